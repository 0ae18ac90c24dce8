#include "gate/mt64.hpp"

// (The vector helpers are always inlined: no vector crosses a call, whatever the target.)
#pragma GCC diagnostic ignored "-Wpsabi"

namespace ropecheck::gate {

namespace {

// MT19937-64's parameters ([rand.predef]: mersenne_twister_engine<uint_fast64_t, 64, 312, 156, 31, ...>).
constexpr size_t kN = Mt19937_64::kN, kM = 156;
constexpr uint64_t kMatrixA = 0xb5026f5aa96619e9ull;
constexpr uint64_t kUpper = ~uint64_t(0) << 31, kLower = ~kUpper;
constexpr uint64_t kInitMultiplier = 6364136223846793005ull;

typedef uint64_t U64x8 __attribute__((vector_size(64)));

template <typename V>
inline __attribute__((always_inline)) V twist(V cur, V next, V far) {
  const V y = (cur & kUpper) | (next & kLower);
  return far ^ (y >> 1) ^ ((V{} - (y & 1)) & kMatrixA);
}

template <typename V>
inline __attribute__((always_inline)) V temper(V z) {
  z ^= (z >> 29) & 0x5555555555555555ull;
  z ^= (z << 17) & 0x71d67fffeda60000ull;
  z ^= (z << 37) & 0xfff7eee000000000ull;
  z ^= z >> 43;
  return z;
}

// (always inlined, as twist and temper: a vector passed between functions built for different targets -- the
// clones below and a plain helper -- would cross an ABI boundary, and -O0 builds call what they do not inline)
inline __attribute__((always_inline)) U64x8 load8(const uint64_t* p) {
  U64x8 v;
  __builtin_memcpy(&v, p, sizeof v);
  return v;
}
inline __attribute__((always_inline)) void store8(uint64_t* p, U64x8 v) { __builtin_memcpy(p, &v, sizeof v); }

// The twist of [rand.eng.mers], in the order it is defined: word i from words i, i + 1 and i + m, where words
// below i are already new. In 8-word steps every word a step reads beyond its own 8 is read before any later
// step writes it, as in the word-at-a-time loop.
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__)
__attribute__((target_clones("avx512f", "avx2", "default")))
#endif
void refill_block(uint64_t* mt, uint64_t* out) {
  size_t i = 0;
  for (; i + 8 <= kN - kM; i += 8) store8(mt + i, twist(load8(mt + i), load8(mt + i + 1), load8(mt + i + kM)));
  for (; i < kN - kM; ++i) mt[i] = twist(mt[i], mt[i + 1], mt[i + kM]);
  for (; i + 8 <= kN - 1; i += 8) store8(mt + i, twist(load8(mt + i), load8(mt + i + 1), load8(mt + (i - (kN - kM)))));
  for (; i < kN - 1; ++i) mt[i] = twist(mt[i], mt[i + 1], mt[i - (kN - kM)]);
  mt[kN - 1] = twist(mt[kN - 1], mt[0], mt[kM - 1]);
  static_assert(kN % 8 == 0);
  for (i = 0; i < kN; i += 8) store8(out + i, temper(load8(mt + i)));
}

}  // namespace

void Mt19937_64::seed(result_type s) {
  mt_[0] = s;
  for (size_t i = 1; i < kN; ++i) mt_[i] = kInitMultiplier * (mt_[i - 1] ^ (mt_[i - 1] >> 62)) + i;
  next_ = kN;
}

void Mt19937_64::refill() {
  refill_block(mt_, out_);
  next_ = 0;
}

}  // namespace ropecheck::gate
