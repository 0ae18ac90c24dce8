// std::mt19937_64's sequence, generated a block at a time in vector registers.
//
// The gate's generated cases (gate/gate_cases.cpp: random, large, sequence, ... rows) are a function of
// std::mt19937_64's outputs for the seed: a seed keeps its cases across releases. Its refill (the twist of 312
// words) and the tempering of each output ran one word at a time and were the largest part of generating a
// case (~4 % of a default gate, ~7 % of a reduced one, whose prefill-sized `large` cases draw 5 M numbers).
// Mt19937_64 produces the same numbers -- the same seeding, twist and tempering (Matsumoto and Nishimura's
// MT19937-64, as the C++ standard specifies it: [rand.eng.mers], [rand.predef]) -- with the twist and the
// tempering of a whole block done 8 words at a time (AVX-512 or AVX2 where the CPU has them; integer arithmetic,
// the same bits on each). It meets UniformRandomBitGenerator with std::mt19937_64's min and max, so a
// distribution draws from it exactly what it draws from std::mt19937_64.
//
// tests: gate/tests/test_gate.cpp, Mt64.SameSequenceAsTheStandardEngine.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>

namespace ropecheck::gate {

class Mt19937_64 {
 public:
  using result_type = uint64_t;
  static constexpr size_t kN = 312;
  static constexpr result_type default_seed = 5489u;

  explicit Mt19937_64(result_type seed = default_seed) { this->seed(seed); }
  void seed(result_type s);

  static constexpr result_type min() { return 0; }
  static constexpr result_type max() { return std::numeric_limits<result_type>::max(); }

  result_type operator()() {
    if (next_ == kN) refill();
    return out_[next_++];
  }

 private:
  void refill();  // twist the state and temper the block into out_

  uint64_t mt_[kN];
  uint64_t out_[kN];
  size_t next_ = kN;
};

}  // namespace ropecheck::gate
