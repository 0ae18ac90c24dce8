// Identity and memory properties: position 0 is the identity and pass-through dims keep the input (the
// contract's identity clause: values, or bits under identity=bits), the input is untouched when out != in,
// in-place equals out-of-place, and the two layouts agree: interleaved(x) = P^-1 halfsplit(P x) (the same
// output under the identity clause).
#include <algorithm>

#include "properties/failure.hpp"
#include "properties/generators.hpp"
#include "properties/suite.hpp"

namespace ropecheck::props {

Property property_PositionZeroIsIdentity(KernelHandle& ker, Dtype d, Layout l, const Scope& scope) {
  return [&ker, d, l, scope] {
    RopeCase c = *gen::rope_case(d, l, gen::Values::finite, scoped(scope));
    std::fill(c.positions.begin(), c.positions.end(), 0);
    for (int pass = 0; pass < 2; ++pass) {
      const std::optional<Bytes> got = pass == 0 ? run_or_discard(ker, c) : run_if_accepted(ker, c, {true, -1});
      if (!got) continue;  // no in-place mode: the out-of-place pass was checked
      const Bytes& out = *got;
      if (!ker.criteria(c).identity_bits) {
        // identity=values: the judge holds every angle-0 pair and every pass-through element to the input's
        // values (+-0 alike, any NaN for a NaN).
        const Judgement j = judge_with(ker, c, out);
        if (!j.ok())
          RC_FAIL(FailureText(std::string("position 0 is not the identity (identity=values)") + (pass ? " (in place)" : ""))
                      .note(": " + j.report(2))
                      .str());
        continue;
      }
      const size_t k = first_difference(c, out.data(), c.input.data());
      if (k != SIZE_MAX)
        RC_FAIL(FailureText(std::string("position 0 is not the identity (identity=bits)") + (pass ? " (in place)" : ""))
                    .note(" at " + element_where(c, k))
                    .in(c)
                    .elements("input", c, c.input.data(), {k})
                    .elements("got", c, out.data(), {k})
                    .str());
    }
  };
}

Property property_PassThroughDimsKept(KernelHandle& ker, Dtype d, Layout l, const Scope& scope) {
  return [&ker, d, l, scope] {
    RopeCase c = *gen::rope_case(d, l, gen::Values::finite, scoped(scope));
    if (c.head_dim == c.rotary_dim) {  // force some pass-through dims
      const uint32_t extra = uint32_t(*gen::uniform_int(1, 17));
      RopeCase w = c;
      w.head_dim = c.rotary_dim + extra;
      w.input = *gen::elements(d, gen::Values::finite, w.n_elements());
      c = w;
    }
    // Pass-through dims hold arbitrary bit patterns: NaN payloads (quiet and signalling), Inf, subnormals,
    // signed zeros -- a kernel keeps their values (identity=values: a NaN stays a NaN, +-0 alike) or, under
    // identity=bits, copies their bits.
    const uint32_t all = d == Dtype::f32 ? 0 : 1u << 16;
    for (size_t t = 0; t < c.n_tokens(); ++t)
      for (size_t h = 0; h < c.n_heads; ++h)
        for (uint32_t k = 0; k < c.head_dim; ++k) {
          if (is_rotated(c, k)) continue;
          const uint32_t bits = all ? uint32_t(*gen::uniform_int(0, all))
                                    : uint32_t(*gen::uniform_int(0, int64_t(1) << 32));
          store_bits(d, c.input.data(), head_offset(c, t, h) + k, bits);
        }
    const Criteria cr = ker.criteria(c);
    for (int pass = 0; pass < 2; ++pass) {
      const std::optional<Bytes> got = pass == 0 ? run_or_discard(ker, c) : run_if_accepted(ker, c, {true, -1});
      if (!got) continue;  // no in-place mode: the out-of-place pass was checked
      const Bytes& out = *got;
      for (size_t t = 0; t < c.n_tokens(); ++t)
        for (size_t h = 0; h < c.n_heads; ++h)
          for (uint32_t k = 0; k < c.head_dim; ++k) {
            if (is_rotated(c, k)) continue;
            const size_t e = head_offset(c, t, h) + k;
            if (!keeps_input(cr, d, load_bits(d, c.input.data(), e), load_bits(d, out.data(), e)))
              RC_FAIL(FailureText(std::string("pass-through dim changed") + (pass ? " (in place)" : ""))
                          .note(" at " + element_where(c, e) +
                                (cr.identity_bits ? " (identity=bits: its bits kept)" : " (identity=values: its value kept)"))
                          .in(c)
                          .elements("input", c, c.input.data(), {e})
                          .elements("got", c, out.data(), {e})
                          .str());
          }
    }
  };
}

Property property_InputUntouchedOutOfPlace(KernelHandle& ker, Dtype d, Layout l, const Scope& scope) {
  return [&ker, d, l, scope] {
    const RopeCase c = *gen::rope_case(d, l, gen::Values::finite, scoped(scope));
    RunResult r = ker.run(c, {false, 0xa5});
    if (r.status == RunResult::Status::declined) RC_DISCARD("the kernel declines this configuration");
    // A handle that checks the input itself (the gate's host) reports a change as a failed call.
    if (r.status == RunResult::Status::failed) RC_FAIL(FailureText(r.failure).in(c).str());
    if (r.input_after) {
      const std::string why = input_touched(c, c.input, *r.input_after);
      if (!why.empty()) RC_FAIL(why);
    }
  };
}

Property property_InPlaceEqualsOutOfPlace(KernelHandle& ker, Dtype d, Layout l, const Scope& scope) {
  return [&ker, d, l, scope] {
    const RopeCase c = *gen::rope_case(d, l, gen::Values::finite, scoped(scope));
    // Out of place into a buffer pre-filled with garbage (0xff bytes: NaN in
    // every dtype): the result must not depend on what out held.
    const Bytes out = run_or_discard(ker, c, {false, 0xff});
    const Bytes inplace = run_in_place_or_discard(ker, c);
    const std::string why = in_place_violation(c, out, inplace, ker.criteria(c).identity_bits);
    if (!why.empty()) RC_FAIL(why);
  };
}

// interleaved(x) = P^-1 halfsplit(P x): P sends interleaved dims (2i, 2i+1)
// to half-split dims (i, i + r/2) and keeps pass-through dims. The same output
// (under the identity clause) when the implementation says so; otherwise both
// results are within B u of the same exact pair, so they differ by at most the
// sum of their allowances, and their pass-through dims are the same output.
Property property_InterleavedEqualsPermutedHalfSplit(KernelHandle& ker, Dtype d, Layout, const Scope& scope) {
  return [&ker, d, scope] {
    const RopeCase ci = *gen::rope_case(d, Layout::interleaved,
                                        ker.bit_exact_layouts() ? gen::Values::finite : gen::Values::safe, scoped(scope));
    const RopeCase ch = half_split_twin(ci);
    const Bytes oi = run_or_discard(ker, ci);
    const Bytes oh = run_or_discard(ker, ch);
    const std::string why = layouts_violation(ci, oi, ker.bound(ci), ch, oh, ker.bound(ch), ker.bit_exact_layouts(),
                                              ker.criteria(ci).identity_bits);
    if (!why.empty()) RC_FAIL(why);
  };
}

}  // namespace ropecheck::props
