// Tests of diagnose(): every planted-bug kernel (tests/kernels/mutants) whose bug shows in its output is named by the
// explanation that produces it, under the default contract and under the loosest one; a correct kernel's
// output gets "none"; a precision diagnosis' contract really accepts the case; structural causes win over
// precision ones.
#include <gtest/gtest.h>

#include <bit>
#include <cfloat>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "impls/plugin_loader.hpp"
#include "impls/registry.hpp"
#include "properties/contract.hpp"
#include "properties/diagnosis.hpp"
#include "properties/judge.hpp"
#include "reference/reference.hpp"

using namespace ropecheck;

namespace ropecheck {
// GoogleTest prints a cause by its name.
void PrintTo(Cause c, std::ostream* os) { *os << '"' << name_of(c) << '"'; }
}  // namespace ropecheck

namespace {

const std::vector<int64_t> kPositions = {1, 2, 3, 7, 100, 4096, 1 << 20, 12345};

RopeCase make_case(Dtype d, Layout l, uint32_t hd, uint32_t rd, std::vector<int64_t> pos = kPositions,
                   uint32_t heads = 2, unsigned seed = 11) {
  RopeCase c;
  c.dtype = d;
  c.layout = l;
  c.head_dim = hd;
  c.rotary_dim = rd;
  c.n_heads = heads;
  c.positions = std::move(pos);
  c.input.assign(c.n_bytes(), 0);
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-4, 4);
  for (size_t k = 0; k < c.n_elements(); ++k) store_f32(d, c.input.data(), k, u(rng));
  return c;
}

Implementation load(const std::string& stem) {
  PluginLoad pl = load_kernel_plugin(std::string(ROPECHECK_MUTANT_DIR) + "/" + stem + ".so");
  if (!pl.impl) throw std::runtime_error(pl.error);
  return *pl.impl;
}

Implementation local(const char* name, rc_rope_apply_fn fn) {
  Implementation k;
  k.name = name;
  k.fn = fn;
  k.dtypes = {Dtype::f32, Dtype::f16, Dtype::bf16};
  k.layouts = {Layout::interleaved, Layout::half_split};
  return k;
}

Criteria criteria(const Contract& ct) { return Criteria::of(KernelErrorModel::for_contract(ct), ct); }

Contract default_contract() {
  std::string err;
  return *parse_contract("default", &err);
}

struct Outcome {
  bool passed = false;
  Diagnosis dg;
  std::string report;
  Bytes out;  // the kernel's output
};

Outcome judge_and_diagnose(const Implementation& k, const RopeCase& c, const Contract& ct) {
  Bytes out;
  EXPECT_EQ(run_kernel(k, c, out), RC_OK) << k.name;
  const ReferenceOutput ref = reference_rope(c);
  const Criteria cr = criteria(ct);
  Outcome o;
  const Judgement j = judge_output(c, ref, out.data(), cr);
  o.passed = j.ok();
  o.report = j.report(2);
  o.dg = diagnose(c, out.data(), ref, cr);
  o.out = std::move(out);
  return o;
}

// ---- local kernels: the mutants' shape (theta and angle in double, cos/sin rounded to f32, the rotation in
// f32, round-to-nearest-even stores, pass-through copied), with the pair computation given.
// The pass-through dims (rotary_dim .. head_dim) copied bit for bit; RC_OK.
int copy_pass_through(const rc_rope_args* a) {
  const Dtype d = Dtype(a->dtype);
  const uint32_t hd = a->head_dim, rd = a->rotary_dim;
  for (uint64_t t = 0; t < a->n_tokens; ++t)
    for (uint32_t h = 0; h < a->n_heads; ++h)
      for (uint32_t k = rd; k < hd; ++k) {
        const size_t e = (size_t(t) * a->n_heads + h) * hd + k;
        store_bits(d, a->out, e, load_bits(d, a->in, e));
      }
  return RC_OK;
}

using PairFn = std::function<void(float x0, float x1, float c, float s, float& y0, float& y1)>;

int shaped_kernel(const rc_rope_args* a, bool copy_zero_angle, const PairFn& rot) {
  const Dtype d = Dtype(a->dtype);
  const uint32_t hd = a->head_dim, rd = a->rotary_dim, np = rd / 2;
  for (uint64_t t = 0; t < a->n_tokens; ++t)
    for (uint32_t i = 0; i < np; ++i) {
      const double theta = a->inv_freq ? a->inv_freq[i] : std::pow(a->base, -2.0 * i / rd);
      const double angle = double(a->positions[t]) * a->position_scale * theta;
      const float c = float(std::cos(angle)), s = float(std::sin(angle));
      for (uint32_t h = 0; h < a->n_heads; ++h) {
        const size_t base = (size_t(t) * a->n_heads + h) * hd;
        const auto [d0, d1] = pair_dims(Layout(a->layout), rd, i);
        if (angle == 0 && copy_zero_angle) {
          store_bits(d, a->out, base + d0, load_bits(d, a->in, base + d0));
          store_bits(d, a->out, base + d1, load_bits(d, a->in, base + d1));
          continue;
        }
        float y0, y1;
        rot(load_f32(d, a->in, base + d0), load_f32(d, a->in, base + d1), c, s, y0, y1);
        store_f32(d, a->out, base + d0, y0);
        store_f32(d, a->out, base + d1, y1);
      }
    }
  return copy_pass_through(a);
}

// cos and sin swapped: y0 = x0 s - x1 c, y1 = x0 c + x1 s.
int swapped_kernel(const rc_rope_args* a) {
  return shaped_kernel(a, true, [](float x0, float x1, float c, float s, float& y0, float& y1) {
    y0 = x0 * s - x1 * c;
    y1 = x0 * c + x1 * s;
  });
}

// Correct, but position 0 goes through the arithmetic: x0*1 - x1*0 turns (-0, 3) into (+0, 3).
int no_identity_copy_kernel(const rc_rope_args* a) {
  return shaped_kernel(a, false, [](float x0, float x1, float c, float s, float& y0, float& y1) {
    y0 = x0 * c - x1 * s;
    y1 = x0 * s + x1 * c;
  });
}

// Rotates correctly, then scales by 1.5: no named explanation.
int scaled_kernel(const rc_rope_args* a) {
  return shaped_kernel(a, true, [](float x0, float x1, float c, float s, float& y0, float& y1) {
    y0 = 1.5f * (x0 * c - x1 * s);
    y1 = 1.5f * (x0 * s + x1 * c);
  });
}

// The built-in conventional-fp32 kernel (the fp32 angle model's pipeline) at positions m + shift, or with
// the position scale negated.
int conventional_changed(const rc_rope_args* a, int64_t shift, double scale_mul) {
  std::vector<int64_t> pos(a->positions, a->positions + a->n_tokens);
  for (int64_t& m : pos) m += shift;
  rc_rope_args b = *a;
  b.positions = pos.data();
  b.position_scale = a->position_scale * scale_mul;
  return ropecheck_conventional_fp32_rope(&b);
}
int conventional_plus1(const rc_rope_args* a) { return conventional_changed(a, 1, 1.0); }
int conventional_negated(const rc_rope_args* a) { return conventional_changed(a, 0, -1.0); }

// llama2.c built with -Ofast (docs/real-kernels.md): theta in f32 about 16 ulps off (a fast powf), the
// angle m * theta in f32, cos and sin of that angle correctly rounded, the rotation exact: every pair keeps
// its length, the phase drifts with the position.
int drifted_theta_kernel(const rc_rope_args* a) {
  const Dtype d = Dtype(a->dtype);
  const uint32_t hd = a->head_dim, rd = a->rotary_dim, np = rd / 2;
  for (uint64_t t = 0; t < a->n_tokens; ++t)
    for (uint32_t i = 0; i < np; ++i) {
      const float theta = float(std::pow(double(a->base), -2.0 * i / rd) * (1 + 16 * 0x1p-24));
      const float angle = float(a->positions[t]) * theta;
      const double c = std::cos(double(angle)), s = std::sin(double(angle));
      for (uint32_t h = 0; h < a->n_heads; ++h) {
        const size_t base = (size_t(t) * a->n_heads + h) * hd;
        const auto [d0, d1] = pair_dims(Layout(a->layout), rd, i);
        const double x0 = load_f32(d, a->in, base + d0), x1 = load_f32(d, a->in, base + d1);
        store_f32(d, a->out, base + d0, float(x0 * c - x1 * s));
        store_f32(d, a->out, base + d1, float(x0 * s + x1 * c));
      }
    }
  return copy_pass_through(a);
}

// The angle 6.3% too large: an angle drift of ~2^-4 |phi|, about 10^6 f32 ulps of |phi|.
// The exact rotation with each rotated output scaled by 1 + 1.5 * 2^-8 or 1 - 1.5 * 2^-8 (alternately): an error of
// bf16 arithmetic's size (beyond what a bf16 cache accepts) at f32 outputs that are not bf16 values (no bf16
// arithmetic made them). Without the rule this was "arithmetic at bf16 precision ... arith=bf16".
constexpr double g_scale_err = 0x1.8p-8;
int scaled_elements_kernel(const rc_rope_args* a) {
  const int rc = ropecheck_scalar_rope(a);
  if (rc != RC_OK || a->dtype != RC_F32) return rc;
  const Dtype d = Dtype(a->dtype);
  for (uint64_t t = 0; t < a->n_tokens; ++t)
    for (uint32_t h = 0; h < a->n_heads; ++h)
      for (uint32_t k = 0; k < a->rotary_dim; ++k) {
        const size_t e = (size_t(t) * a->n_heads + h) * a->head_dim + k;
        store_f32(d, a->out, e, float(load_f32(d, a->out, e) * (1 + ((e & 1) ? 1.0 : -1.0) * g_scale_err)));
      }
  return RC_OK;
}

int stretched_angle_kernel(const rc_rope_args* a) {
  rc_rope_args b = *a;
  b.position_scale = a->position_scale * 1.063;
  return ropecheck_scalar_rope(&b);
}

// Correct, but subnormal results flushed to zero (FTZ).
void ftz_pair(float x0, float x1, float c, float s, float& y0, float& y1) {
  y0 = x0 * c - x1 * s;
  y1 = x0 * s + x1 * c;
  if (std::fabs(y0) < FLT_MIN) y0 = std::copysign(0.0f, y0);
  if (std::fabs(y1) < FLT_MIN) y1 = std::copysign(0.0f, y1);
}

int ftz_kernel(const rc_rope_args* a) { return shaped_kernel(a, true, ftz_pair); }

float bf16r(float v) { return bf16_bits_to_f32(f32_to_bf16_bits(v)); }

// Hugging Face eager rotate_half on bf16 activations: the f32 angle pipeline (inv_freq = 1/base^(2i/d) in
// f32, f32 positions and product), cosf/sinf cast to bf16, q*cos + rotate_half(q)*sin with each product and
// the sum rounded to bf16.
int hf_eager_bf16_kernel(const rc_rope_args* a) {
  const Dtype d = Dtype(a->dtype);
  const uint32_t hd = a->head_dim, rd = a->rotary_dim, np = rd / 2;
  for (uint64_t t = 0; t < a->n_tokens; ++t)
    for (uint32_t i = 0; i < np; ++i) {
      const float e = float(2 * i) / float(rd);
      const float inv = a->inv_freq ? float(a->inv_freq[i]) : 1.0f / std::pow(float(a->base), e);
      const float ang = float(a->positions[t]) * inv;
      const float c = bf16r(std::cos(ang)), s = bf16r(std::sin(ang));
      for (uint32_t h = 0; h < a->n_heads; ++h) {
        const size_t base = (size_t(t) * a->n_heads + h) * hd;
        const auto [d0, d1] = pair_dims(Layout(a->layout), rd, i);
        const float x0 = load_f32(d, a->in, base + d0), x1 = load_f32(d, a->in, base + d1);
        store_f32(d, a->out, base + d0, bf16r(bf16r(x0 * c) + bf16r(-x1 * s)));
        store_f32(d, a->out, base + d1, bf16r(bf16r(x1 * c) + bf16r(x0 * s)));
      }
    }
  return copy_pass_through(a);
}

// ---- the planted bugs -----------------------------------------------------------

struct PlantedBug {
  std::string kernel;  // a mutant's stem, or "local:<name>"
  std::function<RopeCase()> make;
  Cause under_default;  // the expected cause (Cause::none: the output passes)
  Cause under_loosest;
  std::string detail_has;  // a substring the default diagnosis' detail must hold ("" none)
};

RopeCase f32_case() { return make_case(Dtype::f32, Layout::interleaved, 128, 128); }

RopeCase nan_case() {
  RopeCase c = f32_case();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (size_t k : {size_t(5), size_t(130), size_t(700), size_t(1501)}) store_f32(c.dtype, c.input.data(), k, nan);
  return c;
}

const std::vector<PlantedBug>& planted() {
  static const std::vector<PlantedBug> v = {
      {"mut_sign", f32_case, Cause::angle_negated, Cause::angle_negated, "R(-phi) x"},
      {"mut_layout_pairing", [] { return make_case(Dtype::f32, Layout::half_split, 128, 128); }, Cause::other_layout, Cause::other_layout, "pairs (2i, 2i+1)"},
      {"mut_position_off_by_one", f32_case, Cause::position_plus_1, Cause::position_plus_1, ""},
      {"mut_freq_head_dim", [] { return make_case(Dtype::f32, Layout::interleaved, 128, 96); },
       Cause::theta_from_head_dim, Cause::theta_from_head_dim, "base^(-2i/128)"},
      {"mut_wrong_exponent", f32_case, Cause::exponent_i_over_d, Cause::exponent_i_over_d, "base^(-i/128)"},
      {"mut_positions_ignored", f32_case, Cause::token_index_as_position, Cause::token_index_as_position, "positions 0..7"},
      {"mut_vector_tail", [] { return make_case(Dtype::f32, Layout::interleaved, 64, 40); }, Cause::pairs_left_unrotated, Cause::pairs_left_unrotated, "pairs 16-19 of 20 equal to their input at every rotated position"},
      {"mut_passthrough_clobbered", [] { return make_case(Dtype::f32, Layout::interleaved, 128, 64); },
       Cause::pass_through_touched, Cause::pass_through_touched, "dims 64-127 of 128 changed in 16 of 16 heads (set to +0)"},
      {"mut_fp32_angle", f32_case, Cause::f32_angle_drift, Cause::none, "f32 ulps of |phi| where it fails, at position"},
      {"mut_bf16_cache", f32_case, Cause::cos_sin_bf16, Cause::none, ""},
      {"mut_truncating_bf16", [] { return make_case(Dtype::bf16, Layout::interleaved, 128, 128); },
       Cause::truncating_stores, Cause::none, "its neighbour toward zero ("},
      // Issue 23: a truncating conversion in the scalar tail only (20 pairs: 16 in the vector loop, 4 in the tail)
      // was "arithmetic at f16 precision; would pass with arith=f16", and later "cos/sin at bf16 precision".
      {"mut_truncating_tail", [] { return make_case(Dtype::bf16, Layout::half_split, 64, 40); },
       Cause::truncating_stores_tail, Cause::none, "pairs 16..19 of each head's 20 (a tail of 4) are truncated"},
      // Issue 23: a cos/sin table converted to bf16 by truncation (up to one bf16 ulp off, where cos-sin=bf16 allows
      // half of one) was "cos/sin at bf16 precision; would pass with --contract cos-sin=bf16", a contract it fails.
      {"mut_truncated_cache", f32_case, Cause::truncating_cos_sin_table, Cause::none,
       "the cos/sin the kernel used are those of a bf16 table made by truncation"},
      {"mut_nan_flushed", nan_case, Cause::nan_inputs_zeroed, Cause::nan_inputs_zeroed, "4 pair(s) holding a NaN"},
      // Issue 23: both were "f32 angle drift" with K from 994 to 50 795.
      {"mut_position_bf16",
       [] { return make_case(Dtype::f32, Layout::interleaved, 64, 64, {1, 300, 1001, 5003, 70001}); },
       Cause::positions_rounded_to_bf16, Cause::positions_rounded_to_bf16, "the rotation at the positions rounded to bf16"},
      {"mut_inv_freq_bf16", f32_case, Cause::frequencies_rounded_to_bf16, Cause::frequencies_rounded_to_bf16,
       "theta_i rounded to bf16"},
      // Issue 23: was "unexplained" (the gate) and "radial bias ... shortened" (replay) for pairs made longer.
      {"mut_sincos_range",
       [] { return make_case(Dtype::f32, Layout::interleaved, 64, 64, {1, 5, 1 << 23, (1 << 24) + 3}); },
       Cause::cos_sin_not_unit_length, Cause::cos_sin_not_unit_length, "where a rotation keeps 1; from |angle| "},
      {"local:swapped", f32_case, Cause::cos_and_sin_swapped, Cause::cos_and_sin_swapped, ""},
      {"ok_fast_f32", f32_case, Cause::none, Cause::none, ""},
      {"ok_double", [] { return make_case(Dtype::bf16, Layout::half_split, 128, 96); }, Cause::none, Cause::none, ""},
  };
  return v;
}

Implementation kernel_of(const std::string& name) {
  if (name == "local:swapped") return local("swapped", swapped_kernel);
  return load(name);
}

class PlantedBugDiagnosis : public ::testing::TestWithParam<size_t> {};

}  // namespace

TEST_P(PlantedBugDiagnosis, NamesTheBug) {
  const PlantedBug& b = planted()[GetParam()];
  const Implementation k = kernel_of(b.kernel);
  const RopeCase c = b.make();
  for (const bool loosest : {false, true}) {
    const Contract ct = loosest ? loosest_contract() : default_contract();
    const Cause want = loosest ? b.under_loosest : b.under_default;
    SCOPED_TRACE(b.kernel + " under " + ct.short_spec());
    const Outcome o = judge_and_diagnose(k, c, ct);
    std::printf("%-26s %-8s %s\n", b.kernel.c_str(), loosest ? "loosest" : "default", o.dg.text().c_str());
    EXPECT_EQ(o.passed, want == Cause::none) << o.report;
    EXPECT_EQ(o.dg.cause, want) << o.dg.text();
    EXPECT_TRUE(o.dg.explained()) << o.dg.text();
    if (!loosest && !b.detail_has.empty()) {
      EXPECT_NE(o.dg.detail.find(b.detail_has), std::string::npos) << o.dg.text();
    }
    // A structural cause is never a precision one: no contract clause is suggested. A radial bias (truncating
    // stores) suggests the clause that states it, stores=truncate, and nothing else.
    if (want == Cause::radial_bias || want == Cause::truncating_stores) {
      EXPECT_EQ(o.dg.contract, "stores=truncate") << o.dg.text();
    } else if (want != Cause::none && !is_precision_cause(want)) {
      EXPECT_TRUE(o.dg.clause.empty() && o.dg.contract.empty()) << o.dg.text();
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Kernels, PlantedBugDiagnosis, ::testing::Range(size_t(0), planted().size()),
                         [](const ::testing::TestParamInfo<size_t>& i) {
                           std::string n = planted()[i.param].kernel;
                           for (char& ch : n)
                             if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
                           return n;
                         });

TEST(Diagnosis, AngleDriftNamesTheSmallestKAndItsContractPasses) {
  const RopeCase c = f32_case();
  const Outcome o = judge_and_diagnose(load("mut_fp32_angle"), c, default_contract());
  ASSERT_EQ(o.dg.cause, Cause::f32_angle_drift) << o.dg.text();
  ASSERT_EQ(o.dg.clause.rfind("angles=f32:", 0), 0u) << o.dg.text();
  const double k = std::stod(o.dg.clause.substr(11));
  EXPECT_GE(k, 1);
  EXPECT_LE(k, 4) << "an f32 product of f32 theta and an exact position is within ~1 ulp";
  EXPECT_EQ(o.dg.contract, o.dg.clause);
  // K passes, K - 1 does not.
  Bytes out;
  ASSERT_EQ(run_kernel(load("mut_fp32_angle"), c, out), RC_OK);
  const ReferenceOutput ref = reference_rope(c);
  std::string err;
  const Contract pass = *parse_contract(o.dg.contract, &err);
  EXPECT_TRUE(judge_output(c, ref, out.data(), criteria(pass)).ok());
  if (k > 1) {
    Contract less = pass;
    less.angle_ulps = k - 1;
    EXPECT_FALSE(judge_output(c, ref, out.data(), criteria(less)).ok());
  }
}

TEST(Diagnosis, PrecisionContractsAcceptTheCase) {
  // Every precision diagnosis' --contract passes the case it was made for.
  struct K {
    Implementation impl;
    RopeCase c;
  };
  const std::vector<K> ks = {
      {load("mut_bf16_cache"), f32_case()},
      {load("mut_bf16_cache"), make_case(Dtype::f16, Layout::half_split, 64, 64)},
      {load("mut_fp32_angle"), make_case(Dtype::f16, Layout::interleaved, 64, 64, {1, 2, 5, 1 << 22, 1 << 24})},
      {local("hf-eager-bf16", hf_eager_bf16_kernel), make_case(Dtype::bf16, Layout::half_split, 128, 128)},
      {local("hf-eager-bf16", hf_eager_bf16_kernel), make_case(Dtype::f32, Layout::half_split, 128, 128)},
  };
  for (const K& k : ks) {
    SCOPED_TRACE(k.impl.name + " on " + k.c.summary());
    const Outcome o = judge_and_diagnose(k.impl, k.c, default_contract());
    std::printf("%-16s %s: %s\n", k.impl.name.c_str(), std::string(to_string(k.c.dtype)).c_str(),
                o.dg.text().c_str());
    ASSERT_FALSE(o.passed);
    ASSERT_FALSE(o.dg.contract.empty()) << o.dg.text();
    ASSERT_FALSE(o.dg.clause.empty()) << o.dg.text();
    EXPECT_EQ(o.dg.contract.find("e+"), std::string::npos) << "K written exactly: " << o.dg.contract;
    std::string err;
    const auto w = parse_contract(o.dg.contract, &err);
    ASSERT_TRUE(w) << err;
    EXPECT_TRUE(judge_and_diagnose(k.impl, k.c, *w).passed) << o.dg.text();
    EXPECT_NE(o.dg.text().find("; would pass with --contract " + o.dg.contract), std::string::npos);
  }
}

// An angle error no f32 pipeline makes (6.3 % of the angle: K near 10^6 ulps, where the worst derived pipeline, ggml's
// repeated multiplication, needs 35 here) is not f32 drift: no angles=f32:K is suggested (issue 23: K from 994 to
// 50 795 was suggested for bf16 frequencies and positions), and the diagnosis says why.
TEST(Diagnosis, AnAngleErrorBeyondAnyF32PipelineIsNotCalledDrift) {
  const RopeCase c = make_case(Dtype::f32, Layout::interleaved, 16, 16, {1, 2, 3});
  const Outcome o = judge_and_diagnose(local("stretched", stretched_angle_kernel), c, default_contract());
  ASSERT_FALSE(o.passed);
  EXPECT_EQ(o.dg.cause, Cause::unexplained) << o.dg.text();
  EXPECT_TRUE(o.dg.contract.empty()) << o.dg.text();
  EXPECT_NE(o.dg.detail.find("not f32 angle drift"), std::string::npos) << o.dg.text();
  EXPECT_NE(o.dg.detail.find("(K > 35)"), std::string::npos) << o.dg.text();
}

// The accuracy finding says "(within the rounding noise's reach)" only where the angle error is no larger than what
// the output's rounding can turn a pair by (issue 23: it was printed beside angle errors of 1-2 rad at bf16).
TEST(Diagnosis, AnAngleErrorOfRadiansIsNotSaidToBeRoundingNoise) {
  const RopeCase c = make_case(Dtype::bf16, Layout::interleaved, 64, 64, {1, 1000, 5003});
  const Outcome o = judge_and_diagnose(load("mut_sign"), c, default_contract());
  ASSERT_FALSE(o.passed);
  EXPECT_NE(o.report.find("angle error"), std::string::npos) << o.report;
  EXPECT_EQ(o.report.find("within the rounding noise"), std::string::npos) << o.report;
}

TEST(Diagnosis, PhaseOnlyErrorIsAngleDriftNotANarrowCache) {
  // Regression (llama2.c -Ofast under angles=f32): every pair keeps its length and the phase is up to ~16 f32
  // ulps of |phi| off, at positions where cos-sin=f16's allowance is also wide enough. The cause is the
  // angle, and the suggested clause is angles=f32:K with K near 16, not cos-sin=f16.
  const RopeCase c = make_case(Dtype::f32, Layout::interleaved, 64, 64, {1, 2, 3, 7, 60, 100, 200, 300});
  std::string err;
  const Contract ct = *parse_contract("angles=f32", &err);
  const Outcome o = judge_and_diagnose(local("drifted-theta", drifted_theta_kernel), c, ct);
  std::printf("%s\n", o.dg.text().c_str());
  ASSERT_FALSE(o.passed);
  EXPECT_EQ(o.dg.cause, Cause::f32_angle_drift) << o.dg.text();
  ASSERT_EQ(o.dg.clause.rfind("angles=f32:", 0), 0u) << o.dg.text();
  const double k = std::stod(o.dg.clause.substr(11));
  EXPECT_GE(k, 8) << o.dg.text();
  EXPECT_LE(k, 24) << o.dg.text();
  // The cache clause alone would have accepted the case: the order of explanations is what is tested.
  Bytes out;
  ASSERT_EQ(run_kernel(local("drifted-theta", drifted_theta_kernel), c, out), RC_OK);
  const Contract cache = *parse_contract("angles=f32,cos-sin=f16", &err);
  EXPECT_TRUE(judge_output(c, reference_rope(c), out.data(), criteria(cache)).ok());
}

// sin/cos from short Taylor polynomials (degrees 5 and 6 after reduction to |x| <= pi/4): errors up to ~2^-14.7 of
// the pair's length, at every angle -- within what an f16 cache makes, but not what one makes: the outputs are not
// those of cos/sin rounded to f16. At f32 outputs, whose rounding is far finer than a narrow cache's, a cache clause
// is named only where the cache's values predict the output (docs/gate.md, "Plausible pipelines"); this was "cos/sin
// at f16 precision; would pass with --contract cos-sin=f16" for a kernel that has no f16 anywhere.
int poly_sincos_kernel(const rc_rope_args* a) {
  const Dtype d = Dtype(a->dtype);
  const uint32_t hd = a->head_dim, rd = a->rotary_dim, np = rd / 2;
  auto sin_cos = [](double angle, float& s, float& c) {
    const double q = std::nearbyint(angle / (M_PI / 2));
    const float r = float(angle - q * (M_PI / 2)), r2 = r * r;
    const float sr = r * (1 - r2 / 6 * (1 - r2 / 20)), cr = 1 - r2 / 2 * (1 - r2 / 12 * (1 - r2 / 30));
    switch (int64_t(q) & 3) {
      case 0: s = sr, c = cr; break;
      case 1: s = cr, c = -sr; break;
      case 2: s = -sr, c = -cr; break;
      default: s = -cr, c = sr; break;
    }
  };
  for (uint64_t t = 0; t < a->n_tokens; ++t)
    for (uint32_t i = 0; i < np; ++i) {
      const double theta = a->inv_freq ? a->inv_freq[i] : std::pow(a->base, -2.0 * i / rd);
      float s, c;
      sin_cos(double(a->positions[t]) * a->position_scale * theta, s, c);
      for (uint32_t h = 0; h < a->n_heads; ++h) {
        const size_t base = (size_t(t) * a->n_heads + h) * hd;
        const auto [d0, d1] = pair_dims(Layout(a->layout), rd, i);
        const float x0 = load_f32(d, a->in, base + d0), x1 = load_f32(d, a->in, base + d1);
        store_f32(d, a->out, base + d0, x0 * c - x1 * s);
        store_f32(d, a->out, base + d1, x0 * s + x1 * c);
      }
    }
  return copy_pass_through(a);
}

TEST(Diagnosis, ANarrowCacheIsNamedOnlyWhereItsValuesPredictTheOutput) {
  const RopeCase c = make_case(Dtype::f32, Layout::interleaved, 64, 64, {1, 2, 3, 7, 60, 100, 200, 300});
  const Outcome o = judge_and_diagnose(local("poly-sincos", poly_sincos_kernel), c, default_contract());
  std::printf("poly sin/cos: %s\n", o.dg.text().c_str());
  ASSERT_FALSE(o.passed);
  EXPECT_NE(o.dg.cause, Cause::cos_sin_f16) << o.dg.text();
  EXPECT_NE(o.dg.cause, Cause::cos_sin_bf16) << o.dg.text();
  EXPECT_EQ(o.dg.clause.find("cos-sin="), std::string::npos) << o.dg.text();
  EXPECT_EQ(o.dg.contract.find("cos-sin="), std::string::npos) << o.dg.text();
  // The clause alone accepts the output: the signature is what is tested, not the allowance.
  std::string err;
  EXPECT_TRUE(judge_and_diagnose(local("poly-sincos", poly_sincos_kernel), c, *parse_contract("cos-sin=f16", &err)).passed);
  // Real narrow caches at f32 outputs keep their names (the cache's values predict every failing pair).
  EXPECT_EQ(judge_and_diagnose(load("ok_f16_cache"), c, default_contract()).dg.cause, Cause::cos_sin_f16);
  EXPECT_EQ(judge_and_diagnose(load("mut_bf16_cache"), c, default_contract()).dg.cause, Cause::cos_sin_bf16);
}

// Arithmetic in bf16 describes f32 outputs only when they are bf16 values (docs/gate.md, "Plausible pipelines"):
// errors of bf16's size on outputs no bf16 arithmetic made are not "arithmetic at bf16 precision" (issue 23:
// suggestions that describe what the kernel cannot be).
TEST(Diagnosis, NarrowArithmeticIsNotSuggestedForOutputsNotOfItsType) {
  const RopeCase c = make_case(Dtype::f32, Layout::interleaved, 64, 64, {1, 2, 3, 40});
  const Outcome o = judge_and_diagnose(local("scaled", scaled_elements_kernel), c, default_contract());
  ASSERT_FALSE(o.passed);
  EXPECT_EQ(o.dg.clause.find("arith="), std::string::npos) << o.dg.text();
  EXPECT_EQ(o.dg.contract.find("arith="), std::string::npos) << o.dg.text();
  EXPECT_NE(o.dg.cause, Cause::arith_bf16) << o.dg.text();
  EXPECT_NE(o.dg.cause, Cause::arith_f16) << o.dg.text();
  std::printf("%s\n", o.dg.text().c_str());
}

TEST(Diagnosis, HfEagerNeedsACombination) {
  // f32 data: bf16 cos/sin and bf16 arithmetic are both far outside the default contract; no single clause
  // accepts the output.
  const RopeCase c = make_case(Dtype::f32, Layout::half_split, 128, 128);
  const Outcome o = judge_and_diagnose(local("hf-eager-bf16", hf_eager_bf16_kernel), c, default_contract());
  EXPECT_EQ(o.dg.cause, Cause::mixed_precision) << o.dg.text();
  EXPECT_NE(o.dg.clause.find("arith=bf16"), std::string::npos) << o.dg.text();
  EXPECT_NE(o.dg.detail.find("no single clause suffices"), std::string::npos) << o.dg.text();
}

TEST(Diagnosis, FlushedSubnormals) {
  // Half the tokens, or all, hold values around 2^-127: their rotated outputs are subnormal and the kernel
  // flushes them. With values around 2^-140 every output flushes to 0 in both components: a purely radial
  // error, which is not "radial bias" when denormals=flush explains it.
  for (const float scale : {0x1p-128f, 0x1p-140f})
  for (const bool all_tiny : {false, true}) {
    RopeCase c = f32_case();
    for (size_t t = 0; t < c.n_tokens(); ++t)
      if (all_tiny || t % 2 == 0)
        for (size_t k = 0; k < c.n_heads * c.head_dim; ++k) {
          const size_t e = t * c.n_heads * c.head_dim + k;
          store_f32(c.dtype, c.input.data(), e, load_f32(c.dtype, c.input.data(), e) * scale);
        }
    SCOPED_TRACE(fmt::format("{} tokens tiny (x {})", all_tiny ? "all" : "half the", scale));
    const Outcome o = judge_and_diagnose(local("ftz", ftz_kernel), c, default_contract());
    std::printf("ftz %s x %g: %s\n", all_tiny ? "all tiny" : "half tiny", scale, o.dg.text().c_str());
    ASSERT_FALSE(o.passed);
    EXPECT_EQ(o.dg.cause, Cause::subnormals_flushed) << o.dg.text();
    EXPECT_EQ(o.dg.contract, "denormals=flush") << o.dg.text();
  }
}

// bf16 stores by truncation (toward zero), as vLLM's scalar CPU path: an output below bf16's smallest subnormal
// (2^-133) becomes 0 as flushing would make it, but only there; a flushing kernel also zeroes outputs at or above
// it. Found on vLLM: two such zeros were named "subnormals flushed".
int truncating_bf16_kernel(const rc_rope_args* a) {
  return shaped_kernel(a, true, [](float x0, float x1, float c, float s, float& y0, float& y1) {
    auto truncate = [](float v) { return std::bit_cast<float>(std::bit_cast<uint32_t>(v) & 0xffff0000u); };
    y0 = truncate(x0 * c - x1 * s);
    y1 = truncate(x0 * s + x1 * c);
  });
}

TEST(Diagnosis, TruncationToZeroBelowTheSmallestSubnormalIsNotFlushing) {
  RopeCase c = make_case(Dtype::bf16, Layout::half_split, 64, 64);
  for (size_t t = 0; t < c.n_tokens(); ++t)  // every token around 2^-132: outputs from 0 to bf16 subnormals
    for (size_t k = 0; k < c.n_heads * c.head_dim; ++k) {
      const size_t e = t * c.n_heads * c.head_dim + k;
      store_f32(c.dtype, c.input.data(), e, load_f32(c.dtype, c.input.data(), e) * 0x1p-132f);
    }
  const Outcome o = judge_and_diagnose(local("truncating", truncating_bf16_kernel), c, default_contract());
  ASSERT_FALSE(o.passed);
  size_t below = 0;  // (the case has zeros of truncation: exact outputs below 2^-133 truncated to 0)
  for (size_t e = 0; e < c.n_elements(); ++e)
    below += load_f32(c.dtype, o.out.data(), e) == 0 && load_f32(c.dtype, c.input.data(), e) != 0;
  EXPECT_GT(below, 0u);
  EXPECT_NE(o.dg.cause, Cause::subnormals_flushed) << o.dg.text();
  EXPECT_EQ(o.dg.clause.find("denormals=flush"), std::string::npos) << o.dg.text();
  // Nor f16 arithmetic: outputs around 2^-132 are outside f16's range (its allowance there accepts anything).
  EXPECT_EQ(o.dg.clause.find("arith=f16"), std::string::npos) << o.dg.text();
  std::printf("truncating bf16 stores: %s\n", o.dg.text().c_str());
}

// ftz_kernel that computes at angle 0 too (flushing what it computes there).
int ftz_everywhere_kernel(const rc_rope_args* a) { return shaped_kernel(a, false, ftz_pair); }

// A kernel that flushes subnormals, on a case whose only subnormal outputs are at position 0 (angle 0: every
// layout, sign and offset hypothesis gives the identity there, so it is no evidence for any of them): named
// "subnormals flushed", never "other layout" (issue 23: it was).
TEST(Diagnosis, SubnormalsFlushedAtPositionZeroAreNotALayout) {
  for (const Layout l : {Layout::interleaved, Layout::half_split})
  for (const bool alone : {false, true}) {
    // Token 0 (position 0) holds values around 2^-130: subnormal inputs, which the identity keeps, and the
    // kernel flushes; the other tokens are ordinary. Alone: one token at position 0, one subnormal element.
    RopeCase c = make_case(Dtype::f32, l, 64, 64, alone ? std::vector<int64_t>{0} : std::vector<int64_t>{0, 5, 300, 70000});
    for (size_t k = 0; k < (alone ? 1 : c.n_heads * c.head_dim); ++k)
      store_f32(c.dtype, c.input.data(), k, load_f32(c.dtype, c.input.data(), k) * 0x1p-130f);
    SCOPED_TRACE(std::string(to_string(l)) + (alone ? " alone" : ""));
    const Outcome o = judge_and_diagnose(local("ftz0", ftz_everywhere_kernel), c, default_contract());
    std::printf("ftz at position 0 (%s): %s\n", std::string(to_string(l)).c_str(), o.dg.text().c_str());
    ASSERT_FALSE(o.passed);
    EXPECT_EQ(o.dg.cause, Cause::subnormals_flushed) << o.dg.text();
    EXPECT_EQ(o.dg.contract, "denormals=flush") << o.dg.text();
  }
}

TEST(Diagnosis, SignFlipIsNeverAngleDrift) {
  // Under a contract whose angle clause is already wide, the sign flip at small positions is still structural.
  std::string err;
  const Contract wide = *parse_contract("angles=f32:100000,cos-sin=bf16,arith=bf16", &err);
  const RopeCase c = make_case(Dtype::bf16, Layout::half_split, 64, 64, {1, 2, 3, 7});
  const Outcome o = judge_and_diagnose(load("mut_sign"), c, wide);
  ASSERT_FALSE(o.passed);
  EXPECT_EQ(o.dg.cause, Cause::angle_negated) << o.dg.text();
}

TEST(Diagnosis, PositionShiftsAreTellApart) {
  // position m+1 and m-1 / m+2 / m-2 are different explanations; the planted +1 is named, not its neighbours.
  for (Dtype d : {Dtype::f32, Dtype::f16, Dtype::bf16}) {
    const RopeCase c = make_case(d, Layout::half_split, 64, 64, {0, 1, 2, 3, 9, 1000});
    const Outcome o = judge_and_diagnose(load("mut_position_off_by_one"), c, default_contract());
    EXPECT_EQ(o.dg.cause, Cause::position_plus_1) << o.dg.text();
  }
}

TEST(Diagnosis, IdentityChangedUnderIdentityBits) {
  RopeCase c = make_case(Dtype::f32, Layout::interleaved, 64, 64, {0, 3, 5});
  store_f32(c.dtype, c.input.data(), 0, -0.0f);  // token 0 (position 0), dim 0
  store_f32(c.dtype, c.input.data(), 64 + 7, -0.0f);  // token 0, head 1, dim 7
  std::string err;
  const Contract bits = *parse_contract("builtin", &err);
  const Implementation k = local("no-identity-copy", no_identity_copy_kernel);
  const Outcome o = judge_and_diagnose(k, c, bits);
  ASSERT_FALSE(o.passed);
  EXPECT_EQ(o.dg.cause, Cause::identity_changed) << o.dg.text();
  EXPECT_NE(o.dg.detail.find("2 signed zero(s) flipped"), std::string::npos) << o.dg.text();
  // identity=values accepts -0 -> +0.
  EXPECT_EQ(judge_and_diagnose(k, c, default_contract()).dg.cause, Cause::none);
}

// The evidence names what a pair is held to: a contract's allowance, or a flat bound (never "the a flat bound of 3 u
// allowance", issue 50).
TEST(Diagnosis, TheEvidenceNamesWhatAPairIsHeldTo) {
  const Implementation k = load("mut_sign");
  const RopeCase c = make_case(Dtype::f32, Layout::half_split, 64, 64);
  Bytes out;
  ASSERT_EQ(run_kernel(k, c, out), RC_OK);
  const ReferenceOutput ref = reference_rope(c);
  const Diagnosis flat = diagnose(c, out.data(), ref, Criteria::flat_bound(3, false));
  EXPECT_EQ(flat.cause, Cause::angle_negated) << flat.text();
  EXPECT_NE(flat.detail.find("every pair within the flat bound of 3 u against"), std::string::npos) << flat.text();
  EXPECT_EQ(flat.text().find("the a flat"), std::string::npos) << flat.text();
  const Diagnosis dflt = diagnose(c, out.data(), ref, criteria(default_contract()));
  EXPECT_NE(dflt.detail.find("every pair within the default allowance against"), std::string::npos) << dflt.text();
}

TEST(Diagnosis, UnexplainedNamesTheClosest) {
  const Outcome o = judge_and_diagnose(local("scaled", scaled_kernel), f32_case(), default_contract());
  ASSERT_FALSE(o.passed);
  EXPECT_EQ(o.dg.cause, Cause::unexplained) << o.dg.text();
  EXPECT_FALSE(o.dg.explained());
  EXPECT_NE(o.dg.detail.find("the closest, "), std::string::npos) << o.dg.text();
  EXPECT_TRUE(o.dg.clause.empty());
}

TEST(Diagnosis, IsDeterministicAndFormatsItsText) {
  const RopeCase c = f32_case();
  const Outcome a = judge_and_diagnose(load("mut_bf16_cache"), c, default_contract());
  const Outcome b = judge_and_diagnose(load("mut_bf16_cache"), c, default_contract());
  EXPECT_EQ(a.dg.text(), b.dg.text());
  EXPECT_EQ(a.dg.text(), "diagnosis: cos/sin at bf16 precision (" + a.dg.detail +
                             "); would pass with --contract cos-sin=bf16");
  Diagnosis d;
  d.cause = Cause::angle_negated;
  d.detail = "x";
  EXPECT_EQ(d.text(), "diagnosis: angle negated (x)");
  EXPECT_TRUE(d.explained());
  d.cause = Cause::unexplained;
  EXPECT_FALSE(d.explained());
}

Diagnosis diagnose_with(const Implementation& k, const RopeCase& c, const Criteria& cr, AngleModel model,
                        bool* passed) {
  Bytes out;
  EXPECT_EQ(run_kernel(k, c, out), RC_OK) << k.name;
  ReferenceOptions ro;
  ro.angle_model = model;
  const ReferenceOutput ref = reference_rope(c, ro);
  *passed = judge_output(c, ref, out.data(), cr).ok();
  return diagnose(c, out.data(), ref, cr, model);
}

TEST(Diagnosis, ScalesTablesPositionZeroTheFp32ModelAndFlatBounds) {
  const Criteria def = criteria(default_contract());
  bool passed = true;
  const Implementation sign = load("mut_sign"), plus1 = load("mut_position_off_by_one");
  {
    RopeCase c = make_case(Dtype::f16, Layout::interleaved, 64, 64);
    c.position_scale = 0.25;
    EXPECT_EQ(diagnose_with(plus1, c, def, AngleModel::exact, &passed).cause, Cause::position_plus_1);
    EXPECT_EQ(diagnose_with(sign, c, def, AngleModel::exact, &passed).cause, Cause::angle_negated);
  }
  {
    RopeCase c = make_case(Dtype::f32, Layout::half_split, 64, 48);
    for (uint32_t i = 0; i < 24; ++i) c.inv_freq.push_back(0.5 * std::pow(500000.0, -2.0 * i / 48));
    EXPECT_EQ(diagnose_with(sign, c, def, AngleModel::exact, &passed).cause, Cause::angle_negated);
    EXPECT_EQ(diagnose_with(plus1, c, def, AngleModel::exact, &passed).cause, Cause::position_plus_1);
    // With a table the exponent bug cannot show: the kernel passes.
    const Diagnosis d = diagnose_with(load("mut_wrong_exponent"), c, def, AngleModel::exact, &passed);
    EXPECT_TRUE(passed);
    EXPECT_EQ(d.cause, Cause::none);
  }
  {
    // Position 0 only: the reference's angle is 0 everywhere, the kernel rotates by theta.
    const RopeCase c = make_case(Dtype::bf16, Layout::interleaved, 64, 64, {0, 0});
    const Diagnosis d = diagnose_with(plus1, c, def, AngleModel::exact, &passed);
    EXPECT_FALSE(passed);
    EXPECT_EQ(d.cause, Cause::position_plus_1) << d.text();
  }
  {
    // The fp32 angle model: the candidates' rows are that model's angles (at m+1 itself, not m's plus 1's).
    // The kernels: the conventional-fp32 pipeline at m+1 / with the scale negated.
    const RopeCase c = make_case(Dtype::f32, Layout::interleaved, 64, 64, {1, 2, 3, 7, 100, 4096, 1 << 20});
    const Contract dc = default_contract();
    const Criteria conv = Criteria::of(KernelErrorModel::conventional_fp32(), dc);
    const Implementation ok = *find_implementation("conventional-fp32");
    EXPECT_EQ(diagnose_with(ok, c, conv, AngleModel::fp32, &passed).cause, Cause::none);
    EXPECT_TRUE(passed);
    const Diagnosis d = diagnose_with(local("conv+1", conventional_plus1), c, conv, AngleModel::fp32, &passed);
    EXPECT_FALSE(passed);
    EXPECT_EQ(d.cause, Cause::position_plus_1) << d.text();
    EXPECT_EQ(diagnose_with(local("conv-neg", conventional_negated), c, conv, AngleModel::fp32, &passed).cause,
              Cause::angle_negated);
  }
  {
    // A flat --tolerance: structural explanations still fit; no contract can widen it.
    const Criteria flat = Criteria::flat_bound(3.0);
    const RopeCase c = f32_case();
    EXPECT_EQ(diagnose_with(sign, c, flat, AngleModel::exact, &passed).cause, Cause::angle_negated);
    const Diagnosis d = diagnose_with(load("mut_bf16_cache"), c, flat, AngleModel::exact, &passed);
    EXPECT_FALSE(passed);
    EXPECT_EQ(d.cause, Cause::unexplained) << d.text();
    EXPECT_TRUE(d.contract.empty());
  }
}

TEST(Diagnosis, Timing) {
  // 8 tokens x 2 heads x 128 dims: the cost of diagnose() against one reference evaluation.
  const RopeCase c = f32_case();
  const Criteria cr = criteria(default_contract());
  auto ms = [](auto f) {
    double best = 1e9;
    for (int r = 0; r < 5; ++r) {
      const auto t0 = std::chrono::steady_clock::now();
      f();
      best = std::min(best, std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    }
    return best;
  };
  ReferenceOutput ref;
  const double t_ref = ms([&] { ref = reference_rope(c); });
  std::printf("reference_rope: %.2f ms\n", t_ref);
  struct K {
    const char* name;
    Implementation impl;
  };
  for (const K& k : {K{"mut_sign", load("mut_sign")}, K{"mut_bf16_cache", load("mut_bf16_cache")},
                     K{"mut_fp32_angle", load("mut_fp32_angle")}, K{"scaled", local("scaled", scaled_kernel)}}) {
    Bytes out;
    ASSERT_EQ(run_kernel(k.impl, c, out), RC_OK);
    Diagnosis dg;
    const double t = ms([&] { dg = diagnose(c, out.data(), ref, cr); });
    std::printf("diagnose %-16s %.2f ms (%.1f reference evaluations): %s\n", k.name, t, t / t_ref,
                std::string(dg.name()).c_str());
    EXPECT_LT(t, 5000.0);  // a hang guard only: the machine is shared
  }
}

// ABI v2's classic bugs, produced by running the correct scalar kernel on the case the bug computes, then
// judged and diagnosed against the case that was asked for.
TEST(Diagnosis, VariantBugsAreNamed) {
  const Implementation& scalar = *find_implementation("scalar");
  RopeCase c = make_case(Dtype::f32, Layout::half_split, 64, 64, {1, 2, 3, 7, 60, 100});
  c.attention_factor = 1.1386294361119891;
  const size_t n = c.n_tokens();
  c.n_pos_axes = 3;
  for (size_t t = 0; t < 2 * n; ++t) c.positions.push_back(int64_t(t * 5 % 17) - 3);
  for (uint32_t i = 0; i < 32; ++i) c.pair_axis.push_back(uint8_t(i < 8 ? 0 : i < 20 ? 1 : 2));
  ASSERT_EQ(c.validate(), "");
  auto diagnosed = [&](const RopeCase& computed) {
    Bytes out;
    EXPECT_EQ(run_kernel(scalar, computed, out), RC_OK);
    const ReferenceOutput ref = reference_rope(c);
    const Criteria cr = criteria(default_contract());
    EXPECT_FALSE(judge_output(c, ref, out.data(), cr).ok());
    return diagnose(c, out.data(), ref, cr);
  };
  RopeCase twice = c;
  twice.attention_factor = c.attention_factor * c.attention_factor;
  EXPECT_EQ(diagnosed(twice).cause, Cause::attention_factor_applied_twice);
  RopeCase never = c;
  never.attention_factor = 1.0;
  EXPECT_EQ(diagnosed(never).cause, Cause::attention_factor_not_applied);
  RopeCase axis0 = c;
  axis0.pair_axis.assign(32, 0);
  EXPECT_EQ(diagnosed(axis0).cause, Cause::position_axes_ignored);
  // The correct call passes.
  Bytes out;
  ASSERT_EQ(run_kernel(scalar, c, out), RC_OK);
  EXPECT_TRUE(judge_output(c, reference_rope(c), out.data(), criteria(default_contract())).ok());
}

// The factor applied twice gives pairs af times longer than asked, and the kernel's roundings are af times larger
// with them: the candidate is judged relative to its own length. (At af 2.5 in bf16 a correctly rounded af^2
// output left 1.25x the allowance against the candidate: "unexplained", as mut_attn_factor_twice's rule property
// rows were at 1.7x.)
TEST(Diagnosis, TheFactorAppliedTwiceIsNamedAtLargeFactors) {
  const Implementation& scalar = *find_implementation("scalar");
  for (Dtype d : {Dtype::bf16, Dtype::f16, Dtype::f32})
    for (double af : {1.7, 2.5}) {
      RopeCase c = make_case(d, Layout::interleaved, 64, 64, {1, 2, 3, 7, 60, 100, 1000, 4095});
      c.attention_factor = af;
      RopeCase twice = c;
      twice.attention_factor = af * af;
      Bytes out;
      ASSERT_EQ(run_kernel(scalar, twice, out), RC_OK);
      const ReferenceOutput ref = reference_rope(c);
      const Criteria cr = criteria(default_contract());
      ASSERT_FALSE(judge_output(c, ref, out.data(), cr).ok());
      const Diagnosis dg = diagnose(c, out.data(), ref, cr);
      EXPECT_EQ(dg.cause, Cause::attention_factor_applied_twice) << to_string(d) << " af " << af << ": " << dg.text();
    }
}

// The gate's verdict line reads several rows' precision diagnoses together (join_precision): the row that
// exceeds its allowance most gives the main cause; clauses only other rows need come after with their excess;
// the joined contract takes each clause at its widest. Found on a bf16-cache kernel whose rows, each at its own
// smallest widening, named four causes (cos/sin at bf16 and at f16, arithmetic at f16, f32 angle drift).
TEST(DiagnosisJoin, TheRowFarthestOutNamesTheCauseAndTheContractCoversEveryRow) {
  const Contract base{};
  const std::vector<std::string> rows = {
      "diagnosis: cos/sin at bf16 precision (63 pair(s) beyond the default allowance, the worst at 7365x it "
      "(largest error 3.861e+04 u); at most 0.4166x the allowance with cos-sin=bf16); would pass with --contract "
      "cos-sin=bf16",
      "diagnosis: cos/sin at f16 precision (7 pair(s) beyond the default allowance, the worst at 1.159x it); would "
      "pass with --contract cos-sin=f16",
      "diagnosis: arithmetic at f16 precision (2 pair(s) beyond the default allowance, the worst at 2.904x it); "
      "would pass with --contract arith=f16",
      "diagnosis: f32 angle drift (angle error up to 1.956e+05 f32 ulps of |phi|; smallest K that passes: 15302; 1 "
      "pair(s) beyond the default allowance, the worst at 1.5x it); would pass with --contract angles=f32:15302"};
  const std::optional<PrecisionJoin> j = join_precision(rows, base);
  ASSERT_TRUE(j);
  EXPECT_EQ(j->causes, "cos/sin at bf16 precision (up to 7365x the allowance); besides, on rows up to 2.904x it: "
                       "f32 angle drift, arithmetic at f16 precision");
  EXPECT_EQ(j->spec, "angles=f32:15302,cos-sin=bf16,arith=f16");
  // The largest K of the rows, and the failed contract's own clauses are no cause.
  std::string err;
  const Contract bf16_cache = *parse_contract("cos-sin=bf16", &err);
  const std::optional<PrecisionJoin> k = join_precision(
      {"diagnosis: f32 angle drift (the worst at 9x it); would pass with --contract angles=f32:40,cos-sin=bf16",
       "diagnosis: f32 angle drift (the worst at 3x it); would pass with --contract angles=f32:700,cos-sin=bf16"},
      bf16_cache);
  ASSERT_TRUE(k);
  EXPECT_EQ(k->causes, "f32 angle drift (up to 9x the allowance)");
  EXPECT_EQ(k->spec, "angles=f32:700,cos-sin=bf16");
}

// A row whose case the main widening also accepts (its detail lists the other single clauses that accept it) is the
// main cause's, not a second cause: a bf16 cache's rows just past the allowance at f16 outputs were "arithmetic
// at f16 precision" beside it (issue 23: one cache blamed on a cache, narrow arithmetic and angle drift).
TEST(DiagnosisJoin, ARowTheMainWideningAlsoAcceptsIsTheMainCauses) {
  const Contract base{};
  const std::vector<std::string> rows = {
      "diagnosis: cos/sin at bf16 precision (63 pair(s) beyond the default allowance, the worst at 8608x it; at most "
      "0.4x the allowance with cos-sin=bf16; also accepted by --contract arith=bf16); would pass with --contract "
      "cos-sin=bf16",
      "diagnosis: arithmetic at f16 precision (2 pair(s) beyond the default allowance, the worst at 2.904x it; at "
      "most 0.9x the allowance with arith=f16; also accepted by --contract cos-sin=bf16 or --contract arith=bf16; "
      "the hf-eager-bf16 preset also accepts it); would pass with --contract arith=f16"};
  const std::optional<PrecisionJoin> j = join_precision(rows, base);
  ASSERT_TRUE(j);
  EXPECT_EQ(j->causes, "cos/sin at bf16 precision (up to 8608x the allowance)");
  EXPECT_EQ(j->spec, "cos-sin=bf16");
  // Without the list the row needs its own clause, named apart.
  const std::optional<PrecisionJoin> k = join_precision(
      {rows[0], "diagnosis: arithmetic at f16 precision (the worst at 2.904x it); would pass with --contract arith=f16"},
      base);
  ASSERT_TRUE(k);
  EXPECT_EQ(k->causes, "cos/sin at bf16 precision (up to 8608x the allowance); besides, on rows up to 2.904x it: "
                       "arithmetic at f16 precision");
  EXPECT_EQ(k->spec, "cos-sin=bf16,arith=f16");
}

TEST(DiagnosisJoin, OnlyPrecisionDiagnosesWithAContractJoin) {
  const Contract base{};
  // Not a precision cause; a precision cause whose widening does not pass the whole case (no contract given);
  // a K against the derived default (angles=f32): none joins.
  EXPECT_FALSE(join_precision({"diagnosis: angle negated (residual 0.4 u)",
                               "diagnosis: cos/sin at bf16 precision (the worst at 3x it); would pass with --contract "
                               "cos-sin=bf16"},
                              base));
  EXPECT_FALSE(join_precision({"diagnosis: cos/sin at bf16 precision (the worst at 3x it; the case still fails under "
                               "it)"},
                              base));
  EXPECT_FALSE(join_precision({"diagnosis: f32 angle drift (the worst at 3x it); would pass with --contract "
                               "angles=f32:5",
                               "diagnosis: mixed precision (the worst at 2x it); would pass with --contract "
                               "angles=f32,cos-sin=f16"},
                              base));
}
