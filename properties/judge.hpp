// Judging a kernel's output against the reference: the error metric on
// finite pairs, the special-value rules, and the contract's identity clause
// (pass-through elements, pairs at an exact angle of 0).
// A violation becomes a Finding that prints everything needed to reproduce it.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/rope_case.hpp"
#include "properties/contract.hpp"
#include "properties/error_model.hpp"
#include "reference/reference.hpp"

namespace ropecheck {

struct Finding {
  std::string check;    // "accuracy", "identity", "nan", "non-finite", "finite", "pass-through"
  double error = 0;     // e in u (accuracy), else 0
  std::string message;  // the case, the element, input bits, got, exact, error
};

// The worst pair of a judged output in one log2 position bucket: where it is
// and its exact input/output bits, so a report can reproduce it.
struct WorstPair {
  double e = -1;  // pair error in u (< 0: none recorded)
  double radial = 0, tangential = 0;
  int64_t position = 0;
  uint64_t token = 0, head = 0;
  uint32_t pair = 0, dim0 = 0, dim1 = 0;  // pair index and its dims within the head
  uint32_t in_bits[2] = {0, 0};           // input element bits (storage type)
  uint32_t got_bits[2] = {0, 0};          // the kernel's output bits
  uint32_t rounded_bits[2] = {0, 0};      // the correctly rounded output bits
  double exact[2] = {0, 0};               // the exact output, rounded to double
  bool valid() const { return e >= 0; }
};

// How an output is held: the per-pair allowances of a kernel's error model
// and contract (docs/error-model.md), or one flat bound on every pair's e
// (the explicit --tolerance override).
struct Criteria {
  KernelErrorModel model;
  double flat = 0;             // > 0: e <= flat for every pair instead of the per-pair allowances
  bool identity_bits = false;  // what keeps the input keeps its bits (identity=bits), not only its values
  static Criteria of(const KernelErrorModel& m, const Contract& c);
  // A flat --tolerance replaces the allowances, not the identity clause (identity_bits: the contract's).
  static Criteria flat_bound(double bound, bool identity_bits = false);
  // The allowance of one pair (flat: radial = tangential = total = flat, no angle share).
  PairAllowance allowance(const RopeCase& c, uint32_t pair, double norm, double abs_phi,
                          const PairHint& hint = {}) const;
  // A flat bound on e for a whole case (the flat value, or error_bound()).
  double case_bound(const RopeCase& c) const;
};

// The radial components of the judged pairs, for the bias check (docs/gate.md):
// pairs sharing a position and a pair index in one call share cos and sin, so
// they form one cluster of the cluster-robust standard error.
// The sums are kept under three hypotheses about the kernel's cos/sin (indexed by Dtype): f32 (the radial
// components as they are), an f16 cache and a bf16 cache (less the share a correct cache of that type gives
// each pair). The bias check passes when the mean under a hypothesis the contract allows is within its
// allowance (a contract allows a cache, it does not require one); a hypothesis it does not allow that fits
// names the clause in the diagnosis.
struct BiasSums {
  struct Moments {
    double sum_r = 0;   // sum of radial components (u)
    double sum_s2 = 0;  // sum over clusters of (sum of radial in the cluster)^2
    double sum_ns = 0;  // sum over clusters of n_g * (sum of radial in the cluster)
  };
  uint64_t n = 0;           // pairs
  uint64_t clusters = 0;
  Moments by_cache[3];      // [Dtype]: f32 = as measured (less f32(af)'s share with an attention factor), f16 / bf16 = less that cache's share
  double sum_n2 = 0;        // sum over clusters of n_g^2
  double sum_systematic = 0;  // sum of each pair's systematic radial allowance (the angle clause's share)
  void merge(const BiasSums& o);
};

struct Judgement {
  double bound = 0;         // the case's flat bound (Criteria::case_bound), for display
  bool per_pair = false;    // judged by per-pair allowances (else every e against `bound`)
  uint64_t pairs = 0;
  uint64_t violations = 0;
  std::vector<Finding> findings;       // the first few, worst accuracy first
  ErrorStats stats;                    // finite pairs
  std::map<int, ErrorStats> by_bucket;  // by log2 position bucket
  // With JudgeOptions::keep_worst_pairs: for every bucket holding a finite pair (finite input, output
  // and exact result), the pair with the largest e (the first such on ties). Empty otherwise.
  std::map<int, WorstPair> worst_by_bucket;
  // The pair closest to (or furthest beyond) its allowance: max(e/total, |radial|/R, |tangential|/T).
  double worst_ratio = 0;
  PairError worst_pe;
  PairAllowance worst_allowance;
  BiasSums bias;
  // Where the violations are: 1 for each pair of the rotated slice that broke a rule (accuracy, special values, the
  // identity clause), row-major [token][head][pair]; empty when none did (made at the first). And the pass-through
  // elements changed. (properties/localisation.hpp reads them.)
  std::vector<uint8_t> violated;
  uint64_t passthrough_violations = 0;
  bool ok() const { return violations == 0; }
  std::string report(size_t max_lines = 4) const;  // the findings, one block each
};

struct JudgeOptions {
  size_t max_findings = 8;
  bool keep_values = true;         // keep every e (for percentiles)
  bool keep_worst_pairs = false;   // fill Judgement::worst_by_bucket (reports)
};

Judgement judge_output(const RopeCase& c, const ReferenceOutput& ref, const void* got, const Criteria& cr,
                       const JudgeOptions& opt = {});
// Every pair's e within one flat bound; what keeps the input judged by identity=values.
Judgement judge_output(const RopeCase& c, const ReferenceOutput& ref, const void* got, double bound,
                       const JudgeOptions& opt = {});

// The contract's identity clause (docs/error-model.md, "Contracts") on one element the output must keep: a
// pass-through element, or an element of a pair at an exact angle of 0 (`in`: the value it keeps, as bits).
// identity=bits: the same bits. identity=values: the same value -- +-0 alike, any NaN for a NaN (payload and
// quietness are not values: an f16 signalling NaN quieted by a float conversion is kept), a subnormal flushed to
// zero under denormals=flush, the value rounded to an arithmetic type narrower than the data.
bool keeps_input(const Criteria& cr, Dtype d, uint32_t in, uint32_t got);
// Two outputs of one kernel for the same element agree (in place = out of place, the two layouts, a repeated
// call), under the identity clause: identity=bits: the same bits, or both NaN (a computed NaN's payload is no part
// of a result); identity=values: the same value (+-0 alike) or both NaN.
bool same_output(Dtype d, uint32_t a, uint32_t b, bool identity_bits);

// Describe one element: "bits (value)".
std::string describe_element(Dtype d, uint32_t bits);

}  // namespace ropecheck
