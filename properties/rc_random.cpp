#include "properties/rc_random.hpp"

#include <iterator>
#include <stdexcept>
#include <vector>

// (The vector helpers are always inlined: no vector crosses a call, whatever the target.)
#pragma GCC diagnostic ignored "-Wpsabi"

namespace ropecheck::gen {

namespace {

// Threefish-256 (Skein 1.3, section 3.3): the key schedule's parity constant, the rotation constants of its
// eight rounds, and the tweak RapidCheck encrypts with.
constexpr uint64_t kParity = 0x1BD11BDAA9FC1A22ull;
constexpr int kRot[8][2] = {{14, 16}, {52, 57}, {23, 40}, {5, 37}, {25, 33}, {46, 12}, {58, 22}, {32, 32}};
constexpr uint64_t kTweak[3] = {13, 37, 13 ^ 37};

template <typename V>
inline __attribute__((always_inline)) V rotl(V x, int r) {
  return (x << r) | (x >> (64 - r));
}

// The encryption of (p0, p1, 0, 0) under the key k[0..3]: 72 rounds, a subkey added before every fourth and
// after the last; the words are permuted (1 <-> 3) after each round, which here is which words each round
// mixes. V: uint64_t, or a vector of them (every lane its own block).
template <typename V>
inline __attribute__((always_inline)) void threefish(const V (&k)[4], V p0, V p1, V (&out)[4]) {
  const V ks[5] = {k[0], k[1], k[2], k[3], k[0] ^ k[1] ^ k[2] ^ k[3] ^ kParity};
  V v0 = p0, v1 = p1, v2 = p0 ^ p0, v3 = p0 ^ p0;
#pragma GCC unroll 18
  for (int s = 0; s < 18; ++s) {
    v0 += ks[s % 5];
    v1 += ks[(s + 1) % 5] + kTweak[s % 3];
    v2 += ks[(s + 2) % 5] + kTweak[(s + 1) % 3];
    v3 += ks[(s + 3) % 5] + uint64_t(s);
#pragma GCC unroll 4
    for (int r = 0; r < 4; r += 2) {
      const int* a = kRot[(4 * s + r) % 8];
      const int* b = kRot[(4 * s + r + 1) % 8];
      v0 += v1;
      v1 = rotl(v1, a[0]) ^ v0;
      v2 += v3;
      v3 = rotl(v3, a[1]) ^ v2;
      v0 += v3;
      v3 = rotl(v3, b[0]) ^ v0;
      v2 += v1;
      v1 = rotl(v1, b[1]) ^ v2;
    }
  }
  out[0] = v0 + ks[18 % 5];
  out[1] = v1 + ks[19 % 5] + kTweak[18 % 3];
  out[2] = v2 + ks[20 % 5] + kTweak[19 % 3];
  out[3] = v3 + ks[21 % 5] + uint64_t(18);
}

uint64_t first_draw_one(const RandomState& s) {
  const uint64_t k[4] = {s.key[0], s.key[1], s.key[2], s.key[3]};
  uint64_t out[4];
  threefish(k, s.bits, s.counter, out);
  return out[0];
}

typedef uint64_t U64x8 __attribute__((vector_size(64)));

// Eight blocks at a time; the CPU's widest vectors chosen at load time (the same bits on each).
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__)
__attribute__((target_clones("avx512f", "avx2", "default")))
#endif
void first_draws_8(const RandomState* s, size_t groups, uint64_t* out) {
  for (size_t g = 0; g < groups; ++g, s += 8, out += 8) {
    U64x8 k[4], p0, p1, c[4];
    for (int j = 0; j < 8; ++j) {
      for (int w = 0; w < 4; ++w) k[w][j] = s[j].key[w];
      p0[j] = s[j].bits;
      p1[j] = s[j].counter;
    }
    threefish(k, p0, p1, c);
    for (int j = 0; j < 8; ++j) out[j] = c[0][j];
  }
}

}  // namespace

RandomState RandomState::of(const rc::Random& r) {
  std::vector<uint8_t> bytes;
  rc::serialize(r, std::back_inserter(bytes));
  auto it = bytes.cbegin();
  const auto end = bytes.cend();
  RandomState s;
  for (uint64_t& k : s.key) it = rc::detail::deserialize(it, end, k);
  it = rc::detail::deserializeCompact(it, end, s.bits);
  it = rc::detail::deserializeCompact(it, end, s.counter);
  if (it == end) throw std::logic_error("RandomState::of: a serialised rc::Random ended early");
  s.bitsi = *it;
  return s;
}

void RandomState::append(bool bit) {
  if (bitsi == 64) {  // the key re-encrypted with the current bits and counter; the bits start again
    uint64_t k[4];
    threefish({key[0], key[1], key[2], key[3]}, bits, counter, k);
    for (int w = 0; w < 4; ++w) key[w] = k[w];
    bits = 0;
    bitsi = 0;
  }
  if (bit) bits |= uint64_t(1) << bitsi;
  ++bitsi;
}

void first_draws(const RandomState* s, size_t n, uint64_t* out) {
  for (size_t i = 0; i < n; ++i)
    if (s[i].counter != 0) throw std::logic_error("first_draws: a Random something was drawn from already");
  const size_t groups = n / 8;
  first_draws_8(s, groups, out);
  for (size_t i = groups * 8; i < n; ++i) out[i] = first_draw_one(s[i]);
}

}  // namespace ropecheck::gen
