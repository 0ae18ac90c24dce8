#include "impls/registry.hpp"

#include "core/abi_versions.hpp"
#include "impls/rule_theta.hpp"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstring>

namespace ropecheck {

bool Implementation::supports(Dtype d) const { return std::find(dtypes.begin(), dtypes.end(), d) != dtypes.end(); }
bool Implementation::supports(Layout l) const { return std::find(layouts.begin(), layouts.end(), l) != layouts.end(); }

int check_kernel_args(const rc_rope_args* a, uint32_t newest) {
  if (!a) return 2;
  if (a->abi_version < 1 || a->abi_version > newest) return RC_UNSUPPORTED;
  // The tensor form (v3 draft, q.data non-NULL): in, out, positions, n_tokens and n_heads are unused (zero);
  // its tensors are checked by the kernel that takes it (impls/tensor_form.hpp). In the legacy form every
  // tensor is absent.
  const bool tensor = a->abi_version >= 3 && a->q.data;
  if (a->abi_version >= 3) {
    if (a->direction > RC_INVERSE || a->table_kind > RC_TABLE_ANGLE) return 2;
    if (a->abi_version >= 4 && (a->table_rows > RC_ROWS_BY_TOKEN ||
                                (a->table_rows == RC_ROWS_BY_TOKEN && a->table_kind == RC_TABLE_NONE)))
      return 2;
    if (!tensor && (a->q_out.data || a->k.data || a->k_out.data || a->pos.data || a->seq_offsets.data ||
                    a->cu_seqlens.data))
      return 2;
  }
  const bool v2 = a->abi_version >= 2;
  if (a->dtype > RC_BF16 || a->layout > RC_HALF_SPLIT) return 2;
  const uint64_t offset = v2 ? a->rotary_offset : 0;
  if (a->rotary_dim < 2 || a->rotary_dim % 2 || offset + a->rotary_dim > a->head_dim) return 2;
  if (tensor ? (a->n_heads || a->n_tokens || a->in || a->out || a->positions) : a->n_heads == 0) return 2;
  if (a->n_tokens && (!a->positions || !a->in || !a->out)) return 2;
  const uint32_t axes = v2 ? a->n_pos_axes : 1;
  if (axes < 1 || axes > 4) return 2;
  if (!v2)
    for (uint64_t t = 0; t < a->n_tokens; ++t)
      if (a->positions[t] < 0) return 2;
  if (v2 && a->pair_axis)
    for (uint32_t i = 0; i < a->rotary_dim / 2; ++i)
      if (a->pair_axis[i] >= axes) return 2;
  if (v2 && !(std::isfinite(a->attention_factor) && a->attention_factor > 0)) return 2;
  if (v2 && a->freq_rule) {
    if (a->freq_rule->kind > RC_FREQ_LLAMA3) return RC_UNSUPPORTED;
    if (!rule_arguments_ok(a)) return 2;
  } else if (!a->inv_freq && !(std::isfinite(a->base) && a->base > 0)) {
    return 2;
  }
  if (!std::isfinite(a->position_scale)) return 2;
  return RC_OK;
}

int normalize_kernel_args(const rc_rope_args* a, rc_rope_args& n, uint32_t newest) {
  if (!a) return 2;
  if (a->abi_version < 1 || a->abi_version > newest) return RC_UNSUPPORTED;
  n = rc_rope_args{};
  // Only the fields of the call's version: an older caller's struct ends where its version's fields end.
  if (a->abi_version == 1) std::memcpy(&n, a, offsetof(rc_rope_args, rotary_offset));
  else if (a->abi_version == 2) std::memcpy(&n, a, offsetof(rc_rope_args, direction));
  else if (a->abi_version == 3) std::memcpy(&n, a, offsetof(rc_rope_args, table_rows));
  else n = *a;
  if (n.n_pos_axes == 0) n.n_pos_axes = 1;
  if (n.attention_factor == 0) n.attention_factor = 1.0;
  return check_kernel_args(&n, newest);
}

static std::vector<Implementation> make_registry() {
  std::vector<Implementation> v;
  const std::vector<Dtype> all_d(std::begin(kAllDtypes), std::end(kAllDtypes));
  const std::vector<Layout> all_l(std::begin(kAllLayouts), std::end(kAllLayouts));
  v.push_back({"scalar",
               "portable C++; angles in long double, cos/sin once per (token, pair), f32 arithmetic, RNE stores",
               &ropecheck_scalar_rope, all_d, all_l, true, ""});
  v.push_back({"conventional-fp32",
               "the HF/Meta pipeline: f32 inv_freq, f32 position*inv_freq, cosf/sinf, f32 arithmetic",
               &ropecheck_conventional_fp32_rope, all_d, all_l, true, ""});
  add_simd_implementations(v);
  return v;
}

const std::vector<Implementation>& implementations() {
  static const std::vector<Implementation> v = make_registry();
  return v;
}

const Implementation* find_implementation(std::string_view name) {
  for (const auto& i : implementations())
    if (i.name == name) return &i;
  return nullptr;
}

std::vector<std::string> implementation_names() {
  std::vector<std::string> n;
  for (const auto& i : implementations()) n.push_back(i.name);
  return n;
}

int run_kernel(const Implementation& impl, const RopeCase& c, Bytes& out) {
  out.assign(c.n_bytes(), 0);
  const uint32_t v = abi_versions_of(impl.fn).version_for(c.min_abi_version());
  if (v == 0) return RC_UNSUPPORTED;  // the kernel does not speak a version that expresses c: not called
  const rc_rope_args a = c.args(c.input.data(), out.data(), v);
  return impl.fn(&a);
}

int run_kernel_in_place(const Implementation& impl, const RopeCase& c, Bytes& out) {
  out = c.input;
  const uint32_t v = abi_versions_of(impl.fn).version_for(c.min_abi_version());
  if (v == 0) return RC_UNSUPPORTED;
  const rc_rope_args a = c.args(out.data(), out.data(), v);
  return impl.fn(&a);
}

}  // namespace ropecheck
