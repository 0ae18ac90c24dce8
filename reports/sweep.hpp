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
};

// The contract a kernel is judged under when the sweep is given none: for the
// built-in kernels (those of implementations()) the "builtin" preset,
// Contract{} with identity=bits (they copy a zero-angle pair's bits); for any
// other kernel (plugins, test kernels) Contract{}.
Contract default_contract(const Implementation& impl);

// The kernel's angle error where the output's rounding cannot mask it. The
// judge's ErrorStats::max_angle_ulps is the largest |angle error| / ulp32(|phi|)
// over every pair; where |phi| is small, ulp32(|phi|) is far below the angle
// the output's rounding alone moves a pair by (about u of the storage type, in
// radians), so that maximum measures the rounding, not the angle (5e3 f32 ulps
// for the accurate scalar kernel at position 1 in f32, 1.6e7 in bf16). This
// keeps only the pairs where what rounding can explain, the criteria's
// tangential allowance without the angle clause taken as an angle, is at most
// 1/8 ulp of f32 at |phi|: there the measured error is the kernel's angle error
// to within 1/8 ulp. (docs/reports.md, "Angle error")
struct ResolvedAngle {
  uint64_t count = 0;   // pairs resolved
  double max_ulps = 0;  // the largest |angle error| among them, in f32 ulps of |phi|
  void add(double ulps);
  void merge(const ResolvedAngle& o);
};
inline constexpr double kAngleResolution = 1.0 / 8;  // the rounding's share, in f32 ulps of |phi|

// Resolved angle errors of one judged output, by log2 position bucket (every
// bucket with a finite pair has an entry, possibly with count 0).
std::map<int, ResolvedAngle> resolved_angle_errors(const RopeCase& c, const ReferenceOutput& ref, const void* got,
                                                   const Criteria& cr);

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
  std::map<int, ResolvedAngle> resolved_by_bucket;  // the angle error where rounding cannot mask it
  ResolvedAngle resolved_all;
};

std::vector<SweepRow> run_sweep(const SweepOptions& opt);
// The same over given implementations (reports: lets tests sweep a test-only kernel).
std::vector<SweepRow> run_sweep(const SweepOptions& opt, const std::vector<const Implementation*>& impls);

// Markdown tables: max and mean error (u) per bucket, the error's components
// (max |radial|, max |tangential|) and the angle error (f32 ulps of |phi|) per
// bucket, then the summary.
std::string format_sweep_table(const std::vector<SweepRow>& rows);

}  // namespace ropecheck
