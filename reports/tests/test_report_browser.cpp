// report.html in a real browser: headless Chromium loads it from disk, and the
// rendered DOM must hold every plot (with its lines) and every table, in the
// order people read (verdict, summary, plots, then the details collapsed), and
// a failing run's page must name its failing checks and say why. A
// screenshot is left in the build tree for people:
//   <build>/reports/tests/report-screenshot.png
// Skipped (with the reason) only when no chromium binary is installed.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <filesystem>

#include "report_test_util.hpp"
#include "reports/report.hpp"

namespace ropecheck::report {
namespace {

using testing::read_file;
using testing::run_command;
using testing::scratch_dir;

std::string find_chromium() {
  for (const char* c : {"chromium", "chromium-browser", "google-chrome"}) {
    const std::string cmd = std::string("command -v ") + c + " > /dev/null 2>&1";
    if (std::system(cmd.c_str()) == 0) return c;
  }
  return "";
}

std::string chromium_command(const std::string& chromium, const std::string& profile) {
  return "timeout 180 " + chromium +
         " --headless --no-sandbox --disable-gpu --disable-quic --no-first-run --disable-background-networking"
         " --disable-component-update --disable-sync --user-data-dir='" + profile + "'";
}

// The element with this id, from its start tag to the matching close tag
// (the report never nests an element inside one of the same name).
std::string element_by_id(const std::string& dom, const std::string& tag, const std::string& id) {
  const size_t at = dom.find("id=\"" + id + "\"");
  if (at == std::string::npos) return "";
  const size_t open = dom.rfind("<" + tag, at);
  const size_t close = dom.find("</" + tag + ">", at);
  if (open == std::string::npos || close == std::string::npos) return "";
  return dom.substr(open, close - open);
}

// Whether the element with this id sits inside a <details> element (collapsed until opened).
bool inside_details(const std::string& dom, const std::string& id) {
  const size_t at = dom.find("id=\"" + id + "\"");
  if (at == std::string::npos) return false;
  const size_t open = dom.rfind("<details", at), close = dom.rfind("</details>", at);
  return open != std::string::npos && (close == std::string::npos || close < open);
}

size_t count(const std::string& s, const std::string& what) {
  size_t n = 0;
  for (size_t p = s.find(what); p != std::string::npos; p = s.find(what, p + 1)) ++n;
  return n;
}

TEST(ReportBrowser, ChromiumRendersEveryPlotAndTable) {
  const std::string chromium = find_chromium();
  if (chromium.empty())
    GTEST_SKIP() << "chromium is not installed (apt-get install -y chromium, or scripts/install-deps.sh --browser)";
  const std::string dir = scratch_dir("browser");
  const std::string cli = ROPECHECK_CLI;
  // The built-in scalar kernels only: this test is about the page, not about kernels under development.
  auto sweep = run_command(cli + " sweep --impl scalar --impl conventional-fp32 --tokens-per-bucket 2 --heads 1" +
                               " --report-dir " + dir,
                           dir + "/sweep.txt");
  ASSERT_EQ(sweep.exit_code, 0) << sweep.output;
  const Report r = load_report(dir + "/report.json");
  const std::string html = dir + "/report.html";

  const std::string profile = dir + "/profile";
  std::filesystem::create_directories(profile);
  auto dump = run_command(chromium_command(chromium, profile) + " --dump-dom 'file://" + html + "'",
                          dir + "/dom-and-log.txt");
  ASSERT_EQ(dump.exit_code, 0) << dump.output;
  const std::string& dom = dump.output;  // chromium's log lines go to stderr, the DOM to stdout; both are here
  ASSERT_NE(dom.find("<html"), std::string::npos) << dom.substr(0, 2000);

  for (const char* id : {"environment-table", "checks", "summary", "worst-cases"}) {
    const std::string t = element_by_id(dom, "table", id);
    EXPECT_FALSE(t.empty()) << "table #" << id << " missing";
    EXPECT_GE(count(t, "<tr"), 2u) << "table #" << id << " has no rows";
  }
  EXPECT_EQ(count(element_by_id(dom, "table", "checks"), "<tr") - 1, r.checks.size());
  EXPECT_EQ(count(element_by_id(dom, "table", "summary"), "<tr") - 1, r.series.size());

  size_t groups = 0;
  for (const char* dt : {"f32", "f16", "bf16"})
    for (const char* lay : {"interleaved", "half-split"}) {
      size_t n_series = 0;
      size_t n_buckets = 0;
      for (const Series& s : r.series)
        if (s.dtype == dt && s.layout == lay) {
          ++n_series;
          n_buckets = std::max(n_buckets, s.buckets.size());
        }
      ASSERT_GT(n_series, 0u) << dt << " " << lay;
      ++groups;
      const std::string g = std::string(dt) + "-" + lay;
      for (const char* kind : {"plot-max-", "plot-mean-", "plot-angle-", "plot-hist-"}) {
        const std::string svg = element_by_id(dom, "svg", kind + g);
        ASSERT_FALSE(svg.empty()) << kind << g << " missing from the rendered DOM";
        EXPECT_EQ(count(svg, "class=\"series"), n_series) << kind << g;
        EXPECT_GE(count(svg, "<polyline"), n_series) << kind << g << ": a series without a line";
      }
      const std::string table = element_by_id(dom, "table", "table-" + g);
      ASSERT_FALSE(table.empty()) << "table-" << g;
      EXPECT_EQ(count(table, "<tr"), n_buckets + 2) << "table-" << g;  // header, buckets, all
      EXPECT_EQ(count(table, "Max = "), n_series * (n_buckets + 1)) << "table-" << g;
      // The angle error against position, and the components and angle error per bucket.
      const std::string angle = element_by_id(dom, "svg", "plot-angle-" + g);
      EXPECT_NE(angle.find("1 ulp of f32 at |"), std::string::npos) << "plot-angle-" << g << ": no 1-ulp line";
      EXPECT_GE(count(angle, "<circle"), n_series * 2) << "plot-angle-" << g << ": too few resolved buckets";
      const std::string comp = element_by_id(dom, "table", "table-components-" + g);
      ASSERT_FALSE(comp.empty()) << "table-components-" << g;
      EXPECT_EQ(count(comp, "<tr"), n_buckets + 2) << "table-components-" << g;
      EXPECT_EQ(count(comp, "R = "), n_series * (n_buckets + 1)) << "table-components-" << g;
      EXPECT_EQ(count(comp, "<br>angle "), n_series * (n_buckets + 1)) << "table-components-" << g;
    }
  EXPECT_EQ(groups, 6u);
  EXPECT_EQ(count(dom, "class=\"plot "), 4 * groups);
  EXPECT_EQ(count(dom, "class=\"plot plot-angle\""), groups);
  // The summary shows each series' contract and how close its worst pair came to its allowance.
  const std::string summary = element_by_id(dom, "table", "summary");
  EXPECT_NE(summary.find("worst / allowance"), std::string::npos);
  EXPECT_GE(count(summary, "<td>identity=bits</td>"), r.series.size());

  // For people: the verdict, the summary, the plots, then the details, collapsed.
  std::vector<size_t> order;
  for (const char* id : {"id=\"verdict\"", "id=\"summary\"", "id=\"plots\"", "id=\"plot-max-f32-interleaved\"",
                         "id=\"details\""}) {
    order.push_back(dom.find(id));
    ASSERT_NE(order.back(), std::string::npos) << id;
    if (order.size() > 1) {
      EXPECT_LT(order[order.size() - 2], order.back()) << id << " is out of order";
    }
  }
  const std::string verdict = element_by_id(dom, "section", "verdict");
  EXPECT_NE(verdict.find(fmt::format("PASS: {0} of {0} checks pass", r.checks.size())), std::string::npos) << verdict;
  EXPECT_NE(verdict.find("class=\"verdict pass\""), std::string::npos) << verdict;
  EXPECT_EQ(count(summary, "<td class=\"verdict pass\">pass</td>"), r.checks.size());
  for (const std::string id : {"environment-table", "checks", "statistics", "worst-cases", "table-f32-interleaved",
                               "table-components-bf16-half-split"})
    EXPECT_TRUE(inside_details(dom, id)) << "#" << id << " is not collapsed in a <details>";
  for (const std::string id : {"summary", "plot-max-f32-interleaved", "plot-angle-bf16-half-split"})
    EXPECT_FALSE(inside_details(dom, id)) << "#" << id << " is hidden in a <details>";
  // The run's parameters in words, not JSON.
  const std::string env = element_by_id(dom, "table", "environment-table");
  EXPECT_EQ(env.find("[]"), std::string::npos) << env;
  EXPECT_NE(env.find("every one (f32, f16, bf16)"), std::string::npos) << env;
  EXPECT_NE(env.find("<td>scalar, conventional-fp32</td>"), std::string::npos) << env;  // --impl given: as given

  // The screenshot, for people (and a check that the page paints).
  const std::string png = std::string(ROPECHECK_REPORT_TEST_DIR) + "/report-screenshot.png";
  std::filesystem::remove(png);
  auto shot = run_command(chromium_command(chromium, profile) + " --window-size=1500,2400 --screenshot='" + png +
                              "' 'file://" + html + "'",
                          dir + "/shot.txt");
  ASSERT_EQ(shot.exit_code, 0) << shot.output;
  const std::string bytes = read_file(png);
  ASSERT_GT(bytes.size(), 20000u) << "screenshot missing or blank: " << png;
  EXPECT_EQ(bytes.substr(1, 3), "PNG");
  std::cout << "screenshot: " << png << "\n";

  // A failing run: the verdict names every failing check, and their rows say why.
  auto failing = run_command(cli + " sweep --impl conventional-fp32 --contract angles=exact --tokens-per-bucket 2" +
                                 " --heads 1 --report-dir " + dir + "/failing",
                             dir + "/failing.txt");
  ASSERT_EQ(failing.exit_code, 1) << failing.output;
  const Report rf = load_report(dir + "/failing/report.json");
  const size_t n_failing = verdict_of(rf).failing.size();
  ASSERT_GT(n_failing, 0u);
  auto fdump = run_command(chromium_command(chromium, profile) + " --dump-dom 'file://" + dir +
                               "/failing/report.html'",
                           dir + "/failing-dom.txt");
  ASSERT_EQ(fdump.exit_code, 0) << fdump.output;
  const std::string fverdict = element_by_id(fdump.output, "section", "verdict");
  EXPECT_NE(fverdict.find(fmt::format("FAIL: {} of {} checks fail", n_failing, rf.checks.size())), std::string::npos)
      << fverdict;
  EXPECT_EQ(count(element_by_id(fdump.output, "ul", "failing-checks"), "<li>"), n_failing);
  const std::string fsummary = element_by_id(fdump.output, "table", "summary");
  EXPECT_EQ(count(fsummary, "<tr class=\"fail\">"), n_failing);
  EXPECT_EQ(count(fsummary, "<details class=\"finding\">"), n_failing);  // the first finding, its bits a click away
  EXPECT_EQ(count(fsummary, "<summary>accuracy: pair error"), n_failing);
}

}  // namespace
}  // namespace ropecheck::report
