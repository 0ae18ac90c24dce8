// Small sweeps for tests: the sweep's own tests (runs/tests) and the report
// tests (reports/tests), which need real reports to read, render and compare.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "runs/sweep_report.hpp"

namespace ropecheck::sweep_testing {

// 4 tokens x 2 heads x 32 pairs = 256 pairs a bucket: seconds, not minutes.
inline SweepOptions small_options() {
  SweepOptions o;
  o.seed = 7;
  o.tokens_per_bucket = 4;
  o.n_heads = 2;
  o.head_dim = 64;
  o.rotary_dim = 64;
  return o;
}

inline report::Report sweep_report(const SweepOptions& o, const std::vector<const Implementation*>& impls) {
  return report::make_sweep_report(o, run_sweep(o, impls));
}

inline const Implementation* impl(const char* name) {
  const Implementation* i = find_implementation(name);
  EXPECT_NE(i, nullptr) << name;
  return i;
}

inline const report::BucketStats* bucket_of(const report::Series& s, int b) {
  for (const report::BucketStats& x : s.buckets)
    if (x.bucket == b) return &x;
  return nullptr;
}

// u of a dtype named as in a report.
inline double unit_of(const std::string& dtype) {
  return dtype == "f32" ? 0x1p-24 : dtype == "f16" ? 0x1p-11 : 0x1p-8;
}

}  // namespace ropecheck::sweep_testing
