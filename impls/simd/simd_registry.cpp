// SIMD implementations register here (one per compiled Highway target).
// Until the SIMD kernels are built, the registry has none.
#include "impls/registry.hpp"

namespace ropecheck {
void add_simd_implementations(std::vector<Implementation>&) {}
}  // namespace ropecheck
