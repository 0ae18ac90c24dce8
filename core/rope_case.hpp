// A RoPE case: every parameter of one kernel call plus its input values.
// Cases flow through the harness: case -> kernel -> judged against the
// reference -> finding -> report.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <optional>
#include <string_view>

#include "core/dtype.hpp"
#include "core/frequency_rule.hpp"
#include "ropecheck/kernel_abi.h"

namespace ropecheck {

// Raw storage of n elements of a dtype.
using Bytes = std::vector<unsigned char>;

// ABI v3 (include/ropecheck/kernel_abi.h): the direction of the rotation, and cos/sin given by the caller.
enum class Direction : uint8_t {
  forward,  // out pair i = af e^{+j phi_i} z_i
  inverse,  // out pair i = af e^{-j phi_i} z_i (the attention factor kept: inverse(forward(x)) = af^2 x)
};
std::string_view to_string(Direction d);

enum class TableKind : uint8_t {
  cos_sin_2 = 1,     // cos {P, R/2} and sin {P, R/2}: FlashAttention, ONNX Runtime, ONNX
  cos_sin_cat = 2,   // one {P, R}: cos in columns [0, R/2), sin in [R/2, R): vLLM, FlashInfer
  cos_sin_full = 3,  // cos {P, R} and sin {P, R}, each value at both elements of its pair: Hugging Face, Liger
  angle = 4,         // f32 angles {P, R}, full width: TransformerEngine (the kernel takes cos and sin)
};
std::string_view to_string(TableKind k);

// The DLPack dtype of a storage type (f32, f16: float; bf16: bfloat), as the v3 draft's tensors carry it.
inline rc_dl_dtype dl_dtype_of(Dtype d) {
  return {uint8_t(d == Dtype::bf16 ? RC_DL_BFLOAT : RC_DL_FLOAT), uint8_t(8 * dtype_size(d)), 1};
}

// A table the caller gives the kernel, in its canonical form: one value per (row, pair); row r is position r.
// The kind and dtype say how the harness lays it out for the kernel; the values are exactly values of the
// dtype (of f32 for angles) and, for the cos/sin kinds, hold the attention factor (af cos, af sin).
struct CosSinTable {
  TableKind kind = TableKind::cos_sin_2;
  Dtype dtype = Dtype::f32;  // the table's own storage type (angle: f32)
  size_t rows = 0;
  std::vector<double> cos;   // [rows][R/2]: af cos (angle: the angle)
  std::vector<double> sin;   // [rows][R/2]: af sin (angle: empty)
  // A sparse table (positions past 2^31 reach a kernel that indexes its table by position): only the rows listed
  // here (ascending) are kept, cos and sin holding them in that order; the others are not there (the kernel host
  // maps none of their pages). Empty: every row 0..rows-1 is kept.
  std::vector<int64_t> stored;
  // ABI v4 (RC_ROWS_BY_TOKEN): the table is laid out for the kernel with a row per token, row t holding the values
  // of token t's position ({B, S, W} for a rank-4 call); its values are kept by position all the same.
  bool by_token = false;
  bool is_angle() const { return kind == TableKind::angle; }
  // The index in cos/sin of row `row` (SIZE_MAX: not kept).
  size_t kept(size_t row) const;
  double cos_at(size_t row, uint32_t pair, uint32_t n_pairs) const { return cos[kept(row) * n_pairs + pair]; }
  double sin_at(size_t row, uint32_t pair, uint32_t n_pairs) const { return sin[kept(row) * n_pairs + pair]; }
  size_t kept_rows() const { return stored.empty() ? rows : stored.size(); }
  // Laid out sparse for the kernel (by position, only the kept rows there); a per-token table is laid out whole.
  bool sparse() const { return !stored.empty() && !by_token; }
};

// ABI v3 (draft): the call made in the tensor form (include/ropecheck/kernel_abi.h), and how its tensors
// are laid out. What is computed is the case's as ever: q's values are the case's input ([n_tokens][n_heads]
// [head_dim]) and its positions the case's (explicit, axis-major); this says how they are passed, and adds
// k (its own heads, the same positions).
enum class PositionForm : uint8_t {
  int64,     // pos {T'} or {A, T'} (rank 4: {B, S} or {A, B, S}) of int64
  int32,     // the same of int32 (every position fits)
  implicit,  // no pos: token s of sequence b is at s + seq_offsets[b] (one axis)
};
std::string_view to_string(PositionForm f);

struct TensorCall {
  uint32_t rank = 3;                 // 3: q {T, Hq, D}; 4: q {B, S, Hq, D} (B = batch, S = n_tokens / B)
  uint64_t batch = 1;                // B, rank 4
  uint32_t k_heads = 0;              // Hk (0: no k)
  Bytes k_input;                     // [n_tokens][k_heads][head_dim] of the case's dtype
  PositionForm pos = PositionForm::int64;
  bool axes_first = false;           // explicit positions of one axis given as {1, ...}
  std::vector<int64_t> seq_offsets;  // implicit: one per sequence (empty: none passed, 0 each)
  std::vector<int64_t> cu_seqlens;   // rank 3: B + 1 sequence starts (empty: none passed, one sequence)
  bool index_int32 = false;          // seq_offsets and cu_seqlens passed as int32 (else int64)
  // Elements added to each stride beyond the compact one, per tensor (q, q_out, k, k_out) and dimension from
  // the heads' outward: the strides' gaps, which a kernel must not write. An in-place call (the call's flag,
  // as ever: q and k alike) passes q as q_out and k as k_out.
  uint32_t pad[4][3] = {};
};

// One tensor of a tensor-form call as the harness lays it out: rank, shape and strides in elements, and the
// elements its buffer spans (the last element's offset + 1).
struct TensorLayout {
  int32_t ndim = 0;
  int64_t shape[4] = {};
  int64_t strides[4] = {};
  uint64_t span = 0;
  // Element offset of token t's head h in the buffer (t in row-major order of the leading dimensions).
  uint64_t head(uint64_t t, uint64_t h) const;
};

struct RopeCase {
  Dtype dtype = Dtype::f32;
  Layout layout = Layout::interleaved;
  uint32_t head_dim = 0;
  uint32_t rotary_dim = 0;
  uint32_t n_heads = 1;
  std::vector<int64_t> positions;  // n_pos_axes per token, axis-major: positions[axis * n_tokens + t]
  double base = 10000.0;
  double position_scale = 1.0;
  std::vector<double> inv_freq;  // empty, or rotary_dim/2 frequencies replacing theta_i
  Bytes input;                   // [n_tokens][n_heads][head_dim] of dtype

  // ABI v2 (neutral values: a v1 call). See include/ropecheck/kernel_abi.h.
  uint32_t rotary_offset = 0;          // first rotated element of each head
  uint32_t n_pos_axes = 1;             // position axes (1..4)
  std::vector<uint8_t> pair_axis;      // empty (all axis 0) or rotary_dim/2 axis indices
  double attention_factor = 1.0;       // multiplies cos and sin
  std::optional<FrequencyRule> freq_rule;  // theta_i from this rule (inv_freq empty); its attention
                                           // factor fields are not used (attention_factor is)
  uint64_t rule_seq_len = 0;           // the rule's seq_len (dynamic, longrope); 0 = none

  // ABI v3 (neutral: forward, no table). With a table, base, position_scale, inv_freq and freq_rule are not
  // used (inv_freq empty, no rule), and attention_factor is 1 except for an angle table.
  Direction direction = Direction::forward;
  std::optional<CosSinTable> table;
  std::optional<TensorCall> tensor;  // made in the tensor form (its validity: validate())

  size_t n_tokens() const { return n_pos_axes ? positions.size() / n_pos_axes : 0; }
  // Position of token t on an axis, and the axis that drives pair i.
  int64_t position(size_t t, uint32_t axis = 0) const { return positions[axis * n_tokens() + t]; }
  uint32_t axis_of(uint32_t pair) const { return pair_axis.empty() ? 0 : pair_axis[pair]; }
  int64_t pair_position(size_t t, uint32_t pair) const { return position(t, axis_of(pair)); }
  // Whether every v2 field is neutral and no position is negative: abi_version 1 expresses the call.
  bool is_v1() const;
  // Whether a v3 field is not neutral (the direction, a table).
  bool uses_v3() const { return direction != Direction::forward || table.has_value() || tensor.has_value(); }
  // Whether a v4 field is not neutral (a table whose rows follow the tokens).
  bool uses_v4() const { return table && table->by_token; }
  // The lowest abi_version that expresses the call (1 when is_v1(), 3 when uses_v3(), 4 when uses_v4(), else 2).
  uint32_t min_abi_version() const { return uses_v4() ? 4 : uses_v3() ? 3 : is_v1() ? 1 : 2; }
  size_t n_elements() const { return n_tokens() * n_heads * head_dim; }
  size_t n_bytes() const { return n_elements() * dtype_size(dtype); }
  size_t n_pairs_per_head() const { return rotary_dim / 2; }

  // Empty when the case is well formed (for the reference and for kernels); otherwise why not.
  std::string validate() const;
  std::string validate_for_kernel() const { return validate(); }
  std::string validate_table() const;  // the table's part of validate() ("" when there is no table)
  std::string validate_tensor() const;  // the tensor form's part ("" when the call is not in it)

  // The tensor form: the layout of q (0), q_out (1), k (2), k_out (3); and k as a case of its own (the same
  // parameters and positions, k_heads heads, k_input), which the reference and the judge take as any case.
  TensorLayout tensor_layout(int which) const;
  RopeCase k_case() const;

  // The ABI call for this case, reading `in` and writing `out`, at abi_version `version` (0: the lowest that
  // expresses it, min_abi_version()). At a version >= 2 every v2 field carries its value explicitly (neutral
  // values included: the harness never relies on a zero meaning neutral). A version below min_abi_version()
  // is a programming error (std::logic_error). The call points into this case (positions, tables, the
  // rule's descriptor): keep the case alive and unchanged while the call is in use.
  rc_rope_args args(const void* in, void* out, uint32_t version = 0) const;

  // The rule's ABI descriptor (filled by args()).
  mutable rc_freq_rule abi_rule{};
  // The table as the ABI v3 draft lays it out for its kind (filled by args()): table and table2's bytes, shapes.
  mutable Bytes abi_table_bytes[2];
  mutable int64_t abi_table_shape[2][3] = {{0, 0, 0}, {0, 0, 0}};
  mutable int32_t abi_table_ndim = 2;  // 3: a per-token table of a rank-4 call ({B, S, W})

  // One line: dtype, layout, dims, heads, tokens, base, scale, table.
  std::string summary() const;
};

// The element offsets (within the rotated slice) of pair i for a layout.
inline std::pair<uint32_t, uint32_t> pair_dims(Layout l, uint32_t rotary_dim, uint32_t i) {
  if (l == Layout::interleaved) return {2 * i, 2 * i + 1};
  return {i, i + rotary_dim / 2};
}

// The element offsets (within a head) of pair i of a case: its layout's pair moved by rotary_offset.
inline std::pair<uint32_t, uint32_t> pair_elements(const RopeCase& c, uint32_t i) {
  const auto [d0, d1] = pair_dims(c.layout, c.rotary_dim, i);
  return {c.rotary_offset + d0, c.rotary_offset + d1};
}

// Whether element d of a head is rotated (in [rotary_offset, rotary_offset + rotary_dim)).
inline bool is_rotated(const RopeCase& c, uint32_t d) {
  return d >= c.rotary_offset && d < c.rotary_offset + c.rotary_dim;
}

// ABI descriptor <-> rule.
rc_freq_rule abi_freq_rule(const FrequencyRule& r, uint64_t seq_len);
FrequencyRule freq_rule_from_abi(const rc_freq_rule& a, uint32_t rotary_dim);

// Element offset (within the whole buffer) of the first element of a head.
inline size_t head_offset(const RopeCase& c, size_t token, size_t head) {
  return (token * c.n_heads + head) * c.head_dim;
}

// A model's configuration as a case template (reference/hf_config.hpp model_case makes one from a Hugging
// Face config): every field a model fixes -- layout, head_dim, rotary_dim, rotary_offset, base,
// position_scale (1), inv_freq (none), freq_rule, rule_seq_len, attention_factor, n_pos_axes, pair_axis --
// copied from `model` into c, which keeps its dtype, heads and tokens. c's positions (one axis) become axis
// 0; axis a > 0 of token t takes the axis-0 position of token (t + a) mod n_tokens (so every axis sees the
// generator's mix of positions, and different axes differ). The input is rebuilt with model.head_dim
// elements per head: element k of a head is c's element k mod c.head_dim of the same token and head (the
// generator's values, special values included, keep their mix).
void apply_case_template(const RopeCase& model, RopeCase& c);

// The rotated slice a kernel takes when it takes no other, for a run without a model (GPT-NeoX's rotary_pct, GPT-J's
// rotary_dim, DeepSeek's slice at an offset): --rotary-pct / --rotary-dim / --rotary-offset, or found by the gate's
// probes (docs/gate.md, "Partial rotary"). A rule of the head: rotary_dim = int(head_dim * fraction) (Hugging Face's
// int(head_size * rotary_pct)) when fraction > 0, else rotary_dim fixed; rotary_offset fixed; head_dim fixed too
// when head_dim > 0.
struct RotarySlice {
  double fraction = 0;
  uint32_t rotary_dim = 0;
  uint32_t rotary_offset = 0;
  uint32_t head_dim = 0;
  // The rotary_dim of a head of head_dim elements under the rule; 0 where the rule gives it no slice (odd, none,
  // or past the head's end).
  uint32_t rotary_dim_of(uint32_t head_dim) const;
  // The smallest head_dim >= at_least the rule gives a slice of (0: none up to 65536).
  uint32_t head_dim_from(uint32_t at_least) const;
  // "rotary_dim = int(head_dim * 0.25)", "rotary_dim 64 of any head_dim", "rotary_dim 64 at offset 128 of head_dim
  // 192".
  std::string describe() const;
  bool operator==(const RotarySlice& o) const {
    return fraction == o.fraction && rotary_dim == o.rotary_dim && rotary_offset == o.rotary_offset &&
           head_dim == o.head_dim;
  }
};

// c takes the rule's slice: head_dim raised to the smallest one at least c's that the rule gives a slice of, rotary_dim
// and rotary_offset the rule's; an inv_freq table or pair axis map resized to the new pairs (pair i takes entry
// i * old / new); the input rebuilt as apply_case_template rebuilds it. A case with a table is left as it is (its
// table fixes its pairs).
void apply_rotary_slice(const RotarySlice& s, RopeCase& c);

// Build a case from an ABI call (copies the input).
RopeCase case_from_args(const rc_rope_args& a);

// C99 hex float of a double ("%a").
std::string hexfloat(double v);

}  // namespace ropecheck
