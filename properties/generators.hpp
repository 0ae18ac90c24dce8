// RapidCheck generators for RoPE cases.
//
// Floats are built from bit patterns and chosen values (RapidCheck's own float
// generator covers neither subnormals, signed zeros, large or tiny magnitudes,
// nor NaN/Inf): normal and uniform draws at a per-case scale, values near the
// top and bottom of the format's range, subnormals, +-0, random finite bit
// patterns, and -- only when asked for -- NaN (quiet and signalling, random
// payloads) and +-Inf.
//
// Sizes scale with RapidCheck's size (heads, tokens), so each property stays
// fast; RC_PARAMS="max_success=..." raises the number of cases for long runs.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <optional>
#include <utility>
#include <vector>

#include <rapidcheck.h>

#include "core/rope_case.hpp"

namespace ropecheck::gen {

// Which input values a case may hold.
enum class Values {
  safe,      // finite, |x| <= max_finite/4: no rotation can overflow (geometric properties)
  finite,    // any finite value, up to max_finite (accuracy: overflow is judged)
  specials,  // finite values mixed with NaN and +-Inf (the special-value property)
};

// An integer uniform in [lo, hi), independent of RapidCheck's size (inRange
// scales its range with size), shrinking towards lo.
rc::Gen<int64_t> uniform_int(int64_t lo, int64_t hi);

// rotary_dim: from {2,4,6,8,20,24,64,72,80,96,120,128,256} or a random even
// value in [2, max_rotary].
rc::Gen<uint32_t> rotary_dim(uint32_t max_rotary = 512);
// head_dim >= rotary_dim: equal, a little more, or double (partial rotary).
rc::Gen<uint32_t> head_dim(uint32_t rotary, uint32_t max_head = 1024);
// A position in [0, max]: 0, small, near powers of two, uniform, or max.
rc::Gen<int64_t> position(int64_t max = int64_t(1) << 31);
// base from {1e4, 5e5, 1e6} or log-uniform in [2, 1e7].
rc::Gen<double> base();
// A position scale != 1 (linear interpolation factors and random ones).
rc::Gen<double> position_scale();
// A frequency table of n entries (scaled base^(-2i/d) or random, sometimes a 0).
rc::Gen<std::vector<double>> inv_freq_table(uint32_t rotary, double base);

// One element's bits in dtype d. `scale` is the per-case scale of the normal
// and uniform draws (a power of two).
rc::Gen<uint32_t> element_bits(Dtype d, Values v, int scale_exp);
// A per-case scale exponent for the draws, safe for d.
rc::Gen<int> scale_exponent(Dtype d);
// n elements of dtype d as raw bytes.
rc::Gen<Bytes> elements(Dtype d, Values v, size_t n);
// The same generator written with RapidCheck's combinators (a scale_exponent, then a container of n
// element_bits): elements() computes its values directly (the same draws from the same rc::Random, without
// a tree of shrinkables per element) and shrinks through it. Tests compare the two.
rc::Gen<Bytes> elements_by_combinators(Dtype d, Values v, size_t n);

struct CaseShape {
  uint32_t max_rotary = 512;
  uint32_t max_head = 1024;
  uint32_t max_heads = 8;
  uint32_t max_tokens = 4;
  size_t max_elements = 4096;  // heads are reduced to stay under this
  int64_t max_position = int64_t(1) << 31;
  bool frequencies = true;     // sometimes a position scale or an inv_freq table
  bool partial = true;         // head_dim may exceed rotary_dim
};

// The case's parameters without the input (input sized but zero).
rc::Gen<RopeCase> case_shape(Dtype d, Layout l, const CaseShape& s = {});
// A whole case: shape plus input values.
rc::Gen<RopeCase> rope_case(Dtype d, Layout l, Values v, const CaseShape& s = {});

// ---- ABI v2 cases (include/ropecheck/kernel_abi.h) -----------------------------------------------------------
// Every draw shrinks towards the neutral value (offset 0, one axis, no map, attention factor 1, no rule,
// no negative positions), so a failing v2 case shrinks towards the v1 case that still fails, if any.

// Which v2 features a case may carry, and how much of each.
struct V2Shape {
  bool offset = true;          // rotary_offset in [0, 17] (head_dim grows to hold it)
  uint32_t min_axes = 1;       // n_pos_axes in [min_axes, max_axes]
  uint32_t max_axes = 3;
  bool attention = true;       // attention_factor from {1, 0.5, 2, 0.75, 1.25, 1.5, 0.70710678} or in [0.5, 2]
  bool rules = true;           // a frequency rule (none, linear, ntk, dynamic, yarn, llama3, longrope)
  bool negative = true;        // multi-axis cases: positions centred on 0 (axial grids)
};

// The rule kinds a v2 case draws from, in shrinking order (none first).
extern const std::vector<std::optional<FrequencyRuleType>> kV2RuleKinds;
// A valid rule of a type for rotary_dim (R > 2 for ntk and dynamic) with HF-like parameters: linear and dynamic
// factors in [1, 16], NTK alpha in [1, 8], YaRN factor in [1, 64] with original context 2^11..2^15 and HF's
// betas (sometimes others, sometimes truncate off), llama3 factor 8 or [1, 32] with low/high 1/4 or random,
// LongRoPE short/long factors in [1, 64]. Its seq_len (dynamic, longrope) comes with it.
rc::Gen<std::pair<FrequencyRule, uint64_t>> frequency_rule(FrequencyRuleType t, uint32_t rotary_dim);
// A pair -> axis map of rotary_dim/2 entries over `axes` axes: empty (all axis 0), Qwen2-VL's contiguous
// sections (mrope_section [16, 24, 24] scaled to the pairs), Qwen3-VL's interleaved map (i mod axes), or random.
rc::Gen<std::vector<uint8_t>> pair_axis_map(uint32_t rotary_dim, uint32_t axes);
// A v2 case: case_shape(d, l, s) (with no table or scale when a rule is drawn) plus the v2 features of v, and
// input values of class `values`. Positions: n_pos_axes per token; negative ones only with several axes.
rc::Gen<RopeCase> v2_case(Dtype d, Layout l, Values values, const V2Shape& v = {}, const CaseShape& s = {});

}  // namespace ropecheck::gen

namespace ropecheck {
// How RapidCheck prints a case in a counterexample: summary, positions,
// table, and the input bits (the first 256 elements).
void showValue(const RopeCase& c, std::ostream& os);
}  // namespace ropecheck
