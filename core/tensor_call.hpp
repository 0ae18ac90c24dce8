// The buffers of an ABI v3 tensor-form call (include/ropecheck/kernel_abi.h), laid out as the case says
// (RopeCase::tensor_layout: each activation tensor's strides with the case's gaps), in memory the caller owns:
// the gate's kernel host places each buffer in its arena between guard pages (gate/isolation.cpp), an
// in-process handle in plain vectors (properties/engine.cpp). What goes where, how the arguments point at it
// and how the outputs come back are written once, here.
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "core/rope_case.hpp"

namespace ropecheck {

// int64 slots for every shape and stride array of a call: q, q_out, k, k_out (shape, strides: 4 x 8); pos,
// seq_offsets, cu_seqlens (3 x 3); the two tables (2 x 3: a per-token table of a rank-4 call has 3 dimensions).
inline constexpr size_t kTensorShapeSlots = 4 * 8 + 3 * 3 + 2 * 3;

// Bytes per element of the positions tensor (positions) or of seq_offsets and cu_seqlens (else).
size_t tensor_index_elem(const RopeCase& c, bool positions);
void store_index(unsigned char* p, size_t k, size_t elem, int64_t v);
int64_t load_index(const unsigned char* p, size_t k, size_t elem);

// Copies compact [T][H][D] values into a laid-out tensor (values), or poisons its elements (values null).
void scatter_heads(const RopeCase& c, const TensorLayout& l, unsigned char* base, const unsigned char* values,
                   uint32_t poison);
// The compact [T][H][D] values of a laid-out tensor.
Bytes gather_heads(const RopeCase& c, const TensorLayout& l, const unsigned char* base);
// Bytes of a laid-out tensor's buffer (span elements) that lie between its elements and differ from `pattern`;
// with `readable`, only those in its byte ranges [lo, hi) from base (the rest is not read: a sparse tensor).
size_t gap_bytes_changed(const RopeCase& c, const TensorLayout& l, const unsigned char* base, unsigned char pattern,
                         const std::vector<std::pair<uint64_t, uint64_t>>* readable = nullptr);

// Where each buffer of a v3 call is (null: the call has none). In place, q_out and k_out are q and k.
struct TensorBuffers {
  unsigned char* q = nullptr;
  unsigned char* q_out = nullptr;
  unsigned char* k = nullptr;
  unsigned char* k_out = nullptr;
  unsigned char* pos = nullptr;
  unsigned char* seq_offsets = nullptr;
  unsigned char* cu_seqlens = nullptr;
  unsigned char* table[2] = {nullptr, nullptr};
  int64_t* shapes = nullptr;  // kTensorShapeSlots
};

// The bytes each buffer of c's tensor-form call spans (0: none); tables: RopeCase::abi_table_bytes.
struct TensorSizes {
  size_t q = 0, q_out = 0, k = 0, k_out = 0, pos = 0, seq_offsets = 0, cu_seqlens = 0;
};
TensorSizes tensor_sizes(const RopeCase& c, bool in_place);

// Writes the call's inputs: q's and k's values into their layouts, their outputs' elements poisoned (out of
// place), the index tensors. The gaps keep whatever the caller filled them with.
void fill_tensor_buffers(const RopeCase& c, bool in_place, const TensorBuffers& b, uint32_t poison);

// The v3 fields of `args` (built by RopeCase::args) pointed at the buffers: the table(s) (copied from the
// case's abi_table_bytes), and in the tensor form the tensors (the legacy fields zero), their shapes and
// strides written to b.shapes.
void point_v3_args(const RopeCase& c, bool in_place, const TensorBuffers& b, rc_rope_args& args);

}  // namespace ropecheck
