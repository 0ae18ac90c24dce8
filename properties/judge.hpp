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

struct Judgement {
  double bound = 0;
  uint64_t pairs = 0;
  uint64_t violations = 0;
  std::vector<Finding> findings;       // the first few, worst accuracy first
  ErrorStats stats;                    // finite pairs
  std::map<int, ErrorStats> by_bucket;  // by log2 position bucket
  bool ok() const { return violations == 0; }
  std::string report(size_t max_lines = 4) const;  // the findings, one block each
};

struct JudgeOptions {
  size_t max_findings = 8;
  bool keep_values = true;  // keep every e (for percentiles)
};

Judgement judge_output(const RopeCase& c, const ReferenceOutput& ref, const void* got, double bound,
                       const JudgeOptions& opt = {});

// Describe one element: "bits (value)".
std::string describe_element(Dtype d, uint32_t bits);

}  // namespace ropecheck
