#include "core/rope_case.hpp"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <sstream>

namespace ropecheck {

std::string RopeCase::validate() const {
  std::ostringstream why;
  if (head_dim == 0) why << "head_dim must be > 0; ";
  if (rotary_dim < 2 || rotary_dim % 2 != 0) why << "rotary_dim must be even and >= 2 (got " << rotary_dim << "); ";
  if (rotary_dim > head_dim) why << "rotary_dim " << rotary_dim << " > head_dim " << head_dim << "; ";
  if (n_heads == 0) why << "n_heads must be > 0; ";
  if (positions.empty()) why << "at least one token is required; ";
  if (inv_freq.empty()) {
    if (!std::isfinite(base) || !(base > 0.0)) why << "base must be finite and > 0; ";
  } else {
    if (inv_freq.size() != rotary_dim / 2)
      why << "inv_freq has " << inv_freq.size() << " entries, rotary_dim/2 = " << rotary_dim / 2 << "; ";
    for (double f : inv_freq)
      if (!std::isfinite(f)) {
        why << "inv_freq entries must be finite; ";
        break;
      }
  }
  if (!std::isfinite(position_scale)) why << "position_scale must be finite; ";
  if (why.tellp() == 0 && input.size() != n_bytes())
    why << "input has " << input.size() << " bytes, expected " << n_bytes() << "; ";
  std::string s = why.str();
  if (s.size() >= 2) s.resize(s.size() - 2);
  return s;
}

std::string RopeCase::validate_for_kernel() const {
  std::string s = validate();
  for (int64_t m : positions)
    if (m < 0) {
      if (!s.empty()) s += "; ";
      s += "positions must be >= 0 for kernels (got " + std::to_string(m) + ")";
      break;
    }
  return s;
}

rc_rope_args RopeCase::args(const void* in, void* out) const {
  rc_rope_args a{};
  a.abi_version = ROPECHECK_ABI_VERSION;
  a.dtype = uint32_t(dtype);
  a.layout = uint32_t(layout);
  a.head_dim = head_dim;
  a.rotary_dim = rotary_dim;
  a.n_heads = n_heads;
  a.n_tokens = positions.size();
  a.positions = positions.data();
  a.base = base;
  a.position_scale = position_scale;
  a.inv_freq = inv_freq.empty() ? nullptr : inv_freq.data();
  a.in = in;
  a.out = out;
  return a;
}

std::string RopeCase::summary() const {
  std::ostringstream s;
  s << to_string(dtype) << " " << to_string(layout) << " head_dim=" << head_dim << " rotary_dim=" << rotary_dim
    << " heads=" << n_heads << " tokens=" << positions.size();
  if (inv_freq.empty()) s << " base=" << hexfloat(base) << " (" << base << ")";
  else s << " inv_freq=table[" << inv_freq.size() << "]";
  if (position_scale != 1.0) s << " position_scale=" << hexfloat(position_scale) << " (" << position_scale << ")";
  return s.str();
}

RopeCase case_from_args(const rc_rope_args& a) {
  RopeCase c;
  c.dtype = Dtype(a.dtype);
  c.layout = Layout(a.layout);
  c.head_dim = a.head_dim;
  c.rotary_dim = a.rotary_dim;
  c.n_heads = a.n_heads;
  c.positions.assign(a.positions, a.positions + a.n_tokens);
  c.base = a.base;
  c.position_scale = a.position_scale;
  if (a.inv_freq) c.inv_freq.assign(a.inv_freq, a.inv_freq + a.rotary_dim / 2);
  c.input.resize(c.n_bytes());
  if (!c.input.empty()) std::memcpy(c.input.data(), a.in, c.input.size());
  return c;
}

std::string hexfloat(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%a", v);
  return buf;
}

}  // namespace ropecheck
