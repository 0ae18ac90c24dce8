// The accuracy sweep: every built-in kernel x dtype x layout over log2
// position buckets, judged against the reference, summarised as a table.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
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
  std::vector<Dtype> dtypes;     // empty: every dtype (reports)
  std::vector<Layout> layouts;   // empty: every layout (reports)
  // Called after each (dtype, layout) block with (blocks done, blocks in all) (reports: progress).
  std::function<void(size_t, size_t)> progress;
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
  std::map<int, WorstPair> worst_by_bucket;  // reports: the worst pair of each bucket, with its bits
};

std::vector<SweepRow> run_sweep(const SweepOptions& opt);
// The same over given implementations (reports: lets tests sweep a test-only kernel).
std::vector<SweepRow> run_sweep(const SweepOptions& opt, const std::vector<const Implementation*>& impls);

// Markdown tables: max and mean error (u) per bucket, then the summary.
std::string format_sweep_table(const std::vector<SweepRow>& rows);

}  // namespace ropecheck
