// The worst pair of a judged kernel output, per log2 position bucket: where it
// is and its exact input/output bits, so a report can reproduce it.
#pragma once

#include <cstdint>
#include <map>

#include "core/rope_case.hpp"
#include "reference/reference.hpp"

namespace ropecheck {

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

// For every bucket holding a finite pair (finite input, finite output, finite
// exact result), the pair with the largest error e (the first such on ties).
std::map<int, WorstPair> worst_pairs_by_bucket(const RopeCase& c, const ReferenceOutput& ref, const void* got);

}  // namespace ropecheck
