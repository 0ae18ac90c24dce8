// SIMD implementations: one per compiled Highway target that this CPU
// supports (simd-avx3_dl, simd-avx3, simd-avx2, simd-sse4, simd-ssse3,
// simd-scalar), plus `simd`, the dynamically dispatched one. Each computes
// bit-for-bit what `scalar` computes (the same cos/sin row, vectorised; the
// same f32 products and sums; RNE stores), so each is held to `scalar`'s
// error model.
#include "impls/registry.hpp"
#include "impls/simd/simd_kernels.hpp"

namespace ropecheck {

void add_simd_implementations(std::vector<Implementation>& out) {
  const std::vector<Dtype> all_d(std::begin(kAllDtypes), std::end(kAllDtypes));
  const std::vector<Layout> all_l(std::begin(kAllLayouts), std::end(kAllLayouts));
  out.push_back({"simd",
                 "Highway, dynamically dispatched (" + simd::dispatched_target_name() +
                     " here); bit-identical to scalar: double-double angles, f32 rotation, RNE stores",
                 &ropecheck_simd_rope, all_d, all_l, true, ""});
  for (const auto& t : simd::supported_targets())
    out.push_back({t.name,
                   "Highway target " + t.name.substr(5) +
                       " called directly; bit-identical to scalar (double-double angles, f32 rotation, RNE stores)",
                   t.fn, all_d, all_l, true, ""});
}

}  // namespace ropecheck
