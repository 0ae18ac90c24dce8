#include "properties/predicates.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <sstream>
#include <stdexcept>

#include <fmt/format.h>

#include "properties/failure.hpp"
#include "properties/judge.hpp"
#include "reference/reference.hpp"

namespace ropecheck::props {

std::string shrink_path_text(const std::vector<size_t>& path) {
  std::string s;
  for (size_t k : path) s += (s.empty() ? "" : ".") + std::to_string(k);
  return s;
}

std::vector<size_t> parse_shrink_path(const std::string& s) {
  std::vector<size_t> v;
  if (s.empty()) return v;
  size_t pos = 0;
  while (pos <= s.size()) {
    const size_t dot = s.find('.', pos);
    const std::string part = s.substr(pos, dot == std::string::npos ? std::string::npos : dot - pos);
    if (part.empty() || part.size() > 9 || part.find_first_not_of("0123456789") != std::string::npos)
      throw std::invalid_argument("a shrink path is numbers separated by dots (\"3.0.12\"), not '" + s + "'");
    v.push_back(std::stoul(part));
    if (dot == std::string::npos) break;
    pos = dot + 1;
  }
  return v;
}

double pair_norm(double a, double b) { return std::sqrt(a * a + b * b); }

double pair_error_allowance(const RopeCase& c, double bound, double n) {
  const Format f = format_of(c.dtype);
  return bound * f.unit_roundoff() * std::max(n, f.min_normal());
}

double model_deviation(AngleModel model, const RopeCase& c, uint32_t pair, int64_t m) {
  if (model == AngleModel::exact) return 0.0;
  const double exact = exact_angle(c, pair, m);  // rounded to double: error <= |angle| 2^-53
  double mod = exact;
  switch (model) {
    case AngleModel::exact: break;
    case AngleModel::fp32: mod = fp32_model_angle(c, pair, m); break;
  }
  const double d = std::fabs(mod - exact) + (std::fabs(mod) + std::fabs(exact)) * 0x1p-52;
  return std::min(d, 2.0);
}

std::string bits_text(const RopeCase& c, const void* buf, size_t k) {
  return describe_element(c.dtype, load_bits(c.dtype, buf, k));  // one element format for every message
}

std::string element_where(const RopeCase& c, size_t k) {
  const size_t per_token = size_t(c.n_heads) * c.head_dim;
  const size_t t = k / per_token, h = (k % per_token) / c.head_dim, dim = k % c.head_dim;
  std::ostringstream o;
  o << "token " << t << " (position " << (t < c.n_tokens() ? c.position(t) : 0) << "), head " << h << ", dim "
    << dim << (!is_rotated(c, dim) ? " (pass-through)" : "");
  return o.str();
}

// (Equal bytes first: the common case, one memcmp instead of a loop whose every comparison a fuzzing build
// traces. Equal bits are the same output under either identity clause.)
size_t first_difference(const RopeCase& c, const void* a, const void* b) {
  if (std::memcmp(a, b, c.n_bytes()) == 0) return SIZE_MAX;
  const size_t n = c.n_elements();
  for (size_t k = 0; k < n; ++k)
    if (load_bits(c.dtype, a, k) != load_bits(c.dtype, b, k)) return k;
  return SIZE_MAX;
}

size_t first_output_difference(const RopeCase& c, const void* a, const void* b, bool identity_bits) {
  if (std::memcmp(a, b, c.n_bytes()) == 0) return SIZE_MAX;
  const size_t n = c.n_elements();
  for (size_t k = 0; k < n; ++k)
    if (!same_output(c.dtype, load_bits(c.dtype, a, k), load_bits(c.dtype, b, k), identity_bits)) return k;
  return SIZE_MAX;
}

// ---- predicates ------------------------------------------------------------------------------------------

std::vector<uint32_t> relayout_dims(const RopeCase& c, Layout from, Layout to) {
  std::vector<uint32_t> dim_map(c.head_dim);
  for (uint32_t k = 0; k < c.head_dim; ++k) dim_map[k] = k;  // pass-through dims stay
  for (uint32_t i = 0; i < c.rotary_dim / 2; ++i) {
    const auto [a0, a1] = pair_dims(from, c.rotary_dim, i);
    const auto [b0, b1] = pair_dims(to, c.rotary_dim, i);
    dim_map[c.rotary_offset + a0] = c.rotary_offset + b0;
    dim_map[c.rotary_offset + a1] = c.rotary_offset + b1;
  }
  return dim_map;
}

std::vector<size_t> relayout(const RopeCase& c, Layout from, Layout to) {
  const std::vector<uint32_t> dim_map = relayout_dims(c, from, to);
  std::vector<size_t> v(c.n_elements());
  for (size_t b = 0; b < v.size(); b += c.head_dim)
    for (uint32_t k = 0; k < c.head_dim; ++k) v[b + k] = b + dim_map[k];
  return v;
}

RopeCase half_split_twin(const RopeCase& ci) {
  RopeCase ch = ci;
  ch.layout = Layout::half_split;
  const std::vector<size_t> perm = relayout(ci, Layout::interleaved, Layout::half_split);
  for (size_t k = 0; k < ci.n_elements(); ++k) store_bits(ci.dtype, ch.input.data(), perm[k], load_bits(ci.dtype, ci.input.data(), k));
  return ch;
}

namespace {
// Whether every element of every head of `a` (in c's layout) has the bits of element dims[k] of the same head of
// `b`, for elements of E bytes.
template <typename E>
bool same_bits_relaid_as(const RopeCase& c, const uint8_t* a, const uint8_t* b, const uint32_t* dims) {
  for (size_t t = 0; t < c.n_tokens(); ++t)
    for (size_t h = 0; h < c.n_heads; ++h) {
      const size_t o = head_offset(c, t, h);
      const uint8_t* ha = a + o * sizeof(E);
      const uint8_t* hb = b + o * sizeof(E);
      E diff = 0;  // OR of the differences: one comparison per head
      for (uint32_t k = 0; k < c.head_dim; ++k) {
        E x, y;
        std::memcpy(&x, ha + size_t(k) * sizeof(E), sizeof(E));
        std::memcpy(&y, hb + size_t(dims[k]) * sizeof(E), sizeof(E));
        diff |= E(x ^ y);
      }
      if (diff != 0) return false;
    }
  return true;
}

bool same_bits_relaid(const RopeCase& c, const uint8_t* a, const uint8_t* b, const std::vector<uint32_t>& dims) {
  return dtype_size(c.dtype) == 4 ? same_bits_relaid_as<uint32_t>(c, a, b, dims.data())
                                  : same_bits_relaid_as<uint16_t>(c, a, b, dims.data());
}
}  // namespace

std::string layouts_violation(const RopeCase& ci, const Bytes& oi, double bi, const RopeCase& ch, const Bytes& oh,
                              double bh, bool bit_exact, bool identity_bits) {
  const Dtype d = ci.dtype;
  // Element b + k of a head in ci's layout is element b + dims[k] in ch's (the heads are where they were).
  const std::vector<uint32_t> dims = relayout_dims(ci, ci.layout, ch.layout);
  // Bit-exact layouts: the common case is every element equal bit for bit (which passes under either identity
  // clause). One comparison per element decides it; the pair-by-pair loop below runs only on a difference, for
  // its rule and message. (The fuzzer runs this on every case: its loop was ~9 % of an execution.)
  if (bit_exact && same_bits_relaid(ci, oi.data(), oh.data(), dims)) return "";
  for (size_t t = 0; t < ci.n_tokens(); ++t)
    for (size_t h = 0; h < ci.n_heads; ++h) {
      const size_t b = head_offset(ci, t, h);
      for (uint32_t i = 0; i < ci.rotary_dim / 2; ++i) {
        const auto [a0, a1] = pair_elements(ci, i);
        const size_t ki[2] = {b + a0, b + a1}, kh[2] = {b + dims[a0], b + dims[a1]};
        bool ok;
        std::string rule;  // (made for a failure only: this runs for every pair of every fuzzed case)
        if (bit_exact) {
          ok = same_output(d, load_bits(d, oi.data(), ki[0]), load_bits(d, oh.data(), kh[0]), identity_bits) &&
               same_output(d, load_bits(d, oi.data(), ki[1]), load_bits(d, oh.data(), kh[1]), identity_bits);
          if (!ok) rule = identity_bits ? "bit for bit" : "value for value";
        } else {
          const double nx = pair_norm(value(ci, ci.input.data(), ki[0]), value(ci, ci.input.data(), ki[1]));
          const double dist = pair_norm(value(ci, oi.data(), ki[0]) - value(ch, oh.data(), kh[0]),
                                        value(ci, oi.data(), ki[1]) - value(ch, oh.data(), kh[1]));
          const double tol = pair_error_allowance(ci, bi, nx) + pair_error_allowance(ch, bh, nx);
          ok = dist <= tol * (1 + 0x1p-50);
          if (!ok)
            rule = fmt::format("they differ by {:.4g} u, allowed {:.4g} u = both allowances",
                               dist / pair_error_allowance(ci, 1, nx), bi + bh);
        }
        if (!ok)
          return FailureText(fmt::format("layouts disagree ({}) on pair {} of token {} (position {}), head {}", rule, i,
                                         t, ci.positions[t], h))
              .in(ci)
              .elements("input", ci, ci.input.data(), {ki[0], ki[1]})
              .elements(to_string(ci.layout), ci, oi.data(), {ki[0], ki[1]})
              .elements(to_string(ch.layout), ch, oh.data(), {kh[0], kh[1]})
              .str();
      }
      for (uint32_t k = 0; k < ci.head_dim; ++k)
        if (!is_rotated(ci, k) &&
            !same_output(d, load_bits(d, oi.data(), b + k), load_bits(d, oh.data(), b + k), identity_bits))
          return FailureText(fmt::format("layouts disagree on pass-through dim {} at {}", k, element_where(ci, b + k)))
              .in(ci)
              .elements(to_string(ci.layout), ci, oi.data(), {b + k})
              .elements(to_string(ch.layout), ch, oh.data(), {b + k})
              .str();
    }
  return "";
}

std::string in_place_violation(const RopeCase& c, const Bytes& out_of_place, const Bytes& in_place,
                               bool identity_bits) {
  const size_t k = first_output_difference(c, out_of_place.data(), in_place.data(), identity_bits);
  if (k == SIZE_MAX) return "";
  return FailureText("in-place result differs from out-of-place at " + element_where(c, k) +
                     (identity_bits ? " (identity=bits)" : " (identity=values)"))
      .in(c)
      .elements("input", c, c.input.data(), {k})
      .elements("out of place", c, out_of_place.data(), {k})
      .elements("in place", c, in_place.data(), {k})
      .str();
}

std::string input_touched(const RopeCase& c, const Bytes& before, const Bytes& after) {
  const size_t k = first_difference(c, before.data(), after.data());
  if (k == SIZE_MAX) return "";
  return FailureText("the kernel wrote to its input (out != in) at " + element_where(c, k))
      .in(c)
      .elements("was", c, before.data(), {k})
      .elements("now", c, after.data(), {k})
      .str();
}

}  // namespace ropecheck::props
