// An rc::Random's state, split and drawn from exactly as RapidCheck splits and draws, so that the first value
// of many Randoms can be drawn at once.
//
// RapidCheck's Random (08b5058, the version Debian ships) is a counter-mode Threefish-256: a 256-bit key, the
// bits appended by splits (64 of them, then the key is re-encrypted and they start again) and a counter;
// next() returns a word of the encryption of (bits, counter, 0, 0) under the key with tweak (13, 37). Each
// draw of a fresh Random (counter 0) costs one 72-round block cipher call, one at a time. gen::elements
// (properties/generators.cpp) draws thousands of those per case, each from its own split: first_draws
// encrypts 8 of them side by side in vector registers (AVX-512 or AVX2 where the CPU has them: integer
// arithmetic, so every target gives the same bits). The property rows' values are unchanged, bit for bit.
//
// tests: tests/properties/property_engine.cpp, Engine.RandomStateSplitsAndDrawsAsRapidCheck (against rc::Random
// itself) and Engine.ElementsAreTheCombinatorsValuesAndShrinks (the values against RapidCheck's combinators).
#pragma once

#include <cstddef>
#include <cstdint>

#include <rapidcheck/Random.h>

namespace ropecheck::gen {

struct RandomState {
  uint64_t key[4] = {};
  uint64_t bits = 0;     // the bits appended since the key was last re-encrypted
  uint64_t counter = 0;  // values drawn
  uint32_t bitsi = 0;    // how many bits are appended

  // The state of r (read through RapidCheck's own serialisation).
  static RandomState of(const rc::Random& r);
  // rc::Random::append: one bit; the 65th re-encrypts the key and starts the bits again.
  void append(bool bit);
  // rc::Random::split: this one appends 0, the one returned (a copy before) appends 1.
  RandomState split() {
    RandomState right = *this;
    append(false);
    right.append(true);
    return right;
  }
};

// out[i] = rc::Random(s[i]).next(), for states s[i] with counter 0 (nothing drawn yet: the first value is
// word 0 of the encryption of (bits, 0, 0, 0)). Throws std::logic_error on a state with a non-zero counter.
void first_draws(const RandomState* s, size_t n, uint64_t* out);

}  // namespace ropecheck::gen
