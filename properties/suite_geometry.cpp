// Geometric properties: a RoPE kernel applies a rotation per pair.
//
//  - orthogonality: the matrix M of the kernel at position m (columns: the
//    kernel applied to scaled basis vectors) has M^T M ~ I; and
//    <R_m x, R_m y> ~ <x, y>;
//  - norm preservation: ||R_m x|| ~ ||x||, per pair and per head;
//  - relative invariance: <R_m q, R_n k> ~ <R_{m+t} q, R_{n+t} k>, t <= 2^30;
//  - composition: R_a(R_b x) ~ R_{a+b} x.
//
// Every tolerance is derived from the kernel's bound B (tests/properties/property_support.hpp):
// with E(x_i) = B u max(||x_i||, min_normal) the allowed error of pair x_i,
// and the exact rotation preserving norms,
//   |<y_x, y_y> - <R x, R y>| <= sum_i E(x_i) ||y_i|| + ||x_i|| E(y_i) + E(x_i) E(y_i)
// (expand <Rx + e, Ry + f> with ||e_i|| <= E(x_i), ||f_i|| <= E(y_i)), plus
// the rounding of the double sums that evaluate it.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "properties/failure.hpp"
#include "properties/generators.hpp"
#include "properties/suite.hpp"

namespace ropecheck::props {

namespace {


}  // namespace

Property property_OrthogonalityBasisMatrix(KernelHandle& ker, Dtype d, Layout l, const Scope& scope) {
  return [&ker, d, l, scope] {
    gen::CaseShape s;
    s.max_rotary = 256;
    s.max_head = 272;
    s.max_heads = 1;
    s.max_tokens = 1;
    RopeCase c = *gen::case_shape(d, l, scoped(scope, s));
    const Format f = format_of(d);
    // Basis vectors scaled by 2^k, from the smallest normal to max_finite/4.
    const int k = int(*rc::gen::weightedOneOf<int64_t>(
        {{3, rc::gen::just<int64_t>(0)}, {1, gen::uniform_int(f.emin, f.emax - 1)}}));
    const double scale = std::ldexp(1.0, k);
    const int64_t m = c.positions[0];
    const uint32_t n = c.head_dim;
    c.n_heads = 1;
    c.positions.assign(n, m);  // token j holds scale * e_j
    c.input.assign(c.n_bytes(), 0);
    for (uint32_t j = 0; j < n; ++j) store_f32(d, c.input.data(), size_t(j) * n + j, float(scale));
    const Bytes out = run_or_discard(ker, c);
    const double bound = ker.bound(c);
    const double eps = pair_error_allowance(c, bound, scale) / scale;  // error of a column, relative
    // M[r][j] = out[j][r] / scale (exact: a power of two), kept by column: col(j)[r] = M[r][j].
    std::vector<double> M(size_t(n) * n);
    for (uint32_t j = 0; j < n; ++j)
      for (uint32_t r = 0; r < n; ++r) M[size_t(j) * n + r] = value(c, out.data(), size_t(j) * n + r) / scale;
    auto col = [&](uint32_t j) { return M.data() + size_t(j) * n; };
    // A column's nonzero rows, and whether it is all finite. (M^T M)_jq sums M[r][j] M[r][q] over r in order;
    // with both columns finite a term with a zero factor is +-0 and leaves the sum as it is (it starts at +0
    // and is never -0), so only rows where both are nonzero are added, in the same order: the same sum.
    std::vector<std::vector<uint32_t>> nonzero(n);
    std::vector<char> finite(n, 1);
    for (uint32_t j = 0; j < n; ++j)
      for (uint32_t r = 0; r < n; ++r) {
        if (col(j)[r] != 0) nonzero[j].push_back(r);
        if (!std::isfinite(col(j)[r])) finite[j] = 0;
      }
    for (uint32_t j = 0; j < n; ++j) {
      const double ej = is_rotated(c, j) ? eps : 0.0;  // pass-through columns are exact
      for (uint32_t q = j; q < n; ++q) {
        const double eq = is_rotated(c, q) ? eps : 0.0;
        double dot = 0, abs_sum = 0;
        const double *a = col(j), *b = col(q);
        if (finite[j] && finite[q]) {
          for (uint32_t r : nonzero[j].size() <= nonzero[q].size() ? nonzero[j] : nonzero[q])
            if (a[r] != 0 && b[r] != 0) {
              const double t = a[r] * b[r];
              dot += t;
              abs_sum += std::fabs(t);
            }
        } else {
          for (uint32_t r = 0; r < n; ++r) {
            const double t = a[r] * b[r];
            dot += t;
            abs_sum += std::fabs(t);
          }
        }
        const double expected = j == q ? 1.0 : 0.0;
        // (M^T M)_jq = <R e_j + f_j, R e_q + f_q>, ||f|| <= eps, R orthogonal.
        const double tol = ej + eq + ej * eq + sum_slack(n, abs_sum);
        if (!(std::fabs(dot - expected) <= tol)) {
          auto column = [&](uint32_t col) {  // the first 64 elements of the kernel's output for s e_col
            std::vector<size_t> ks;
            for (uint32_t r = 0; r < n && r < 64; ++r) ks.push_back(size_t(col) * n + r);
            return ks;
          };
          RC_FAIL(FailureText("orthogonality")
                      .sides("(M^T M)[" + std::to_string(j) + "][" + std::to_string(q) + "]", dot,
                             "I[" + std::to_string(j) + "][" + std::to_string(q) + "]", expected, tol)
                      .because("eps_j + eps_q + eps_j eps_q + sum rounding, eps = B u max(s, min_normal)/s = " +
                               number_text(eps) + " (B = " + number_text(bound) + " u)")
                      .in(c)
                      .line("position " + std::to_string(m) + ", basis scale s = 2^" + std::to_string(k))
                      .elements("column " + std::to_string(j), c, out.data(), column(j))
                      .elements("column " + std::to_string(q), c, out.data(), column(q))
                      .str());
        }
      }
    }
  };
}

Property property_InnerProductsPreserved(KernelHandle& ker, Dtype d, Layout l, const Scope& scope) {
  return [&ker, d, l, scope] {
    RopeCase c = *gen::case_shape(d, l, scoped(scope));
    // Tokens come in pairs (x, y) at the same position.
    std::vector<int64_t> pos;
    for (int64_t m : c.positions) pos.insert(pos.end(), {m, m});
    c.positions = pos;
    c.input = *gen::elements(d, gen::Values::safe, c.n_elements());
    const Bytes out = run_or_discard(ker, c);
    const double bound = ker.bound(c);
    for (size_t t = 0; t + 1 < c.n_tokens(); t += 2) {
      for (size_t h = 0; h < c.n_heads; ++h) {
        double ip_in = 0, ip_out = 0, abs_in = 0, abs_out = 0, tol = 0;
        for (uint32_t k = 0; k < c.head_dim; ++k) {
          if (is_rotated(c, k)) continue;  // pass-through: exact on both sides
          const double a = value(c, c.input.data(), head_offset(c, t, h) + k) *
                           value(c, c.input.data(), head_offset(c, t + 1, h) + k);
          const double b = value(c, out.data(), head_offset(c, t, h) + k) *
                           value(c, out.data(), head_offset(c, t + 1, h) + k);
          ip_in += a, ip_out += b, abs_in += std::fabs(a), abs_out += std::fabs(b);
        }
        for (uint32_t i = 0; i < c.n_pairs_per_head(); ++i) {
          const PairView px = pair_at(c, t, h, i), py = pair_at(c, t + 1, h, i);
          const double x0 = value(c, c.input.data(), px.k0), x1 = value(c, c.input.data(), px.k1);
          const double y0 = value(c, c.input.data(), py.k0), y1 = value(c, c.input.data(), py.k1);
          const double u0 = value(c, out.data(), px.k0), u1 = value(c, out.data(), px.k1);
          const double v0 = value(c, out.data(), py.k0), v1 = value(c, out.data(), py.k1);
          const double nx = pair_norm(x0, x1), ny = pair_norm(y0, y1);
          const double ex = pair_error_allowance(c, bound, nx), ey = pair_error_allowance(c, bound, ny);
          const double ti = ex * ny + nx * ey + ex * ey;
          const double a = x0 * y0 + x1 * y1, b = u0 * v0 + u1 * v1;
          const double pa = std::fabs(x0 * y0) + std::fabs(x1 * y1), pb = std::fabs(u0 * v0) + std::fabs(u1 * v1);
          // Per pair: <R x_i, R y_i> = <x_i, y_i> exactly.
          const double tol_i = ti + sum_slack(2, pa + pb);
          if (!(std::fabs(a - b) <= tol_i)) {
            RC_FAIL(FailureText("inner product of pair " + std::to_string(i) + " not preserved")
                        .sides("<Rx,Ry>", b, "<x,y>", a, tol_i)
                        .because("E_x ||y|| + ||x|| E_y + E_x E_y + sum rounding, E = B u max(||.||, min_normal), B = " +
                                 number_text(bound) + " u")
                        .in(c)
                        .line("tokens " + std::to_string(t) + ", " + std::to_string(t + 1) + " at position " +
                              std::to_string(c.positions[t]) + ", head " + std::to_string(h))
                        .elements("x", c, c.input.data(), {px.k0, px.k1})
                        .elements("y", c, c.input.data(), {py.k0, py.k1})
                        .elements("Rx", c, out.data(), {px.k0, px.k1})
                        .elements("Ry", c, out.data(), {py.k0, py.k1})
                        .str());
          }
          ip_in += a, ip_out += b, abs_in += pa, abs_out += pb, tol += ti;
        }
        // Whole head.
        const double tol_h = tol + sum_slack(c.head_dim, abs_in) + sum_slack(c.head_dim, abs_out);
        if (!(std::fabs(ip_in - ip_out) <= tol_h)) {
          RC_FAIL(FailureText("inner product of head " + std::to_string(h) + " not preserved")
                      .sides("<Rx,Ry>", ip_out, "<x,y>", ip_in, tol_h)
                      .because("the pairs' tolerances + sum rounding")
                      .in(c)
                      .line("tokens " + std::to_string(t) + ", " + std::to_string(t + 1) + " at position " +
                            std::to_string(c.positions[t]))
                      .str());
        }
      }
    }
  };
}

Property property_NormPreserved(KernelHandle& ker, Dtype d, Layout l, const Scope& scope) {
  return [&ker, d, l, scope] {
    const RopeCase c = *gen::rope_case(d, l, gen::Values::safe, scoped(scope));
    const Bytes out = run_or_discard(ker, c);
    const double bound = ker.bound(c);
    for (size_t t = 0; t < c.n_tokens(); ++t) {
      for (size_t h = 0; h < c.n_heads; ++h) {
        double sx = 0, sy = 0, se = 0;
        for (uint32_t i = 0; i < c.n_pairs_per_head(); ++i) {
          const PairView p = pair_at(c, t, h, i);
          const double x0 = value(c, c.input.data(), p.k0), x1 = value(c, c.input.data(), p.k1);
          const double y0 = value(c, out.data(), p.k0), y1 = value(c, out.data(), p.k1);
          const double nx = pair_norm(x0, x1), ny = pair_norm(y0, y1);
          const double e = pair_error_allowance(c, bound, nx);
          // | ||y|| - ||Rx|| | <= ||y - Rx|| <= E, and ||Rx|| = ||x||; each norm rounds by <= 2^-52.
          const double tol = e + (nx + ny) * 0x1p-51;
          if (!(std::fabs(ny - nx) <= tol)) {
            RC_FAIL(FailureText("norm of pair " + std::to_string(i) + " not preserved")
                        .sides("||Rx||", ny, "||x||", nx, tol)
                        .because("B u max(||x||, min_normal) + norm rounding, B = " + number_text(bound) + " u")
                        .in(c)
                        .line("token " + std::to_string(t) + " (position " + std::to_string(c.positions[t]) +
                              "), head " + std::to_string(h))
                        .elements("x", c, c.input.data(), {p.k0, p.k1})
                        .elements("Rx", c, out.data(), {p.k0, p.k1})
                        .str());
          }
          sx += x0 * x0 + x1 * x1, sy += y0 * y0 + y1 * y1, se += e * e;
        }
        for (uint32_t k = 0; k < c.head_dim; ++k) {
          if (is_rotated(c, k)) continue;
          const double x = value(c, c.input.data(), head_offset(c, t, h) + k);
          const double y = value(c, out.data(), head_offset(c, t, h) + k);
          sx += x * x, sy += y * y;
        }
        // Whole head: | ||y|| - ||x|| | <= ||y - Rx|| <= sqrt(sum E_i^2).
        const double nx = std::sqrt(sx), ny = std::sqrt(sy);
        const double tol = std::sqrt(se) + (nx + ny) * double(c.head_dim + 4) * 0x1p-52;
        if (!(std::fabs(ny - nx) <= tol)) {
          RC_FAIL(FailureText("norm of head " + std::to_string(h) + " not preserved")
                      .sides("||Rx||", ny, "||x||", nx, tol)
                      .because("sqrt(sum of the pairs' E^2) + norm rounding")
                      .in(c)
                      .line("token " + std::to_string(t) + " (position " + std::to_string(c.positions[t]) + ")")
                      .str());
        }
      }
    }
  };
}

// <R_m q, R_n k> = <R_{m+t} q, R_{n+t} k> for exact angles. Each side is off
// by at most sum_i E_q,i ||k_i|| + ||q_i|| E_k,i + E_q,i E_k,i with
// E_x,i(p) = B u max(||x_i||, min_normal) + dev_i(p) ||x_i|| (dev: the angle
// model's deviation from the exact angle at position p, 0 for `exact`); the
// tolerance is the sum of both sides' terms plus the double sums' rounding.
Property property_RelativeInvariance(KernelHandle& ker, Dtype d, Layout l, const Scope& scope) {
  return [&ker, d, l, scope] {
    gen::CaseShape s;
    s.max_tokens = 1;
    s.max_heads = 4;
    // m + t and n + t within the scope.
    const int64_t half = std::max<int64_t>(1, std::min(int64_t(1) << 30, scope.max_position / 2));
    s.max_position = half;
    RopeCase c = *gen::case_shape(d, l, s);
    const int64_t m = *gen::position(half), n = *gen::position(half);
    const int64_t shift = *gen::position(half);
    c.positions = {m, n, m + shift, n + shift};  // tokens: q, k, q, k
    const size_t per_token = size_t(c.n_heads) * c.head_dim;
    const Bytes q = *gen::elements(d, gen::Values::safe, per_token);
    const Bytes k = *gen::elements(d, gen::Values::safe, per_token);
    c.input.clear();
    for (int r = 0; r < 2; ++r) {
      c.input.insert(c.input.end(), q.begin(), q.end());
      c.input.insert(c.input.end(), k.begin(), k.end());
    }
    const Bytes out = run_or_discard(ker, c);
    const double bound = ker.bound(c);
    std::vector<double> dev(4 * c.n_pairs_per_head());  // [token][pair]
    for (size_t tok = 0; tok < 4; ++tok)
      for (uint32_t i = 0; i < c.n_pairs_per_head(); ++i)
        dev[tok * c.n_pairs_per_head() + i] = model_deviation(ker.angle_model(), c, i, c.positions[tok]);
    for (size_t h = 0; h < c.n_heads; ++h) {
      double ip[2] = {0, 0}, abs_sum = 0, tol = 0;
      for (uint32_t k2 = 0; k2 < c.head_dim; ++k2) {
          if (is_rotated(c, k2)) continue;  // pass-through: identical on both sides
        for (int side = 0; side < 2; ++side) {
          const double a = value(c, out.data(), head_offset(c, 2 * side, h) + k2) *
                           value(c, out.data(), head_offset(c, 2 * side + 1, h) + k2);
          ip[side] += a;
          abs_sum += std::fabs(a);
        }
      }
      for (uint32_t i = 0; i < c.n_pairs_per_head(); ++i) {
        const PairView pq = pair_at(c, 0, h, i), pk = pair_at(c, 1, h, i);
        const double nq = pair_norm(value(c, c.input.data(), pq.k0), value(c, c.input.data(), pq.k1));
        const double nk = pair_norm(value(c, c.input.data(), pk.k0), value(c, c.input.data(), pk.k1));
        double ipi[2], absi = 0, toli = 0;
        for (int side = 0; side < 2; ++side) {
          const PairView a = pair_at(c, 2 * side, h, i), b = pair_at(c, 2 * side + 1, h, i);
          const double a0 = value(c, out.data(), a.k0), a1 = value(c, out.data(), a.k1);
          const double b0 = value(c, out.data(), b.k0), b1 = value(c, out.data(), b.k1);
          ipi[side] = a0 * b0 + a1 * b1;
          absi += std::fabs(a0 * b0) + std::fabs(a1 * b1);
          const double eq = pair_error_allowance(c, bound, nq) + dev[2 * side * c.n_pairs_per_head() + i] * nq;
          const double ek = pair_error_allowance(c, bound, nk) + dev[(2 * side + 1) * c.n_pairs_per_head() + i] * nk;
          toli += eq * nk + nq * ek + eq * ek;
        }
        const double tol_i = toli + sum_slack(2, absi);
        if (!(std::fabs(ipi[0] - ipi[1]) <= tol_i)) {
          FailureText f("relative invariance broken for pair " + std::to_string(i) + " of head " + std::to_string(h));
          f.sides("<R_m q, R_n k>", ipi[0], "<R_(m+t) q, R_(n+t) k>", ipi[1], tol_i)
              .because("both sides' E_q ||k|| + ||q|| E_k + E_q E_k + sum rounding (B = " + number_text(bound) +
                       " u, angle model " + std::string(to_string(ker.angle_model())) + ")")
              .in(c)
              .line("m = " + std::to_string(m) + ", n = " + std::to_string(n) + ", t = " + std::to_string(shift))
              .elements("q", c, c.input.data(), {pq.k0, pq.k1})
              .elements("k", c, c.input.data(), {pk.k0, pk.k1});
          for (int tok = 0; tok < 4; ++tok) {
            const PairView p = pair_at(c, size_t(tok), h, i);
            f.elements("out token " + std::to_string(tok) + " (position " + std::to_string(c.positions[size_t(tok)]) +
                           ")",
                       c, out.data(), {p.k0, p.k1});
          }
          RC_FAIL(f.str());
        }
        ip[0] += ipi[0], ip[1] += ipi[1], abs_sum += absi, tol += toli;
      }
      const double tol_h = tol + sum_slack(c.head_dim, abs_sum);
      if (!(std::fabs(ip[0] - ip[1]) <= tol_h)) {
        RC_FAIL(FailureText("relative invariance broken for head " + std::to_string(h))
                    .sides("<R_m q, R_n k>", ip[0], "<R_(m+t) q, R_(n+t) k>", ip[1], tol_h)
                    .because("the pairs' tolerances + sum rounding")
                    .in(c)
                    .line("m = " + std::to_string(m) + ", n = " + std::to_string(n) + ", t = " + std::to_string(shift))
                    .str());
      }
    }
  };
}

// R_a(R_b x) = R_{a+b} x for exact angles. Per pair:
//   ||K_a(K_b x) - K_{a+b} x|| <= E_b(x) + E_a(K_b x) + E_{a+b}(x)
// (K_b x is within E_b of R_b x; R_a moves that error unchanged; K_a adds its
// own on its actual input; K_{a+b} x is within E_{a+b} of R_{a+b} x = R_a R_b x),
// E_p(v) = B_p u max(||v||, min_normal) + dev(p) ||v||.
Property property_Composition(KernelHandle& ker, Dtype d, Layout l, const Scope& scope) {
  return [&ker, d, l, scope] {
    gen::CaseShape s;
    // a + b within the scope.
    const int64_t half = std::max<int64_t>(1, std::min(int64_t(1) << 30, scope.max_position / 2));
    s.max_position = half;
    RopeCase cb = *gen::rope_case(d, l, gen::Values::safe, s);
    const std::vector<int64_t> b = cb.positions;
    const std::vector<int64_t> a = *rc::gen::container<std::vector<int64_t>>(b.size(), gen::position(half));
    RopeCase ca = cb, cab = cb;
    ca.positions = a;
    for (size_t t = 0; t < b.size(); ++t) cab.positions[t] = a[t] + b[t];
    const Bytes y1 = run_or_discard(ker, cb);
    ca.input = y1;
    const Bytes y2 = run_or_discard(ker, ca);
    const Bytes z = run_or_discard(ker, cab);
    const double Ba = ker.bound(ca), Bb = ker.bound(cb), Bab = ker.bound(cab);
    for (size_t t = 0; t < b.size(); ++t) {
      std::vector<double> dev_a(cb.n_pairs_per_head()), dev_b(dev_a.size()), dev_ab(dev_a.size());
      for (uint32_t i = 0; i < cb.n_pairs_per_head(); ++i) {
        dev_b[i] = model_deviation(ker.angle_model(), cb, i, b[t]);
        dev_a[i] = model_deviation(ker.angle_model(), ca, i, a[t]);
        dev_ab[i] = model_deviation(ker.angle_model(), cab, i, a[t] + b[t]);
      }
      for (size_t h = 0; h < cb.n_heads; ++h) {
        for (uint32_t i = 0; i < cb.n_pairs_per_head(); ++i) {
          const PairView p = pair_at(cb, t, h, i);
          const double nx = pair_norm(value(cb, cb.input.data(), p.k0), value(cb, cb.input.data(), p.k1));
          const double n1 = pair_norm(value(cb, y1.data(), p.k0), value(cb, y1.data(), p.k1));
          const double e1 = pair_error_allowance(cb, Bb, nx) + dev_b[i] * nx;
          const double e2 = pair_error_allowance(ca, Ba, n1) + dev_a[i] * n1;
          const double e3 = pair_error_allowance(cab, Bab, nx) + dev_ab[i] * nx;
          const double y0v = value(cb, y2.data(), p.k0), y1v = value(cb, y2.data(), p.k1);
          const double z0 = value(cb, z.data(), p.k0), z1 = value(cb, z.data(), p.k1);
          const double dist = pair_norm(y0v - z0, y1v - z1);
          const double tol = (e1 + e2 + e3) + (pair_norm(y0v, y1v) + pair_norm(z0, z1)) * 0x1p-50;
          if (!(dist <= tol)) {
            RC_FAIL(FailureText("composition broken for pair " + std::to_string(i))
                        .distance("||K_a(K_b x) - K_(a+b) x||", dist, tol)
                        .because("E_b + E_a + E_(a+b) = " + number_text(e1) + " + " + number_text(e2) + " + " +
                                 number_text(e3) + " (bounds " + number_text(Bb) + ", " + number_text(Ba) + ", " +
                                 number_text(Bab) + " u, angle model " + std::string(to_string(ker.angle_model())) +
                                 ")")
                        .in(cb)
                        .line("token " + std::to_string(t) + ", head " + std::to_string(h) + ": a = " +
                              std::to_string(a[t]) + ", b = " + std::to_string(b[t]))
                        .elements("x", cb, cb.input.data(), {p.k0, p.k1})
                        .elements("K_b x", cb, y1.data(), {p.k0, p.k1})
                        .elements("K_a(K_b x)", cb, y2.data(), {p.k0, p.k1})
                        .elements("K_(a+b) x", cb, z.data(), {p.k0, p.k1})
                        .str());
          }
        }
      }
    }
  };
}

}  // namespace ropecheck::props
