// Bit-exact properties: position 0 is the identity, pass-through dims are
// copied, the input is untouched when out != in, in-place equals out-of-place,
// and the two layouts agree: interleaved(x) = P^-1 halfsplit(P x).
#include <algorithm>
#include <sstream>

#include "properties/generators.hpp"
#include "properties/property_support.hpp"

namespace ropecheck::props {

class Memory : public KernelTest {};
class Layouts : public KernelTest {};

// First differing element of two buffers of the case's dtype, or npos.
size_t first_difference(const RopeCase& c, const void* a, const void* b) {
  for (size_t k = 0; k < c.n_elements(); ++k)
    if (load_bits(c.dtype, a, k) != load_bits(c.dtype, b, k)) return k;
  return size_t(-1);
}

std::string where(const RopeCase& c, size_t k) {
  const size_t per_token = size_t(c.n_heads) * c.head_dim;
  const size_t t = k / per_token, h = (k % per_token) / c.head_dim, dim = k % c.head_dim;
  std::ostringstream o;
  o << "token " << t << " (position " << c.positions[t] << "), head " << h << ", dim " << dim
    << (dim >= c.rotary_dim ? " (pass-through)" : "");
  return o.str();
}

// Call the kernel with caller-owned buffers (out pre-filled with `fill`).
Bytes call_with(const Implementation& im, const RopeCase& c, const Bytes& in, unsigned char fill) {
  Bytes out(c.n_bytes(), fill);
  const rc_rope_args a = c.args(in.data(), out.data());
  const int rc = im.fn(&a);
  if (rc == RC_UNSUPPORTED) RC_DISCARD("the kernel declines this configuration");
  if (rc != RC_OK) RC_FAIL(im.name + " returned " + std::to_string(rc) + " on a well-formed case: " + c.summary());
  return out;
}

Property property_PositionZeroIsIdentity(const Implementation& im, Dtype d, Layout l) {
  return [&im, d, l] {
    RopeCase c = *gen::rope_case(d, l, gen::Values::finite);
    std::fill(c.positions.begin(), c.positions.end(), 0);
    for (int pass = 0; pass < 2; ++pass) {
      const Bytes out = pass == 0 ? run_or_discard(im, c) : run_in_place_or_discard(im, c);
      const size_t k = first_difference(c, out.data(), c.input.data());
      if (k != size_t(-1))
        RC_FAIL(std::string("position 0 is not the identity") + (pass ? " (in place)" : "") + " at " + where(c, k) +
                ": input " + bits_text(c, c.input.data(), k) + ", got " + bits_text(c, out.data(), k) +
                "\n  case: " + c.summary());
    }
  };
}

TEST_P(Memory, PositionZeroIsIdentity) { check_property(property_PositionZeroIsIdentity(impl(), dtype(), layout())); }

Property property_PassThroughDimsBitExact(const Implementation& im, Dtype d, Layout l) {
  return [&im, d, l] {
    RopeCase c = *gen::rope_case(d, l, gen::Values::finite);
    if (c.head_dim == c.rotary_dim) {  // force some pass-through dims
      const uint32_t extra = uint32_t(*gen::uniform_int(1, 17));
      RopeCase w = c;
      w.head_dim = c.rotary_dim + extra;
      w.input = *gen::elements(d, gen::Values::finite, w.n_elements());
      c = w;
    }
    // Pass-through dims hold arbitrary bit patterns: NaN payloads (quiet and
    // signalling), Inf, subnormals -- a kernel must copy them, not convert them.
    const uint32_t all = d == Dtype::f32 ? 0 : 1u << 16;
    for (size_t t = 0; t < c.n_tokens(); ++t)
      for (size_t h = 0; h < c.n_heads; ++h)
        for (uint32_t k = c.rotary_dim; k < c.head_dim; ++k) {
          const uint32_t bits = all ? uint32_t(*gen::uniform_int(0, all))
                                    : uint32_t(*gen::uniform_int(0, int64_t(1) << 32));
          store_bits(d, c.input.data(), head_offset(c, t, h) + k, bits);
        }
    for (int pass = 0; pass < 2; ++pass) {
      const Bytes out = pass == 0 ? run_or_discard(im, c) : run_in_place_or_discard(im, c);
      for (size_t t = 0; t < c.n_tokens(); ++t)
        for (size_t h = 0; h < c.n_heads; ++h)
          for (uint32_t k = c.rotary_dim; k < c.head_dim; ++k) {
            const size_t e = head_offset(c, t, h) + k;
            if (load_bits(d, out.data(), e) != load_bits(d, c.input.data(), e))
              RC_FAIL(std::string("pass-through dim changed") + (pass ? " (in place)" : "") + " at " + where(c, e) +
                      ": input " + bits_text(c, c.input.data(), e) + ", got " + bits_text(c, out.data(), e) +
                      "\n  case: " + c.summary());
          }
    }
  };
}

TEST_P(Memory, PassThroughDimsBitExact) { check_property(property_PassThroughDimsBitExact(impl(), dtype(), layout())); }

Property property_InputUntouchedOutOfPlace(const Implementation& im, Dtype d, Layout l) {
  return [&im, d, l] {
    const RopeCase c = *gen::rope_case(d, l, gen::Values::finite);
    const Bytes in = c.input;
    (void)call_with(im, c, in, 0xa5);
    const size_t k = first_difference(c, in.data(), c.input.data());
    if (k != size_t(-1))
      RC_FAIL("the kernel wrote to its input (out != in) at " + where(c, k) + ": was " +
              bits_text(c, c.input.data(), k) + ", now " + bits_text(c, in.data(), k) + "\n  case: " + c.summary());
  };
}

TEST_P(Memory, InputUntouchedOutOfPlace) { check_property(property_InputUntouchedOutOfPlace(impl(), dtype(), layout())); }

Property property_InPlaceEqualsOutOfPlace(const Implementation& im, Dtype d, Layout l) {
  return [&im, d, l] {
    const RopeCase c = *gen::rope_case(d, l, gen::Values::finite);
    // Out of place into a buffer pre-filled with garbage (0xff bytes: NaN in
    // every dtype): the result must not depend on what out held.
    const Bytes out = call_with(im, c, c.input, 0xff);
    const Bytes inplace = run_in_place_or_discard(im, c);
    const size_t k = first_difference(c, out.data(), inplace.data());
    if (k != size_t(-1))
      RC_FAIL("in-place result differs from out-of-place at " + where(c, k) + ": input " +
              bits_text(c, c.input.data(), k) + ", out of place " + bits_text(c, out.data(), k) + ", in place " +
              bits_text(c, inplace.data(), k) + "\n  case: " + c.summary());
  };
}

TEST_P(Memory, InPlaceEqualsOutOfPlace) { check_property(property_InPlaceEqualsOutOfPlace(impl(), dtype(), layout())); }

// interleaved(x) = P^-1 halfsplit(P x): P sends interleaved dims (2i, 2i+1)
// to half-split dims (i, i + r/2) and keeps pass-through dims. Bit-exact when
// the implementation says so; otherwise both results are within B u of the
// same exact pair, so they differ by at most the sum of their allowances.
Property property_InterleavedEqualsPermutedHalfSplit(const Implementation& im, Dtype d, Layout) {
  return [&im, d] {
    const RopeCase ci =
        *gen::rope_case(d, Layout::interleaved, im.bit_exact_layouts ? gen::Values::finite : gen::Values::safe);
    RopeCase ch = ci;
    ch.layout = Layout::half_split;
    const uint32_t half = ci.rotary_dim / 2;
    for (size_t t = 0; t < ci.n_tokens(); ++t)
      for (size_t h = 0; h < ci.n_heads; ++h) {
        const size_t b = head_offset(ci, t, h);
        for (uint32_t i = 0; i < half; ++i) {
          store_bits(d, ch.input.data(), b + i, load_bits(d, ci.input.data(), b + 2 * i));
          store_bits(d, ch.input.data(), b + i + half, load_bits(d, ci.input.data(), b + 2 * i + 1));
        }
      }
    const Bytes oi = run_or_discard(im, ci);
    const Bytes oh = run_or_discard(im, ch);
    const double bi = im.bound(ci), bh = im.bound(ch);
    for (size_t t = 0; t < ci.n_tokens(); ++t)
      for (size_t h = 0; h < ci.n_heads; ++h) {
        const size_t b = head_offset(ci, t, h);
        for (uint32_t i = 0; i < half; ++i) {
          const size_t ki[2] = {b + 2 * i, b + 2 * i + 1}, kh[2] = {b + i, b + i + half};
          bool ok = true;
          std::string rule;
          if (im.bit_exact_layouts) {
            ok = load_bits(d, oi.data(), ki[0]) == load_bits(d, oh.data(), kh[0]) &&
                 load_bits(d, oi.data(), ki[1]) == load_bits(d, oh.data(), kh[1]);
            rule = "bit-exact";
          } else {
            const double nx = pair_norm(value(ci, ci.input.data(), ki[0]), value(ci, ci.input.data(), ki[1]));
            const double dist = pair_norm(value(ci, oi.data(), ki[0]) - value(ch, oh.data(), kh[0]),
                                          value(ci, oi.data(), ki[1]) - value(ch, oh.data(), kh[1]));
            const double tol = pair_error_allowance(ci, bi, nx) + pair_error_allowance(ch, bh, nx);
            ok = dist <= tol * (1 + 0x1p-50);
            rule = "within " + std::to_string(tol) + " (both allowances)";
          }
          if (!ok)
            RC_FAIL("layouts disagree (" + rule + ") on pair " + std::to_string(i) + " of token " +
                    std::to_string(t) + " (position " + std::to_string(ci.positions[t]) + "), head " +
                    std::to_string(h) + ":\n  input: " + bits_text(ci, ci.input.data(), ki[0]) + ", " +
                    bits_text(ci, ci.input.data(), ki[1]) + "\n  interleaved: " + bits_text(ci, oi.data(), ki[0]) +
                    ", " + bits_text(ci, oi.data(), ki[1]) + "\n  half-split:  " + bits_text(ch, oh.data(), kh[0]) +
                    ", " + bits_text(ch, oh.data(), kh[1]) + "\n  case: " + ci.summary());
        }
        for (uint32_t k = ci.rotary_dim; k < ci.head_dim; ++k)
          if (load_bits(d, oi.data(), b + k) != load_bits(d, oh.data(), b + k))
            RC_FAIL("layouts disagree on pass-through dim " + std::to_string(k) + "\n  case: " + ci.summary());
      }
  };
}

TEST_P(Layouts, InterleavedEqualsPermutedHalfSplit) { check_property(property_InterleavedEqualsPermutedHalfSplit(impl(), dtype(), layout())); }

INSTANTIATE_TEST_SUITE_P(Registry, Memory, testing::ValuesIn(kernel_params()), param_name);
INSTANTIATE_TEST_SUITE_P(Registry, Layouts, testing::ValuesIn(kernel_dtype_params()), param_name_no_layout);

}  // namespace ropecheck::props
