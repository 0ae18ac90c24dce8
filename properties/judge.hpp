// Judging a kernel's output against the reference: the error metric on
// finite pairs, the special-value rules, and bit-exact pass-through.
// A violation becomes a Finding that prints everything needed to reproduce it.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/rope_case.hpp"
#include "properties/error_model.hpp"
#include "reference/reference.hpp"

namespace ropecheck {

struct Finding {
  std::string check;    // "accuracy", "nan", "non-finite", "finite", "pass-through"
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

struct Judgement {
  double bound = 0;
  uint64_t pairs = 0;
  uint64_t violations = 0;
  std::vector<Finding> findings;       // the first few, worst accuracy first
  ErrorStats stats;                    // finite pairs
  std::map<int, ErrorStats> by_bucket;  // by log2 position bucket
  // With JudgeOptions::keep_worst_pairs: for every bucket holding a finite pair (finite input, output
  // and exact result), the pair with the largest e (the first such on ties). Empty otherwise.
  std::map<int, WorstPair> worst_by_bucket;
  bool ok() const { return violations == 0; }
  std::string report(size_t max_lines = 4) const;  // the findings, one block each
};

struct JudgeOptions {
  size_t max_findings = 8;
  bool keep_values = true;         // keep every e (for percentiles)
  bool keep_worst_pairs = false;   // fill Judgement::worst_by_bucket (reports)
};

Judgement judge_output(const RopeCase& c, const ReferenceOutput& ref, const void* got, double bound,
                       const JudgeOptions& opt = {});

// Describe one element: "bits (value)".
std::string describe_element(Dtype d, uint32_t bits);

}  // namespace ropecheck
