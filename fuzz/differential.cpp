#include "fuzz/differential.hpp"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <memory>
#include <optional>
#include <sstream>

#include "core/abi_versions.hpp"
#include "properties/predicates.hpp"
#include "properties/judge.hpp"
#include "reference/reference.hpp"

namespace ropecheck::fuzz {
namespace {

// An exact-size heap block (no spare capacity for an overrun to hide in).
struct Buffer {
  explicit Buffer(size_t n) : size(n), p(new unsigned char[n]) {}
  Buffer(size_t n, const unsigned char* from) : Buffer(n) { std::memcpy(p.get(), from, n); }
  size_t size;
  std::unique_ptr<unsigned char[]> p;
  unsigned char* data() { return p.get(); }
  const unsigned char* data() const { return p.get(); }
};


std::string header(const Implementation& impl, const RopeCase& c, const std::string& what) {
  return "ropecheck fuzz: implementation '" + impl.name + "' " + what + "\n" + describe_case(c);
}

Layout other(Layout l) { return l == Layout::interleaved ? Layout::half_split : Layout::interleaved; }

std::string check_one(const FuzzCase& fc, const Implementation& impl, const KernelPromise& promise,
                      const ReferenceOutput& ref) {
  const RopeCase& c = fc.rope;
  const size_t nb = c.n_bytes(), ne = c.n_elements();
  const Dtype d = c.dtype;
  Buffer in(nb, c.input.data());
  Buffer out(nb);
  std::memset(out.data(), 0xa5, nb);  // a kernel that skips an element leaves this pattern
  // At the ABI version the kernel speaks (core/abi_versions.hpp); a case none of them expresses is not made.
  const uint32_t version = abi_versions_of(impl.fn).version_for(c.min_abi_version());
  if (version == 0) return {};
  const rc_rope_args a = c.args(in.data(), out.data(), version);
  const int rc = impl.fn(&a);
  if (rc == RC_UNSUPPORTED) return {};
  if (rc != RC_OK) return header(impl, c, "returned " + std::to_string(rc) + " on a valid case");
  {
    const Bytes after(in.data(), in.data() + nb);
    if (const std::string why = props::input_touched(c, c.input, after); !why.empty()) return header(impl, c, why);
  }
  // The correctly rounded output passes every rule of the judge (its error is
  // at most sqrt(2) u, below every bound; the special-value rules are stated
  // on it), so a bit-identical output needs no judging.
  if (std::memcmp(out.data(), ref.rounded.data(), nb) != 0) {
    JudgeOptions jo;
    jo.max_findings = 4;
    jo.keep_values = false;
    const Judgement j =
        judge_output(c, ref, out.data(), Criteria::flat_bound(promise.bound(c), promise.contract.identity_bits), jo);
    if (!j.ok())
      return header(impl, c, "violates the reference under the " + std::string(to_string(promise.angle_model)) +
                                 " angle model") +
             j.report(4);
  }

  if (fc.in_place) {
    Buffer io(nb, c.input.data());
    const rc_rope_args ai = c.args(io.data(), io.data(), version);
    const int rci = impl.fn(&ai);
    if (rci != rc)
      return header(impl, c, "returned " + std::to_string(rci) + " in place but " + std::to_string(rc) + " out of place");
    const Bytes oop(out.data(), out.data() + nb), inp(io.data(), io.data() + nb);
    if (const std::string why = props::in_place_violation(c, oop, inp, promise.contract.identity_bits);
        !why.empty()) return header(impl, c, why);
  }

  const Layout l2 = other(c.layout);
  if (impl.bit_exact_layouts && impl.supports(l2)) {
    RopeCase c2 = c;
    c2.layout = l2;
    Buffer in2(nb), out2(nb);
    std::memset(out2.data(), 0x5a, nb);
    const std::vector<size_t> perm = props::relayout(c, c.layout, l2);
    for (size_t k = 0; k < ne; ++k) store_bits(d, in2.data(), perm[k], load_bits(d, c.input.data(), k));
    c2.input.assign(in2.data(), in2.data() + nb);
    const rc_rope_args a2 = c2.args(in2.data(), out2.data(), version);
    const int rc2 = impl.fn(&a2);
    if (rc2 == RC_UNSUPPORTED) return {};
    if (rc2 != RC_OK)
      return header(impl, c, "returned " + std::to_string(rc2) + " on the same case in the " +
                                 std::string(to_string(l2)) + " layout");
    const Bytes o1(out.data(), out.data() + nb), o2(out2.data(), out2.data() + nb);
    if (const std::string why = props::layouts_violation(c, o1, promise.bound(c), c2, o2, promise.bound(c2), true,
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
    if (std::string r = check_one(fc, *impl, promise, *ref); !r.empty()) return r;
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
