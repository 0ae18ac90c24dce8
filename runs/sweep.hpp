// The accuracy sweep: every built-in kernel x dtype x layout over log2
// position buckets, judged against the reference, summarised as a table.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "impls/registry.hpp"
#include "properties/contract.hpp"
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
  // --contract: every kernel is judged under Criteria::of(its error model, this
  // contract), and its series under the exact angle model become checks too
  // (the contract states what it promises against the exact rotation). Absent:
  // each kernel under its own contract (default_contract()), and only the
  // series under its own angle model are checks.
  std::optional<Contract> contract;
  // Called after each (dtype, layout) block with (blocks done, blocks in all) (reports: progress).
  std::function<void(size_t, size_t)> progress;
  // A model's case template (--hf-config / --preset; reference/hf_config.hpp model_case): the swept case takes
  // it (core/rope_case.hpp apply_case_template) instead of head_dim / rotary_dim / base. A kernel that declines
  // it (RC_UNSUPPORTED) gets no row; `declined` names it.
  std::optional<RopeCase> model;
  std::vector<std::string>* declined = nullptr;  // "KERNEL DTYPE LAYOUT", one per declined block
};

// The contract a kernel is judged under when the sweep is given none: for the
// built-in kernels (those of implementations()) the "builtin" preset,
// Contract{} with identity=bits (they copy a zero-angle pair's bits); for any
// other kernel (plugins, test kernels) Contract{}.
Contract default_contract(const Implementation& impl);

struct SweepRow {
  std::string impl;
  AngleModel model = AngleModel::exact;
  Dtype dtype = Dtype::f32;
  Layout layout = Layout::interleaved;
  Contract contract;  // what the kernel was judged under (with its error model)
  double bound = 0;   // the flat case bound of those criteria (display; the verdict is per pair)
  std::map<int, ErrorStats> by_bucket;
  ErrorStats all;
  uint64_t violations = 0;
  std::string first_finding;
  // The largest fraction of its allowance any pair used: max over pairs of
  // max(e / total, |radial| / radial allowance, |tangential| / tangential
  // allowance); > 1 on a violation. 0 when no pair was judged.
  double worst_ratio = 0;
  bool own_model = true;         // judged under the kernel's own angle model
  bool expected_to_pass = true;  // a check: own model, or the exact model under an explicit --contract
  std::map<int, WorstPair> worst_by_bucket;  // reports: the worst pair of each bucket, with its bits
};

std::vector<SweepRow> run_sweep(const SweepOptions& opt);
// The same over given implementations (reports: lets tests sweep a test-only kernel).
std::vector<SweepRow> run_sweep(const SweepOptions& opt, const std::vector<const Implementation*>& impls);

// Markdown tables: max and mean error (u) per bucket, the error's components
// (max |radial|, max |tangential|) and the angle error (f32 ulps of |phi|) per
// bucket, then the summary.
std::string format_sweep_table(const std::vector<SweepRow>& rows);
// One line per kernel x angle model, one column per dtype: the largest pair error over both layouts and every bucket
// and the verdict ("pass", "FAIL (n violations)", "n/a" where it is not a check: another angle model), for `sweep
// --summary` (the main job's output; the full tables stay in report.md).
std::string format_sweep_summary(const std::vector<SweepRow>& rows);

}  // namespace ropecheck
