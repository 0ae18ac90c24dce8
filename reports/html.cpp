// report.html and the headline SVG: inline SVG plots drawn here, no script,
// no network. Ids and classes are stable (docs/reports.md); tests find them.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <set>

#include "properties/error_model.hpp"
#include "reports/report.hpp"

namespace ropecheck::report {

namespace {

std::string esc(const std::string& s) {
  std::string o;
  for (char c : s) {
    switch (c) {
      case '&': o += "&amp;"; break;
      case '<': o += "&lt;"; break;
      case '>': o += "&gt;"; break;
      case '"': o += "&quot;"; break;
      default: o += c;
    }
  }
  return o;
}

const char* const kPalette[] = {"#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e",
                                "#8c564b", "#e377c2", "#17becf", "#7f7f7f", "#bcbd22"};

struct Line {
  std::string label, color, cls;
  bool dashed = false;
  std::vector<std::pair<double, double>> pts;  // y <= 0 or non-finite breaks the line
};

struct Plot {
  std::string id, cls, title, xlabel, ylabel;
  double x = 0, y = 0, w = 600, h = 360;  // placement when nested
  std::vector<Line> lines;
  std::vector<std::pair<double, std::string>> hlines;  // reference lines (y, label)
  std::function<std::string(double)> xtick;            // SVG text content of an x tick label
  double xtick_step = 1;
  bool standalone = false;
};

std::string pow2_label(double k) {
  return fmt::format("2<tspan dy=\"-5\" font-size=\"9\">{}</tspan>", int(std::lround(k)));
}

std::string svg_plot(const Plot& p) {
  const double left = 64, right = 14, top = 30;
  const double legend_h = 16.0 * double(p.lines.size() + p.hlines.size());
  const double bottom = 42;
  const double pw = p.w - left - right, ph = p.h - top - bottom;
  const double total_h = p.h + legend_h + 10;
  double x0 = INFINITY, x1 = -INFINITY, ylo = INFINITY, yhi = -INFINITY;
  for (const auto& l : p.lines)
    for (const auto& [x, y] : l.pts) {
      x0 = std::min(x0, x);
      x1 = std::max(x1, x);
      if (y > 0 && std::isfinite(y)) {
        ylo = std::min(ylo, y);
        yhi = std::max(yhi, y);
      }
    }
  for (const auto& [y, lab] : p.hlines)
    if (y > 0 && std::isfinite(y)) {
      ylo = std::min(ylo, y);
      yhi = std::max(yhi, y);
    }
  if (!std::isfinite(x0)) x0 = 0, x1 = 1;
  if (x1 <= x0) x1 = x0 + 1;
  if (!std::isfinite(ylo)) ylo = 0.1, yhi = 1;
  const int dlo = int(std::floor(std::log10(ylo))), dhi = std::max(dlo + 1, int(std::ceil(std::log10(yhi))));
  auto X = [&](double x) { return left + (x - x0) / (x1 - x0) * pw; };
  auto Y = [&](double y) { return top + ph - (std::log10(y) - dlo) / double(dhi - dlo) * ph; };

  std::string o;
  if (p.standalone)
    o += fmt::format("<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{0}\" height=\"{1}\" viewBox=\"0 0 {0} {1}\"",
                     p.w, total_h);
  else
    o += fmt::format("<svg xmlns=\"http://www.w3.org/2000/svg\" x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\"", p.x,
                     p.y, p.w, total_h);
  if (!p.id.empty()) o += " id=\"" + esc(p.id) + "\"";
  if (!p.cls.empty()) o += " class=\"" + esc(p.cls) + "\"";
  o += fmt::format(" role=\"img\" aria-label=\"{}\" font-family=\"sans-serif\" font-size=\"11\">\n", esc(p.title));
  o += fmt::format("<rect x=\"0\" y=\"0\" width=\"{}\" height=\"{}\" fill=\"#ffffff\"/>\n", p.w, total_h);
  o += fmt::format("<text x=\"{}\" y=\"18\" font-size=\"13\" font-weight=\"bold\" text-anchor=\"middle\">{}</text>\n",
                   left + pw / 2, esc(p.title));
  // grid and y ticks: every decade
  for (int d = dlo; d <= dhi; ++d) {
    const double y = Y(std::pow(10.0, d));
    o += fmt::format("<line class=\"grid\" x1=\"{:.1f}\" y1=\"{:.1f}\" x2=\"{:.1f}\" y2=\"{:.1f}\" stroke=\"#dddddd\"/>\n",
                     left, y, left + pw, y);
    o += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"end\">10<tspan dy=\"-5\" font-size=\"9\">{}</tspan>"
                     "</text>\n",
                     left - 6, y + 4, d);
  }
  // x ticks
  const double step = std::max(1.0, std::ceil((x1 - x0) / 12.0 / p.xtick_step) * p.xtick_step);
  for (double x = std::ceil(x0); x <= x1 + 1e-9; x += step) {
    const double xx = X(x);
    o += fmt::format("<line x1=\"{0:.1f}\" y1=\"{1:.1f}\" x2=\"{0:.1f}\" y2=\"{2:.1f}\" stroke=\"#999999\"/>\n", xx,
                     top + ph, top + ph + 4);
    o += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\">{}</text>\n", xx, top + ph + 17,
                     p.xtick ? p.xtick(x) : fmt::format("{:g}", x));
  }
  o += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"{:.1f}\" height=\"{:.1f}\" fill=\"none\" stroke=\"#333333\"/>\n",
                   left, top, pw, ph);
  o += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\">{}</text>\n", left + pw / 2,
                   top + ph + 33, esc(p.xlabel));
  o += fmt::format("<text transform=\"translate(14 {:.1f}) rotate(-90)\" text-anchor=\"middle\">{}</text>\n",
                   top + ph / 2, esc(p.ylabel));
  double ly = top + ph + 50;
  for (const auto& [yv, lab] : p.hlines) {
    if (!(yv > 0 && std::isfinite(yv))) continue;
    const double y = Y(yv);
    o += fmt::format("<line class=\"hline\" x1=\"{:.1f}\" y1=\"{:.1f}\" x2=\"{:.1f}\" y2=\"{:.1f}\" stroke=\"#555555\" "
                     "stroke-dasharray=\"2 3\"/>\n",
                     left, y, left + pw, y);
    o += fmt::format("<line x1=\"{:.1f}\" y1=\"{:.1f}\" x2=\"{:.1f}\" y2=\"{:.1f}\" stroke=\"#555555\" "
                     "stroke-dasharray=\"2 3\"/><text x=\"{:.1f}\" y=\"{:.1f}\">{}</text>\n",
                     left, ly - 4, left + 28, ly - 4, left + 34, ly, esc(lab));
    ly += 16;
  }
  for (const auto& l : p.lines) {
    const std::string dash = l.dashed ? " stroke-dasharray=\"6 4\"" : "";
    o += "<g class=\"series" + (l.cls.empty() ? "" : " " + esc(l.cls)) + "\" data-label=\"" + esc(l.label) + "\">";
    o += "<title>" + esc(l.label) + "</title>\n";
    std::string seg;
    auto flush = [&] {
      if (!seg.empty())
        o += fmt::format("<polyline fill=\"none\" stroke=\"{}\" stroke-width=\"2\"{} points=\"{}\"/>\n", l.color, dash,
                         seg);
      seg.clear();
    };
    for (const auto& [x, y] : l.pts) {
      if (!(y > 0 && std::isfinite(y))) {
        flush();
        continue;
      }
      seg += fmt::format("{:.1f},{:.1f} ", X(x), Y(y));
    }
    flush();
    for (const auto& [x, y] : l.pts)
      if (y > 0 && std::isfinite(y))
        o += fmt::format("<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"2.5\" fill=\"{}\"><title>{}: {:.4g}</title></circle>",
                         X(x), Y(y), l.color, esc(l.label), y);
    o += "</g>\n";
    o += fmt::format("<line x1=\"{:.1f}\" y1=\"{:.1f}\" x2=\"{:.1f}\" y2=\"{:.1f}\" stroke=\"{}\" stroke-width=\"2\"{}/>"
                     "<text class=\"legend\" x=\"{:.1f}\" y=\"{:.1f}\">{}</text>\n",
                     left, ly - 4, left + 28, ly - 4, l.color, dash, left + 34, ly, esc(l.label));
    ly += 16;
  }
  o += "</svg>\n";
  return o;
}

// x of a bucket: log2 of its smallest position (bucket b holds [2^(b-1), 2^b)).
double bucket_x(int b) { return double(b - 1); }

std::string group_id(const std::string& dtype, const std::string& layout) { return dtype + "-" + layout; }

struct Groups {
  std::vector<std::pair<std::string, std::string>> list;  // (dtype, layout) in first-seen order
  std::vector<std::string> line_keys;                     // kernel / model in first-seen order
  std::string color(const std::string& k) const {
    const auto it = std::find(line_keys.begin(), line_keys.end(), k);
    return kPalette[size_t(it - line_keys.begin()) % std::size(kPalette)];
  }
};

std::string line_key(const Series& s) { return s.kernel + " (" + s.angle_model + ")"; }

Groups groups_of(const Report& r) {
  Groups g;
  for (const auto& s : r.series) {
    if (std::find(g.list.begin(), g.list.end(), std::make_pair(s.dtype, s.layout)) == g.list.end())
      g.list.emplace_back(s.dtype, s.layout);
    if (std::find(g.line_keys.begin(), g.line_keys.end(), line_key(s)) == g.line_keys.end())
      g.line_keys.push_back(line_key(s));
  }
  return g;
}

Plot bucket_plot(const Report& r, const Groups& g, const std::string& dt, const std::string& lay, bool max) {
  Plot p;
  p.id = std::string(max ? "plot-max-" : "plot-mean-") + group_id(dt, lay);
  p.cls = std::string("plot ") + (max ? "plot-max" : "plot-mean");
  p.title = std::string(max ? "Max" : "Mean") + " pair error, " + dt + " " + lay;
  p.xlabel = "position (log2 bucket: [2^k, 2^(k+1)))";
  p.ylabel = std::string(max ? "max" : "mean") + " error (u, log scale)";
  p.xtick = pow2_label;
  for (const auto& s : r.series) {
    if (s.dtype != dt || s.layout != lay) continue;
    Line l;
    l.label = line_key(s) + (s.judged_under_own_model ? "" : " [not its own model]");
    l.color = g.color(line_key(s));
    l.dashed = !s.judged_under_own_model;
    l.cls = "series-" + s.kernel + "-" + s.angle_model;
    for (const auto& b : s.buckets)
      if (b.bucket > 0) l.pts.emplace_back(bucket_x(b.bucket), max ? b.max : b.mean);
    p.lines.push_back(std::move(l));
  }
  return p;
}

// The kernel's angle error against position: per bucket, the largest |angle error| in f32 ulps of |phi| over
// the pairs where rounding cannot mask it (Decomposition::max_resolved_angle_ulps); buckets without such a pair,
// or reports without the decomposition, leave a gap.
Plot angle_plot(const Report& r, const Groups& g, const std::string& dt, const std::string& lay) {
  Plot p;
  p.id = "plot-angle-" + group_id(dt, lay);
  p.cls = "plot plot-angle";
  p.title = "Angle error, " + dt + " " + lay;
  p.xlabel = "position (log2 bucket: [2^k, 2^(k+1)))";
  p.ylabel = "max angle error (f32 ulps of |phi|, log)";
  p.xtick = pow2_label;
  p.hlines = {{1.0, "1 ulp of f32 at |phi|"}};
  for (const auto& s : r.series) {
    if (s.dtype != dt || s.layout != lay) continue;
    Line l;
    l.label = line_key(s) + (s.judged_under_own_model ? "" : " [not its own model]");
    l.color = g.color(line_key(s));
    l.dashed = !s.judged_under_own_model;
    l.cls = "series-" + s.kernel + "-" + s.angle_model;
    for (const auto& b : s.buckets)
      if (b.bucket > 0)
        l.pts.emplace_back(bucket_x(b.bucket), b.decomposition && b.decomposition->resolved_angle_count
                                                   ? b.decomposition->max_resolved_angle_ulps
                                                   : 0.0);  // 0: a gap
    p.lines.push_back(std::move(l));
  }
  return p;
}

Plot hist_plot(const Report& r, const Groups& g, const std::string& dt, const std::string& lay) {
  Plot p;
  p.id = "plot-hist-" + group_id(dt, lay);
  p.cls = "plot plot-hist";
  p.title = "Error histogram, " + dt + " " + lay;
  p.xlabel = "pair error e (u), bin [2^k, 2^(k+1))";
  p.ylabel = "fraction of pairs (log scale)";
  p.xtick = pow2_label;
  p.xtick_step = 2;
  for (const auto& s : r.series) {
    if (s.dtype != dt || s.layout != lay) continue;
    Line l;
    l.label = line_key(s) + (s.judged_under_own_model ? "" : " [not its own model]");
    l.color = g.color(line_key(s));
    l.dashed = !s.judged_under_own_model;
    l.cls = "series-" + s.kernel + "-" + s.angle_model;
    uint64_t total = 0;
    for (uint64_t c : s.histogram) total += c;
    for (size_t i = 0; i < s.histogram.size() && i < r.histogram_edges.size(); ++i) {
      // bin 0 is [0, edges[1]): drawn one octave below edges[1]
      const double lo = i == 0 ? (r.histogram_edges.size() > 1 ? r.histogram_edges[1] / 2 : 0) : r.histogram_edges[i];
      if (!(lo > 0)) continue;
      l.pts.emplace_back(std::log2(lo), total ? double(s.histogram[i]) / double(total) : 0.0);
    }
    // trim the empty tails so the x range shows where the errors are
    while (!l.pts.empty() && l.pts.back().second == 0) l.pts.pop_back();
    while (!l.pts.empty() && l.pts.front().second == 0) l.pts.erase(l.pts.begin());
    p.lines.push_back(std::move(l));
  }
  return p;
}

const char* kCss = R"(body{font-family:sans-serif;margin:1.5em;color:#222;max-width:1900px}
h1{font-size:1.5em}h2{font-size:1.2em;margin-top:1.6em;border-bottom:1px solid #ccc}h3{font-size:1.05em}
table{border-collapse:collapse;font-size:12px;margin:0.6em 0}
th,td{border:1px solid #ccc;padding:3px 6px;text-align:left;vertical-align:top}
td.num{text-align:right;font-variant-numeric:tabular-nums}
tr.fail td,td.fail{background:#fde0e0;font-weight:bold}td.pass{background:#e3f4e3}tr.info td{color:#555}
td.nowrap{white-space:nowrap}
.verdict{padding:0.5em 1em;border-radius:4px;margin:1em 0}.verdict-line{font-size:1.3em;font-weight:bold;margin:0.2em 0}
.verdict.pass{background:#e3f4e3;border:1px solid #8c8}.verdict.fail{background:#fde0e0;border:1px solid #d88}
.verdict.none{background:#eee;border:1px solid #bbb}
#checks td,td.detail{white-space:pre-line}
pre.finding{font-size:11px;font-weight:normal;white-space:pre-wrap;margin:0.3em 0 0}
details{margin:0.4em 0}details>summary{cursor:pointer;font-weight:bold}
details.finding{margin:0.3em 0 0}details.finding>summary{font-weight:normal;font-size:11px}
.plots{display:flex;flex-wrap:wrap;gap:12px}.plots svg{border:1px solid #ddd}
code,.bits{font-family:monospace;font-size:11px}.note{color:#555;font-size:12px}
)";

std::string td(const std::string& s, const std::string& cls = "") {
  return cls.empty() ? "<td>" + esc(s) + "</td>" : "<td class=\"" + cls + "\">" + esc(s) + "</td>";
}
std::string tdn(double v, const char* f = "{:.3g}") { return "<td class=\"num\">" + fmt::format(fmt::runtime(f), v) + "</td>"; }

}  // namespace

std::string render_html(const Report& r) {
  // For people, in the order they read: the verdict, a line per series, the plots; then the details (run,
  // environment, every check, the per-bucket tables, every statistic, the worst cases' bits), collapsed.
  const Groups g = groups_of(r);
  std::string o = "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>ropecheck " +
                  esc(r.kind) + " report</title>\n<style>\n" + kCss + "</style>\n</head>\n<body>\n";
  o += "<h1 id=\"title\">ropecheck " + esc(r.kind) + " report</h1>\n";

  // The verdict, and the failing checks by name.
  const Verdict v = verdict_of(r);
  const std::string vcls = v.checks == 0 ? "none" : v.pass() ? "pass" : "fail";
  o += "<section id=\"verdict\" class=\"verdict " + vcls + "\">\n<p class=\"verdict-line\">" + esc(v.headline()) +
       "</p>\n";
  if (!v.failing.empty()) {
    o += "<ul id=\"failing-checks\">\n";
    // Each by name with the first line of its detail (a gate's diagnosis); the rest (cases, bits) on a click.
    for (const Check* c : v.failing) {
      const size_t eol = c->detail.find('\n');
      o += "<li><code>" + esc(c->name) + "</code> (" + esc(c->source) + "): " + esc(c->detail.substr(0, eol));
      if (eol != std::string::npos)
        o += "<details class=\"finding\"><summary>more</summary><pre class=\"finding\">" +
             esc(c->detail.substr(eol + 1)) + "</pre></details>";
      o += "</li>\n";
    }
    o += "</ul>\n";
  }
  o += "</section>\n";

  // A line per series: worst error against its bound, where, under which contract, and why it fails.
  o += "<section id=\"summary-section\"><h2>Summary</h2>\n<p class=\"note\">One row per kernel (angle model), dtype "
       "and layout. Errors are pair errors in u of the output dtype (u = 2<sup>-24</sup> f32, 2<sup>-11</sup> f16, "
       "2<sup>-8</sup> bf16): e = &#8214;y &#8722; &#375;&#8214; / (max(&#8214;x&#8214;, min_normal) u). The verdict "
       "is per pair: each pair's radial and tangential error within the allowance its kernel's error model and "
       "contract derive (docs/error-model.md); <i>bound</i> is the flat bound of those criteria, <i>worst / "
       "allowance</i> how close the worst pair came to its own allowance (&gt; 1: a violation). A series that is "
       "not a check is informational, only the checks decide the verdict (in a sweep: a kernel judged under an "
       "angle model other than its own without a contract for it, its drift).</p>\n<table id=\"summary\" class=\"summary\">\n<tr><th>kernel</th><th>angle model</th><th>dtype</th>"
       "<th>layout</th><th>verdict</th><th>max error (u)</th><th>bound (u)</th><th>worst / allowance</th><th>worst "
       "at</th><th>contract</th><th>detail</th></tr>\n";
  for (const SeriesSummary& m : summarize(r)) {
    const Series& s = *m.series;
    const std::string cls = m.verdict == "FAIL" ? "fail" : m.verdict == "pass" ? "pass" : "info";
    // The finding's first line says what is wrong; its case and bits, several lines, open on a click.
    std::string detail = esc(m.detail);
    if (!m.finding.empty()) {
      const size_t eol = m.finding.find('\n');
      const std::string rest = eol == std::string::npos ? "" : m.finding.substr(eol + 1);
      detail += "<details class=\"finding\"><summary>" + esc(m.finding.substr(0, eol)) + "</summary>" +
                (rest.empty() ? "" : "<pre class=\"finding\">" + esc(rest) + "</pre>") + "</details>";
    }
    o += "<tr class=\"" + cls + "\">" + td(s.kernel, "nowrap") + td(s.angle_model) + td(s.dtype) + td(s.layout) +
         td(m.verdict, "verdict " + cls) + tdn(s.all.max) + tdn(s.bound) +
         (s.worst_ratio ? tdn(*s.worst_ratio) : "<td>-</td>") + td(m.where, "nowrap") +
         td(s.contract ? short_contract(*s.contract) : "-") + "<td class=\"detail\">" + detail + "</td></tr>\n";
  }
  o += "</table></section>\n";

  // The error against position, a section per dtype and layout.
  o += "<section id=\"plots\"><h2>Error against position</h2>\n<p class=\"note\">Per position bucket [2<sup>k</sup>, "
       "2<sup>k+1</sup>): the max and mean pair error (u), the kernel's angle error in ulps of f32 at |&#966;| where "
       "rounding cannot mask it, and the error histogram. Dashed lines: a kernel judged under an angle model other "
       "than its own.</p>\n";
  for (const auto& [dt, lay] : g.list) {
    const std::string gid = group_id(dt, lay);
    o += "<section class=\"group\" id=\"group-" + gid + "\" data-dtype=\"" + esc(dt) + "\" data-layout=\"" + esc(lay) +
         "\">\n<h3>" + esc(dt) + " " + esc(lay) + "</h3>\n<div class=\"plots\">\n";
    Plot pm = bucket_plot(r, g, dt, lay, true), pa = bucket_plot(r, g, dt, lay, false),
         pg = angle_plot(r, g, dt, lay), ph = hist_plot(r, g, dt, lay);
    for (Plot* p : {&pm, &pa, &pg, &ph}) {
      p->w = 440;
      p->h = 300;
      p->standalone = true;
      o += svg_plot(*p);
    }
    o += "</div>\n</section>\n";
  }
  o += "</section>\n";

  // The details, collapsed.
  o += "<section id=\"details\"><h2>Details</h2>\n";
  o += "<details id=\"details-run\"><summary>Run parameters and environment</summary>\n"
       "<table id=\"environment-table\" class=\"kv\">\n";
  for (const auto& [k, val] : run_facts(r)) o += "<tr><th>" + esc(k) + "</th>" + td(val) + "</tr>\n";
  o += "</table></details>\n";

  o += fmt::format("<details id=\"details-checks\"><summary>Every check ({}, {} failing)</summary>\n",
                   r.checks.size(), v.failing.size());
  o += "<table id=\"checks\" class=\"checks\">\n<tr><th>check</th><th>source</th><th>status</th><th>detail</th></tr>\n";
  for (const auto& c : r.checks)
    o += "<tr" + std::string(c.status == "fail" ? " class=\"fail\"" : "") + ">" + td(c.name) + td(c.source) +
         td(c.status, c.status == "pass" ? "pass" : c.status == "fail" ? "fail" : "") + td(c.detail) + "</tr>\n";
  o += "</table></details>\n";

  for (const auto& [dt, lay] : g.list) {
    const std::string gid = group_id(dt, lay);
    o += "<details class=\"group-tables\" id=\"details-" + gid + "\"><summary>" + esc(dt) + " " + esc(lay) +
         ": errors, components and angle error per position bucket</summary>\n";
    // Boost.Math-style table: rows buckets, columns kernel (model).
    std::vector<const Series*> cols;
    std::set<int> buckets;
    for (const auto& s : r.series)
      if (s.dtype == dt && s.layout == lay) {
        cols.push_back(&s);
        for (const auto& b : s.buckets) buckets.insert(b.bucket);
      }
    o += "<table id=\"table-" + gid + "\" class=\"error-table\">\n<tr><th>position</th>";
    for (const Series* s : cols)
      o += "<th>" + esc(line_key(*s)) + (r.check_of(*s) ? "" : " &#8224;") + "<br><span class=\"note\">bound " +
           fmt::format("{:.3g}", s->bound) + " u</span></th>";
    o += "</tr>\n";
    auto cell = [](const BucketStats& b) {
      return fmt::format("<td class=\"num\" title=\"{} pairs, p99 {:.3g} u, bias {:+.2e}\">Max = {:.3g}u "
                         "(Mean = {:.3g}u)</td>",
                         b.count, b.p99, b.bias, b.max, b.mean);
    };
    // A row per bucket and one for all of them, a cell per series.
    auto rows = [&](const auto& cell) {
      std::string t;
      for (int b : buckets) {
        t += "<tr><th>" + esc(bucket_label(b)) + "</th>";
        for (const Series* s : cols) {
          const BucketStats* f = nullptr;
          for (const auto& x : s->buckets)
            if (x.bucket == b) f = &x;
          t += f ? cell(*f) : "<td>-</td>";
        }
        t += "</tr>\n";
      }
      t += "<tr><th>all</th>";
      for (const Series* s : cols) t += cell(s->all);
      return t + "</tr>\n</table>\n";
    };
    o += rows(cell);
    // The error's components and the angle error, per bucket.
    o += "<p class=\"note\">Components and angle error: R, T = max |radial|, max |tangential| component (u); the "
         "largest |angle error| from the exact output to the kernel's (rad) and, over the pairs where rounding can "
         "explain at most 1/8 ulp, in ulps of f32 at |&#966;| (&#8211;: no such pair). Hover for the mean angle error "
         "and the counts. &#8224;: not a check.</p>\n";
    o += "<table id=\"table-components-" + gid + "\" class=\"components-table\">\n<tr><th>position</th>";
    for (const Series* s : cols) o += "<th>" + esc(line_key(*s)) + (r.check_of(*s) ? "" : " &#8224;") + "</th>";
    o += "</tr>\n";
    auto comp = [](const BucketStats& b) {
      if (!b.decomposition) return std::string("<td class=\"num\">not recorded</td>");
      const Decomposition& d = *b.decomposition;
      return fmt::format("<td class=\"num\" title=\"{} pairs; angle measured on {}, mean {:+.3g} rad, largest over all "
                         "of them {:.3g} f32 ulps; resolved on {}\">R = {:.3g}u / T = {:.3g}u<br>angle {:.3g} rad, {}"
                         "</td>",
                         b.count, d.angle_count, d.mean_angle_rad, d.max_angle_ulps, d.resolved_angle_count,
                         d.max_radial, d.max_tangential, d.max_angle_rad,
                         d.resolved_angle_count ? fmt::format("{:.3g} ulp", d.max_resolved_angle_ulps)
                                                : std::string("&#8211; ulp"));
    };
    o += rows(comp) + "</details>\n";
  }

  o += "<details id=\"details-statistics\"><summary>Every statistic per series</summary>\n<table id=\"statistics\" "
       "class=\"statistics\">\n<tr><th>kernel</th><th>angle model</th><th>dtype</th><th>layout</th><th>contract</th>"
       "<th>pairs</th><th>max</th><th>p99</th><th>mean</th><th>max radial</th><th>max tangential</th><th>bias (radial)"
       "</th><th>bias (tangential)</th><th>max angle (rad)</th><th>mean angle (rad)</th><th>max angle (f32 ulps, "
       "resolved)</th><th>bound</th><th>worst / allowance</th><th>violations</th></tr>\n";
  for (const auto& s : r.series) {
    const auto& d = s.all.decomposition;
    const std::string none = "<td>-</td>";
    o += "<tr" + std::string(s.violations && r.check_of(s) ? " class=\"fail\"" : "") + ">" + td(s.kernel) +
         td(s.angle_model) + td(s.dtype) + td(s.layout) + td(s.contract ? short_contract(*s.contract) : "-") +
         tdn(double(s.all.count), "{:.0f}") + tdn(s.all.max) + tdn(s.all.p99) + tdn(s.all.mean) +
         (d ? tdn(d->max_radial) + tdn(d->max_tangential) : none + none) + tdn(s.all.bias, "{:+.2e}") +
         tdn(s.all.tangential_bias, "{:+.2e}") +
         (d ? tdn(d->max_angle_rad) + tdn(d->mean_angle_rad, "{:+.2e}") : none + none) +
         (d && d->resolved_angle_count ? tdn(d->max_resolved_angle_ulps) : none) + tdn(s.bound) +
         (s.worst_ratio ? tdn(*s.worst_ratio) : none) + tdn(double(s.violations), "{:.0f}") + "</tr>\n";
  }
  o += "</table></details>\n";

  o += "<details id=\"details-worst\"><summary>Worst cases, with their bits</summary>\n<table id=\"worst-cases\" "
       "class=\"worst\">\n<tr><th>kernel</th><th>angle model</th><th>dtype</th><th>layout</th><th>error (u)</th>"
       "<th>position</th><th>token / head / pair (dims)</th><th>input bits</th><th>got bits</th><th>correctly rounded"
       "</th><th>exact</th></tr>\n";
  for (const auto& s : r.series) {
    if (!s.all.worst) continue;
    const WorstCase& w = *s.all.worst;
    o += "<tr>" + td(s.kernel) + td(s.angle_model) + td(s.dtype) + td(s.layout) + tdn(w.error, "{:.4g}") +
         tdn(double(w.position), "{:.0f}") +
         td(fmt::format("{} / {} / {} ({}, {})", w.token, w.head, w.pair, w.dim0, w.dim1)) +
         td(w.input[0] + " " + w.input[1], "bits") + td(w.got[0] + " " + w.got[1], "bits") +
         td(w.rounded[0] + " " + w.rounded[1], "bits") + td(w.exact[0] + " " + w.exact[1], "bits") + "</tr>\n";
  }
  o += "</table></details>\n</section>\n</body>\n</html>\n";
  return o;
}

std::string render_headline_svg(const Report& r) {
  const double pw = 380, ph = 340;
  const char* dtypes[] = {"f32", "f16", "bf16"};
  std::string panels;
  int n = 0;
  for (const char* dt : dtypes) {
    const Series* acc = nullptr;
    const Series* conv = nullptr;
    for (const auto& s : r.series) {
      if (s.dtype != dt || s.layout != "interleaved" || s.angle_model != "exact") continue;
      if (s.kernel == "scalar") acc = &s;
      if (s.kernel == "conventional-fp32") conv = &s;
    }
    if (!acc || !conv) continue;
    Plot p;
    p.id = std::string("headline-") + dt;
    p.cls = "plot headline";
    p.title = dt;
    p.x = pw * n++;
    p.y = 34;
    p.w = pw;
    p.h = ph;
    p.xlabel = "position (octave [2^k, 2^(k+1)))";
    p.ylabel = std::string("max pair error (u of ") + dt + ")";
    p.xtick = pow2_label;
    p.xtick_step = 4;
    Line a{"accurate angles (scalar)", kPalette[0], "accurate", false, {}};
    Line c{"conventional fp32 pipeline", kPalette[1], "conventional", false, {}};
    for (const auto& b : acc->buckets)
      if (b.bucket > 0) a.pts.emplace_back(bucket_x(b.bucket), b.max);
    for (const auto& b : conv->buckets)
      if (b.bucket > 0) c.pts.emplace_back(bucket_x(b.bucket), b.max);
    p.lines = {a, c};
    p.hlines = {{acc->bound, fmt::format("scalar's proven bound ({:.3g} u)", acc->bound)}};
    panels += svg_plot(p);
  }
  if (n == 0) throw ReportError("the report holds no scalar and conventional-fp32 series judged under the exact model");
  const double w = pw * n, h = ph + 34 + 2 * 16 + 10 + 16;
  std::string o = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{0}\" height=\"{1}\" viewBox=\"0 0 {0} {1}\" "
      "font-family=\"sans-serif\">\n<rect width=\"{0}\" height=\"{1}\" fill=\"#ffffff\"/>\n"
      "<text x=\"{2}\" y=\"22\" font-size=\"15\" font-weight=\"bold\" text-anchor=\"middle\">RoPE error against "
      "position, judged against the exact rotation (max over {3} pairs per octave)</text>\n",
      w, h, w / 2, r.series.empty() || r.series[0].buckets.size() < 2 ? 0 : r.series[0].buckets[1].count);
  o += panels + "</svg>\n";
  return o;
}

}  // namespace ropecheck::report
