#include "fuzz/differential.hpp"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <memory>
#include <optional>
#include <sstream>

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

bool is_nan_bits(Dtype d, uint32_t bits) { return std::isnan(bits_to_double(d, bits)); }

// Same bits, or both NaN: NaN payloads are not part of any kernel's contract
// (the judge accepts any NaN where NaN is due).
bool same_output(Dtype d, uint32_t a, uint32_t b) { return a == b || (is_nan_bits(d, a) && is_nan_bits(d, b)); }

// The first element where two outputs differ (same_output), or -1.
long first_difference(Dtype d, const void* a, const void* b, size_t n_elements) {
  for (size_t k = 0; k < n_elements; ++k)
    if (!same_output(d, load_bits(d, a, k), load_bits(d, b, k))) return long(k);
  return -1;
}

std::string element_site(const RopeCase& c, size_t k) {
  std::ostringstream o;
  o << "element " << k << " (token " << k / (size_t(c.n_heads) * c.head_dim) << ", head "
    << (k / c.head_dim) % c.n_heads << ", dim " << k % c.head_dim << ")";
  return o.str();
}

std::string header(const Implementation& impl, const RopeCase& c, const std::string& what) {
  return "ropecheck fuzz: implementation '" + impl.name + "' " + what + "\n" + describe_case(c);
}

Layout other(Layout l) { return l == Layout::interleaved ? Layout::half_split : Layout::interleaved; }

// For every element of a buffer in layout `from`, its index in layout `to`.
std::vector<size_t> relayout(const RopeCase& c, Layout from, Layout to) {
  std::vector<uint32_t> dim_map(c.head_dim);
  for (uint32_t k = 0; k < c.head_dim; ++k) dim_map[k] = k;  // pass-through dims stay
  for (uint32_t i = 0; i < c.rotary_dim / 2; ++i) {
    const auto [a0, a1] = pair_dims(from, c.rotary_dim, i);
    const auto [b0, b1] = pair_dims(to, c.rotary_dim, i);
    dim_map[a0] = b0;
    dim_map[a1] = b1;
  }
  std::vector<size_t> v(c.n_elements());
  for (size_t k = 0; k < v.size(); ++k) v[k] = k - k % c.head_dim + dim_map[k % c.head_dim];
  return v;
}

std::string check_one(const FuzzCase& fc, const Implementation& impl, const ReferenceOutput& ref) {
  const RopeCase& c = fc.rope;
  const size_t nb = c.n_bytes(), ne = c.n_elements();
  const Dtype d = c.dtype;
  Buffer in(nb, c.input.data());
  Buffer out(nb);
  std::memset(out.data(), 0xa5, nb);  // a kernel that skips an element leaves this pattern
  const rc_rope_args a = c.args(in.data(), out.data());
  const int rc = impl.fn(&a);
  if (rc == RC_UNSUPPORTED) return {};
  if (rc != RC_OK) return header(impl, c, "returned " + std::to_string(rc) + " on a valid case");
  if (std::memcmp(in.data(), c.input.data(), nb) != 0) {
    const long k = first_difference(d, in.data(), c.input.data(), ne);
    return header(impl, c, "wrote to its input buffer in an out-of-place call, at " + element_site(c, size_t(k)));
  }
  // The correctly rounded output passes every rule of the judge (its error is
  // at most sqrt(2) u, below every bound; the special-value rules are stated
  // on it), so a bit-identical output needs no judging.
  if (std::memcmp(out.data(), ref.rounded.data(), nb) != 0) {
    JudgeOptions jo;
    jo.max_findings = 4;
    jo.keep_values = false;
    const Judgement j = judge_output(c, ref, out.data(), impl.bound(c), jo);
    if (!j.ok())
      return header(impl, c, "violates the reference under the " + std::string(to_string(impl.angle_model)) +
                                 " angle model") +
             j.report(4);
  }

  if (fc.in_place) {
    Buffer io(nb, c.input.data());
    const rc_rope_args ai = c.args(io.data(), io.data());
    const int rci = impl.fn(&ai);
    if (rci != rc)
      return header(impl, c, "returned " + std::to_string(rci) + " in place but " + std::to_string(rc) + " out of place");
    if (const long k = first_difference(d, io.data(), out.data(), ne); k >= 0)
      return header(impl, c, "in place differs from out of place at " + element_site(c, size_t(k)) + ": " +
                                 describe_element(d, load_bits(d, io.data(), size_t(k))) + " vs " +
                                 describe_element(d, load_bits(d, out.data(), size_t(k))));
  }

  const Layout l2 = other(c.layout);
  if (impl.bit_exact_layouts && impl.supports(l2)) {
    RopeCase c2 = c;
    c2.layout = l2;
    Buffer in2(nb), out2(nb);
    std::memset(out2.data(), 0x5a, nb);
    const std::vector<size_t> perm = relayout(c, c.layout, l2);
    for (size_t k = 0; k < ne; ++k) store_bits(d, in2.data(), perm[k], load_bits(d, c.input.data(), k));
    const rc_rope_args a2 = c2.args(in2.data(), out2.data());
    const int rc2 = impl.fn(&a2);
    if (rc2 == RC_UNSUPPORTED) return {};
    if (rc2 != RC_OK)
      return header(impl, c, "returned " + std::to_string(rc2) + " on the same case in the " +
                                 std::string(to_string(l2)) + " layout");
    for (size_t k = 0; k < ne; ++k) {
      const uint32_t g = load_bits(d, out.data(), k), g2 = load_bits(d, out2.data(), perm[k]);
      if (!same_output(d, g, g2))
        return header(impl, c, "is not layout-consistent (bit_exact_layouts): at " + element_site(c, k) + " the " +
                                   std::string(to_string(c.layout)) + " call gives " + describe_element(d, g) +
                                   ", the " + std::string(to_string(l2)) + " call on the permuted input gives " +
                                   describe_element(d, g2));
    }
  }
  return {};
}

}  // namespace

std::string check_implementations(const FuzzCase& fc, const std::vector<const Implementation*>& impls) {
  const RopeCase& c = fc.rope;
  if (std::string why = c.validate_for_kernel(); !why.empty())
    return "ropecheck fuzz: the decoder produced an invalid case (" + why + ")\n" + describe_case(c);
  std::optional<ReferenceOutput> refs[2];  // by angle model
  for (const Implementation* impl : impls) {
    if (!impl->supports(c.dtype) || !impl->supports(c.layout)) continue;
    std::optional<ReferenceOutput>& ref = refs[impl->angle_model == AngleModel::exact ? 0 : 1];
    if (!ref) {
      try {
        ref = reference_rope(c, ReferenceOptions{impl->angle_model});
      } catch (const std::exception& e) {
        return std::string("ropecheck fuzz: the reference failed: ") + e.what() + "\n" + describe_case(c);
      }
    }
    if (std::string r = check_one(fc, *impl, *ref); !r.empty()) return r;
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

std::vector<const Implementation*> registered_implementations() {
  std::vector<const Implementation*> v;
  for (const Implementation& i : implementations()) v.push_back(&i);
  return v;
}

}  // namespace ropecheck::fuzz
