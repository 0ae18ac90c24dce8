// The fuzz input format: every byte string decodes to a RopeCase that kernels
// accept (or to nothing, when the case is outside the domain the reference
// decides quickly), so libFuzzer's mutations are never wasted on parse errors.
//
// Layout (all multi-byte fields little-endian; a short input reads zeros):
//   byte 0  flags: bits 0-1 dtype (0 f32, 1 f16, 2 bf16, 3 f32), bit 2 layout
//           (0 interleaved, 1 half-split), bit 3 in-place, bit 4 inv_freq table,
//           bits 5-6 scale mode, bit 7 base mode
//   byte 1  bits 0-3: rotary_dim/2 - 1 (rotary_dim 2..32); bits 4-7 mod 5:
//           pass-through dims (head_dim = rotary_dim + 0..4)
//   byte 2  bits 0-1: n_heads - 1 (1..4); bits 2-4: n_tokens - 1 (1..8)
//   base    mode 0: 1 byte, an index into kBases; mode 1: 8 bytes, a raw double
//           (non-finite or <= 0 falls back to 10000)
//   scale   mode 0: 1.0, nothing read; mode 1: 1 byte, an index into kScales;
//           mode 2/3: 8 bytes, a raw double (non-finite -> 1.0; |s| > 2^20 is
//           reduced with fmod)
//   table   when bit 4: rotary_dim/2 raw doubles (non-finite -> 1.0; |f| > 4
//           reduced with fmod 4)
//   positions, one per token: 1 mode byte, then
//           mode%4 == 0: the mode byte's high 6 bits (0..63), nothing more;
//           mode%4 == 1: 2 bytes, 0..65535;
//           mode%4 == 2: 1 byte k, 1 signed byte d: max(0, 2^(k%63) + d);
//           mode%4 == 3: 8 bytes, a raw int64 with the sign bit cleared
//   input   the remaining bytes are the input's raw bit patterns, so NaN, Inf,
//           subnormals and huge values appear; short input repeats what is
//           there (zeros when nothing is left), extra bytes are ignored.
//
// Cases whose largest angle |m * scale * theta_i| exceeds 2^kMaxAngleLog2 are
// rejected: the reference's Ziv loop would need ever more precision for them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/rope_case.hpp"

namespace ropecheck::fuzz {

inline constexpr double kBases[] = {10000.0, 500000.0, 1000000.0, 10.0, 2.0, 100.0, 1.0e8, 1.5,
                                    0.5,     1.0,      3.0,       1e30, 1e-3, 1e4 * 8, 65536.0, 1.0000001};
inline constexpr double kScales[] = {1.0, 0.5, 0.25, 0.125, 1.0 / 32, 2.0, 4.0, 0.0, -1.0, 1.0 / 3, 1e-30, 1e6};
inline constexpr int kMaxAngleLog2 = 80;

struct FuzzCase {
  RopeCase rope;
  bool in_place = false;
};

// nullopt when the bytes decode to a case outside the fuzzed domain.
std::optional<FuzzCase> decode_case(const uint8_t* data, size_t size);

// Bytes that decode_case turns back into `fc` (raw base/scale/table modes and
// raw positions are used where a table entry does not fit). Throws
// std::invalid_argument when fc is outside what the format can express
// (dims, heads or tokens too large, negative positions).
std::vector<uint8_t> encode_case(const FuzzCase& fc);

// Everything needed to reproduce a case by hand: the summary, positions,
// the table, and the input's bits.
std::string describe_case(const RopeCase& c);

}  // namespace ropecheck::fuzz
