// Identity and memory properties: position 0 is the identity, pass-through dims keep the input (the built-ins
// declare identity=bits: bit for bit), the input is untouched when out != in, in-place equals out-of-place,
// and the two layouts agree: interleaved(x) = P^-1 halfsplit(P x).
#include "properties/property_support.hpp"

namespace ropecheck::props {

class Memory : public KernelTest {};
class Layouts : public KernelTest {};

TEST_P(Memory, PositionZeroIsIdentity) { check_property(property_PositionZeroIsIdentity(handle(), dtype(), layout())); }


TEST_P(Memory, PassThroughDimsKept) { check_property(property_PassThroughDimsKept(handle(), dtype(), layout())); }


TEST_P(Memory, InputUntouchedOutOfPlace) { check_property(property_InputUntouchedOutOfPlace(handle(), dtype(), layout())); }


TEST_P(Memory, InPlaceEqualsOutOfPlace) { check_property(property_InPlaceEqualsOutOfPlace(handle(), dtype(), layout())); }

TEST_P(Layouts, InterleavedEqualsPermutedHalfSplit) { check_property(property_InterleavedEqualsPermutedHalfSplit(handle(), dtype(), layout())); }

INSTANTIATE_TEST_SUITE_P(Registry, Memory, testing::ValuesIn(kernel_params()), param_name);
INSTANTIATE_TEST_SUITE_P(Registry, Layouts, testing::ValuesIn(kernel_dtype_params()), param_name_no_layout);

}  // namespace ropecheck::props
