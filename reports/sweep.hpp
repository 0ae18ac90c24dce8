// The accuracy sweep: every built-in kernel x dtype x layout over log2
// position buckets, judged against the reference, summarised as a table.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "impls/registry.hpp"
#include "properties/judge.hpp"

namespace ropecheck {

struct SweepOptions {
  std::vector<std::string> impls;  // empty: every registered implementation
  uint64_t seed = 1;
  int max_log2_position = 31;   // positions up to 2^this
  int bucket_step = 4;          // sample a bucket every this many octaves
  uint32_t tokens_per_bucket = 16;
  uint32_t n_heads = 4;
  uint32_t head_dim = 128;
  uint32_t rotary_dim = 128;
  double base = 10000.0;
  bool also_exact_model = true;  // judge fp32-model kernels under exact too (shows drift)
};

struct SweepRow {
  std::string impl;
  AngleModel model;
  Dtype dtype;
  Layout layout;
  double bound = 0;
  std::map<int, ErrorStats> by_bucket;
  ErrorStats all;
  uint64_t violations = 0;
  std::string first_finding;
  bool expected_to_pass = true;  // judged under the kernel's own angle model
};

std::vector<SweepRow> run_sweep(const SweepOptions& opt);

// Markdown tables: max and mean error (u) per bucket, then the summary.
std::string format_sweep_table(const std::vector<SweepRow>& rows);

}  // namespace ropecheck
