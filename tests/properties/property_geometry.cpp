// Geometric properties: a RoPE kernel applies a rotation per pair.
//
//  - orthogonality: the matrix M of the kernel at position m (columns: the
//    kernel applied to scaled basis vectors) has M^T M ~ I; and
//    <R_m x, R_m y> ~ <x, y>;
//  - norm preservation: ||R_m x|| ~ ||x||, per pair and per head;
//  - relative invariance: <R_m q, R_n k> ~ <R_{m+t} q, R_{n+t} k>, t <= 2^30;
//  - composition: R_a(R_b x) ~ R_{a+b} x.
//
// The definitions (and the derivations of their tolerances) are in suite_geometry.cpp.
#include "properties/property_support.hpp"

namespace ropecheck::props {

class Geometry : public KernelTest {};

TEST_P(Geometry, OrthogonalityBasisMatrix) { check_property(property_OrthogonalityBasisMatrix(handle(), dtype(), layout())); }


TEST_P(Geometry, InnerProductsPreserved) { check_property(property_InnerProductsPreserved(handle(), dtype(), layout())); }


TEST_P(Geometry, NormPreserved) { check_property(property_NormPreserved(handle(), dtype(), layout())); }

TEST_P(Geometry, RelativeInvariance) { check_property(property_RelativeInvariance(handle(), dtype(), layout())); }

TEST_P(Geometry, Composition) { check_property(property_Composition(handle(), dtype(), layout())); }

INSTANTIATE_TEST_SUITE_P(Registry, Geometry, testing::ValuesIn(kernel_params()), param_name);

}  // namespace ropecheck::props
