// The exact RoPE reference.
//
// Every input value is exact. theta_i = base^(-2i/rotary_dim) (or the given
// table, or the frequency rule's table evaluated exactly: reference/frequency_rules.hpp),
// the angle m*scale*theta_i (m the position on the pair's axis), its cos and sin times
// the attention factor, and the rotation of each pair are computed with MPFR through Boost.Multiprecision at >= 128 bits, and
// each output is rounded once, to nearest even, to the storage type. When the
// working-precision value is too close to a rounding boundary to decide, the
// pair is recomputed at twice the precision (Ziv), up to >= 1064 bits.
//
// Speed: theta_i is computed once per call (a default table by one pow and
// products, kept across calls), cos/sin once per (position, pair) and shared
// by all heads. cos/sin are first evaluated in double-double from the MPFR
// angle, and each pair is first rounded from a double-double evaluation of
// the rotation, both with rigorous error bounds (see reference.cpp); only when
// those bounds cannot decide the rounding (of the storage type or of the
// double in `exact`) do the pair's cos/sin and rotation go through MPFR.
//
// Special values (docs/error-model.md, "Special values"):
//  - an angle of exactly 0 (position 0, scale 0, a zero table entry) is the
//    identity: the output bits are the input bits (with an attention factor
//    s != 1 the pair is s times its input, correctly rounded);
//  - a pair holding NaN gives NaN in both outputs; a pair holding +-Inf gives
//    what IEEE arithmetic gives on the exact cos and sin (so +-Inf or NaN);
//  - a finite result beyond the format's range rounds to +-Inf, a tiny one to
//    a subnormal or signed zero as IEEE does;
//  - dims outside [rotary_offset, rotary_offset + rotary_dim) pass through bit for bit.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/rope_case.hpp"

namespace ropecheck {

// How the angle m*scale*theta_i is formed before its exact cos and sin.
enum class AngleModel {
  exact,  // exact theta and angle
  fp32,   // the PyTorch pipeline, each step rounded to f32:
          //   e = f32(2i)/f32(rotary_dim); p = f32(f32(base)^e); inv = f32(1/p)
          //   (inv = f32(table[i]) with a table); mf = f32(m); mf = f32(mf*f32(scale))
          //   when scale != 1; angle = f32(mf*inv)
};

std::string_view to_string(AngleModel m);
std::optional<AngleModel> parse_angle_model(std::string_view s);

struct ReferenceOutput {
  Bytes rounded;               // the correctly rounded output, in the storage type
  std::vector<double> exact;   // the exact output correctly rounded to double (for measuring error)
  std::vector<double> angle;   // |angle| of each (token, pair), [n_tokens][rotary_dim/2], rounded to
                               // double: the exact angle, or the fp32 model's f32 angle
  uint64_t ziv_retries = 0;    // pairs whose rounding to the storage type needed more than the
                               // first MPFR precision (Ziv retries)
  uint64_t exact_retries = 0;  // pairs recomputed at more precision only to round `exact` to double
  uint64_t mpfr_pairs = 0;     // pairs the double-double fast path left to MPFR
  uint64_t dd_trig = 0;        // (position, pair) cos/sin evaluated in double-double (fast_path)
  uint64_t mpfr_trig = 0;      // (position, pair) cos/sin computed by MPFR: where the double-double
                               // evaluation does not apply, or a pair of the row needed MPFR after all
};

struct ReferenceOptions {
  AngleModel angle_model = AngleModel::exact;
  // First MPFR working precision in bits; each Ziv retry doubles it. Keep the
  // default (>= 128) for real use: smaller values (>= 32) exist so that tests
  // can drive the retry path on inputs that are merely near a rounding boundary.
  unsigned working_bits = 134;
  // Evaluate cos/sin and round from the rigorously bounded double-double
  // evaluations when they decide (false: every cos/sin and pair goes through
  // MPFR; tests compare the two).
  bool fast_path = true;
};

// Throws std::invalid_argument when the case is malformed (RopeCase::validate)
// or working_bits is outside [32, 1064],
// std::runtime_error if rounding stays undecided at the highest precision.
ReferenceOutput reference_rope(const RopeCase& c, const ReferenceOptions& opt = {});

// ABI v3 (draft): the tables the harness gives a kernel, and the exact values a given table is judged against.
enum class TablePipeline : uint8_t {
  correctly_rounded,  // af cos(phi), af sin(phi) of the exact angle, each rounded once to the table's dtype
                      // (angle tables: the exact angle rounded to f32)
  conventional_f32,   // the fp32 angle model's f32 angle, its cos and sin correctly rounded to f32, times af in
                      // f32, then rounded to the table's dtype (Hugging Face: emb.cos() * scaling, .to(dtype))
};
std::string_view to_string(TablePipeline p);

// `rows` rows (positions 0..rows-1) of a table of `kind` in `dtype` (angle: f32) for the angles and the
// attention factor of `c` (its base, scale, inv_freq or rule; c has no table itself). Throws
// std::invalid_argument when c is malformed or has a table.
CosSinTable build_table(const RopeCase& c, TableKind kind, Dtype dtype, size_t rows, TablePipeline p);
// The same with row r holding the values of position row_positions[r].
CosSinTable build_table_rows(const RopeCase& c, TableKind kind, Dtype dtype, const std::vector<int64_t>& row_positions,
                             TablePipeline p);

// The call of `c` (no table, one position axis) as a kernel that takes caller-given tables is called: the same
// rotation, its cos and sin (times the attention factor) or its angles given as a table of `kind` in `dtype`
// built by `p`, its positions now indices of the table's rows (each distinct position a row of its own, the rows
// in the opposite order to the positions, other rows real rows of other positions). The kernel's output is
// judged against the table as given (its arithmetic); the table's own error is the pipeline's, by construction.
// nullopt (and *why) when a table cannot express the call (several position axes).
// How a given table's rows are laid out (with_given_table): renumbered as above (the default); by position
// itself, the table sparse (positions past 2^31 reach the kernel: only the rows of the call's positions are kept,
// CosSinTable::stored); per token (ABI v4, CosSinTable::by_token: row t holds token t's values).
enum class GivenRows : uint8_t { renumbered, sparse, by_token };
std::optional<RopeCase> with_given_table(const RopeCase& c, TableKind kind, Dtype dtype, TablePipeline p,
                                         std::string* why = nullptr, GivenRows rows = GivenRows::renumbered);

// af cos(phi) and af sin(phi) of pair i at position m of `c` (its angle fields; no table: std::invalid_argument),
// rounded to double
// from a 134-bit evaluation (within 2^-52 relative of af cos, af sin, plus 2^-130 absolute).
void exact_cos_sin(const RopeCase& c, uint32_t pair, int64_t position, double& af_cos, double& af_sin);

// The f32 angle of the fp32 angle model for pair i at position m (exposed for
// tests and reports).
float fp32_model_angle(const RopeCase& c, uint32_t pair, int64_t position);

// The exact angle m*scale*theta_i rounded to double (for reports and tests).
double exact_angle(const RopeCase& c, uint32_t pair, int64_t position);

// theta_i of the case (base^(-2i/R), the table's entry or the frequency rule's exact value) rounded to
// double.
double theta_value(const RopeCase& c, uint32_t pair);

// The first pass's double-double cos and sin (reference.cpp, "cos and sin in double-double") of an angle
// given exactly as a double, times an attention factor: |af cos(angle) - (ch + cl)| <= err and the same for
// sin. False where that path does not apply (MPFR computes those). The reduction by k pi/2 in double
// arithmetic (the angle as a double-double), or in MPFR (the angle as an MPFR number). Exposed for tests.
struct DdCosSin {
  double ch, cl, sh, sl, err;
};
bool dd_cos_sin_of(double angle, double attention_factor, DdCosSin& out, bool mpfr_reduction = false);
// theta_i of the case at `bits` bits as the reference uses it, as an exact sum of doubles, and its relative
// error bound in units of 2^-bits. Exposed for tests.
struct ThetaProbe {
  std::vector<double> parts;  // theta = (the exact sum of these) * 2^exponent
  int exponent = 0;
  double units = 0;
};
ThetaProbe theta_probe(const RopeCase& c, uint32_t pair, unsigned bits);

}  // namespace ropecheck
