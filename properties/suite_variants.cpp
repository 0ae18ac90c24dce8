// Properties of the ABI v2 variants (include/ropecheck/kernel_abi.h), in the changed form in which the
// RoPE properties still hold:
//
//  - attention factor: ||out pair|| = s ||in pair|| (the exact output is s R x);
//  - relative invariance per axis: shifting one position axis by t for q and k leaves every pair's
//    <q_i, k_i> unchanged, and a pair on another axis does not move when only that axis moves;
//  - linear rule = plain RoPE at scaled positions: rule linear(f) equals no rule with position_scale 1/f;
//  - NTK rule = plain RoPE with the scaled base: rule ntk(alpha) equals no rule with base' = base alpha^(R/(R-2));
//  - offset slice: elements outside [o, o+R) keep the input (the identity clause), and the slice equals the same kernel's output on
//    the sub-head (head_dim = R, offset 0);
//  - variant accuracy: one v2 shape under every frequency rule, each within its allowance of the exact
//    reference (the rule tables are judged here: the metamorphic properties above cannot see a wrong YaRN
//    or llama3 table);
//  - ABI v3: inverse(forward(x)) = s^2 x, and <forward(x), y> = <x, inverse(y)> (the inverse is the
//    forward's transpose).
//
// A kernel that declines a v2 case (RC_UNSUPPORTED) discards the execution: v1 kernels are not failed.
//
// Tolerances, as in suite_geometry.cpp: E(x_i) = B u max(||y*_i||, min_normal) bounds a pair's error against
// its exact output y*_i (= s R x_i; the judge's allowance), plus the angle model's deviation
// dev_i(p) ||y*_i|| (0 for exact angles). Two calls of one kernel that must give the same exact pair may
// differ by E_1 + E_2; where the two exact pairs differ (the double table of one side rounds differently
// from the rule of the other), by that too: ||R_a x - R_b x|| <= |a - b| ||x||.
#include <algorithm>
#include <cmath>
#include <functional>
#include <optional>
#include <string>

#include "properties/failure.hpp"
#include "properties/generators.hpp"
#include "properties/suite.hpp"

namespace ropecheck::props {

namespace {


// The angle model's deviation for pair i of token t (0 for exact angles, without evaluating anything).
double deviation(const KernelHandle& k, const RopeCase& c, uint32_t i, size_t t) {
  if (k.angle_model() == AngleModel::exact) return 0.0;
  return model_deviation(k.angle_model(), c, i, c.pair_position(t, i));
}


// rotary_dim > 2 (ntk's exponent R/(R-2)), head_dim grown to hold it; the input redrawn.
void at_least_four(RopeCase& c, gen::Values v) {
  if (c.rotary_dim > 2) return;
  c.rotary_dim = 4;
  if (!c.pair_axis.empty()) c.pair_axis.assign(2, c.pair_axis[0]);
  if (!c.inv_freq.empty()) c.inv_freq.resize(2, c.inv_freq[0]);
  c.head_dim = std::max(c.head_dim, c.rotary_offset + 4);
  c.input = *gen::elements(c.dtype, v, c.n_elements());
}


// The forward case of the inverse properties: the attention factor, which the backward keeps; offsets, axes and
// rules are the v2 properties' (and a backward kernel need not take them: ggml's rope_back takes none).
RopeCase inverse_case(Dtype d, Layout l, const Scope& scope) {
  gen::V2Shape v;
  v.rules = false;
  v.offset = false;
  v.max_axes = 1;
  gen::CaseShape sh = scoped(scope);
  sh.max_elements = 2048;
  return *gen::v2_case(d, l, gen::Values::safe, v, sh);
}

}  // namespace

// Two calls whose exact pairs differ by at most dphi(t, i) radians (times ||y*||): every rotated pair within
// E_a + E_b + dphi ||y*||, every other element the same output (same_output: the identity clause).
void expect_same_rotation(const KernelHandle& ker, const RopeCase& ca, const Bytes& oa, const RopeCase& cb,
                          const Bytes& ob, const char* what, const std::function<double(size_t, uint32_t)>& dphi,
                          const std::string& context) {
  const double Ba = ker.bound(ca), Bb = ker.bound(cb);
  const double s = ca.attention_factor;
  for (size_t t = 0; t < ca.n_tokens(); ++t)
    for (size_t h = 0; h < ca.n_heads; ++h) {
      for (uint32_t i = 0; i < ca.n_pairs_per_head(); ++i) {
        const PairView p = pair_at(ca, t, h, i);
        const double ny = s * pair_norm(value(ca, ca.input.data(), p.k0), value(ca, ca.input.data(), p.k1));
        const double a0 = value(ca, oa.data(), p.k0), a1 = value(ca, oa.data(), p.k1);
        const double b0 = value(cb, ob.data(), p.k0), b1 = value(cb, ob.data(), p.k1);
        const double dist = pair_norm(a0 - b0, a1 - b1);
        const double ea = pair_error_allowance(ca, Ba, ny) + deviation(ker, ca, i, t) * ny;
        const double eb = pair_error_allowance(cb, Bb, ny) + deviation(ker, cb, i, t) * ny;
        const double d = std::min(dphi(t, i), 2.0) * ny;
        const double tol = (ea + eb + d) * (1 + 0x1p-40) + (pair_norm(a0, a1) + pair_norm(b0, b1)) * 0x1p-50;
        if (!(dist <= tol)) {
          RC_FAIL(FailureText(std::string(what) + ": pair " + std::to_string(i) + " of token " + std::to_string(t) +
                              " (position " + std::to_string(ca.pair_position(t, i)) + ", axis " +
                              std::to_string(ca.axis_of(i)) + "), head " + std::to_string(h))
                      .distance("||a - b||", dist, tol)
                      .because("E_a + E_b + |dphi| ||y*|| = " + number_text(ea) + " + " + number_text(eb) + " + " +
                               number_text(d) + " (bounds " + number_text(Ba) + ", " + number_text(Bb) + " u)")
                      .line(context)
                      .in(ca, "case a")
                      .in(cb, "case b")
                      .elements("input", ca, ca.input.data(), {p.k0, p.k1})
                      .elements("a", ca, oa.data(), {p.k0, p.k1})
                      .elements("b", cb, ob.data(), {p.k0, p.k1})
                      .str());
        }
      }
      const bool identity_bits = ker.criteria(ca).identity_bits;
      for (uint32_t k = 0; k < ca.head_dim; ++k) {
        if (is_rotated(ca, k)) continue;
        const size_t e = head_offset(ca, t, h) + k;
        if (!same_output(ca.dtype, load_bits(ca.dtype, oa.data(), e), load_bits(ca.dtype, ob.data(), e), identity_bits))
          RC_FAIL(FailureText(std::string(what) + ": pass-through element differs at " + element_where(ca, e))
                      .in(ca, "case a")
                      .elements("a", ca, oa.data(), {e})
                      .elements("b", cb, ob.data(), {e})
                      .str());
      }
    }
}


Property property_AttentionFactorScalesNorms(KernelHandle& ker, Dtype d, Layout l, const Scope& scope) {
  return [&ker, d, l, scope] {
    gen::CaseShape sh = scoped(scope);
    sh.max_elements = 2048;
    const RopeCase c = *gen::v2_case(d, l, gen::Values::safe, {}, sh);
    const Bytes out = run_or_discard(ker, c);
    const double bound = ker.bound(c), s = c.attention_factor;
    for (size_t t = 0; t < c.n_tokens(); ++t)
      for (size_t h = 0; h < c.n_heads; ++h)
        for (uint32_t i = 0; i < c.n_pairs_per_head(); ++i) {
          const PairView p = pair_at(c, t, h, i);
          const double nx = pair_norm(value(c, c.input.data(), p.k0), value(c, c.input.data(), p.k1));
          const double ny = pair_norm(value(c, out.data(), p.k0), value(c, out.data(), p.k1));
          // | ||y|| - ||s R x|| | <= ||y - s R x|| <= E(s ||x||); s*nx and each norm round by <= 2^-52 each.
          const double e = pair_error_allowance(c, bound, s * nx);
          const double tol = e + (s * nx + ny) * 0x1p-50;
          if (!(std::fabs(ny - s * nx) <= tol)) {
            RC_FAIL(FailureText("attention factor")
                        .sides("||out pair " + std::to_string(i) + "||", ny, "s ||x||", s * nx, tol)
                        .because("B u max(s||x||, min_normal) + norm rounding, B = " + number_text(bound) + " u")
                        .in(c)
                        .line("s = " + number_text(s) + ", ||x|| = " + number_text(nx) + ", ratio ||out|| / ||x|| = " +
                              number_text(nx > 0 ? ny / nx : 0.0))
                        .line("token " + std::to_string(t) + " (position " + std::to_string(c.pair_position(t, i)) +
                              "), head " + std::to_string(h))
                        .elements("x", c, c.input.data(), {p.k0, p.k1})
                        .elements("out", c, out.data(), {p.k0, p.k1})
                        .str());
          }
        }
  };
}

// ABI v3: the inverse undoes the forward rotation up to the attention factor, which both keep:
// I(F(x)) = s^2 x per pair. With F* and I* the exact maps (I* = s R(-phi), ||I*|| = s) and y = F(x) as stored,
// ||I(y) - s^2 x|| <= ||I(y) - I*(y)|| + ||I*(y - F*(x))|| <= E_I(s ||y||) + s E_F(s ||x||): each call within
// its own allowance (pair_error_allowance), plus the rounding of the double norms.
Property property_InverseUndoesForward(KernelHandle& ker, Dtype d, Layout l, const Scope& scope) {
  return [&ker, d, l, scope] {
    const RopeCase c = inverse_case(d, l, scope);
    const Bytes y = run_or_discard(ker, c);
    RopeCase ci = c;
    ci.direction = Direction::inverse;
    ci.input = y;
    for (size_t k = 0; k < ci.n_elements(); ++k)
      if (!std::isfinite(load_f32(d, y.data(), k))) RC_DISCARD("the forward output is not finite");
    const Bytes z = run_or_discard(ker, ci);
    const double bf = ker.bound(c), bi = ker.bound(ci), s = c.attention_factor;
    for (size_t t = 0; t < c.n_tokens(); ++t)
      for (size_t h = 0; h < c.n_heads; ++h)
        for (uint32_t i = 0; i < c.n_pairs_per_head(); ++i) {
          const PairView p = pair_at(c, t, h, i);
          const double x0 = value(c, c.input.data(), p.k0), x1 = value(c, c.input.data(), p.k1);
          const double nx = pair_norm(x0, x1);
          const double ny = pair_norm(value(c, y.data(), p.k0), value(c, y.data(), p.k1));
          const double z0 = value(c, z.data(), p.k0), z1 = value(c, z.data(), p.k1);
          const double err = pair_norm(z0 - s * s * x0, z1 - s * s * x1);
          const double tol = pair_error_allowance(ci, bi, s * ny) + s * pair_error_allowance(c, bf, s * nx) +
                             (s * s * nx + pair_norm(z0, z1)) * 0x1p-50;
          if (!(err <= tol)) {
            RC_FAIL(FailureText("inverse: pair " + std::to_string(i) + " not restored")
                        .distance("||inverse(forward(x)) - s^2 x||", err, tol)
                        .because("E_I(s ||y||) + s E_F(s ||x||) + norm rounding (s = " + number_text(s) +
                                 "; forward B = " + number_text(bf) + " u, inverse B = " + number_text(bi) + " u)")
                        .in(c)
                        .line("token " + std::to_string(t) + " (position " + std::to_string(c.pair_position(t, i)) +
                              "), head " + std::to_string(h))
                        .elements("x", c, c.input.data(), {p.k0, p.k1})
                        .elements("forward", c, y.data(), {p.k0, p.k1})
                        .elements("inverse", c, z.data(), {p.k0, p.k1})
                        .str());
          }
        }
  };
}

// ABI v3: the inverse is the forward's transpose, the equation a backward pass rests on (the gradient of
// y = F(x) is F^T(dy)): <F(x), y> = <x, I(y)> per pair, x and y drawn independently for the same positions. The
// exact maps have it exactly (F* = s R(phi), I* = s R(-phi) = F*^T), so
// |<F(x), y> - <x, I(y)>| <= ||F(x) - F*(x)|| ||y|| + ||x|| ||I(y) - I*(y)|| <= E_F(s ||x||) ||y|| + ||x|| E_I(s ||y||),
// each call within its own allowance, plus the rounding of the double dot products. Unlike inverse(forward(x)),
// the inverse sees inputs that are no forward's output, and an inverse that is the forward's inverse but not its
// transpose (1/s R(-phi): the attention factor divided out) fails it.
Property property_InverseIsForwardTransposed(KernelHandle& ker, Dtype d, Layout l, const Scope& scope) {
  return [&ker, d, l, scope] {
    const RopeCase c = inverse_case(d, l, scope);
    RopeCase ci = c;
    ci.direction = Direction::inverse;
    ci.input = *gen::elements(d, gen::Values::safe, c.n_elements());
    const Bytes fx = run_or_discard(ker, c);
    const Bytes iy = run_or_discard(ker, ci);
    const double bf = ker.bound(c), bi = ker.bound(ci), s = c.attention_factor;
    for (size_t t = 0; t < c.n_tokens(); ++t)
      for (size_t h = 0; h < c.n_heads; ++h)
        for (uint32_t i = 0; i < c.n_pairs_per_head(); ++i) {
          const PairView p = pair_at(c, t, h, i);
          const double x0 = value(c, c.input.data(), p.k0), x1 = value(c, c.input.data(), p.k1);
          const double y0 = value(ci, ci.input.data(), p.k0), y1 = value(ci, ci.input.data(), p.k1);
          const double f0 = value(c, fx.data(), p.k0), f1 = value(c, fx.data(), p.k1);
          const double g0 = value(ci, iy.data(), p.k0), g1 = value(ci, iy.data(), p.k1);
          const double nx = pair_norm(x0, x1), ny = pair_norm(y0, y1);
          const double lhs = f0 * y0 + f1 * y1, rhs = x0 * g0 + x1 * g1;
          const double tol = pair_error_allowance(c, bf, s * nx) * ny + nx * pair_error_allowance(ci, bi, s * ny) +
                             (pair_norm(f0, f1) * ny + nx * pair_norm(g0, g1)) * 0x1p-50;
          if (!(std::fabs(lhs - rhs) <= tol)) {
            RC_FAIL(FailureText("adjoint: pair " + std::to_string(i) + " is not transposed")
                        .sides("<forward(x), y>", lhs, "<x, inverse(y)>", rhs, tol)
                        .because("E_F(s||x||) ||y|| + ||x|| E_I(s||y||) + rounding (s = " + number_text(s) +
                                 "; forward B = " + number_text(bf) + " u, inverse B = " + number_text(bi) + " u)")
                        .in(c)
                        .line("token " + std::to_string(t) + " (position " + std::to_string(c.pair_position(t, i)) +
                              "), head " + std::to_string(h))
                        .elements("x", c, c.input.data(), {p.k0, p.k1})
                        .elements("forward(x)", c, fx.data(), {p.k0, p.k1})
                        .elements("y", ci, ci.input.data(), {p.k0, p.k1})
                        .elements("inverse(y)", ci, iy.data(), {p.k0, p.k1})
                        .str());
          }
        }
  };
}

// Tokens q, k, q', k': q' and k' are q and k with axis `a` moved by t. Per pair <q_i, k_i> = <q'_i, k'_i>
// (relative invariance on axis a, nothing moved on the others), and a pair not on axis a has q'_i = q_i
// (the position of another axis must not reach it: a wrong pair -> axis map fails here).
Property property_RelativeInvariancePerAxis(KernelHandle& ker, Dtype d, Layout l, const Scope& scope) {
  return [&ker, d, l, scope] {
    gen::V2Shape v;
    v.min_axes = 2;
    v.attention = false;
    gen::CaseShape sh;
    sh.max_tokens = 1;
    sh.max_heads = 4;
    const int64_t half = std::max<int64_t>(1, std::min(int64_t(1) << 30, scope.max_position / 2));
    sh.max_position = half;
    RopeCase c = *gen::v2_case(d, l, gen::Values::safe, v, sh);
    const uint32_t axes = c.n_pos_axes;
    const uint32_t a = uint32_t(*gen::uniform_int(0, axes));
    const int64_t shift = *gen::position(half) * (*gen::uniform_int(0, 2) ? 1 : -1);
    // Positions per axis for q and k (axis 0 as drawn for q, a second draw for k).
    std::vector<int64_t> q(axes), k(axes);
    for (uint32_t ax = 0; ax < axes; ++ax) {
      q[ax] = c.positions[ax];
      k[ax] = ax == 0 ? *gen::position(half) : *gen::position(std::min<int64_t>(half, 1 << 12)) - (q[ax] < 0 ? 1 << 11 : 0);
    }
    c.positions.assign(size_t(4) * axes, 0);
    for (uint32_t ax = 0; ax < axes; ++ax) {
      c.positions[ax * 4 + 0] = q[ax];
      c.positions[ax * 4 + 1] = k[ax];
      c.positions[ax * 4 + 2] = q[ax] + (ax == a ? shift : 0);
      c.positions[ax * 4 + 3] = k[ax] + (ax == a ? shift : 0);
    }
    const size_t per_token = size_t(c.n_heads) * c.head_dim;
    const Bytes xq(c.input.begin(), c.input.begin() + per_token * dtype_size(d));
    const Bytes xk = *gen::elements(d, gen::Values::safe, per_token);
    c.input.clear();
    for (int r = 0; r < 2; ++r) {
      c.input.insert(c.input.end(), xq.begin(), xq.end());
      c.input.insert(c.input.end(), xk.begin(), xk.end());
    }
    const Bytes out = run_or_discard(ker, c);
    const double bound = ker.bound(c);
    const uint32_t np = c.n_pairs_per_head();
    for (size_t h = 0; h < c.n_heads; ++h) {
      for (uint32_t i = 0; i < np; ++i) {
        const PairView pq = pair_at(c, 0, h, i), pk = pair_at(c, 1, h, i);
        const double nq = pair_norm(value(c, c.input.data(), pq.k0), value(c, c.input.data(), pq.k1));
        const double nk = pair_norm(value(c, c.input.data(), pk.k0), value(c, c.input.data(), pk.k1));
        double ip[2], absi = 0, toli = 0, eq[2];
        for (int side = 0; side < 2; ++side) {
          const PairView x = pair_at(c, 2 * side, h, i), y = pair_at(c, 2 * side + 1, h, i);
          const double x0 = value(c, out.data(), x.k0), x1 = value(c, out.data(), x.k1);
          const double y0 = value(c, out.data(), y.k0), y1 = value(c, out.data(), y.k1);
          ip[side] = x0 * y0 + x1 * y1;
          absi += std::fabs(x0 * y0) + std::fabs(x1 * y1);
          eq[side] = pair_error_allowance(c, bound, nq) + deviation(ker, c, i, 2 * side) * nq;
          const double ek = pair_error_allowance(c, bound, nk) + deviation(ker, c, i, 2 * side + 1) * nk;
          toli += eq[side] * nk + nq * ek + eq[side] * ek;
        }
        const double tol_i = toli + sum_slack(2, absi);
        auto context = [&](FailureText& f) -> FailureText& {  // the failure's context (formatted only for a failure)
          std::string pos, axis;
          for (int64_t m : c.positions) pos += ' ' + std::to_string(m);
          for (uint8_t x : c.pair_axis) axis += ' ' + std::to_string(int(x));
          return f.in(c)
              .line("axis " + std::to_string(a) + " of " + std::to_string(axes) + " moved by t = " +
                    std::to_string(shift) + "; pair " + std::to_string(i) + " is on axis " +
                    std::to_string(c.axis_of(i)))
              .line("positions (axis-major, tokens q k q' k'):" + pos)
              .line("pair_axis:" + axis);
        };
        if (!(std::fabs(ip[0] - ip[1]) <= tol_i)) {
          FailureText f("relative invariance per axis broken for pair " + std::to_string(i) + " of head " +
                        std::to_string(h));
          f.sides("<q_i, k_i>", ip[0], "<q'_i, k'_i>", ip[1], tol_i)
              .because("both sides' E_q ||k|| + ||q|| E_k + E_q E_k + sum rounding (B = " + number_text(bound) + " u)");
          RC_FAIL(context(f).str());
        }
        if (c.axis_of(i) != a) {
          const PairView q1 = pair_at(c, 2, h, i);
          const double dist = pair_norm(value(c, out.data(), q1.k0) - value(c, out.data(), pq.k0),
                                        value(c, out.data(), q1.k1) - value(c, out.data(), pq.k1));
          const double tol = (eq[0] + eq[1]) * (1 + 0x1p-40) + nq * 0x1p-48;
          if (!(dist <= tol)) {
            FailureText f("pair " + std::to_string(i) + " (axis " + std::to_string(c.axis_of(i)) + ") of head " +
                          std::to_string(h) + " moved when only axis " + std::to_string(a) + " moved");
            f.distance("||q'_i - q_i||", dist, tol).because("E_q + E_q' (B = " + number_text(bound) + " u)");
            RC_FAIL(context(f)
                        .elements("q_i", c, out.data(), {pq.k0, pq.k1})
                        .elements("q'_i", c, out.data(), {q1.k0, q1.k1})
                        .str());
          }
        }
      }
    }
  };
}

Property property_LinearRuleEqualsScaledPositions(KernelHandle& ker, Dtype d, Layout l, const Scope& scope) {
  return [&ker, d, l, scope] {
    gen::V2Shape v;
    v.rules = false;
    gen::CaseShape sh = scoped(scope);
    sh.frequencies = false;
    sh.max_elements = 2048;
    RopeCase ruled = *gen::v2_case(d, l, gen::Values::safe, v, sh);
    const FrequencyRule rule = (*gen::frequency_rule(FrequencyRuleType::linear, ruled.rotary_dim)).first;
    ruled.freq_rule = rule;
    RopeCase plain = ruled;
    plain.freq_rule.reset();
    const double f = *rule.factor;
    plain.position_scale = 1.0 / f;
    const Bytes a = run_or_discard(ker, ruled);
    const Bytes b = run_or_discard(ker, plain);
    // Exact angles m theta_i / f and m fl(1/f) theta_i: |fl(1/f) - 1/f| <= 2^-53 / f.
    const double R = ruled.rotary_dim;
    auto dphi = [&](size_t t, uint32_t i) {
      return std::fabs(double(ruled.pair_position(t, i))) * std::pow(ruled.base, -2.0 * i / R) / f * 0x1p-52;
    };
    expect_same_rotation(ker, ruled, a, plain, b, "linear rule != plain RoPE at positions / factor", dphi,
                         "factor f = " + hexfloat(f) + ", position_scale 1/f = " + hexfloat(plain.position_scale));
  };
}

Property property_NtkRuleEqualsScaledBase(KernelHandle& ker, Dtype d, Layout l, const Scope& scope) {
  return [&ker, d, l, scope] {
    gen::V2Shape v;
    v.rules = false;
    gen::CaseShape sh = scoped(scope);
    sh.frequencies = false;
    sh.max_elements = 2048;
    RopeCase ruled = *gen::v2_case(d, l, gen::Values::safe, v, sh);
    at_least_four(ruled, gen::Values::safe);
    const FrequencyRule rule = (*gen::frequency_rule(FrequencyRuleType::ntk, ruled.rotary_dim)).first;
    ruled.freq_rule = rule;
    const double alpha = *rule.factor;
    const long double R = ruled.rotary_dim;
    const double scaled = double((long double)ruled.base * powl((long double)alpha, R / (R - 2)));
    if (!std::isfinite(scaled)) RC_DISCARD("base' overflows");
    RopeCase plain = ruled;
    plain.freq_rule.reset();
    plain.base = scaled;
    const Bytes a = run_or_discard(ker, ruled);
    const Bytes b = run_or_discard(ker, plain);
    // base'' = base' (1 + delta), |delta| <= 2^-53 + the long double evaluation's few 2^-64: theta_i moves by
    // a relative (2i/R) |delta| (+ second order), so the exact angles differ by <= |m| theta_i (2i/R) 2^-51.
    auto dphi = [&](size_t t, uint32_t i) {
      const double e = 2.0 * i / double(R);
      return std::fabs(double(ruled.pair_position(t, i))) * std::pow(scaled, -e) * e * 0x1p-51;
    };
    expect_same_rotation(ker, ruled, a, plain, b, "ntk rule != plain RoPE with base' = base alpha^(R/(R-2))", dphi,
                         "alpha = " + hexfloat(alpha) + ", base' = " + hexfloat(scaled));
  };
}

// The slice [o, o+R) of each head against the same kernel on the sub-head case (head_dim = R, offset 0, the
// slice as input): both are held to the same exact pairs (same positions, table, attention factor), so they
// differ by at most E_a + E_b -- not bit for bit: the ABI promises the exact result, not one rounding, and a
// kernel may round differently at another alignment (vector bodies and tails). Elements outside the slice keep
// the input under the identity clause (arbitrary bit patterns: NaN payloads, subnormals; bit for bit under
// identity=bits).
Property property_OffsetSliceEqualsSubHead(KernelHandle& ker, Dtype d, Layout l, const Scope& scope) {
  return [&ker, d, l, scope] {
    gen::V2Shape v;
    v.offset = false;
    gen::CaseShape sh = scoped(scope);
    sh.max_elements = 2048;
    RopeCase c = *gen::v2_case(d, l, gen::Values::safe, v, sh);
    c.rotary_offset = uint32_t(*gen::uniform_int(1, 18));
    c.head_dim = c.rotary_offset + c.rotary_dim + uint32_t(*gen::uniform_int(0, 9));
    c.input = *gen::elements(d, gen::Values::safe, c.n_elements());
    const uint32_t all = d == Dtype::f32 ? 0 : 1u << 16;
    for (size_t t = 0; t < c.n_tokens(); ++t)
      for (size_t h = 0; h < c.n_heads; ++h)
        for (uint32_t k = 0; k < c.head_dim; ++k)
          if (!is_rotated(c, k))
            store_bits(d, c.input.data(), head_offset(c, t, h) + k,
                       all ? uint32_t(*gen::uniform_int(0, all)) : uint32_t(*gen::uniform_int(0, int64_t(1) << 32)));
    RopeCase sub = c;
    sub.rotary_offset = 0;
    sub.head_dim = c.rotary_dim;
    sub.input.assign(sub.n_bytes(), 0);
    const size_t es = dtype_size(d);
    for (size_t t = 0; t < c.n_tokens(); ++t)
      for (size_t h = 0; h < c.n_heads; ++h)
        std::copy_n(c.input.begin() + (head_offset(c, t, h) + c.rotary_offset) * es, c.rotary_dim * es,
                    sub.input.begin() + head_offset(sub, t, h) * es);
    const Bytes out = run_or_discard(ker, c);
    const Bytes os = run_or_discard(ker, sub);
    const double Bc = ker.bound(c), Bs = ker.bound(sub), s = c.attention_factor;
    const Criteria cr = ker.criteria(c);
    for (size_t t = 0; t < c.n_tokens(); ++t)
      for (size_t h = 0; h < c.n_heads; ++h) {
        for (uint32_t k = 0; k < c.head_dim; ++k) {
          if (is_rotated(c, k)) continue;
          const size_t e = head_offset(c, t, h) + k;
          if (!keeps_input(cr, d, load_bits(d, c.input.data(), e), load_bits(d, out.data(), e)))
            RC_FAIL(FailureText("offset slice: an element outside [o, o+R) changed at " + element_where(c, e) +
                                (cr.identity_bits ? " (identity=bits: its bits kept)" : " (identity=values: its value kept)"))
                        .in(c)
                        .elements("input", c, c.input.data(), {e})
                        .elements("got", c, out.data(), {e})
                        .str());
        }
        for (uint32_t i = 0; i < c.n_pairs_per_head(); ++i) {
          const PairView p = pair_at(c, t, h, i), q = pair_at(sub, t, h, i);
          const double ny = s * pair_norm(value(c, c.input.data(), p.k0), value(c, c.input.data(), p.k1));
          const double a0 = value(c, out.data(), p.k0), a1 = value(c, out.data(), p.k1);
          const double b0 = value(sub, os.data(), q.k0), b1 = value(sub, os.data(), q.k1);
          const double dist = pair_norm(a0 - b0, a1 - b1);
          const double tol = (pair_error_allowance(c, Bc, ny) + pair_error_allowance(sub, Bs, ny)) * (1 + 0x1p-40) +
                             (pair_norm(a0, a1) + pair_norm(b0, b1)) * 0x1p-50;
          if (!(dist <= tol)) {
            RC_FAIL(FailureText("offset slice != sub-head: pair " + std::to_string(i) + " of token " + std::to_string(t) +
                                ", head " + std::to_string(h))
                        .distance("||slice - sub-head||", dist, tol)
                        .because("E_a + E_b (bounds " + number_text(Bc) + ", " + number_text(Bs) + " u)")
                        .in(c)
                        .in(sub, "sub-head case")
                        .elements("input", c, c.input.data(), {p.k0, p.k1})
                        .elements("slice", c, out.data(), {p.k0, p.k1})
                        .elements("sub-head", sub, os.data(), {q.k0, q.k1})
                        .str());
          }
        }
      }
  };
}

// One v2 shape and input under every rule kind (none, linear, ntk, dynamic, yarn, llama3, longrope), each
// judged against the exact reference: a wrong in-kernel table shows in every execution that draws a rule
// region the bug touches.
Property property_VariantsWithinBoundOfReference(KernelHandle& ker, Dtype d, Layout l, const Scope& scope) {
  return [&ker, d, l, scope] {
    gen::V2Shape v;
    v.rules = false;
    gen::CaseShape sh = scoped(scope);
    sh.max_rotary = 128;
    sh.max_head = 160;
    sh.max_heads = 2;
    sh.max_tokens = 3;
    sh.max_elements = 1024;
    // Every finite value, up to max_finite: with an attention factor s > 1 an f32 product can overflow where
    // the exact output is finite (the built-ins recompute such pairs), and at an angle of 0 the output s x can be
    // an exact tie of the storage type (the reference rounds it to even) -- both were findings of this property.
    RopeCase c = *gen::v2_case(d, l, gen::Values::finite, v, sh);
    at_least_four(c, gen::Values::finite);
    bool any = false;
    for (const auto& kind : gen::kV2RuleKinds) {
      RopeCase ck = c;
      if (kind) {
        auto [rule, seq] = *gen::frequency_rule(*kind, c.rotary_dim);
        ck.freq_rule = rule;
        ck.rule_seq_len = seq;
        ck.inv_freq.clear();
        ck.position_scale = 1.0;
      }
      const std::optional<Bytes> got = run_if_accepted(ker, ck, {});
      if (!got) continue;  // this rule declined: the others are still judged
      any = true;
      const Bytes& out = *got;
      const Judgement j = judge_with(ker, ck, out);
      if (!j.ok())
        RC_FAIL(FailureText("variant accuracy (rule " + std::string(kind ? to_string(*kind) : "none") + ") of " +
                            ker.name() + " under the " + std::string(to_string(ker.angle_model())) + " angle model")
                    .note(": " + j.report())
                    .str());
    }
    if (!any) RC_DISCARD("the kernel declines this configuration under every rule");
  };
}

}  // namespace ropecheck::props
