#include "core/rope_case.hpp"

#include <algorithm>
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
  if (tensor) why << validate_tensor();
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
  const size_t kept = t.kept_rows();
  if (t.cos.size() != kept * np || (t.is_angle() ? !t.sin.empty() : t.sin.size() != kept * np))
    why << "the table's values are not " << kept << " rows of rotary_dim/2 = " << np << "; ";
  for (size_t k = 0; k < t.stored.size(); ++k)
    if (t.stored[k] < 0 || uint64_t(t.stored[k]) >= t.rows || (k && t.stored[k] <= t.stored[k - 1])) {
      why << "the kept rows of a sparse table must ascend within [0, " << t.rows << "); ";
      break;
    }
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
    } else if (t.kept(size_t(m)) == SIZE_MAX) {
      why << "position " << m << " is not one of the sparse table's kept rows; ";
      break;
    }
  return why.str();
}

size_t CosSinTable::kept(size_t row) const {
  if (stored.empty()) return row;
  const auto it = std::lower_bound(stored.begin(), stored.end(), int64_t(row));
  return it != stored.end() && *it == int64_t(row) ? size_t(it - stored.begin()) : SIZE_MAX;
}

std::string_view to_string(PositionForm f) {
  switch (f) {
    case PositionForm::int64: return "int64";
    case PositionForm::int32: return "int32";
    case PositionForm::implicit: return "implicit";
  }
  return "?";
}

uint64_t TensorLayout::head(uint64_t t, uint64_t h) const {
  if (ndim == 4) return (t / uint64_t(shape[1])) * uint64_t(strides[0]) + (t % uint64_t(shape[1])) * uint64_t(strides[1]) +
                        h * uint64_t(strides[2]);
  return t * uint64_t(strides[0]) + h * uint64_t(strides[1]);
}

TensorLayout RopeCase::tensor_layout(int which) const {
  const TensorCall& tc = *tensor;
  TensorLayout l;
  l.ndim = int32_t(tc.rank);
  const uint64_t T = n_tokens(), H = which >= 2 ? tc.k_heads : n_heads;
  int d = 0;
  if (tc.rank == 4) {
    l.shape[d++] = int64_t(tc.batch);
    l.shape[d++] = int64_t(tc.batch ? T / tc.batch : 0);
  } else {
    l.shape[d++] = int64_t(T);
  }
  l.shape[d++] = int64_t(H);
  l.shape[d] = head_dim;
  l.strides[d] = 1;
  int64_t inner = head_dim;
  for (int k = d - 1, p = 0; k >= 0; --k, ++p) {
    l.strides[k] = inner + int64_t(tc.pad[which][p]);
    inner = l.strides[k] * l.shape[k];
  }
  uint64_t last = 0;
  for (int k = 0; k <= d; ++k) {
    if (l.shape[k] == 0) return l;  // (span 0: no element)
    last += uint64_t(l.shape[k] - 1) * uint64_t(l.strides[k]);
  }
  l.span = last + 1;
  return l;
}

RopeCase RopeCase::k_case() const {
  RopeCase k = *this;
  k.tensor.reset();
  k.n_heads = tensor->k_heads;
  k.input = tensor->k_input;
  return k;
}

std::string RopeCase::validate_tensor() const {
  std::ostringstream why;
  const TensorCall& tc = *tensor;
  const uint64_t T = n_tokens();
  if (tc.rank != 3 && tc.rank != 4) why << "the tensor form's rank is 3 or 4 (got " << tc.rank << "); ";
  if (tc.rank == 4 && (tc.batch == 0 || T % tc.batch != 0))
    why << "rank 4: " << T << " tokens are not " << tc.batch << " sequences of one length; ";
  if (tc.k_input.size() != T * tc.k_heads * head_dim * dtype_size(dtype))
    why << "k_input has " << tc.k_input.size() << " bytes, expected " << T * tc.k_heads * head_dim * dtype_size(dtype)
        << "; ";
  if (tc.rank == 4 && !tc.cu_seqlens.empty()) why << "cu_seqlens is for rank 3 only; ";
  uint64_t nseq = tc.rank == 4 ? tc.batch : 1;
  if (!tc.cu_seqlens.empty()) {
    nseq = tc.cu_seqlens.size() - 1;
    bool ok = tc.cu_seqlens.size() >= 2 && tc.cu_seqlens.front() == 0 && uint64_t(tc.cu_seqlens.back()) == T;
    for (size_t b = 1; ok && b < tc.cu_seqlens.size(); ++b) ok = tc.cu_seqlens[b] >= tc.cu_seqlens[b - 1];
    if (!ok) why << "cu_seqlens must rise from 0 to the " << T << " tokens; ";
  }
  if (tc.pos == PositionForm::int32)
    for (int64_t m : positions)
      if (m != int64_t(int32_t(m))) {
        why << "position " << m << " does not fit in int32; ";
        break;
      }
  if (tc.index_int32)
    for (const std::vector<int64_t>* v : {&tc.seq_offsets, &tc.cu_seqlens})
      for (int64_t x : *v)
        if (x != int64_t(int32_t(x))) {
          why << "seq_offsets and cu_seqlens passed as int32 must fit (" << x << " does not); ";
          break;
        }
  if (tc.pos != PositionForm::implicit) {
    if (!tc.seq_offsets.empty()) why << "seq_offsets go with implicit positions only; ";
  } else if (n_pos_axes != 1 || tc.axes_first) {
    why << "implicit positions have one axis; ";
  } else if (!tc.seq_offsets.empty() && tc.seq_offsets.size() != nseq) {
    why << tc.seq_offsets.size() << " seq_offsets for " << nseq << " sequences; ";
  } else if (why.tellp() == 0) {
    const uint64_t S = tc.rank == 4 ? T / tc.batch : T;
    for (uint64_t t = 0, b = 0; t < T; ++t) {
      uint64_t seq = 0, s = t;
      if (tc.rank == 4) {
        seq = t / S;
        s = t % S;
      } else if (!tc.cu_seqlens.empty()) {
        while (uint64_t(tc.cu_seqlens[b + 1]) <= t) ++b;
        seq = b;
        s = t - uint64_t(tc.cu_seqlens[b]);
      }
      const int64_t off = tc.seq_offsets.empty() ? 0 : tc.seq_offsets[seq];
      int64_t m;
      if (__builtin_add_overflow(int64_t(s), off, &m) || m != positions[t]) {
        why << "implicit positions: token " << t << " is at " << positions[t] << ", not " << s << " + " << off << "; ";
        break;
      }
    }
  }
  return why.str();
}

namespace {
// c's input rebuilt for its head_dim from `old`, heads of old_dim elements: element k of a head is old's element
// k mod old_dim of the same token and head.
void rebuild_heads(RopeCase& c, const Bytes& old, uint32_t old_dim) {
  const size_t nt = c.n_tokens(), es = dtype_size(c.dtype);
  c.input.assign(c.n_bytes(), 0);
  if (old_dim == 0 || old.size() < nt * c.n_heads * size_t(old_dim) * es) return;
  for (size_t t = 0; t < nt; ++t)
    for (size_t h = 0; h < c.n_heads; ++h)
      for (size_t k = 0; k < c.head_dim; ++k)
        std::memcpy(c.input.data() + ((t * c.n_heads + h) * c.head_dim + k) * es,
                    old.data() + ((t * c.n_heads + h) * old_dim + k % old_dim) * es, es);
}
}  // namespace

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
  rebuild_heads(c, old, old_dim);
}

uint32_t RotarySlice::rotary_dim_of(uint32_t hd) const {
  if (head_dim && hd != head_dim) return 0;
  const uint32_t rd = fraction > 0 ? uint32_t(double(hd) * fraction) : rotary_dim;
  if (rd < 2 || rd % 2 || uint64_t(rd) + rotary_offset > hd) return 0;
  return rd;
}

uint32_t RotarySlice::head_dim_from(uint32_t at_least) const {
  if (head_dim) return head_dim;
  for (uint32_t hd = std::max(at_least, 2u); hd <= 65536; ++hd)
    if (rotary_dim_of(hd)) return hd;
  return 0;
}

std::string RotarySlice::describe() const {
  std::ostringstream o;
  if (fraction > 0) o << "rotary_dim = int(head_dim * " << fraction << ")";
  else o << "rotary_dim " << rotary_dim;
  if (rotary_offset) o << " at offset " << rotary_offset;
  if (head_dim) o << " of head_dim " << head_dim;
  else if (fraction <= 0) o << " of any head_dim";
  return o.str();
}

void apply_rotary_slice(const RotarySlice& s, RopeCase& c) {
  if (c.table) return;
  const uint32_t hd = s.head_dim_from(c.head_dim);
  if (!hd) return;
  const uint32_t rd = s.rotary_dim_of(hd);
  const uint32_t old_dim = c.head_dim, old_pairs = c.rotary_dim / 2, pairs = rd / 2;
  auto resize = [&](auto& v) {
    if (v.empty() || v.size() == pairs || old_pairs == 0) return;
    auto old = v;
    v.resize(pairs);
    for (uint32_t i = 0; i < pairs; ++i) v[i] = old[uint64_t(i) * old.size() / pairs];
  };
  resize(c.inv_freq);
  resize(c.pair_axis);
  c.head_dim = hd;
  c.rotary_dim = rd;
  c.rotary_offset = s.rotary_offset;
  if (hd == old_dim) return;
  const Bytes old = c.input;
  rebuild_heads(c, old, old_dim);
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
      // The rows laid out: by position, every row (or a sparse table's kept rows, which the kernel host places at
      // their rows' offsets); by token (v4), token t's position's row for each token ({B, S} rows of a rank-4 call,
      // one set of S rows when every sequence has the same positions).
      std::vector<size_t> laid;  // the kept row (index into cos/sin) of each laid-out row
      int32_t ndim = 2;
      int64_t lead[2] = {int64_t(t.rows), 0};
      if (t.by_token) {
        const size_t T = n_tokens();
        size_t B = 1, S = T;
        if (tensor && tensor->rank == 4) {
          B = tensor->batch ? tensor->batch : 1;
          S = T / B;
          bool shared = true;
          for (size_t k = S; k < T && shared; ++k) shared = positions[k] == positions[k % S];
          if (shared) B = 1;
          ndim = 3;
          lead[0] = int64_t(B);
          lead[1] = int64_t(S);
        } else {
          lead[0] = int64_t(T);
        }
        for (size_t k = 0; k < B * S; ++k) laid.push_back(t.kept(size_t(positions[k])));
      } else {
        for (size_t r = 0; r < t.kept_rows(); ++r) laid.push_back(r);
      }
      for (int n = 0; n < (two ? 2 : 1); ++n) {
        Bytes& b = abi_table_bytes[n];
        b.assign(laid.size() * width * es, 0);
        for (size_t r = 0; r < laid.size(); ++r)
          for (uint32_t i = 0; i < np; ++i) {
            const size_t k = laid[r];
            const double cv = t.cos[k * np + i], sv = t.is_angle() ? 0.0 : t.sin[k * np + i];
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
        abi_table_ndim = ndim;
        abi_table_shape[n][0] = lead[0];
        abi_table_shape[n][1] = ndim == 3 ? lead[1] : int64_t(width);
        abi_table_shape[n][2] = ndim == 3 ? int64_t(width) : 0;
        rc_tensor& tt = n == 0 ? a.table : a.table2;
        tt.data = t.sparse() ? nullptr : b.data();  // (a sparse table: only the kernel host places it)
        tt.device = {RC_DL_CPU, 0};
        tt.ndim = ndim;
        tt.dtype = dl_dtype_of(t.dtype);
        tt.shape = abi_table_shape[n];
        tt.strides = nullptr;
        tt.byte_offset = 0;
      }
    }
  }
  if (a.abi_version >= 4) a.table_rows = table && table->by_token ? RC_ROWS_BY_TOKEN : RC_ROWS_BY_POSITION;
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
  if (direction == Direction::inverse) s << " inverse";
  if (table) s << " table=" << to_string(table->kind) << "/" << to_string(table->dtype) << "[" << table->rows << "]";
  if (tensor) {
    const TensorCall& tc = *tensor;
    s << " tensor=rank" << tc.rank;
    if (tc.rank == 4) s << "(B=" << tc.batch << ")";
    if (tc.k_heads) s << " k_heads=" << tc.k_heads;
    s << " pos=" << to_string(tc.pos) << (tc.axes_first ? "{A,..}" : "");
    if (!tc.seq_offsets.empty()) s << " seq_offsets[" << tc.seq_offsets.size() << "]";
    if (!tc.cu_seqlens.empty()) s << " varlen[" << tc.cu_seqlens.size() - 1 << "]";
    bool padded = false;
    for (const auto& p : tc.pad)
      for (uint32_t x : p) padded = padded || x;
    if (padded) s << " strided";
  }
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
