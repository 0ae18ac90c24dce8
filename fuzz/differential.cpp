#include "fuzz/differential.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <optional>
#include <sstream>

#include "core/abi_versions.hpp"
#include "properties/predicates.hpp"
#include "properties/judge.hpp"
#include "reference/reference.hpp"

namespace ropecheck::fuzz {
namespace {

std::string header(const Implementation& impl, const RopeCase& c, const std::string& what) {
  return "ropecheck fuzz: implementation '" + impl.name + "' " + what + "\n" + describe_case(c);
}

Layout other(Layout l) { return l == Layout::interleaved ? Layout::half_split : Layout::interleaved; }

// The buffers are Bytes of exactly the tensor's size (a vector made with its size holds no spare capacity for an
// overrun to hide in: AddressSanitizer sees a read or write past the end), handed to the predicates as they are
// (no copies). They are made once per case and filled afresh for each implementation: one set per
// implementation was 45 of an execution's ~340 allocations, each filled and poisoned by ASan.
struct Buffers {
  explicit Buffers(size_t nb) : in(nb), out(nb), io(nb), in2(nb), out2(nb) {}
  Bytes in, out, io, in2, out2;
  // Outputs of this case the judge passed, with what they were judged under: an implementation whose output is
  // bit for bit one of them under the same reference and criteria gets the same judgement (the SIMD targets and
  // `scalar` give the same bits by design; judging each again was 18 % of an execution on grown inputs).
  struct Passed {
    Bytes out;
    const ReferenceOutput* ref;
    double bound;
    bool identity_bits;
  };
  std::vector<Passed> passed;
};

// Copies `from` into `to` (both the tensor's size).
void refill(Bytes& to, const Bytes& from) { std::memcpy(to.data(), from.data(), to.size()); }

// The same case in the other layout on the permuted input, made once per case for every implementation that
// promises bit-exact layouts; `rounded`: the correctly rounded output in that layout (the reference's, permuted).
struct Twin {
  RopeCase rope;
  const Bytes* rounded = nullptr;
};

// `twin`: null when no implementation needs one.
std::string check_one(const FuzzCase& fc, const Implementation& impl, const KernelPromise& promise,
                      const ReferenceOutput& ref, const Twin* twin, Buffers& buf) {
  const RopeCase& c = fc.rope;
  const size_t nb = c.n_bytes();
  Bytes& in = buf.in;
  Bytes& out = buf.out;
  refill(in, c.input);
  std::memset(out.data(), 0xa5, nb);  // a kernel that skips an element leaves this pattern
  // At the ABI version the kernel speaks (core/abi_versions.hpp); a case none of them expresses is not made.
  const uint32_t version = abi_versions_of(impl.fn).version_for(c.min_abi_version());
  if (version == 0) return {};
  const rc_rope_args a = c.args(in.data(), out.data(), version);
  const int rc = impl.fn(&a);
  if (rc == RC_UNSUPPORTED) return {};
  if (rc != RC_OK) return header(impl, c, "returned " + std::to_string(rc) + " on a valid case");
  if (const std::string why = props::input_touched(c, c.input, in); !why.empty()) return header(impl, c, why);
  // The correctly rounded output passes every rule of the judge (its error is
  // at most sqrt(2) u, below every bound; the special-value rules are stated
  // on it), so a bit-identical output needs no judging.
  const bool rounded = std::memcmp(out.data(), ref.rounded.data(), nb) == 0;
  if (!rounded) {
    const double bound = promise.bound(c);
    const bool identity_bits = promise.contract.identity_bits;
    const bool judged_before = std::any_of(buf.passed.begin(), buf.passed.end(), [&](const Buffers::Passed& p) {
      return p.ref == &ref && p.bound == bound && p.identity_bits == identity_bits &&
             std::memcmp(p.out.data(), out.data(), nb) == 0;
    });
    if (!judged_before) {
      JudgeOptions jo;
      jo.max_findings = 4;
      jo.keep_values = false;
      const Judgement j = judge_output(c, ref, out.data(), Criteria::flat_bound(bound, identity_bits), jo);
      if (!j.ok())
        return header(impl, c, "violates the reference under the " + std::string(to_string(promise.angle_model)) +
                                   " angle model") +
               j.report(4);
      buf.passed.push_back({out, &ref, bound, identity_bits});
    }
  }

  if (fc.in_place) {
    Bytes& io = buf.io;
    refill(io, c.input);
    const rc_rope_args ai = c.args(io.data(), io.data(), version);
    const int rci = impl.fn(&ai);
    if (rci != rc)
      return header(impl, c, "returned " + std::to_string(rci) + " in place but " + std::to_string(rc) + " out of place");
    if (const std::string why = props::in_place_violation(c, out, io, promise.contract.identity_bits);
        !why.empty()) return header(impl, c, why);
  }

  if (twin && impl.bit_exact_layouts && impl.supports(twin->rope.layout)) {
    const RopeCase& c2 = twin->rope;
    Bytes& in2 = buf.in2;
    Bytes& out2 = buf.out2;
    refill(in2, c2.input);
    std::memset(out2.data(), 0x5a, nb);
    const rc_rope_args a2 = c2.args(in2.data(), out2.data(), version);
    const int rc2 = impl.fn(&a2);
    if (rc2 == RC_UNSUPPORTED) return {};
    if (rc2 != RC_OK)
      return header(impl, c, "returned " + std::to_string(rc2) + " on the same case in the " +
                                 std::string(to_string(c2.layout)) + " layout");
    // Both outputs the correctly rounded ones: the same bits, relaid (two memcmp; the element-by-element
    // comparison was ~5 % of an execution). Bit-exact layouts take no error bound.
    if (rounded && std::memcmp(out2.data(), twin->rounded->data(), nb) == 0) return {};
    if (const std::string why = props::layouts_violation(c, out, 0.0, c2, out2, 0.0, true,
                                                              promise.contract.identity_bits);
        !why.empty())
      return header(impl, c, "is not layout-consistent (bit_exact_layouts): " + why);
  }
  return {};
}

}  // namespace

std::string check_implementations(const FuzzCase& fc, const std::vector<JudgedKernel>& impls) {
  const RopeCase& c = fc.rope;
  if (std::string why = c.validate_for_kernel(); !why.empty())
    return "ropecheck fuzz: the decoder produced an invalid case (" + why + ")\n" + describe_case(c);
  std::optional<ReferenceOutput> refs[2];  // by angle model
  std::optional<Twin> twin;                 // the case in the other layout (made when first needed)
  std::vector<size_t> perm;                  // element k of c is element perm[k] of the twin
  std::optional<Bytes> twin_rounded[2];      // by angle model
  Buffers buf(c.n_bytes());
  for (const auto& [impl, promise] : impls) {
    if (!impl->supports(c.dtype) || !impl->supports(c.layout)) continue;
    std::optional<ReferenceOutput>& ref = refs[promise.angle_model == AngleModel::exact ? 0 : 1];
    if (!ref) {
      try {
        ref = reference_rope(c, ReferenceOptions{promise.angle_model});
      } catch (const std::exception& e) {
        return std::string("ropecheck fuzz: the reference failed: ") + e.what() + "\n" + describe_case(c);
      }
    }
    if (impl->bit_exact_layouts && !twin) {
      twin.emplace();
      twin->rope = c;
      twin->rope.layout = other(c.layout);
      perm = props::relayout(c, c.layout, twin->rope.layout);
      for (size_t k = 0; k < c.n_elements(); ++k)
        store_bits(c.dtype, twin->rope.input.data(), perm[k], load_bits(c.dtype, c.input.data(), k));
    }
    if (impl->bit_exact_layouts) {  // (the twin's correctly rounded output under this kernel's angle model)
      std::optional<Bytes>& tr = twin_rounded[promise.angle_model == AngleModel::exact ? 0 : 1];
      if (!tr) {
        tr.emplace(ref->rounded.size());
        for (size_t k = 0; k < c.n_elements(); ++k)
          store_bits(c.dtype, tr->data(), perm[k], load_bits(c.dtype, ref->rounded.data(), k));
      }
      twin->rounded = &*tr;
    }
    if (std::string r = check_one(fc, *impl, promise, *ref, twin ? &*twin : nullptr, buf); !r.empty()) return r;
  }
  return {};
}

namespace {
size_t g_kept = 0;
}

void fail(const std::string& report) {
  std::fputs(report.c_str(), stderr);
  std::fflush(stderr);
  static const bool keep_going = [] {
    const char* e = std::getenv("ROPECHECK_FUZZ_KEEP_GOING");
    return e && *e && std::string(e) != "0";
  }();
  if (!keep_going) std::abort();
  ++g_kept;
}

size_t failures_kept() { return g_kept; }

std::vector<JudgedKernel> registered_implementations() {
  std::vector<JudgedKernel> v;
  for (const Implementation& i : implementations()) v.push_back({&i, promise_of(i)});
  return v;
}

}  // namespace ropecheck::fuzz
