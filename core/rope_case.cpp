#include "core/rope_case.hpp"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <sstream>
#include <stdexcept>

namespace ropecheck {

std::string_view to_string(Direction d) { return d == Direction::forward ? "forward" : "inverse"; }

std::string_view to_string(TableKind k) {
  switch (k) {
    case TableKind::cos_sin_2: return "cos-sin-2";
    case TableKind::cos_sin_cat: return "cos-sin-cat";
    case TableKind::cos_sin_full: return "cos-sin-full";
    case TableKind::angle: return "angle";
  }
  return "?";
}

bool RopeCase::is_v1() const {
  if (uses_v3()) return false;
  if (rotary_offset != 0 || n_pos_axes != 1 || !pair_axis.empty() || attention_factor != 1.0 || freq_rule)
    return false;
  for (int64_t m : positions)
    if (m < 0) return false;
  return true;
}

std::string RopeCase::validate() const {
  std::ostringstream why;
  if (head_dim == 0) why << "head_dim must be > 0; ";
  if (rotary_dim < 2 || rotary_dim % 2 != 0) why << "rotary_dim must be even and >= 2 (got " << rotary_dim << "); ";
  if (uint64_t(rotary_offset) + rotary_dim > head_dim) {
    if (rotary_offset == 0) why << "rotary_dim " << rotary_dim << " > head_dim " << head_dim << "; ";
    else why << "rotary_offset " << rotary_offset << " + rotary_dim " << rotary_dim << " > head_dim " << head_dim << "; ";
  }
  if (n_heads == 0) why << "n_heads must be > 0; ";
  if (n_pos_axes < 1 || n_pos_axes > 4) why << "n_pos_axes must be 1..4 (got " << n_pos_axes << "); ";
  else if (positions.size() % n_pos_axes != 0)
    why << positions.size() << " positions are not " << n_pos_axes << " per token; ";
  if (positions.empty()) why << "at least one token is required; ";
  if (!pair_axis.empty()) {
    if (pair_axis.size() != rotary_dim / 2)
      why << "pair_axis has " << pair_axis.size() << " entries, rotary_dim/2 = " << rotary_dim / 2 << "; ";
    for (size_t i = 0; i < pair_axis.size(); ++i)
      if (pair_axis[i] >= n_pos_axes) {
        why << "pair_axis[" << i << "] = " << int(pair_axis[i]) << " is not < n_pos_axes " << n_pos_axes << "; ";
        break;
      }
  }
  if (!std::isfinite(attention_factor) || !(attention_factor > 0))
    why << "attention_factor must be finite and > 0 (got " << attention_factor << "); ";
  if (inv_freq.empty()) {
    if (!std::isfinite(base) || !(base > 0.0)) why << "base must be finite and > 0; ";
  } else {
    if (freq_rule) why << "a frequency rule and an inv_freq table exclude each other; ";
    if (inv_freq.size() != rotary_dim / 2)
      why << "inv_freq has " << inv_freq.size() << " entries, rotary_dim/2 = " << rotary_dim / 2 << "; ";
    for (double f : inv_freq)
      if (!std::isfinite(f)) {
        why << "inv_freq entries must be finite; ";
        break;
      }
  }
  if (freq_rule && why.tellp() == 0) {
    try {
      validate_frequency_rule(*freq_rule, rotary_dim, base);
    } catch (const std::exception& e) {
      why << "frequency rule: " << e.what() << "; ";
    }
  }
  if (!std::isfinite(position_scale)) why << "position_scale must be finite; ";
  if (table) why << validate_table();
  if (why.tellp() == 0 && input.size() != n_bytes())
    why << "input has " << input.size() << " bytes, expected " << n_bytes() << "; ";
  std::string s = why.str();
  if (s.size() >= 2) s.resize(s.size() - 2);
  return s;
}

std::string RopeCase::validate_table() const {
  std::ostringstream why;
  const CosSinTable& t = *table;
  const size_t np = rotary_dim / 2;
  if (!inv_freq.empty() || freq_rule) why << "a cos/sin table excludes inv_freq and a frequency rule; ";
  if (!t.is_angle() && attention_factor != 1.0)
    why << "with a cos/sin table the attention factor is in its values (attention_factor must be 1); ";
  if (t.is_angle() && t.dtype != Dtype::f32) why << "an angle table is f32; ";
  if (t.rows == 0) why << "the table needs at least one row; ";
  if (t.cos.size() != t.rows * np || (t.is_angle() ? !t.sin.empty() : t.sin.size() != t.rows * np))
    why << "the table's values are not " << t.rows << " rows of rotary_dim/2 = " << np << "; ";
  if (why.tellp() != 0) return why.str();
  for (const std::vector<double>* v : {&t.cos, &t.sin})
    for (double x : *v)
      if (!std::isfinite(x) || !is_value_of(t.dtype, x)) {
        why << "table values must be finite values of " << to_string(t.dtype) << " (got " << hexfloat(x) << "); ";
        return why.str();
      }
  for (int64_t m : positions)
    if (m < 0 || uint64_t(m) >= t.rows) {
      why << "position " << m << " is outside the table's rows [0, " << t.rows << "); ";
      break;
    }
  return why.str();
}

void apply_case_template(const RopeCase& model, RopeCase& c) {
  const size_t nt = c.n_tokens();
  const uint32_t old_dim = c.head_dim;
  std::vector<int64_t> p0(c.positions.begin(), c.positions.begin() + long(nt));
  const Bytes old = c.input;
  c.layout = model.layout;
  c.head_dim = model.head_dim;
  c.rotary_dim = model.rotary_dim;
  c.rotary_offset = model.rotary_offset;
  c.base = model.base;
  c.position_scale = model.position_scale;
  c.inv_freq = model.inv_freq;
  c.freq_rule = model.freq_rule;
  c.rule_seq_len = model.rule_seq_len;
  c.attention_factor = model.attention_factor;
  c.n_pos_axes = model.n_pos_axes;
  c.pair_axis = model.pair_axis;
  c.positions.assign(size_t(c.n_pos_axes) * nt, 0);
  for (uint32_t a = 0; a < c.n_pos_axes; ++a)
    for (size_t t = 0; t < nt; ++t) c.positions[a * nt + t] = p0[(t + a) % nt];
  const size_t es = dtype_size(c.dtype);
  c.input.assign(c.n_bytes(), 0);
  if (old_dim == 0 || old.size() < nt * c.n_heads * size_t(old_dim) * es) return;
  for (size_t t = 0; t < nt; ++t)
    for (size_t h = 0; h < c.n_heads; ++h)
      for (size_t k = 0; k < c.head_dim; ++k)
        std::memcpy(c.input.data() + ((t * c.n_heads + h) * c.head_dim + k) * es,
                    old.data() + ((t * c.n_heads + h) * old_dim + k % old_dim) * es, es);
}

rc_freq_rule abi_freq_rule(const FrequencyRule& r, uint64_t seq_len) {
  rc_freq_rule a{};
  switch (r.type) {
    case FrequencyRuleType::default_: a.kind = RC_FREQ_DEFAULT; break;
    case FrequencyRuleType::linear: a.kind = RC_FREQ_LINEAR; break;
    case FrequencyRuleType::dynamic: a.kind = RC_FREQ_DYNAMIC; break;
    case FrequencyRuleType::ntk: a.kind = RC_FREQ_NTK; break;
    case FrequencyRuleType::yarn: a.kind = RC_FREQ_YARN; break;
    case FrequencyRuleType::longrope: a.kind = RC_FREQ_LONGROPE; break;
    case FrequencyRuleType::llama3: a.kind = RC_FREQ_LLAMA3; break;
  }
  a.truncate = r.truncate ? 1 : 0;
  a.factor = r.factor.value_or(0.0);
  a.max_position_embeddings = r.max_position_embeddings;
  a.original_max_position_embeddings = r.original_max_position_embeddings;
  a.seq_len = seq_len;
  a.beta_fast = r.beta_fast;
  a.beta_slow = r.beta_slow;
  a.low_freq_factor = r.low_freq_factor;
  a.high_freq_factor = r.high_freq_factor;
  a.short_factor = r.short_factor.empty() ? nullptr : r.short_factor.data();
  a.long_factor = r.long_factor.empty() ? nullptr : r.long_factor.data();
  return a;
}

FrequencyRule freq_rule_from_abi(const rc_freq_rule& a, uint32_t rotary_dim) {
  FrequencyRule r;
  switch (a.kind) {
    case RC_FREQ_LINEAR: r.type = FrequencyRuleType::linear; break;
    case RC_FREQ_DYNAMIC: r.type = FrequencyRuleType::dynamic; break;
    case RC_FREQ_NTK: r.type = FrequencyRuleType::ntk; break;
    case RC_FREQ_YARN: r.type = FrequencyRuleType::yarn; break;
    case RC_FREQ_LONGROPE: r.type = FrequencyRuleType::longrope; break;
    case RC_FREQ_LLAMA3: r.type = FrequencyRuleType::llama3; break;
    default: r.type = FrequencyRuleType::default_; break;
  }
  r.truncate = a.truncate != 0;
  if (a.factor != 0) r.factor = a.factor;
  r.max_position_embeddings = a.max_position_embeddings;
  r.original_max_position_embeddings = a.original_max_position_embeddings;
  r.beta_fast = a.beta_fast;
  r.beta_slow = a.beta_slow;
  r.low_freq_factor = a.low_freq_factor;
  r.high_freq_factor = a.high_freq_factor;
  if (a.short_factor) r.short_factor.assign(a.short_factor, a.short_factor + rotary_dim / 2);
  if (a.long_factor) r.long_factor.assign(a.long_factor, a.long_factor + rotary_dim / 2);
  return r;
}

rc_rope_args RopeCase::args(const void* in, void* out, uint32_t version) const {
  if (version == 0) version = min_abi_version();
  if (version < min_abi_version())
    throw std::logic_error("RopeCase::args: abi_version " + std::to_string(version) + " cannot express " + summary());
  rc_rope_args a{};
  a.abi_version = version;
  a.dtype = uint32_t(dtype);
  a.layout = uint32_t(layout);
  a.head_dim = head_dim;
  a.rotary_dim = rotary_dim;
  a.n_heads = n_heads;
  a.n_tokens = n_tokens();
  a.positions = positions.data();
  a.base = base;
  a.position_scale = position_scale;
  a.inv_freq = inv_freq.empty() ? nullptr : inv_freq.data();
  a.in = in;
  a.out = out;
  if (a.abi_version >= 2) {
    a.rotary_offset = rotary_offset;
    a.n_pos_axes = n_pos_axes;
    a.pair_axis = pair_axis.empty() ? nullptr : pair_axis.data();
    a.attention_factor = attention_factor;
    if (freq_rule) {
      abi_rule = abi_freq_rule(*freq_rule, rule_seq_len);
      a.freq_rule = &abi_rule;
    }
  }
#ifdef ROPECHECK_ABI_DRAFT_V3
  if (a.abi_version >= 3) {
    a.direction = direction == Direction::inverse ? RC_INVERSE : RC_FORWARD;
    if (table) {
      const CosSinTable& t = *table;
      const uint32_t np = rotary_dim / 2;
      a.table_kind = uint32_t(t.kind);
      a.base = 10000.0;  // unused with a table (kernel_abi.h): the neutral values
      a.position_scale = 1.0;
      a.inv_freq = nullptr;
      a.freq_rule = nullptr;
      const bool two = t.kind == TableKind::cos_sin_2 || t.kind == TableKind::cos_sin_full;
      const uint32_t width = t.kind == TableKind::cos_sin_2 ? np : rotary_dim;
      const size_t es = dtype_size(t.dtype);
      for (int n = 0; n < (two ? 2 : 1); ++n) {
        Bytes& b = abi_table_bytes[n];
        b.assign(t.rows * width * es, 0);
        for (size_t r = 0; r < t.rows; ++r)
          for (uint32_t i = 0; i < np; ++i) {
            const double cv = t.cos_at(r, i, np), sv = t.is_angle() ? 0.0 : t.sin_at(r, i, np);
            const double v = n == 0 ? cv : sv;
            const auto [d0, d1] = pair_dims(layout, rotary_dim, i);
            switch (t.kind) {
              case TableKind::cos_sin_2: store_f32(t.dtype, b.data(), r * width + i, float(v)); break;
              case TableKind::cos_sin_cat:
                store_f32(t.dtype, b.data(), r * width + i, float(cv));
                store_f32(t.dtype, b.data(), r * width + np + i, float(sv));
                break;
              case TableKind::cos_sin_full:
              case TableKind::angle:
                store_f32(t.dtype, b.data(), r * width + d0, float(v));
                store_f32(t.dtype, b.data(), r * width + d1, float(v));
                break;
            }
          }
        abi_table_shape[n][0] = int64_t(t.rows);
        abi_table_shape[n][1] = int64_t(width);
        rc_tensor& tt = n == 0 ? a.table : a.table2;
        tt.data = b.data();
        tt.device = {RC_DL_CPU, 0};
        tt.ndim = 2;
        tt.dtype = {uint8_t(t.dtype == Dtype::bf16 ? RC_DL_BFLOAT : RC_DL_FLOAT), uint8_t(8 * es), 1};
        tt.shape = abi_table_shape[n];
        tt.strides = nullptr;
        tt.byte_offset = 0;
      }
    }
  }
#endif
  return a;
}

std::string RopeCase::summary() const {
  std::ostringstream s;
  s << to_string(dtype) << " " << to_string(layout) << " head_dim=" << head_dim << " rotary_dim=" << rotary_dim
    << " heads=" << n_heads << " tokens=" << positions.size();
  if (inv_freq.empty()) s << " base=" << hexfloat(base) << " (" << base << ")";
  else s << " inv_freq=table[" << inv_freq.size() << "]";
  if (position_scale != 1.0) s << " position_scale=" << hexfloat(position_scale) << " (" << position_scale << ")";
  if (freq_rule) {
    s << " rule=" << to_string(freq_rule->type);
    if (freq_rule->factor) s << " factor=" << *freq_rule->factor;
    if (rule_seq_len) s << " seq_len=" << rule_seq_len;
  }
  if (rotary_offset) s << " rotary_offset=" << rotary_offset;
  if (n_pos_axes != 1) s << " axes=" << n_pos_axes;
  if (!pair_axis.empty()) {
    s << " pair_axis=";
    for (uint8_t x : pair_axis) s << int(x);
  }
  if (attention_factor != 1.0)
    s << " attention_factor=" << hexfloat(attention_factor) << " (" << attention_factor << ")";
  return s.str();
}

RopeCase case_from_args(const rc_rope_args& a) {
  RopeCase c;
  c.dtype = Dtype(a.dtype);
  c.layout = Layout(a.layout);
  c.head_dim = a.head_dim;
  c.rotary_dim = a.rotary_dim;
  c.n_heads = a.n_heads;
  // From v2 on a zero in a field a version added means "as before" (a v1-style caller's zero-initialised
  // struct): n_pos_axes 0 is one axis, attention_factor 0 is 1.
  const uint32_t axes = a.abi_version >= 2 && a.n_pos_axes != 0 ? a.n_pos_axes : 1;
  c.n_pos_axes = axes;
  c.positions.assign(a.positions, a.positions + a.n_tokens * axes);
  c.base = a.base;
  c.position_scale = a.position_scale;
  if (a.inv_freq) c.inv_freq.assign(a.inv_freq, a.inv_freq + a.rotary_dim / 2);
  if (a.abi_version >= 2) {
    c.rotary_offset = a.rotary_offset;
    if (a.pair_axis) c.pair_axis.assign(a.pair_axis, a.pair_axis + a.rotary_dim / 2);
    c.attention_factor = a.attention_factor != 0 ? a.attention_factor : 1.0;
    if (a.freq_rule) {
      c.freq_rule = freq_rule_from_abi(*a.freq_rule, a.rotary_dim);
      c.rule_seq_len = a.freq_rule->seq_len;
    }
  }
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
