#include "core/tensor_call.hpp"

#include <algorithm>
#include <cstring>
#include <vector>

namespace ropecheck {

size_t tensor_index_elem(const RopeCase& c, bool positions) {
  const TensorCall& tc = *c.tensor;
  if (positions) return tc.pos == PositionForm::int32 ? 4 : 8;
  return tc.index_int32 ? 4 : 8;
}

void store_index(unsigned char* p, size_t k, size_t elem, int64_t v) {
  if (elem == 4) {
    const int32_t x = int32_t(v);
    std::memcpy(p + 4 * k, &x, 4);
  } else {
    std::memcpy(p + 8 * k, &v, 8);
  }
}

int64_t load_index(const unsigned char* p, size_t k, size_t elem) {
  if (elem == 4) {
    int32_t y;
    std::memcpy(&y, p + 4 * k, 4);
    return y;
  }
  int64_t x;
  std::memcpy(&x, p + 8 * k, 8);
  return x;
}

void scatter_heads(const RopeCase& c, const TensorLayout& l, unsigned char* base, const unsigned char* values,
                   uint32_t poison) {
  const size_t es = dtype_size(c.dtype), D = c.head_dim, H = size_t(l.shape[l.ndim - 2]);
  for (size_t t = 0; t < c.n_tokens(); ++t)
    for (size_t h = 0; h < H; ++h) {
      unsigned char* at = base + size_t(l.head(t, h)) * es;
      if (values) std::memcpy(at, values + ((t * H + h) * D) * es, D * es);
      else for (size_t e = 0; e < D; ++e) store_bits(c.dtype, at, e, poison);
    }
}

Bytes gather_heads(const RopeCase& c, const TensorLayout& l, const unsigned char* base) {
  const size_t es = dtype_size(c.dtype), D = c.head_dim, H = size_t(l.shape[l.ndim - 2]);
  Bytes out(c.n_tokens() * H * D * es);
  for (size_t t = 0; t < c.n_tokens(); ++t)
    for (size_t h = 0; h < H; ++h)
      std::memcpy(out.data() + ((t * H + h) * D) * es, base + size_t(l.head(t, h)) * es, D * es);
  return out;
}

size_t gap_bytes_changed(const RopeCase& c, const TensorLayout& l, const unsigned char* base, unsigned char pattern,
                         const std::vector<std::pair<uint64_t, uint64_t>>* readable) {
  const uint64_t es = dtype_size(c.dtype), bytes = c.head_dim * es, H = uint64_t(l.shape[l.ndim - 2]);
  std::vector<uint64_t> heads;
  heads.reserve(c.n_tokens() * H);
  for (size_t t = 0; t < c.n_tokens(); ++t)
    for (uint64_t h = 0; h < H; ++h) heads.push_back(l.head(t, h) * es);
  std::sort(heads.begin(), heads.end());
  size_t k = 0;
  auto count = [&](uint64_t lo, uint64_t hi) {
    auto bytes_in = [&](uint64_t a, uint64_t b) {
      for (uint64_t i = a; i < b; ++i) k += base[i] != pattern;
    };
    if (!readable) return bytes_in(lo, hi);
    for (const auto& [rlo, rhi] : *readable) bytes_in(std::max(lo, rlo), std::min(hi, rhi));
  };
  uint64_t at = 0;  // the gaps: before the first head, between heads, after the last
  for (uint64_t h : heads) {
    count(at, h);
    at = std::max(at, h + bytes);
  }
  count(at, l.span * es);
  return k;
}

TensorSizes tensor_sizes(const RopeCase& c, bool in_place) {
  TensorSizes s;
  const TensorCall& tc = *c.tensor;
  const size_t es = dtype_size(c.dtype);
  s.q = size_t(c.tensor_layout(0).span) * es;
  if (!in_place) s.q_out = size_t(c.tensor_layout(1).span) * es;
  if (tc.k_heads) {
    s.k = size_t(c.tensor_layout(2).span) * es;
    if (!in_place) s.k_out = size_t(c.tensor_layout(3).span) * es;
  }
  if (tc.pos != PositionForm::implicit) s.pos = c.positions.size() * tensor_index_elem(c, true);
  s.seq_offsets = tc.seq_offsets.size() * tensor_index_elem(c, false);
  s.cu_seqlens = tc.cu_seqlens.size() * tensor_index_elem(c, false);
  return s;
}

void fill_tensor_buffers(const RopeCase& c, bool in_place, const TensorBuffers& b, uint32_t poison) {
  const TensorCall& tc = *c.tensor;
  scatter_heads(c, c.tensor_layout(0), b.q, c.input.data(), 0);
  if (!in_place) scatter_heads(c, c.tensor_layout(1), b.q_out, nullptr, poison);
  if (tc.k_heads) {
    const RopeCase k = c.k_case();
    scatter_heads(k, c.tensor_layout(2), b.k, tc.k_input.data(), 0);
    if (!in_place) scatter_heads(k, c.tensor_layout(3), b.k_out, nullptr, poison);
  }
  if (b.pos)
    for (size_t i = 0; i < c.positions.size(); ++i) store_index(b.pos, i, tensor_index_elem(c, true), c.positions[i]);
  if (b.seq_offsets)
    for (size_t i = 0; i < tc.seq_offsets.size(); ++i)
      store_index(b.seq_offsets, i, tensor_index_elem(c, false), tc.seq_offsets[i]);
  if (b.cu_seqlens)
    for (size_t i = 0; i < tc.cu_seqlens.size(); ++i)
      store_index(b.cu_seqlens, i, tensor_index_elem(c, false), tc.cu_seqlens[i]);
}

void point_v3_args(const RopeCase& c, bool in_place, const TensorBuffers& b, rc_rope_args& args) {
  int64_t* slot = b.shapes;
  auto take = [&](std::initializer_list<int64_t> v) {
    int64_t* p = slot;
    for (int64_t x : v) *slot++ = x;
    return p;
  };
  for (int n = 0; n < 2; ++n)
    if (b.table[n]) {
      rc_tensor& t = n == 0 ? args.table : args.table2;
      const std::vector<int64_t>& kept = c.table->stored;
      if (!c.table->sparse()) {
        std::memcpy(b.table[n], c.abi_table_bytes[n].data(), c.abi_table_bytes[n].size());
      } else {  // a sparse table: each kept row at its row's offset (the pages between them are not the table's)
        const size_t row = c.abi_table_bytes[n].size() / kept.size();
        for (size_t k = 0; k < kept.size(); ++k)
          std::memcpy(b.table[n] + size_t(kept[k]) * row, c.abi_table_bytes[n].data() + k * row, row);
      }
      t.data = b.table[n];
      t.shape = c.abi_table_ndim == 3 ? take({c.abi_table_shape[n][0], c.abi_table_shape[n][1], c.abi_table_shape[n][2]})
                                      : take({c.abi_table_shape[n][0], c.abi_table_shape[n][1]});
    }
  if (!c.tensor) return;
  const TensorCall& tc = *c.tensor;
  args.in = nullptr;
  args.out = nullptr;
  args.positions = nullptr;
  args.n_tokens = 0;
  args.n_heads = 0;
  auto activation = [&](int which, unsigned char* data) {
    const TensorLayout l = c.tensor_layout(which);
    rc_tensor t{};
    t.data = data;
    t.device = {RC_DL_CPU, 0};
    t.ndim = l.ndim;
    t.dtype = dl_dtype_of(c.dtype);
    t.shape = slot;
    for (int k = 0; k < l.ndim; ++k) *slot++ = l.shape[k];
    t.strides = slot;
    for (int k = 0; k < l.ndim; ++k) *slot++ = l.strides[k];
    return t;
  };
  args.q = activation(0, b.q);
  args.q_out = in_place ? args.q : activation(1, b.q_out);
  if (tc.k_heads) {
    args.k = activation(2, b.k);
    args.k_out = in_place ? args.k : activation(3, b.k_out);
  }
  auto index = [&](unsigned char* data, size_t elem, std::initializer_list<int64_t> shape) {
    rc_tensor t{};
    t.data = data;
    t.device = {RC_DL_CPU, 0};
    t.ndim = int32_t(shape.size());
    t.dtype = {uint8_t(RC_DL_INT), uint8_t(8 * elem), 1};
    t.shape = take(shape);
    return t;
  };
  const int64_t T = int64_t(c.n_tokens()), B = int64_t(tc.batch), A = int64_t(c.n_pos_axes);
  if (b.pos) {
    const size_t e = tensor_index_elem(c, true);
    const bool first = tc.axes_first || c.n_pos_axes > 1;
    if (tc.rank == 4) args.pos = first ? index(b.pos, e, {A, B, T / B}) : index(b.pos, e, {B, T / B});
    else args.pos = first ? index(b.pos, e, {A, T}) : index(b.pos, e, {T});
  }
  if (b.seq_offsets) args.seq_offsets = index(b.seq_offsets, tensor_index_elem(c, false), {int64_t(tc.seq_offsets.size())});
  if (b.cu_seqlens) args.cu_seqlens = index(b.cu_seqlens, tensor_index_elem(c, false), {int64_t(tc.cu_seqlens.size())});
}

}  // namespace ropecheck
