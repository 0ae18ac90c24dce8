#include "impls/tensor_form.hpp"

#include "impls/given_table.hpp"

#include <cstddef>

namespace ropecheck {


namespace {

constexpr int kMalformed = 2;

// A tensor of the call, checked: its first element's address, shape and strides in elements.
struct View {
  char* base = nullptr;
  int ndim = 0;
  int64_t shape[4] = {};
  int64_t stride[4] = {};
  size_t elem = 0;  // bytes per element
};

bool is(const rc_dl_dtype& t, uint8_t code, uint8_t bits) { return t.code == code && t.bits == bits && t.lanes == 1; }

// The element size of an activation dtype of the call's `dtype` (0: another dtype).
size_t activation_size(const rc_dl_dtype& t, uint32_t dtype) {
  switch (dtype) {
    case RC_F32: return is(t, RC_DL_FLOAT, 32) ? 4 : 0;
    case RC_F16: return is(t, RC_DL_FLOAT, 16) ? 2 : 0;
    case RC_BF16: return is(t, RC_DL_BFLOAT, 16) ? 2 : 0;
    default: return 0;
  }
}

size_t index_size(const rc_dl_dtype& t) { return is(t, RC_DL_INT, 32) ? 4 : is(t, RC_DL_INT, 64) ? 8 : 0; }

// Fills v from t (present: data non-NULL) of rank 1..4 and element size `elem`; false when malformed: another
// device, a negative extent or stride, or an element offset that does not fit in int64.
bool view_of(const rc_tensor& t, size_t elem, View& v) {
  if (!t.data || elem == 0 || t.device.device_type != RC_DL_CPU || t.ndim < 1 || t.ndim > 4 || !t.shape) return false;
  v.base = static_cast<char*>(t.data) + t.byte_offset;
  v.ndim = t.ndim;
  v.elem = elem;
  int64_t compact = 1, last = 0;  // the row-major stride of the dimension; the largest element offset
  for (int d = t.ndim - 1; d >= 0; --d) {
    if (t.shape[d] < 0) return false;
    v.shape[d] = t.shape[d];
    v.stride[d] = t.strides ? t.strides[d] : compact;
    if (v.stride[d] < 0) return false;
    int64_t span;
    if (t.shape[d] > 0 && (__builtin_mul_overflow(t.shape[d] - 1, v.stride[d], &span) ||
                           __builtin_add_overflow(last, span, &last)))
      return false;
    if (__builtin_mul_overflow(compact, t.shape[d] > 0 ? t.shape[d] : 1, &compact)) compact = INT64_MAX;
  }
  return true;
}

int64_t load_index(const char* p, size_t elem) {  // an int32 or int64 element
  if (elem == 4) {
    int32_t x;
    __builtin_memcpy(&x, p, 4);
    return x;
  }
  int64_t x;
  __builtin_memcpy(&x, p, 8);
  return x;
}

int64_t index_at(const View& v, int64_t k) {  // element k of a rank-1 index tensor
  return load_index(v.base + size_t(k * v.stride[0]) * v.elem, v.elem);
}

// An activation tensor (q, q_out, k, k_out): rank 3 or 4, the call's dtype, head_dim last with stride 1.
bool activation(const rc_tensor& t, const rc_rope_args& n, View& v) {
  return view_of(t, activation_size(t.dtype, n.dtype), v) && v.ndim >= 3 && v.shape[v.ndim - 1] == n.head_dim &&
         v.stride[v.ndim - 1] == 1;
}

bool same_shape(const View& a, const View& b) {
  if (a.ndim != b.ndim) return false;
  for (int d = 0; d < a.ndim; ++d)
    if (a.shape[d] != b.shape[d]) return false;
  return true;
}

// The call's tokens: T' = B*S (rank 4) or T (rank 3), and where token t's head h starts in a tensor.
struct Tokens {
  int rank = 3;
  int64_t count = 0, seq = 1;  // T'; S (rank 4)
  char* head(const View& v, int64_t t, int64_t h) const {
    const int64_t off = rank == 4 ? (t / seq) * v.stride[0] + (t % seq) * v.stride[1] + h * v.stride[2]
                                  : t * v.stride[0] + h * v.stride[1];
    return v.base + size_t(off) * v.elem;
  }
};

// The checked tensors of a tensor-form call.
struct Call {
  View q, q_out, k, k_out;
  bool has_k = false;
  Tokens tok;
};

int check_tensors(const rc_rope_args& n, Call& c) {
  if (!activation(n.q, n, c.q) || !activation(n.q_out, n, c.q_out) || !same_shape(c.q, c.q_out)) return kMalformed;
  if (c.q.shape[c.q.ndim - 2] < 1) return kMalformed;  // Hq >= 1
  c.has_k = n.k.data != nullptr;
  if (c.has_k) {
    if (!activation(n.k, n, c.k) || !activation(n.k_out, n, c.k_out) || !same_shape(c.k, c.k_out)) return kMalformed;
    if (c.k.ndim != c.q.ndim || c.k.shape[c.k.ndim - 2] < 1) return kMalformed;
    for (int d = 0; d < c.q.ndim - 2; ++d)
      if (c.k.shape[d] != c.q.shape[d]) return kMalformed;
  } else if (n.k_out.data) {
    return kMalformed;
  }
  c.tok.rank = c.q.ndim;
  if (c.tok.rank == 4) {
    c.tok.seq = c.q.shape[1];
    if (__builtin_mul_overflow(c.q.shape[0], c.q.shape[1], &c.tok.count)) return kMalformed;
  } else {
    c.tok.count = c.q.shape[0];
  }
  return RC_OK;
}

int positions_of(const rc_rope_args& n, const Call& c, std::vector<int64_t>& out) {
  const int64_t T = c.tok.count;
  const uint32_t axes = n.n_pos_axes;
  const int lead = c.q.ndim - 2;  // q's token dimensions: 1 (T) or 2 (B, S)
  View cu;
  const bool has_cu = n.cu_seqlens.data != nullptr;
  if (has_cu) {  // rank 3 only: {B+1}, cu[0] = 0, non-decreasing, cu[B] = T
    if (c.q.ndim != 3 || !view_of(n.cu_seqlens, index_size(n.cu_seqlens.dtype), cu) || cu.ndim != 1 ||
        cu.shape[0] < 1 || index_at(cu, 0) != 0 || index_at(cu, cu.shape[0] - 1) != T)
      return kMalformed;
    for (int64_t b = 1; b < cu.shape[0]; ++b)
      if (index_at(cu, b) < index_at(cu, b - 1)) return kMalformed;
  }
  out.assign(size_t(axes) * size_t(T), 0);
  if (n.pos.data) {  // explicit: {T'} or {B, S} for one axis, {A, T'} or {A, B, S} with the axes first
    View p;
    if (n.seq_offsets.data || !view_of(n.pos, index_size(n.pos.dtype), p)) return kMalformed;
    const int first = p.ndim == lead ? 0 : 1;  // the dimension of the first token index
    if (p.ndim == lead ? axes != 1 : !(p.ndim == lead + 1 && p.shape[0] == int64_t(axes))) return kMalformed;
    for (int d = 0; d < lead; ++d)
      if (p.shape[first + d] != c.q.shape[d]) return kMalformed;
    for (uint32_t a = 0; a < axes; ++a)
      for (int64_t t = 0; t < T; ++t) {
        int64_t off = first ? int64_t(a) * p.stride[0] : 0;
        off += lead == 2 ? (t / c.tok.seq) * p.stride[first] + (t % c.tok.seq) * p.stride[first + 1]
                         : t * p.stride[first];
        out[size_t(a) * size_t(T) + size_t(t)] = load_index(p.base + size_t(off) * p.elem, p.elem);
      }
    return RC_OK;
  }
  // Implicit: token s of sequence b is at s + seq_offsets[b] (one axis).
  if (axes != 1) return kMalformed;
  const int64_t B = c.q.ndim == 4 ? c.q.shape[0] : has_cu ? cu.shape[0] - 1 : 1;
  View so;
  const bool has_so = n.seq_offsets.data != nullptr;
  if (has_so && (!view_of(n.seq_offsets, index_size(n.seq_offsets.dtype), so) || so.ndim != 1 || so.shape[0] != B))
    return kMalformed;
  for (int64_t t = 0, b = 0; t < T; ++t) {
    int64_t s = t, seq = 0;
    if (c.q.ndim == 4) {
      seq = t / c.tok.seq;
      s = t % c.tok.seq;
    } else if (has_cu) {
      while (index_at(cu, b + 1) <= t) ++b;  // (tokens ascend; empty sequences are skipped)
      seq = b;
      s = t - index_at(cu, b);
    }
    int64_t m = s;
    if (has_so && __builtin_add_overflow(s, index_at(so, seq), &m)) return kMalformed;
    out[size_t(t)] = m;
  }
  return RC_OK;
}

}  // namespace

int tensor_form_positions(const rc_rope_args& n, std::vector<int64_t>& positions) {
  Call c;
  if (int rc = check_tensors(n, c); rc != RC_OK) return rc;
  return positions_of(n, c, positions);
}

int apply_tensor_form(const rc_rope_args& n, rc_rope_apply_fn legacy) {
  if (n.abi_version < 3 || !n.q.data) return kMalformed;
  if (n.in || n.out || n.positions || n.n_tokens || n.n_heads) return kMalformed;  // the legacy fields are unused
  Call c;
  if (int rc = check_tensors(n, c); rc != RC_OK) return rc;
  std::vector<int64_t> pos;
  if (int rc = positions_of(n, c, pos); rc != RC_OK) return rc;

  // The legacy call of the same features: first with no tokens (what the kernel says of the features), then
  // one per token (and head) below.
  rc_rope_args l = n;
  l.q = l.q_out = l.k = l.k_out = l.pos = l.seq_offsets = l.cu_seqlens = rc_tensor{};
  l.n_heads = 1;
  // v4: a table whose rows follow the tokens ({T, W}, or {B or 1, S, W} with a rank-4 q): each token's legacy call
  // gets its own row as a one-row table by position (at position 0).
  const bool by_token = n.abi_version >= 4 && n.table_rows == RC_ROWS_BY_TOKEN;
  struct TokenRows {
    char* base = nullptr;
    size_t elem = 0;
    int64_t shared_b = 0, stride_b = 0, stride_s = 0, width = 0;
  } token_rows[2];
  int64_t row_shape[2][2] = {{1, 0}, {1, 0}};
  if (by_token) {
    for (int k = 0; k < (n.table2.data ? 2 : 1); ++k) {
      const rc_tensor& t = k ? n.table2 : n.table;
      Dtype td;
      View v;
      if (!table_dtype_of(t.dtype, td) || !view_of(t, dtype_size(td), v) || v.ndim != c.q.ndim - 1) return kMalformed;
      const int64_t S = c.q.ndim == 4 ? c.q.shape[1] : c.tok.count;
      if (c.q.ndim == 4 ? (v.shape[1] != S || (v.shape[0] != 1 && v.shape[0] != c.q.shape[0])) : v.shape[0] != S)
        return kMalformed;
      if (v.shape[v.ndim - 1] > 1 && v.stride[v.ndim - 1] != 1) return RC_UNSUPPORTED;
      token_rows[k] = {v.base, v.elem, c.q.ndim == 4 && v.shape[0] == 1, c.q.ndim == 4 ? v.stride[0] : 0,
                       v.stride[v.ndim - 2], v.shape[v.ndim - 1]};
      row_shape[k][1] = v.shape[v.ndim - 1];
    }
    l.table_rows = RC_ROWS_BY_POSITION;
    for (int k = 0; k < 2; ++k) {
      rc_tensor& t = k ? l.table2 : l.table;
      if (!t.data) continue;
      t.data = token_rows[k].base;
      t.ndim = 2;
      t.shape = row_shape[k];
      t.strides = nullptr;
      t.byte_offset = 0;
    }
  }
  if (int rc = legacy(&l); rc != RC_OK) return rc;
  if (!by_token && n.table_kind != RC_TABLE_NONE) {  // every position a row of the table, before any write
    if (!n.table.shape || n.table.ndim < 1 || (n.table2.data && (!n.table2.shape || n.table2.ndim < 1)))
      return kMalformed;
    int64_t rows = n.table.shape[0];
    if (n.table2.data && n.table2.shape[0] < rows) rows = n.table2.shape[0];
    for (int64_t m : pos)
      if (m < 0 || m >= rows) return kMalformed;
  }

  const int64_t T = c.tok.count;
  const uint32_t axes = n.n_pos_axes;
  int64_t here[4];
  l.positions = here;
  l.n_tokens = 1;
  for (int which = 0; which < (c.has_k ? 2 : 1); ++which) {
    const View& in = which ? c.k : c.q;
    const View& out = which ? c.k_out : c.q_out;
    const int64_t H = in.shape[in.ndim - 2];
    const bool together = H <= int64_t(UINT32_MAX) && (H == 1 || (in.stride[in.ndim - 2] == n.head_dim &&
                                                                  out.stride[out.ndim - 2] == n.head_dim));
    for (int64_t t = 0; t < T; ++t) {
      for (uint32_t a = 0; a < axes; ++a) here[a] = pos[size_t(a) * size_t(T) + size_t(t)];
      if (by_token) {  // token t's row, at position 0 of a one-row table
        const int64_t S = c.q.ndim == 4 ? c.q.shape[1] : T, b = t / S, s = t % S;
        for (int k = 0; k < 2; ++k) {
          rc_tensor& tt = k ? l.table2 : l.table;
          if (!tt.data) continue;
          const TokenRows& r = token_rows[k];
          tt.data = r.base + size_t((r.shared_b ? 0 : b * r.stride_b) + s * r.stride_s) * r.elem;
        }
        here[0] = 0;
      }
      for (int64_t h = 0; h < H; h += together ? H : 1) {
        l.n_heads = together ? uint32_t(H) : 1;
        l.in = c.tok.head(in, t, h);
        l.out = c.tok.head(out, t, h);
        if (int rc = legacy(&l); rc != RC_OK) return rc;  // (not reached: the features were accepted above)
      }
    }
  }
  return RC_OK;
}


}  // namespace ropecheck
