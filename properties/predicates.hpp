// What the properties compare, as plain functions of cases and outputs (no RapidCheck): the engine's
// properties (properties/engine.hpp), the fuzzers and replay files use them. Part of ropecheck_core.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "core/rope_case.hpp"
#include "reference/reference.hpp"

namespace ropecheck::props {

// "3.0.12" <-> {3, 0, 12}; throws std::invalid_argument on anything else.
std::string shrink_path_text(const std::vector<size_t>& path);
std::vector<size_t> parse_shrink_path(const std::string& s);
// The property driver's discard ratio (engine.hpp, DriverOptions): executions with a declined call do not count,
// and execution indices reach cases * (1 + ratio) - 1. Every replay file written before the ratio was recorded
// comes from a driver with this ratio.
inline constexpr uint64_t kDefaultMaxDiscardRatio = 10;

// Value of element k of a buffer of the case's dtype, exactly, as a double.
inline double value(const RopeCase& c, const void* buf, size_t k) { return load_f32(c.dtype, buf, k); }
// ||(a, b)|| in double (a*a + b*b exact up to one rounding for f32 values).
double pair_norm(double a, double b);
// B u max(||x||, min_normal): the allowed error on a pair of norm n.
double pair_error_allowance(const RopeCase& c, double bound, double n);
// The angle model's deviation from the exact rotation for pair i at position m, as a multiple of ||x||:
// min(|model angle - exact angle| + slack, 2); 0 for the exact model.
double model_deviation(AngleModel model, const RopeCase& c, uint32_t pair, int64_t m);
// An element of buf for messages: describe_element (its bits, hexfloat and decimal), as FailureText prints it.
std::string bits_text(const RopeCase& c, const void* buf, size_t k);
// "token T (position M), head H, dim D[ (pass-through)]"
std::string element_where(const RopeCase& c, size_t k);
// First differing element (bits) of two buffers of the case's dtype, or SIZE_MAX.
size_t first_difference(const RopeCase& c, const void* a, const void* b);
// First element where two outputs of the case disagree under the identity clause (judge.hpp, same_output:
// identity=bits the same bits or both NaN, identity=values the same value or both NaN), or SIZE_MAX.
size_t first_output_difference(const RopeCase& c, const void* a, const void* b, bool identity_bits);

// ---- predicates on outputs (used by the properties, the fuzzers and replay) --------------------------------
// The half-split case holding interleaved case ci's input permuted (P x): the same pairs.
RopeCase half_split_twin(const RopeCase& interleaved);
// For every element of a buffer in layout `from`, its index in layout `to` (pass-through dims kept).
std::vector<size_t> relayout(const RopeCase& c, Layout from, Layout to);
// The same per head: dims[k] is where dim k of a head in `from` goes in `to` (pass-through dims stay).
std::vector<uint32_t> relayout_dims(const RopeCase& c, Layout from, Layout to);
// interleaved(x) = P^-1 halfsplit(P x): the same output (same_output under the identity clause: identity_bits)
// when `bit_exact`, else the rotated pairs within both outputs' allowances (bounds bi, bh) and the pass-through
// elements the same output. Empty when it holds, else why not.
std::string layouts_violation(const RopeCase& ci, const Bytes& oi, double bi, const RopeCase& ch, const Bytes& oh,
                              double bh, bool bit_exact, bool identity_bits);
// An in-place call gives the out-of-place call's output (same_output under the identity clause).
std::string in_place_violation(const RopeCase& c, const Bytes& out_of_place, const Bytes& in_place,
                               bool identity_bits);
// An out-of-place call left its input unchanged.
std::string input_touched(const RopeCase& c, const Bytes& before, const Bytes& after);

}  // namespace ropecheck::props
