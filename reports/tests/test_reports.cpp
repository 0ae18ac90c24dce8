// Reports: the JSON round trip, the baseline compare (on itself, against a
// less accurate kernel, coverage), and corrupt or incompatible files.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "report_test_util.hpp"
#include "reports/report.hpp"
#include "runs/tests/sweep_fixtures.hpp"
#ifdef ROPECHECK_MUTANT_DIR
#include "impls/plugin_loader.hpp"
#endif

namespace ropecheck::report {
namespace {

using sweep_testing::impl;
using sweep_testing::small_options;
using sweep_testing::sweep_report;
using sweep_testing::unit_of;
using testing::read_file;
using testing::run_command;
using testing::scratch_dir;

// ---- test-only kernels: the scalar kernel with its cos/sin degraded ---------------

float round_bf16(long double x) { return bf16_bits_to_f32(f32_to_bf16_bits(float(x))); }

float round_toward_zero(long double x) {
  float f = float(x);
  if (std::fabs((long double)f) > std::fabs(x)) f = std::nextafter(f, 0.0f);
  return f;
}

// The scalar kernel's arithmetic (long double angle, sincosl, f32 rotation,
// RNE stores), with cos and sin rounded to f32 by Round instead of to nearest.
template <float (*Round)(long double)>
int degraded_trig_rope(const rc_rope_args* a) {
  if (int rc = check_kernel_args(a, 2); rc != RC_OK) return rc;
  const Dtype d = Dtype(a->dtype);
  const Layout l = Layout(a->layout);
  const uint32_t npairs = a->rotary_dim / 2;
  for (uint64_t t = 0; t < a->n_tokens; ++t) {
    const long double ms = (long double)a->positions[t] * (long double)a->position_scale;
    for (uint32_t i = 0; i < npairs; ++i) {
      const long double theta =
          a->inv_freq ? (long double)a->inv_freq[i]
                      : powl((long double)a->base, -(long double)(2 * i) / (long double)a->rotary_dim);
      const long double angle = ms * theta;
      long double sl, cl;
      sincosl(angle, &sl, &cl);
      const float c = Round(cl), s = Round(sl);
      for (uint32_t h = 0; h < a->n_heads; ++h) {
        const size_t base = (size_t(t) * a->n_heads + h) * a->head_dim;
        const auto [d0, d1] = pair_dims(l, a->rotary_dim, i);
        if (angle == 0) {
          store_bits(d, a->out, base + d0, load_bits(d, a->in, base + d0));
          store_bits(d, a->out, base + d1, load_bits(d, a->in, base + d1));
          continue;
        }
        const float x0 = load_f32(d, a->in, base + d0), x1 = load_f32(d, a->in, base + d1);
        store_f32(d, a->out, base + d0, x0 * c - x1 * s);
        store_f32(d, a->out, base + d1, x0 * s + x1 * c);
      }
    }
    for (uint32_t h = 0; h < a->n_heads; ++h)
      for (uint32_t k = a->rotary_dim; k < a->head_dim; ++k) {
        const size_t e = (size_t(t) * a->n_heads + h) * a->head_dim + k;
        store_bits(d, a->out, e, load_bits(d, a->in, e));
      }
  }
  return RC_OK;
}

// Registered under the accurate kernel's name, so the compare matches its series.
Implementation degraded_scalar(rc_rope_apply_fn fn) {
  const Implementation* s = find_implementation("scalar");
  EXPECT_NE(s, nullptr);
  Implementation i = *s;
  i.fn = fn;
  i.description = "test-only: scalar with degraded cos/sin";
  return i;
}

bool has_diff(const CompareResult& r, const std::string& kind, const std::string& what_contains, bool failing) {
  for (const auto& d : r.diffs)
    if (d.kind == kind && d.what.find(what_contains) != std::string::npos && d.failing == failing) return true;
  return false;
}

// Failing "bias" rows whose series contains WHAT.
size_t bias_failures(const CompareResult& r, const std::string& what_contains = "") {
  size_t n = 0;
  for (const auto& d : r.diffs)
    n += d.failing && d.metric == "bias" && d.what.find(what_contains) != std::string::npos;
  return n;
}

// The report as one written before buckets had an rms (schema version 1 still).
Report without_rms(const Report& r) {
  nlohmann::json j = to_json(r);
  for (auto& s : j["series"]) {
    s["all"].erase("rms");
    for (auto& b : s["buckets"]) b.erase("rms");
  }
  return from_json(j);
}

// The report as one written before the error decomposition, the contract and
// worst_ratio were recorded (schema version 1 still).
Report without_decomposition(const Report& r) {
  nlohmann::json j = to_json(r);
  for (auto& s : j["series"]) {
    s.erase("contract");
    s.erase("worst_ratio");
    for (auto* b : {&s["all"]})
      for (const char* k : {"max_radial", "max_tangential", "angle_count", "max_angle_rad", "mean_angle_rad",
                            "max_angle_ulps", "resolved_angle_count", "max_resolved_angle_ulps"})
        b->erase(k);
    for (auto& b : s["buckets"])
      for (const char* k : {"max_radial", "max_tangential", "angle_count", "max_angle_rad", "mean_angle_rad",
                            "max_angle_ulps", "resolved_angle_count", "max_resolved_angle_ulps"})
        b.erase(k);
  }
  return from_json(j);
}

// ---- JSON ------------------------------------------------------------------------

TEST(ReportJson, RoundTripsAndKeepsEveryField) {
  const SweepOptions o = small_options();
  const Report r = sweep_report(o, {impl("scalar"), impl("conventional-fp32")});
  // 2 kernels; conventional-fp32 is judged under fp32 and under exact: 3 series per dtype x layout.
  ASSERT_EQ(r.series.size(), 3u * 3u * 2u);
  EXPECT_EQ(r.checks.size(), 2u * 3u * 2u);
  const nlohmann::json j = to_json(r);
  const Report back = from_json(nlohmann::json::parse(j.dump()));
  EXPECT_EQ(to_json(back), j);

  const std::string dir = scratch_dir("roundtrip");
  write_report_dir(r, dir);
  const Report loaded = load_report(dir + "/report.json");
  EXPECT_EQ(to_json(loaded), j);
  EXPECT_EQ(loaded.seed, 7u);
  EXPECT_EQ(loaded.parameters.at("tokens_per_bucket"), 4);
  EXPECT_FALSE(loaded.environment.compiler.empty());
  EXPECT_FALSE(read_file(dir + "/report.md").empty());
  EXPECT_NE(read_file(dir + "/report.html").find("<svg"), std::string::npos);
}

TEST(ReportJson, WorstCaseIsTheBucketMaxWithItsBits) {
  const Report r = sweep_report(small_options(), {impl("scalar")});
  for (const Series& s : r.series) {
    ASSERT_FALSE(s.buckets.empty()) << s.key();
    uint64_t total = 0;
    for (const BucketStats& b : s.buckets) {
      total += b.count;
      if (b.bucket == 0) continue;  // position 0: the identity, error 0
      ASSERT_TRUE(b.worst.has_value()) << s.key() << " " << b.label;
      EXPECT_EQ(b.worst->error, b.max) << s.key() << " " << b.label;
      EXPECT_EQ(position_bucket(b.worst->position), b.bucket);
      EXPECT_EQ(b.worst->input[0].size(), s.dtype == "f32" ? 10u : 6u);  // 0x + hex digits
      EXPECT_LE(b.p99, b.max);
      EXPECT_LE(b.mean, b.max);
    }
    EXPECT_EQ(total, s.all.count);
    uint64_t hist = 0;
    for (uint64_t c : s.histogram) hist += c;
    EXPECT_EQ(hist, s.all.count) << s.key();
    ASSERT_TRUE(s.all.worst.has_value());
    EXPECT_EQ(s.all.worst->error, s.all.max);
  }
}

// Every bucket has its rms, sqrt(mean e^2): the bias compare's spread. A
// report without it (written before it was recorded) still reads, and writes
// back without it; a negative one is malformed.
TEST(ReportJson, RmsIsRecordedAndOptional) {
  const Report r = sweep_report(small_options(), {impl("scalar")});
  for (const Series& s : r.series)
    for (const BucketStats* b : {&s.all, &s.buckets.front(), &s.buckets.back()}) {
      ASSERT_TRUE(b->rms.has_value()) << s.key() << " " << b->label;
      EXPECT_GE(*b->rms, b->mean * (1 - 1e-6)) << s.key() << " " << b->label;  // rms >= mean (Jensen)
      EXPECT_LE(*b->rms, b->max * (1 + 1e-6)) << s.key() << " " << b->label;
      EXPECT_GE(*b->rms, std::fabs(b->bias) * (1 - 1e-6)) << s.key() << " " << b->label;  // |radial| <= e
      if (b->bucket != 0) {
        EXPECT_GT(*b->rms, 0.0) << s.key() << " " << b->label;
      }
    }
  const nlohmann::json j = to_json(r);
  EXPECT_TRUE(j["series"][0]["buckets"][1].contains("rms"));
  EXPECT_EQ(to_json(from_json(j)), j);

  const Report old = without_rms(r);
  EXPECT_FALSE(old.series[0].buckets[1].rms.has_value());
  EXPECT_FALSE(to_json(old)["series"][0]["buckets"][1].contains("rms"));
  EXPECT_FALSE(compare_reports(old, old).failed());

  nlohmann::json neg = j;
  neg["series"][0]["buckets"][1]["rms"] = -0.5;
  EXPECT_THROW(from_json(neg), ReportError);
  neg["series"][0]["buckets"][1]["rms"] = "wide";
  EXPECT_THROW(from_json(neg), ReportError);
}

// Every bucket holds its error's components and the kernel's angle error, and
// they agree with each other and with the bucket's e: per pair e^2 = radial^2 +
// tangential^2, so max(|radial|), max(|tangential|) <= max e <=
// hypot(max |radial|, max |tangential|); the angle error is the tangential
// component turned into radians (|angle| ~ |tangential| u).
TEST(ReportJson, DecompositionIsRecordedAndConsistent) {
  const Report r = sweep_report(small_options(), {impl("scalar"), impl("conventional-fp32")});
  size_t resolved_buckets = 0;
  for (const Series& s : r.series) {
    ASSERT_TRUE(s.contract.has_value()) << s.key();
    EXPECT_EQ(*s.contract, "angles=exact,cos-sin=f32,arith=f32,denormals=keep,identity=bits") << s.key();
    ASSERT_TRUE(s.worst_ratio.has_value()) << s.key();
    EXPECT_EQ(*s.worst_ratio > 1.0, s.violations > 0) << s.key();  // the verdict is the per-pair allowance
    const double u = unit_of(s.dtype);
    Decomposition all_max;
    for (const BucketStats* b : [&] {
           std::vector<const BucketStats*> v{&s.all};
           for (const auto& x : s.buckets) v.push_back(&x);
           return v;
         }()) {
      const std::string where = s.key() + " " + b->label;
      ASSERT_TRUE(b->decomposition.has_value()) << where;
      const Decomposition& d = *b->decomposition;
      EXPECT_LE(d.max_radial, b->max * (1 + 1e-12)) << where;
      EXPECT_LE(d.max_tangential, b->max * (1 + 1e-12)) << where;
      EXPECT_LE(b->max, std::hypot(d.max_radial, d.max_tangential) * (1 + 1e-12)) << where;
      EXPECT_LE(d.angle_count, b->count) << where;
      EXPECT_LE(d.resolved_angle_count, d.angle_count) << where;
      EXPECT_LE(d.max_angle_rad, M_PI) << where;
      EXPECT_LE(std::fabs(d.mean_angle_rad), d.max_angle_rad) << where;
      if (b->bucket == 0) {  // position 0: the identity, nothing to measure in ulps of |phi| = 0
        EXPECT_EQ(d.max_radial + d.max_tangential + d.max_angle_rad, 0.0) << where;
        EXPECT_EQ(d.resolved_angle_count, 0u) << where;
      }
      if (b->max * u < 1e-3) {  // small errors: the angle is the tangential component in radians (atan(t u) ~ t u)
        EXPECT_LE(d.max_angle_rad, d.max_tangential * u * 1.001) << where;
        EXPECT_GE(d.max_angle_rad, d.max_tangential * u * 0.999) << where;
      }
      if (b->bucket >= 0) {
        all_max.max_radial = std::max(all_max.max_radial, d.max_radial);
        all_max.max_tangential = std::max(all_max.max_tangential, d.max_tangential);
        all_max.max_angle_rad = std::max(all_max.max_angle_rad, d.max_angle_rad);
        all_max.max_resolved_angle_ulps = std::max(all_max.max_resolved_angle_ulps, d.max_resolved_angle_ulps);
        all_max.resolved_angle_count += d.resolved_angle_count;
        resolved_buckets += d.resolved_angle_count > 0;
      }
    }
    const Decomposition& a = *s.all.decomposition;  // "all" is every bucket together
    EXPECT_EQ(a.max_radial, all_max.max_radial) << s.key();
    EXPECT_EQ(a.max_tangential, all_max.max_tangential) << s.key();
    EXPECT_EQ(a.max_angle_rad, all_max.max_angle_rad) << s.key();
    EXPECT_EQ(a.max_resolved_angle_ulps, all_max.max_resolved_angle_ulps) << s.key();
    EXPECT_EQ(a.resolved_angle_count, all_max.resolved_angle_count) << s.key();
  }
  EXPECT_GT(resolved_buckets, 20u);
  const nlohmann::json j = to_json(r);
  for (const char* k : {"max_radial", "max_tangential", "angle_count", "max_angle_rad", "mean_angle_rad",
                        "max_angle_ulps", "resolved_angle_count", "max_resolved_angle_ulps"})
    EXPECT_TRUE(j["series"][0]["buckets"][1].contains(k)) << k;
  EXPECT_TRUE(j["series"][0].contains("contract"));
  EXPECT_EQ(to_json(from_json(j)), j);
}

// Reports written before the decomposition, the contract and worst_ratio
// (schema version 1 all the same) still read, render and compare, both ways,
// without failing on their absence: a real one (the committed baseline of
// a63c109, cut to three series) and one stripped here.
TEST(ReportJson, AReportWithoutTheDecompositionStillReads) {
  const Report old = load_report(std::string(ROPECHECK_SOURCE_DIR) + "/reports/tests/data/report-before-decomposition.json");
  ASSERT_EQ(old.series.size(), 3u);
  for (const Series& s : old.series) {
    EXPECT_FALSE(s.contract.has_value());
    EXPECT_FALSE(s.worst_ratio.has_value());
    EXPECT_FALSE(s.all.decomposition.has_value());
    for (const BucketStats& b : s.buckets) EXPECT_FALSE(b.decomposition.has_value()) << s.key() << " " << b.label;
  }
  const nlohmann::json back = to_json(old);
  EXPECT_FALSE(back["series"][0]["buckets"][1].contains("max_radial"));
  EXPECT_FALSE(back["series"][0].contains("contract"));
  const std::string md = render_markdown(old), html = render_html(old);
  EXPECT_NE(md.find("not recorded"), std::string::npos);
  EXPECT_NE(html.find("id=\"plot-angle-f32-interleaved\""), std::string::npos);

  // Against today's sweep with the default parameters' shape: the same series, the decomposition only on one side.
  SweepOptions o;  // the baseline's parameters, cut to what the file holds
  o.impls = {"scalar", "conventional-fp32"};
  o.dtypes = {Dtype::f32};
  o.layouts = {Layout::interleaved};
  const Report cur = make_sweep_report(o, run_sweep(o));
  for (const auto& [b, c] : {std::pair{&old, &cur}, std::pair{&cur, &old}}) {
    const CompareResult res = compare_reports(*b, *c);
    EXPECT_FALSE(res.failed()) << res.table();
    EXPECT_EQ(res.series_compared, 3u);
    EXPECT_NE(res.table().find("no error decomposition"), std::string::npos) << res.table();
  }
  const CompareResult res = compare_reports(old, cur);
  EXPECT_EQ(res.decomposition_missing_baseline, res.buckets_compared);
  EXPECT_EQ(res.decomposition_missing_current, 0u);

  const Report fresh = sweep_report(small_options(), {impl("scalar")});
  const Report stripped = without_decomposition(fresh);
  EXPECT_FALSE(stripped.series[0].buckets[1].decomposition.has_value());
  EXPECT_FALSE(compare_reports(stripped, fresh).failed());
  EXPECT_FALSE(compare_reports(fresh, stripped).failed());
  // The decomposition comes whole: a bucket with part of it is malformed, and so is a negative maximum.
  nlohmann::json part = to_json(fresh);
  part["series"][0]["buckets"][1].erase("max_radial");
  EXPECT_THROW(from_json(part), ReportError);
  part = to_json(fresh);
  part["series"][0]["buckets"][1].erase("resolved_angle_count");
  EXPECT_THROW(from_json(part), ReportError);
  part = to_json(fresh);
  part["series"][0]["buckets"][1]["max_tangential"] = -1.0;
  EXPECT_THROW(from_json(part), ReportError);
  part = to_json(fresh);
  part["series"][0]["contract"] = "angles=sloppy";
  EXPECT_THROW(from_json(part), ReportError);
}

// ---- compare ---------------------------------------------------------------------

// The components and the angle error are compared for information only: a
// grown max |tangential| or angle error is a note, never a failure (they are
// bounded by e, whose max has the rule); so is a changed contract.
TEST(ReportCompare, ComponentsAnglesAndContractsAreInformational) {
  const Report base = sweep_report(small_options(), {impl("scalar")});
  Report cur = base;
  const size_t k = 3;
  Decomposition& d = *cur.series[0].buckets[k].decomposition;
  d.max_tangential *= 10;
  d.max_angle_rad *= 10;
  d.max_resolved_angle_ulps = 5;
  d.resolved_angle_count = std::max<uint64_t>(d.resolved_angle_count, 1);
  cur.series[1].contract = "angles=f32,cos-sin=f32,arith=f32,denormals=keep,identity=values";
  const CompareResult res = compare_reports(base, cur);
  EXPECT_FALSE(res.failed()) << res.table();
  size_t info = 0;
  for (const auto& x : res.diffs) info += x.kind == "info" && x.what == base.series[0].key() && !x.failing;
  EXPECT_GE(info, 2u) << res.table();
  EXPECT_TRUE(has_diff(res, "contract", base.series[1].key(), false)) << res.table();
  EXPECT_NE(res.table().find("(informational)"), std::string::npos) << res.table();
  EXPECT_TRUE(compare_reports(base, base).diffs.empty());
}

TEST(ReportCompare, PassesOnItself) {
  const Report r = sweep_report(small_options(), {impl("scalar"), impl("conventional-fp32")});
  const CompareResult res = compare_reports(r, r);
  EXPECT_FALSE(res.failed()) << res.table();
  EXPECT_TRUE(res.diffs.empty()) << res.table();
  EXPECT_EQ(res.series_compared, r.series.size());
  EXPECT_NE(res.table().find("compare: OK"), std::string::npos);
}

TEST(ReportCompare, ABf16TrigKernelFailsAgainstTheAccurateBaselineAndPassesAgainstItself) {
  const SweepOptions o = small_options();
  const Report accurate = sweep_report(o, {impl("scalar")});
  const Implementation lossy = degraded_scalar(degraded_trig_rope<round_bf16>);
  const Report degraded = sweep_report(o, {&lossy});

  const CompareResult res = compare_reports(accurate, degraded);
  EXPECT_TRUE(res.failed());
  const std::string table = res.table();
  for (const char* dt : {"f32", "f16", "bf16"})
    EXPECT_TRUE(has_diff(res, "regression", std::string("scalar / exact / ") + dt, true)) << dt << "\n" << table;
  EXPECT_NE(table.find("| FAIL"), std::string::npos) << table;
  EXPECT_NE(table.find("compare: FAIL"), std::string::npos) << table;
  EXPECT_NE(table.find("2^12.."), std::string::npos) << table;  // per bucket

  const CompareResult self = compare_reports(degraded, degraded);
  EXPECT_FALSE(self.failed()) << self.table();
}

// The point of a baseline: a kernel that got less accurate fails CI even
// while every check (its proven bound) still passes.
TEST(ReportCompare, ADegradationWithinTheBoundsStillFails) {
  const SweepOptions o = small_options();
  const Report accurate = sweep_report(o, {impl("scalar")});
  const Implementation worse = degraded_scalar(degraded_trig_rope<round_toward_zero>);
  const Report degraded = sweep_report(o, {&worse});
  // Rounding cos/sin toward zero instead of to nearest (2 u32 instead of 1)
  // shrinks every rotated vector: a radial bias, not a broken bound, on f32.
  bool any_f32 = false;
  for (const Check& c : degraded.checks)
    if (c.name.find("/f32/") != std::string::npos) {
      any_f32 = true;
      EXPECT_EQ(c.status, "pass") << c.name << ": " << c.detail;
    }
  ASSERT_TRUE(any_f32);
  const CompareResult res = compare_reports(accurate, degraded);
  EXPECT_TRUE(res.failed()) << res.table();
  EXPECT_TRUE(has_diff(res, "regression", "scalar / exact / f32", true)) << res.table();
  EXPECT_GT(bias_failures(res, "scalar / exact / f32"), 0u) << res.table();  // and on bias itself
  for (const Series& s : degraded.series)
    if (s.dtype == "f32") {
      EXPECT_LT(s.all.bias, 0.0) << s.key();
    }
}

TEST(ReportCompare, CoverageShrinkFailsAndANewKernelIsANote) {
  const SweepOptions o = small_options();
  const Report both = sweep_report(o, {impl("scalar"), impl("conventional-fp32")});
  const Report scalar_only = sweep_report(o, {impl("scalar")});

  const CompareResult gone = compare_reports(both, scalar_only);
  EXPECT_TRUE(gone.failed());
  EXPECT_TRUE(has_diff(gone, "coverage", "conventional-fp32 / fp32 / f16 / half-split", true)) << gone.table();
  EXPECT_TRUE(has_diff(gone, "coverage", "accuracy/conventional-fp32/fp32/bf16/interleaved", true)) << gone.table();

  const CompareResult added = compare_reports(scalar_only, both);
  EXPECT_FALSE(added.failed()) << added.table();
  EXPECT_TRUE(has_diff(added, "new", "conventional-fp32 / exact / f32 / interleaved", false)) << added.table();

  SweepOptions fewer = o;
  fewer.max_log2_position = 19;  // drops the 2^20.. and 2^28.. buckets
  const CompareResult buckets = compare_reports(scalar_only, sweep_report(fewer, {impl("scalar")}));
  EXPECT_TRUE(buckets.failed());
  bool bucket_gone = false;
  for (const auto& d : buckets.diffs) bucket_gone |= d.kind == "coverage" && d.bucket == "2^28.." && d.failing;
  EXPECT_TRUE(bucket_gone) << buckets.table();

  SweepOptions less = o;
  less.tokens_per_bucket = 2;  // fewer pairs in every bucket
  const CompareResult count = compare_reports(scalar_only, sweep_report(less, {impl("scalar")}));
  EXPECT_TRUE(count.failed());
  bool count_shrank = false;
  for (const auto& d : count.diffs) count_shrank |= d.kind == "coverage" && d.metric == "count" && d.failing;
  EXPECT_TRUE(count_shrank) << count.table();
}

// ---- baselines from other CPUs ------------------------------------------------------

// A report as a machine running these SIMD kernels writes it: each of the scalar kernel's series (and
// checks) again under the name of each SIMD kernel (they are bit-identical to scalar), simd_targets the
// kernels' targets, simd_compiled_targets as given (nullopt: a report from before they were recorded).
Report as_written_on(const Report& scalar, const std::vector<std::string>& simd_kernels,
                     const std::optional<std::vector<std::string>>& compiled) {
  Report r = scalar;
  r.environment.simd_targets.clear();
  r.environment.simd_compiled_targets = compiled;
  for (const std::string& k : simd_kernels) {
    if (const auto t = simd_target_of(k)) r.environment.simd_targets.push_back(*t);  // `simd` needs none
    for (const Series& s : scalar.series) {
      if (s.kernel != "scalar") continue;
      Series x = s;
      x.kernel = k;
      if (const Check* c = scalar.check_of(s)) {
        Check y = *c;
        y.name = "accuracy/" + k + "/" + s.angle_model + "/" + s.dtype + "/" + s.layout;
        r.checks.push_back(y);
      }
      r.series.push_back(std::move(x));
    }
  }
  return r;
}

size_t count_diffs(const CompareResult& r, const std::string& kind, const std::string& metric, bool failing) {
  size_t n = 0;
  for (const auto& d : r.diffs) n += d.kind == kind && d.metric == metric && d.failing == failing;
  return n;
}

const std::vector<std::string> kX86Targets = {"AVX3_DL", "AVX3", "AVX2", "SSE4", "SSSE3", "SCALAR"};

// Task: a baseline made on an AVX-512 machine, compared on one without AVX-512. The series (and checks) of
// simd-avx3_dl and simd-avx3 cannot run here: listed as not run here, informational, the compare passes;
// everything the CPU does run is compared as usual.
TEST(ReportCompare, ASeriesOfATargetThisCpuLacksIsNotRunHereNotACoverageLoss) {
  const Report scalar = sweep_report(small_options(), {impl("scalar"), impl("conventional-fp32")});
  const size_t per_kernel = 3 * 2;  // dtypes x layouts
  const Report base = as_written_on(scalar, {"simd-avx3_dl", "simd-avx3", "simd-avx2"}, kX86Targets);
  const Report here = as_written_on(scalar, {"simd-avx2"}, kX86Targets);
  const CompareResult res = compare_reports(base, here);
  EXPECT_FALSE(res.failed()) << res.table();
  EXPECT_EQ(res.series_not_run_here, 2 * per_kernel);
  EXPECT_EQ(res.checks_not_run_here, 2 * per_kernel);
  EXPECT_EQ(res.targets_not_here, (std::vector<std::string>{"AVX3", "AVX3_DL"}));
  EXPECT_EQ(count_diffs(res, "not-run-here", "series", false), 2 * per_kernel) << res.table();
  EXPECT_EQ(count_diffs(res, "not-run-here", "check", false), 2 * per_kernel) << res.table();
  EXPECT_EQ(count_diffs(res, "coverage", "series", true) + count_diffs(res, "coverage", "check", true), 0u);
  EXPECT_TRUE(has_diff(res, "not-run-here", "simd-avx3_dl / exact / bf16 / half-split", false)) << res.table();
  EXPECT_TRUE(has_diff(res, "not-run-here", "accuracy/simd-avx3/exact/f32/interleaved", false)) << res.table();
  EXPECT_EQ(res.series_compared, here.series.size());  // everything run here is compared
  const std::string table = res.table();
  EXPECT_NE(table.find("not run here (this CPU lacks the target AVX3_DL)"), std::string::npos) << table;
  EXPECT_NE(table.find("this CPU lacks their SIMD target(s) AVX3, AVX3_DL"), std::string::npos) << table;
  EXPECT_NE(table.find("compare: OK"), std::string::npos) << table;
  EXPECT_NE(table.find("12 series and 12 check(s) not run here"), std::string::npos) << table;

  // The baseline's own target list is not what decides (the committed baseline of ec99f19 lists no
  // AVX3_DL next to its simd-avx3_dl series), nor does a current report from before the compiled targets
  // were recorded change the verdict.
  Report base_unlisted = base;
  base_unlisted.environment.simd_targets = {"AVX3", "AVX2", "SSE4", "SSSE3", "SCALAR"};
  EXPECT_EQ(compare_reports(base_unlisted, here).series_not_run_here, 2 * per_kernel);
  EXPECT_FALSE(compare_reports(base_unlisted, here).failed());
  const Report here_older = as_written_on(scalar, {"simd-avx2"}, std::nullopt);
  EXPECT_FALSE(compare_reports(base, here_older).failed()) << compare_reports(base, here_older).table();
  EXPECT_EQ(compare_reports(base, here_older).series_not_run_here, 2 * per_kernel);

  // A SIMD series that did run here is held to the baseline as any other.
  Report worse = here;
  for (Series& s : worse.series)
    if (s.kernel == "simd-avx2") s.buckets.back().max *= 2;
  const CompareResult reg = compare_reports(base, worse);
  EXPECT_TRUE(reg.failed());
  EXPECT_TRUE(has_diff(reg, "regression", "simd-avx2 / exact", true)) << reg.table();
  EXPECT_EQ(reg.series_not_run_here, 2 * per_kernel);
}

// A baseline series missing for any other reason is still a coverage loss: a kernel that needs no SIMD
// target (conventional-fp32, the dispatched `simd`), a SIMD kernel whose target this CPU runs, and a SIMD
// kernel whose target this build does not compile (a build that lost a target on a CPU that has it looks
// the same to the CPU: the compiled list tells them apart).
TEST(ReportCompare, ASeriesMissingForAnyOtherReasonIsStillACoverageLoss) {
  const Report scalar = sweep_report(small_options(), {impl("scalar"), impl("conventional-fp32")});
  const Report base = as_written_on(scalar, {"simd-avx3_dl", "simd-avx2", "simd"}, kX86Targets);

  // conventional-fp32 gone, on a CPU without AVX3_DL: its series and checks are lost coverage; simd-avx3_dl's
  // are still only not run here.
  Report no_conv = as_written_on(scalar, {"simd-avx2", "simd"}, kX86Targets);
  std::erase_if(no_conv.series, [](const Series& s) { return s.kernel == "conventional-fp32"; });
  std::erase_if(no_conv.checks, [](const Check& c) { return c.name.rfind("accuracy/conventional-fp32/", 0) == 0; });
  no_conv.environment.simd_targets = {"AVX2", "SSE4", "SSSE3", "SCALAR"};  // the dispatched `simd` lists none
  const CompareResult conv = compare_reports(base, no_conv);
  EXPECT_TRUE(conv.failed());
  EXPECT_TRUE(has_diff(conv, "coverage", "conventional-fp32 / fp32 / f32 / interleaved", true)) << conv.table();
  EXPECT_TRUE(has_diff(conv, "coverage", "accuracy/conventional-fp32/fp32/bf16/half-split", true)) << conv.table();
  EXPECT_EQ(count_diffs(conv, "coverage", "series", true), 2 * 6u);  // under fp32 and under exact
  EXPECT_EQ(conv.series_not_run_here, 6u);
  EXPECT_NE(conv.table().find("compare: FAIL"), std::string::npos);

  // The dispatched `simd` kernel runs on every CPU: gone is gone.
  Report no_dispatch = as_written_on(scalar, {"simd-avx2"}, kX86Targets);
  const CompareResult dispatch = compare_reports(base, no_dispatch);
  EXPECT_TRUE(has_diff(dispatch, "coverage", "simd / exact / f16 / interleaved", true)) << dispatch.table();

  // simd-avx2 gone while this CPU lists AVX2: it should have run (e.g. `sweep --impl scalar`).
  Report no_avx2 = as_written_on(scalar, {"simd"}, kX86Targets);
  no_avx2.environment.simd_targets = {"AVX2", "SSE4", "SSSE3", "SCALAR"};
  const CompareResult avx2 = compare_reports(base, no_avx2);
  EXPECT_TRUE(avx2.failed());
  EXPECT_TRUE(has_diff(avx2, "coverage", "simd-avx2 / exact / f32 / half-split", true)) << avx2.table();
  EXPECT_TRUE(has_diff(avx2, "coverage", "accuracy/simd-avx2/exact/f32/half-split", true)) << avx2.table();
  EXPECT_NE(avx2.table().find("gone (this CPU runs the target AVX2)"), std::string::npos) << avx2.table();

  // simd-avx3_dl gone because the build no longer compiles AVX3_DL: lost, whatever the CPU.
  const Report lost_target = as_written_on(scalar, {"simd-avx2", "simd"},
                                           std::vector<std::string>{"AVX3", "AVX2", "SSE4", "SSSE3", "SCALAR"});
  const CompareResult build = compare_reports(base, lost_target);
  EXPECT_TRUE(build.failed());
  EXPECT_EQ(build.series_not_run_here, 0u) << build.table();
  EXPECT_TRUE(has_diff(build, "coverage", "simd-avx3_dl / exact / f32 / interleaved", true)) << build.table();
  EXPECT_TRUE(has_diff(build, "coverage", "accuracy/simd-avx3_dl/exact/f32/interleaved", true)) << build.table();
  EXPECT_NE(build.table().find("gone (this build does not compile the target AVX3_DL)"), std::string::npos);
}

TEST(ReportCompare, APassingCheckThatNowFailsFails) {
  const Report base = sweep_report(small_options(), {impl("scalar")});
  Report cur = base;
  cur.checks[0].status = "fail";
  cur.checks[0].detail = "1 violation(s)";
  const CompareResult res = compare_reports(base, cur);
  EXPECT_TRUE(res.failed());
  EXPECT_TRUE(has_diff(res, "check", base.checks[0].name, true)) << res.table();
  // The slack: growth within it passes, beyond it fails.
  Report grown = base;
  Series& s = grown.series[0];
  BucketStats& b = s.buckets.back();
  const Slack slack;
  b.max = slack.limit(base.series[0].buckets.back().max) * 0.999;
  EXPECT_FALSE(compare_reports(base, grown).failed());
  b.max = slack.limit(base.series[0].buckets.back().max) * 1.001;
  EXPECT_TRUE(compare_reports(base, grown).failed());
  b.max = base.series[0].buckets.back().max;
  b.mean = slack.limit(base.series[0].buckets.back().mean) * 1.001;
  EXPECT_TRUE(compare_reports(base, grown).failed());
}

// (1) A bias that moved far beyond the allowance fails, and the row says by
// how much, against what, over how many pairs; at the edge the allowance is
// exactly 5 sqrt(rms_b^2/n_b + rms_c^2/n_c) + 1/8 u.
TEST(ReportCompare, ABiasThatMovedBeyondItsAllowanceFails) {
  const Report base = sweep_report(small_options(), {impl("scalar")});
  const Series& bs = base.series[0];
  ASSERT_EQ(bs.key(), "scalar / exact / f32 / interleaved");
  const size_t k = bs.buckets.size() - 2;
  const BucketStats& bb = bs.buckets[k];
  ASSERT_TRUE(bb.rms.has_value());
  ASSERT_EQ(bb.count, 256u);  // 4 tokens x 2 heads x 32 pairs
  const Slack slack;
  const double allowed = slack.bias_allowance(*bb.rms, bb.count, *bb.rms, bb.count);
  EXPECT_NEAR(allowed, 5.0 * *bb.rms * std::sqrt(2.0 / 256.0) + 0.125, 1e-12);

  Report cur = base;
  BucketStats& cb = cur.series[0].buckets[k];
  cb.bias = bb.bias - 3 * allowed;
  const CompareResult res = compare_reports(base, cur);
  EXPECT_TRUE(res.failed());
  ASSERT_EQ(bias_failures(res), 1u) << res.table();
  const Difference& d = res.diffs.front();  // failures first: the only one
  EXPECT_EQ(d.kind, "regression");
  EXPECT_EQ(d.what, bs.key());
  EXPECT_EQ(d.bucket, bb.label);
  EXPECT_EQ(d.metric, "bias");
  EXPECT_NE(d.baseline.find(fmt::format("{:+.4f}", bb.bias)), std::string::npos) << d.baseline;
  EXPECT_NE(d.current.find(fmt::format("{:+.4f}", cb.bias)), std::string::npos) << d.current;
  EXPECT_NE(d.baseline.find("n 256"), std::string::npos) << d.baseline;
  EXPECT_NE(d.current.find("n 256"), std::string::npos) << d.current;
  EXPECT_NE(d.limit.find(fmt::format("{:.4f}", allowed)), std::string::npos) << d.limit;
  const std::string table = res.table();
  EXPECT_NE(table.find("(1 of them bias)"), std::string::npos) << table;
  EXPECT_EQ(table.find("no per-bucket rms"), std::string::npos) << table;

  // At the edge: within passes, beyond fails, either sign.
  for (double sign : {-1.0, 1.0}) {
    cb.bias = bb.bias + sign * allowed * 0.99;
    EXPECT_FALSE(compare_reports(base, cur).failed()) << sign << "\n" << compare_reports(base, cur).table();
    cb.bias = bb.bias + sign * allowed * 1.01;
    EXPECT_EQ(bias_failures(compare_reports(base, cur)), 1u) << sign;
  }
  // What truncation does (mut_truncating_bf16: -0.65 u) fails here too; the options are honoured.
  cb.bias = bb.bias - 0.65;
  EXPECT_EQ(bias_failures(compare_reports(base, cur)), 1u) << "allowance " << allowed;
  Slack wide;
  wide.bias_absolute = 1.0;
  EXPECT_FALSE(compare_reports(base, cur, wide).failed());
  wide = Slack{};
  wide.bias_sigmas = 20;
  EXPECT_FALSE(compare_reports(base, cur, wide).failed());
  // A baseline that was biased and a current that is not: an improvement, a note.
  Report biased = base;
  biased.series[0].buckets[k].bias = -0.65;
  const CompareResult better = compare_reports(biased, base);
  EXPECT_FALSE(better.failed()) << better.table();
  EXPECT_TRUE(has_diff(better, "improved", bs.key(), false)) << better.table();
  // ...and the other way round a regression.
  EXPECT_EQ(bias_failures(compare_reports(base, biased)), 1u);
}

// (2) Bias that moved within statistical noise passes: the same accurate
// kernels on other seeds (other inputs: independent samples, the worst case
// for the noise of a difference of means). The 5-sigma term alone absorbs
// it; with no allowance at all the same compares fail, so the noise is real.
TEST(ReportCompare, BiasNoiseBetweenSeedsPasses) {
  SweepOptions o = small_options();
  const std::vector<const Implementation*> kernels = {impl("scalar"), impl("conventional-fp32")};
  const Report base = sweep_report(o, kernels);
  Slack statistical_only;
  statistical_only.bias_absolute = 0;
  Slack none = statistical_only;
  none.bias_sigmas = 0;
  size_t compared = 0, noisy = 0;
  double worst_sigmas = 0;  // the largest |moved| in standard deviations
  for (uint64_t seed : {8, 9, 10}) {
    o.seed = seed;
    const Report cur = sweep_report(o, kernels);
    const CompareResult dflt = compare_reports(base, cur);
    EXPECT_EQ(bias_failures(dflt), 0u) << "seed " << seed << "\n" << dflt.table();
    const CompareResult stat = compare_reports(base, cur, statistical_only);
    EXPECT_EQ(bias_failures(stat), 0u) << "seed " << seed << "\n" << stat.table();
    noisy += bias_failures(compare_reports(base, cur, none));
    for (size_t i = 0; i < base.series.size(); ++i)
      for (size_t b = 0; b < base.series[i].buckets.size(); ++b) {
        const BucketStats &x = base.series[i].buckets[b], &y = cur.series[i].buckets[b];
        ASSERT_EQ(x.bucket, y.bucket);
        if (x.count == 0 || *x.rms == 0) continue;
        ++compared;
        const double sd = std::sqrt(*x.rms * *x.rms / double(x.count) + *y.rms * *y.rms / double(y.count));
        worst_sigmas = std::max(worst_sigmas, std::fabs(y.bias - x.bias) / sd);
      }
  }
  EXPECT_GT(compared, 100u);
  EXPECT_GT(noisy, compared / 4) << "the bias does move between seeds";
  EXPECT_LT(worst_sigmas, 5.0);
  std::printf("bias noise: %zu bucket compares, the largest move is %.2f sigma (rms-bounded)\n", compared,
              worst_sigmas);
}

// (3) End to end: the mutation suite's truncating bf16 kernel (stores bf16 by
// truncation: bias about -0.65 u) against its correct twin, the same C code
// with round-to-nearest-even stores (tests/kernels/mutants/). Both are swept under one
// name so their series meet.
#ifdef ROPECHECK_MUTANT_DIR
Implementation load_mutant(const std::string& stem) {
  PluginLoad pl = load_kernel_plugin(std::string(ROPECHECK_MUTANT_DIR) + "/" + stem + ".so");
  if (!pl.impl) throw std::runtime_error(pl.error);
  pl.impl->name = "fast-f32";
  return *pl.impl;
}
#endif

TEST(ReportCompare, TheTruncatingBf16MutantFailsOnBiasAgainstTheAccurateBaseline) {
#ifndef ROPECHECK_MUTANT_DIR
  GTEST_SKIP() << "the mutation suite (gate/) is not part of this build";
#else
  const Implementation ok = load_mutant("ok_fast_f32"), trunc = load_mutant("mut_truncating_bf16");
  const SweepOptions o = small_options();
  const Report accurate = sweep_report(o, {&ok});
  const Report truncating = sweep_report(o, {&trunc});
  for (const Series& s : truncating.series)
    if (s.dtype == "bf16") {
      EXPECT_LT(s.all.bias, -0.4) << s.key();
      EXPECT_GT(accurate.find(s.key())->all.bias, -0.05) << s.key();
    }

  const CompareResult res = compare_reports(accurate, truncating);
  EXPECT_TRUE(res.failed());
  // Every bf16 bucket but position 0 (the identity: no rounding, bias 0 on both sides).
  for (const char* layout : {"interleaved", "half-split"}) {
    const std::string key = std::string("fast-f32 / exact / bf16 / ") + layout;
    EXPECT_EQ(bias_failures(res, key), truncating.find(key)->buckets.size() - 1) << layout << "\n" << res.table();
  }
  for (const auto& d : res.diffs)
    if (d.failing && d.metric == "bias") {
      std::printf("first bias row: %s | %s | %s | %s | %s\n", d.what.c_str(), d.bucket.c_str(), d.baseline.c_str(),
                  d.current.c_str(), d.limit.c_str());
      break;
    }
  // f32 and f16 stores round to nearest in both: nothing moved there.
  EXPECT_EQ(bias_failures(res, "/ f32 /") + bias_failures(res, "/ f16 /"), 0u) << res.table();
  // Bias alone fails it: with max and mean let grow without limit, and the
  // checks left aside, the compare still fails, on bias rows.
  Slack max_mean_ignored;
  max_mean_ignored.relative = 1e9;
  const CompareResult bias_only = compare_reports(accurate, truncating, max_mean_ignored);
  for (const auto& d : bias_only.diffs)
    if (d.failing) {
      EXPECT_TRUE(d.metric == "bias" || d.kind == "check") << d.what << " " << d.metric;
    }
  EXPECT_EQ(bias_failures(bias_only), bias_failures(res));

  const CompareResult self = compare_reports(truncating, truncating);
  EXPECT_FALSE(self.failed()) << self.table();
  // ...and against itself on other inputs: only noise, no bias row.
  SweepOptions other = o;
  other.seed = 8;
  const CompareResult reseeded = compare_reports(truncating, sweep_report(other, {&trunc}));
  EXPECT_EQ(bias_failures(reseeded), 0u) << reseeded.table();

  // A baseline written before buckets had an rms: the fallback (spread
  // bounded by the bucket max) is wider but still catches it, and says so.
  const CompareResult old = compare_reports(without_rms(accurate), truncating);
  EXPECT_GT(bias_failures(old, "/ bf16 /"), 4u) << old.table();
  EXPECT_EQ(bias_failures(old, "/ f32 /") + bias_failures(old, "/ f16 /"), 0u) << old.table();
  std::printf("bf16 buckets failing on bias: %zu with rms, %zu with the max fallback, of %zu\n",
              bias_failures(res, "/ bf16 /"), bias_failures(old, "/ bf16 /"),
              2 * truncating.find("fast-f32 / exact / bf16 / interleaved")->buckets.size());
  EXPECT_GT(old.bias_fallback_baseline, 0u);
  EXPECT_EQ(old.bias_fallback_current, 0u);
  const std::string table = old.table();
  EXPECT_NE(table.find("note: the baseline report has no per-bucket rms"), std::string::npos) << table;
  EXPECT_NE(table.find("[max]"), std::string::npos) << table;
  EXPECT_FALSE(compare_reports(without_rms(accurate), accurate).failed());
  EXPECT_FALSE(compare_reports(without_rms(truncating), truncating).failed());
#endif
}

TEST(ReportCompare, NonFiniteValuesRoundTripAndCompareSanely) {
  Report base = sweep_report(small_options(), {impl("scalar")});
  Report odd = base;
  odd.series[0].buckets[1].max = NAN;
  odd.series[0].buckets[2].mean = INFINITY;
  const Report back = from_json(nlohmann::json::parse(to_json(odd).dump()));
  EXPECT_TRUE(std::isnan(back.series[0].buckets[1].max));
  EXPECT_TRUE(std::isinf(back.series[0].buckets[2].mean));
  EXPECT_FALSE(compare_reports(back, back).failed()) << compare_reports(back, back).table();
  const CompareResult res = compare_reports(base, back);  // finite -> NaN / inf is a regression
  EXPECT_TRUE(res.failed());
  size_t regressions = 0;
  for (const auto& d : res.diffs) regressions += d.kind == "regression" && d.failing;
  EXPECT_EQ(regressions, 2u) << res.table();
  // Duplicates are malformed (a compare could not tell which one is meant).
  nlohmann::json dup = to_json(base);
  dup["checks"].push_back(dup["checks"][0]);
  EXPECT_THROW(from_json(dup), ReportError);
  dup = to_json(base);
  dup["series"][0]["buckets"].push_back(dup["series"][0]["buckets"][1]);
  EXPECT_THROW(from_json(dup), ReportError);
}

// ---- the CLI: exit codes ------------------------------------------------------------

TEST(ReportCli, CompareExitCodes) {
  const std::string dir = scratch_dir("cli");
  const SweepOptions o = small_options();
  const Report accurate = sweep_report(o, {impl("scalar")});
  const Implementation lossy = degraded_scalar(degraded_trig_rope<round_bf16>);
  const Report degraded = sweep_report(o, {&lossy});
  const std::string a = dir + "/accurate.json", d = dir + "/degraded.json";
  write_text_file(a, to_json(accurate).dump(1));
  write_text_file(d, to_json(degraded).dump(1));
  const std::string cli = ROPECHECK_CLI;

  auto same = run_command(cli + " report compare --baseline " + a + " --current " + a, dir + "/out1.txt");
  EXPECT_EQ(same.exit_code, 0) << same.output;
  EXPECT_NE(same.output.find("compare: OK"), std::string::npos) << same.output;

  auto worse = run_command(cli + " report compare --baseline " + a + " --current " + d, dir + "/out2.txt");
  EXPECT_EQ(worse.exit_code, 1) << worse.output;
  EXPECT_NE(worse.output.find("regression"), std::string::npos) << worse.output;
  EXPECT_NE(worse.output.find("scalar / exact / bf16 / half-split"), std::string::npos) << worse.output;

  // The slack is honoured: a degradation within the bounds (cos/sin rounded
  // toward zero) fails at the default slack; with a huge max/mean slack it
  // still fails on its bias (radial, -0.56 u), and passes with a huge bias slack too.
  const Implementation toward_zero = degraded_scalar(degraded_trig_rope<round_toward_zero>);
  const std::string w = dir + "/toward-zero.json";
  write_text_file(w, to_json(sweep_report(o, {&toward_zero})).dump(1));
  auto tight = run_command(cli + " report compare --baseline " + a + " --current " + w, dir + "/out3.txt");
  EXPECT_EQ(tight.exit_code, 1) << tight.output;
  EXPECT_NE(tight.output.find("its bias (mean radial error) may move by 5 * sqrt("), std::string::npos)
      << tight.output;
  auto slack = run_command(cli + " report compare --slack-rel 1e9 --baseline " + a + " --current " + w,
                           dir + "/out3.txt");
  EXPECT_EQ(slack.exit_code, 1) << slack.output;
  EXPECT_NE(slack.output.find("| bias "), std::string::npos) << slack.output;
  auto both = run_command(cli + " report compare --slack-rel 1e9 --bias-slack 1e9 --baseline " + a + " --current " + w,
                          dir + "/out3.txt");
  EXPECT_EQ(both.exit_code, 0) << both.output;
  // ...but a check that now fails still fails.
  Report failing = accurate;
  failing.checks[0].status = "fail";
  write_text_file(d, to_json(failing).dump());
  auto check = run_command(cli + " report compare --slack-rel 1e9 --baseline " + a + " --current " + d,
                           dir + "/out4.txt");
  EXPECT_EQ(check.exit_code, 1) << check.output;
}

// `report compare` (and `sweep --baseline`, which prints the same table) says so: a baseline from a CPU
// with AVX-512 compared on one without passes, naming what was not run here; a lost kernel still exits 1.
TEST(ReportCli, CompareSaysNotRunHere) {
  const std::string dir = scratch_dir("not-run-here");
  const Report scalar = sweep_report(small_options(), {impl("scalar")});
  const Report base = as_written_on(scalar, {"simd-avx3_dl", "simd-avx3", "simd-avx2"}, kX86Targets);
  const Report here = as_written_on(scalar, {"simd-avx2"}, kX86Targets);
  const std::string b = dir + "/base.json", c = dir + "/here.json";
  write_text_file(b, to_json(base).dump());
  write_text_file(c, to_json(here).dump());
  const std::string cli = ROPECHECK_CLI;
  auto ok = run_command(cli + " report compare --baseline " + b + " --current " + c, dir + "/ok.txt");
  EXPECT_EQ(ok.exit_code, 0) << ok.output;
  EXPECT_NE(ok.output.find("| note   | not-run-here | simd-avx3_dl / exact / f32 / interleaved"), std::string::npos)
      << ok.output;
  EXPECT_NE(ok.output.find("not run here (this CPU lacks the target AVX3)"), std::string::npos) << ok.output;
  EXPECT_NE(ok.output.find("compare: OK"), std::string::npos) << ok.output;

  Report lost = here;
  lost.series.erase(lost.series.begin());  // scalar / exact / f32 / interleaved
  write_text_file(c, to_json(lost).dump());
  auto fail = run_command(cli + " report compare --baseline " + b + " --current " + c, dir + "/fail.txt");
  EXPECT_EQ(fail.exit_code, 1) << fail.output;
  EXPECT_NE(fail.output.find("| FAIL   | coverage     | scalar / exact / f32 / interleaved"), std::string::npos)
      << fail.output;
  EXPECT_NE(fail.output.find("not run here"), std::string::npos) << fail.output;  // still listed
}

// sweep --contract: the conventional fp32 pipeline judged against the exact
// rotation fails under a declared angles=exact (its series under the exact
// model become checks), passes under angles=f32 (what it is designed with),
// and without --contract stays informational there, as before; the contract
// is recorded per series and as a parameter.
TEST(ReportCli, SweepContractJudgesTheFp32PipelineUnderItsDeclaredContract) {
  const std::string dir = scratch_dir("contract");
  const std::string cli = ROPECHECK_CLI;
  const std::string sweep = cli + " sweep --impl conventional-fp32 --tokens-per-bucket 2 --heads 1";
  const std::vector<std::string> exact_keys = {
      "conventional-fp32 / exact / f32 / interleaved", "conventional-fp32 / exact / f32 / half-split",
      "conventional-fp32 / exact / f16 / interleaved", "conventional-fp32 / exact / f16 / half-split",
      "conventional-fp32 / exact / bf16 / interleaved", "conventional-fp32 / exact / bf16 / half-split"};
  auto check_name = [](const std::string& key) {
    std::string n = "accuracy/" + key;
    for (size_t p; (p = n.find(" / ")) != std::string::npos;) n.replace(p, 3, "/");
    return n;
  };

  auto own = run_command(sweep + " --report-dir " + dir + "/own", dir + "/own.txt");
  EXPECT_EQ(own.exit_code, 0) << own.output;
  const Report ro = load_report(dir + "/own/report.json");
  EXPECT_EQ(ro.parameters.at("contract"), "each kernel's own");
  for (const std::string& k : exact_keys) {
    ASSERT_NE(ro.find(k), nullptr) << k;
    EXPECT_GT(ro.find(k)->violations, 0u) << k;  // drifts beyond exact angles...
    EXPECT_EQ(ro.find_check(check_name(k)), nullptr) << k;  // ...but is not a check there
    EXPECT_EQ(ro.find(k)->contract.value_or(""), "angles=exact,cos-sin=f32,arith=f32,denormals=keep,identity=bits");
  }

  auto exact = run_command(sweep + " --contract angles=exact --report-dir " + dir + "/exact", dir + "/exact.txt");
  EXPECT_EQ(exact.exit_code, 1) << exact.output;
  EXPECT_NE(exact.output.find("FAIL conventional-fp32 exact f32 interleaved (contract default)"), std::string::npos)
      << exact.output;
  const Report re = load_report(dir + "/exact/report.json");
  for (const std::string& k : exact_keys) {
    const Check* c = re.find_check(check_name(k));
    ASSERT_NE(c, nullptr) << k;
    EXPECT_EQ(c->status, "fail") << k;
    EXPECT_GT(re.find(k)->worst_ratio.value_or(0), 1.0) << k;
  }

  auto f32 = run_command(sweep + " --contract angles=f32 --report-dir " + dir + "/f32", dir + "/f32.txt");
  EXPECT_EQ(f32.exit_code, 0) << f32.output;
  const Report rf = load_report(dir + "/f32/report.json");
  const std::string spec = "angles=f32,cos-sin=f32,arith=f32,denormals=keep,identity=values";
  EXPECT_EQ(rf.parameters.at("contract"), spec);
  for (const Series& s : rf.series) {
    EXPECT_EQ(s.contract.value_or(""), spec) << s.key();
    EXPECT_EQ(s.violations, 0u) << s.key() << "\n" << s.first_finding;
    EXPECT_LE(s.worst_ratio.value_or(2), 1.0) << s.key();
  }
  for (const std::string& k : exact_keys) {
    const Check* c = rf.find_check(check_name(k));
    ASSERT_NE(c, nullptr) << k;
    EXPECT_EQ(c->status, "pass") << k << ": " << c->detail;
    EXPECT_NE(c->detail.find("under contract angles=f32"), std::string::npos) << c->detail;
  }
  EXPECT_NE(f32.output.find("| conventional-fp32 | exact | f32 | interleaved | angles=f32 |"), std::string::npos)
      << f32.output;

  auto preset = run_command(sweep + " --contract pytorch-f32", dir + "/preset.txt");
  EXPECT_EQ(preset.exit_code, 0) << preset.output;
  auto bad = run_command(sweep + " --contract angles=sloppy", dir + "/bad.txt");
  EXPECT_EQ(bad.exit_code, 2) << bad.output;
  EXPECT_NE(bad.output.find("--contract: angles: expected exact, f32 or f32:K"), std::string::npos) << bad.output;
}

TEST(ReportCli, CorruptOrIncompatibleReportsExitTwo) {
  const std::string dir = scratch_dir("corrupt");
  const Report good = sweep_report(small_options(), {impl("scalar")});
  const std::string ok = dir + "/good.json";
  write_text_file(ok, to_json(good).dump());
  nlohmann::json j = to_json(good);

  std::vector<std::pair<std::string, std::string>> bad;  // (file text, expected message part)
  bad.emplace_back("", "not valid JSON");
  bad.emplace_back("{\"schema\": \"ropecheck-report\", \"schema_version\": 1, ", "not valid JSON");
  bad.emplace_back("[1, 2, 3]", "not a JSON object");
  bad.emplace_back("{\"hello\": 1}", "not a ropecheck report");
  nlohmann::json v = j;
  v["schema_version"] = 999;
  bad.emplace_back(v.dump(), "schema version 999 is not supported");
  nlohmann::json m = j;
  m.erase("series");
  bad.emplace_back(m.dump(), "missing field 'series'");
  nlohmann::json t = j;
  t["series"][0]["buckets"][1]["max"] = "big";
  bad.emplace_back(t.dump(), "expected a number");
  nlohmann::json h = j;
  h["series"][0]["histogram"].erase(0);
  bad.emplace_back(h.dump(), "bins");

  const std::string cli = ROPECHECK_CLI;
  for (size_t i = 0; i < bad.size(); ++i) {
    const std::string f = dir + "/bad" + std::to_string(i) + ".json";
    write_text_file(f, bad[i].first);
    EXPECT_THROW(load_report(f), ReportError) << i;
    for (const std::string& args : {" --baseline " + f + " --current " + ok, " --baseline " + ok + " --current " + f}) {
      auto r = run_command(cli + " report compare" + args, dir + "/out.txt");
      EXPECT_EQ(r.exit_code, 2) << i << ": " << r.output;
      EXPECT_NE(r.output.find("error: "), std::string::npos) << r.output;
      EXPECT_NE(r.output.find(bad[i].second), std::string::npos) << i << ": " << r.output;
    }
  }
  auto missing = run_command(cli + " report compare --baseline " + dir + "/nope.json --current " + ok,
                             dir + "/out.txt");
  EXPECT_EQ(missing.exit_code, 2) << missing.output;
  EXPECT_NE(missing.output.find("cannot open report"), std::string::npos) << missing.output;
  // `sweep --baseline` refuses a corrupt baseline before sweeping.
  auto sweep = run_command(cli + " sweep --tokens-per-bucket 1 --baseline " + dir + "/bad0.json", dir + "/out.txt");
  EXPECT_EQ(sweep.exit_code, 2) << sweep.output;
}

TEST(ReportBaseline, CommittedBaselineCoversTheBuiltInKernels) {
  const Report b = load_report(std::string(ROPECHECK_SOURCE_DIR) + "/reports/baseline/sweep.json");
  for (const char* k : {"scalar / exact", "conventional-fp32 / fp32", "conventional-fp32 / exact"})
    for (const char* dt : {"f32", "f16", "bf16"})
      for (const char* l : {"interleaved", "half-split"})
        EXPECT_NE(b.find(std::string(k) + " / " + dt + " / " + l), nullptr) << k << " " << dt << " " << l;
  EXPECT_TRUE(b.all_checks_pass());
  // Written with the decomposition and the contracts: the compare has both sides of every note.
  for (const Series& s : b.series) {
    EXPECT_TRUE(s.contract.has_value()) << s.key();
    EXPECT_TRUE(s.all.decomposition.has_value()) << s.key();
    for (const BucketStats& x : s.buckets) EXPECT_TRUE(x.decomposition.has_value()) << s.key() << " " << x.label;
  }
  EXPECT_EQ(b.parameters.at("contract"), "each kernel's own");
  // Made with the default sweep parameters (what the CTest baseline compare runs).
  const SweepOptions d;
  EXPECT_EQ(b.seed, d.seed);
  EXPECT_EQ(b.parameters.at("tokens_per_bucket"), d.tokens_per_bucket);
  EXPECT_EQ(b.parameters.at("max_log2_position"), d.max_log2_position);
}

// ---- for people: verdict and summary first -------------------------------------------

// Positions of the parts, in order, in a rendered page (npos when one is missing).
std::vector<size_t> positions(const std::string& text, const std::vector<std::string>& parts) {
  std::vector<size_t> at;
  for (const std::string& p : parts) at.push_back(text.find(p));
  return at;
}

void expect_in_order(const std::string& text, const std::vector<std::string>& parts, const char* what) {
  const std::vector<size_t> at = positions(text, parts);
  for (size_t i = 0; i < parts.size(); ++i) {
    ASSERT_NE(at[i], std::string::npos) << what << ": no " << parts[i];
    if (i) {
      EXPECT_LT(at[i - 1], at[i]) << what << ": " << parts[i - 1] << " should come before " << parts[i];
    }
  }
}

// report.md and report.html open with the verdict (the failing checks named) and a line per series (worst
// error against its bound, where, the contract, why it fails), then the plots (html) or tables (md), then
// everything else; the run's parameters read as words, not JSON.
TEST(ReportRender, VerdictAndSummaryComeFirst) {
  const Report r = sweep_report(small_options(), {impl("scalar"), impl("conventional-fp32")});
  Report failing = r;
  Series& s = failing.series[0];  // scalar / exact / f32 / interleaved
  ASSERT_EQ(s.key(), "scalar / exact / f32 / interleaved");
  s.violations = 3;
  s.first_finding = "accuracy: pair error 9 u (allowed 3.8)\n  case: f32 interleaved\n  input: 0x3f800000";
  Check& c = failing.checks[0];
  ASSERT_EQ(c.name, "accuracy/scalar/exact/f32/interleaved");
  c.status = "fail";
  c.detail = "3 violation(s) under contract identity=bits\nsmallest failing case: f32 interleaved head_dim=2";

  const Verdict v = verdict_of(failing);
  EXPECT_EQ(v.headline(), fmt::format("FAIL: 1 of {} checks fail", r.checks.size()));
  EXPECT_EQ(verdict_of(r).headline(), fmt::format("PASS: {0} of {0} checks pass", r.checks.size()));
  EXPECT_EQ(verdict_of(Report{}).headline(), "NO CHECKS: nothing in this report was judged");

  const std::vector<SeriesSummary> sum = summarize(failing);
  ASSERT_EQ(sum.size(), r.series.size());
  EXPECT_EQ(sum[0].verdict, "FAIL");
  EXPECT_EQ(sum[0].detail, c.detail);
  EXPECT_EQ(sum[0].finding, s.first_finding);
  for (const SeriesSummary& m : sum) {
    ASSERT_NE(m.worst_bucket, nullptr) << m.series->key();
    for (const BucketStats& b : m.series->buckets) EXPECT_LE(b.max, m.worst_bucket->max) << m.series->key();
    EXPECT_EQ(m.where.rfind(m.worst_bucket->label + " (position ", 0), 0u) << m.where;
    if (m.series->kernel == "conventional-fp32" && m.series->angle_model == "exact") {
      EXPECT_EQ(m.verdict, "not a check");  // its drift under exact angles, informational
      EXPECT_NE(m.detail.find("informational"), std::string::npos) << m.detail;
    } else if (m.series != &s) {
      EXPECT_EQ(m.verdict, "pass") << m.series->key();
      EXPECT_TRUE(m.detail.empty()) << m.detail;
    }
  }

  const std::string html = render_html(failing);
  expect_in_order(html,
                  {"id=\"verdict\"", "FAIL: 1 of", "accuracy/scalar/exact/f32/interleaved</code>", "id=\"summary\"",
                   "pair error 9 u (allowed 3.8)</summary>", "id=\"plot-max-f32-interleaved\"", "id=\"details\"",
                   "<details id=\"details-run\"", "id=\"environment-table\"", "id=\"checks\"",
                   "id=\"table-f32-interleaved\"", "id=\"statistics\"", "id=\"worst-cases\""},
                  "report.html");
  EXPECT_NE(html.find("class=\"verdict fail\""), std::string::npos);
  // A multi-line detail (a gate's diagnosis, then its cases): the verdict shows its first line, the rest on a
  // click (html) or under Checks (md).
  EXPECT_NE(html.find("3 violation(s) under contract identity=bits<details class=\"finding\"><summary>more</summary>"
                      "<pre class=\"finding\">smallest failing case"),
            std::string::npos);
  EXPECT_NE(render_html(r).find("class=\"verdict pass\""), std::string::npos);
  const std::string md = render_markdown(failing);
  expect_in_order(md,
                  {"**FAIL: 1 of", "* `accuracy/scalar/exact/f32/interleaved`: 3 violation(s) under contract "
                   "identity=bits\n", "## Summary",
                   "| scalar | exact | f32 | interleaved | **FAIL** |", "its first finding:", "## f32 interleaved",
                   "## Checks", "## Statistics", "## Worst cases", "## Run"},
                  "report.md");

  // Parameters in words: no JSON brackets; the sweep's empty lists are every one the report holds.
  for (const std::string& page : {html, md}) {
    EXPECT_EQ(page.find("[]"), std::string::npos);
    EXPECT_EQ(page.find("[\""), std::string::npos);
  }
  EXPECT_EQ(parameter_text(r, "dtypes"), "every one (f32, f16, bf16)");
  EXPECT_EQ(parameter_text(r, "layouts"), "every one (interleaved, half-split)");
  EXPECT_EQ(parameter_text(r, "contract"), "each kernel's own");
  EXPECT_EQ(parameter_text(r, "tokens_per_bucket"), "4");
  EXPECT_EQ(parameter_text(r, "absent"), "-");
  Report other = r;
  other.kind = "gate";
  other.parameters = {{"dtypes", nlohmann::json::array()},
                      {"shapes", {{{"heads", 2}, {"dims", {64, 128}}}, {{"heads", 1}}}},
                      {"limits", {{"seconds", 1.5}, {"strict", true}}}};
  EXPECT_EQ(parameter_text(other, "dtypes"), "(none)");  // "every one" is the sweep's convention only
  EXPECT_EQ(parameter_text(other, "shapes"), "(dims: (64, 128); heads: 2), (heads: 1)");
  EXPECT_EQ(parameter_text(other, "limits"), "seconds: 1.5; strict: true");
}

TEST(ReportHeadline, DrawsBothPipelinesForEveryDtype) {
  SweepOptions o = headline_options(1, 1);
  o.max_log2_position = 8;  // small: the full one is `ropecheck report headline`
  const Report r = make_sweep_report(o, run_sweep(o));
  const std::string svg = render_headline_svg(r);
  for (const char* dt : {"f32", "f16", "bf16"})
    EXPECT_NE(svg.find(std::string("id=\"headline-") + dt + "\""), std::string::npos) << dt;
  EXPECT_NE(svg.find("accurate angles (scalar)"), std::string::npos);
  EXPECT_NE(svg.find("conventional fp32 pipeline"), std::string::npos);
  size_t lines = 0;
  for (size_t p = svg.find("<polyline"); p != std::string::npos; p = svg.find("<polyline", p + 1)) ++lines;
  EXPECT_EQ(lines, 6u);  // 2 pipelines x 3 dtypes, no gaps
  Report empty = r;
  empty.series.clear();
  EXPECT_THROW(render_headline_svg(empty), ReportError);
}

}  // namespace
}  // namespace ropecheck::report
