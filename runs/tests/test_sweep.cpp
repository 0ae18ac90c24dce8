// The accuracy sweep itself: what it measures per bucket (through the report
// it makes) and its terminal table. The report tests (reports/tests) read,
// render and compare such reports.
#include <gtest/gtest.h>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>

#include "runs/sweep_report.hpp"
#include "runs/tests/sweep_fixtures.hpp"

namespace ropecheck::report {
namespace {

using sweep_testing::bucket_of;
using sweep_testing::impl;
using sweep_testing::small_options;
using sweep_testing::sweep_report;
using sweep_testing::unit_of;

// The accurate scalar kernel: its angle error is the output's rounding, a few u
// of the storage type in radians, at every position; where rounding cannot mask
// it (PairError::resolved) it is far below an ulp of f32 at |phi|. The conventional
// fp32 pipeline judged against the exact rotation: its angle error grows with
// the position (x16 every 4 octaves) in radians, but in f32 ulps of |phi| it
// stays near 1 in every bucket where it can be resolved: an f32 angle off by
// about an ulp, the contract angles=f32's design. (A bucket's maximum over few
// resolved pairs is a small sample: the ulp range is checked on buckets with at
// least 64 of them.)
TEST(Sweep, AngleErrorOfAccurateAnglesIsTinyAndOfF32AnglesNearOneUlpAtEveryPosition) {
  SweepOptions o = small_options();
  o.tokens_per_bucket = 8;
  const Report r = sweep_report(o, {impl("scalar"), impl("conventional-fp32")});
  for (const char* dt : {"f32", "f16", "bf16"})
    for (const char* lay : {"interleaved", "half-split"}) {
      const std::string tail = std::string(" / ") + dt + " / " + lay;
      const Series* acc = r.find("scalar / exact" + tail);
      const Series* drift = r.find("conventional-fp32 / exact" + tail);
      const Series* own = r.find("conventional-fp32 / fp32" + tail);
      ASSERT_TRUE(acc && drift && own) << tail;
      const double u = unit_of(dt);
      size_t resolved = 0;
      double lo = INFINITY, hi = 0;
      double prev_rad = 0;
      for (const BucketStats& b : drift->buckets) {
        const Decomposition& d = *b.decomposition;
        const Decomposition& a = *bucket_of(*acc, b.bucket)->decomposition;
        const Decomposition& o = *bucket_of(*own, b.bucket)->decomposition;
        const std::string where = std::string(dt) + " " + lay + " " + b.label;
        EXPECT_LE(a.max_angle_rad, 4 * u) << where;  // the rounding of the output, nothing more
        EXPECT_LE(o.max_angle_rad, 4 * u) << where;  // the fp32 pipeline against its own angle
        if (a.resolved_angle_count) {
          EXPECT_LT(a.max_resolved_angle_ulps, 0.25) << where;
        }
        if (o.resolved_angle_count) {
          EXPECT_LT(o.max_resolved_angle_ulps, 0.25) << where;
        }
        // Radians: x16 per bucket (4 octaves) once above the rounding and below pi.
        if (b.bucket >= 6 && d.max_angle_rad < 1.0 && prev_rad > 4 * u) {
          EXPECT_GT(d.max_angle_rad, 6 * prev_rad) << where;
          EXPECT_LT(d.max_angle_rad, 40 * prev_rad) << where;
        }
        prev_rad = d.max_angle_rad;
        if (d.resolved_angle_count >= 64) {
          ++resolved;
          lo = std::min(lo, d.max_resolved_angle_ulps);
          hi = std::max(hi, d.max_resolved_angle_ulps);
        }
      }
      // f32 resolves the angle from position 2^8 on, f16 from 2^16, bf16 from 2^20.
      EXPECT_GE(resolved, std::string(dt) == "f32" ? 6u : std::string(dt) == "f16" ? 3u : 2u) << tail;
      EXPECT_GE(lo, 0.5) << tail;
      EXPECT_LE(hi, 4.0) << tail;
      EXPECT_LE(hi, 4 * lo) << tail << ": roughly constant in ulps";
      std::printf("%s %s: conventional-fp32 under exact, max angle error %.3g..%.3g f32 ulps over %zu buckets; "
                  "scalar %.3g ulps\n",
                  dt, lay, lo, hi, resolved, acc->all.decomposition->max_resolved_angle_ulps);
    }
}

TEST(Sweep, TableShowsComponentsAnglesAndContract) {
  const std::string t = format_sweep_table(run_sweep(small_options(), {impl("scalar")}));
  for (const char* part : {"Max pair error (u) by position bucket", "Error components by position bucket",
                           "Max angle error by position bucket, in f32 ulps of |phi|", "| contract |",
                           "| worst/allowance |", "| scalar | exact | f32 | interleaved | identity=bits |"})
    EXPECT_NE(t.find(part), std::string::npos) << part << "\n" << t;
}

// `sweep --summary` (the main job's output): one line per kernel and angle model, a column per dtype with the largest
// error over both layouts and the verdict; a series judged under another angle model is not a check ("n/a").
TEST(Sweep, TheSummaryHasALinePerKernelAndAngleModel) {
  const auto rows = run_sweep(small_options(), {impl("scalar"), impl("conventional-fp32")});
  const std::string t = format_sweep_summary(rows);
  EXPECT_EQ(std::count(t.begin(), t.end(), '\n'), 2 + 3) << t;  // header, rule; scalar, conventional x 2 models
  EXPECT_NE(t.find("| kernel | angle model | f32: max e (u), verdict |"), std::string::npos) << t;
  EXPECT_NE(t.find("| conventional-fp32 | exact | "), std::string::npos) << t;
  EXPECT_NE(t.find("n/a (another angle model)"), std::string::npos) << t;
  double worst = 0;
  for (const auto& r : rows)
    if (r.impl == "scalar" && r.dtype == Dtype::f32) worst = std::max(worst, r.all.max);
  EXPECT_NE(t.find(fmt::format("| scalar | exact | {:.3g}, pass |", worst)), std::string::npos) << t;
}

// The environment a report records lists, in simd_targets, exactly the targets of the registered
// `simd-<target>` kernels: what a compare reads to tell a series this CPU cannot run from a lost one
// (docs/reports.md, "Baselines from other CPUs"). Each is compiled in, and both lists survive JSON.
TEST(Sweep, TheEnvironmentListsTheTargetOfEveryRegisteredSimdKernel) {
  const Environment e = current_environment();
  ASSERT_TRUE(e.simd_compiled_targets.has_value());
  size_t simd_kernels = 0;
  for (const Implementation& i : implementations())
    if (const auto t = simd_target_of(i.name)) {
      ++simd_kernels;
      EXPECT_TRUE(lists_target(e.simd_targets, *t)) << i.name << " is registered, its target " << *t
                                                    << " is not in simd_targets";
    }
  EXPECT_GT(simd_kernels, 0u);
  EXPECT_EQ(e.simd_targets.size(), simd_kernels) << "a listed target without its kernel";
  for (const std::string& t : e.simd_targets) EXPECT_TRUE(lists_target(*e.simd_compiled_targets, t)) << t;
  EXPECT_EQ(e.implementations, implementation_names());
  // The naming convention both sides rely on.
  EXPECT_EQ(simd_target_of("simd-avx3_dl").value_or(""), "AVX3_DL");
  EXPECT_EQ(simd_target_of("simd-scalar").value_or(""), "SCALAR");
  for (const char* k : {"simd", "scalar", "conventional-fp32", "simd-", "fast-f32"})
    EXPECT_FALSE(simd_target_of(k).has_value()) << k;

  Report r;
  r.environment = e;
  r.histogram_edges = default_histogram_edges();
  const Report back = from_json(nlohmann::json::parse(to_json(r).dump()));
  EXPECT_EQ(back.environment.simd_targets, e.simd_targets);
  EXPECT_EQ(back.environment.simd_compiled_targets, e.simd_compiled_targets);
  nlohmann::json older = to_json(r);  // written before the compiled targets were recorded: still reads
  older["environment"].erase("simd_compiled_targets");
  EXPECT_FALSE(from_json(older).environment.simd_compiled_targets.has_value());
}

}  // namespace
}  // namespace ropecheck::report
