// Where a failing case's violations are (issue 50, "Localisation first"): which pairs, heads and tokens of the
// case broke a rule -- exactly the pairs after the last full vector of 4, 8, 16 or 32 pairs (a SIMD loop's scalar
// tail), q or k only, from which |angle| on -- read from the judgement alone (Judgement::violated), never from
// the kernel. A failing row says it beside its cause ("where: ..."); an unexplained one says it instead.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/rope_case.hpp"
#include "properties/judge.hpp"

namespace ropecheck {

struct Localisation {
  uint32_t n_pairs = 0, n_heads = 0;
  uint64_t n_tokens = 0;
  std::vector<uint32_t> pairs;   // the pair indices with a violation (on any token and head), ascending
  std::vector<uint32_t> heads;   // the heads with one
  std::vector<uint64_t> tokens;  // the tokens with one
  // > 0: every failing pair lies after the last full vector of this many pairs (n_pairs not a multiple of it: a
  // vector loop's scalar tail), the smallest such width of 4, 8, 16, 32.
  uint32_t tail_width = 0;
  // The tensor form's two tensors: which failed ("q", "k" or "q and k"); empty for the flat form.
  std::string tensors;
  // > 0: every failing pair has |angle| >= from_angle and every pair judged right below it has less (the angle
  // from which the kernel goes wrong: a sin/cos past its range); 0: no such threshold.
  double from_angle = 0;
  uint64_t passthrough = 0;  // pass-through elements changed
  bool any() const { return !pairs.empty() || passthrough > 0; }
  // "pairs 56-59 of 60 only (the tail after the last full vector of 8 pairs); heads 1-7 of 8 (head 0 right); every
  // token; from |angle| 8.4e+06 (2^23.0) on" -- or "every pair, head and token" when nothing narrows it.
  std::string text() const;
};

// The violations of a judged case (j: q's or the flat form's; kj: the tensor form's k, or null) and its angles (the
// reference's, [token][pair]; empty: no threshold is looked for).
Localisation localise(const RopeCase& c, const Judgement& j, const Judgement* kj, const std::vector<double>& angles);

}  // namespace ropecheck
