#include "core/abi_versions.hpp"

#include <fmt/format.h>

#include <map>
#include <memory>
#include <mutex>

namespace ropecheck {

namespace {

std::string versions_text(uint32_t mask) {
  std::string s;
  for (uint32_t v = 1; v <= kNewestAbiVersion; ++v)
    if (mask >> v & 1u) s += fmt::format("{}v{}", s.empty() ? "" : ", ", v);
  return s;
}

// What a probe did, in words.
std::string outcome_text(const AbiProbe& p) {
  if (!p.outcome.empty()) return p.outcome;
  if (p.rc == RC_OK) return "returned RC_OK";
  if (p.rc == RC_UNSUPPORTED) return "returned RC_UNSUPPORTED";
  return fmt::format("returned the error code {}", p.rc);
}

}  // namespace

bool AbiVersions::features_sent(bool declared) const {
  if (!probed || accepted == 0) return true;  // nothing learnt: as before
  if (declared) return true;
  return takes(1) && !blind;
}

uint32_t AbiVersions::version_for(uint32_t needed, bool declared) const {
  if (needed < 1) needed = 1;
  if (probed && accepted == 0 && needed == 1 && !(declined >> 1 & 1u))
    for (uint32_t v = 2; v <= kNewestAbiVersion; ++v)
      if (declined >> v & 1u) return v;
  if (!probed || accepted == 0) return needed;
  if (needed == 1) {
    if (takes(1)) return 1;
    for (uint32_t v = 2; v <= kNewestAbiVersion; ++v)
      if (takes(v)) return v;
    return 1;
  }
  if (!features_sent(declared)) return 0;
  for (uint32_t v = needed; v <= kNewestAbiVersion; ++v)
    if (takes(v)) return v;
  // Declared features on a kernel that accepts any version (or took only a lower one): send the version that
  // expresses the case.
  return declared && (blind || accepted) ? needed : 0;
}

std::string AbiVersions::why_not_sent(uint32_t needed) const {
  if (blind)
    return fmt::format("the kernel accepts any abi_version (even {}, which no header defines), so it cannot be "
                       "told apart from a v1 kernel that never reads the v{} fields: not sent (declare the "
                       "features with --supports to have them run)",
                       kUndefinedAbiVersion, needed);
  if (!takes(1)) {
    const uint32_t k = version_for(1);
    return fmt::format("the kernel accepts only abi_version {} (the idiom `abi_version != ROPECHECK_ABI_VERSION` "
                       "built against header v{}): it is sent neutral calls only (declare the features with "
                       "--supports to have them run)",
                       k, k);
  }
  return fmt::format("the kernel speaks ABI {} (it refused a neutral v{} call): not sent", versions_text(accepted),
                     needed);
}

std::string AbiVersions::summary() const {
  if (!probed) return "ABI versions not probed";
  if (accepted == 0) {
    for (const AbiProbe& p : probes)
      if (!p.outcome.empty())
        return fmt::format("not known: the probe call ({}) {} at abi_version {}; calls go as abi_version 1", p.call,
                           p.outcome, p.version);
    return "the kernel refused every probe call at every ABI version";
  }
  std::string s = "the kernel speaks ABI " + versions_text(accepted);
  if (blind) s += fmt::format(" and accepts abi_version {} too (it does not check the version)", kUndefinedAbiVersion);
  if (!features_sent()) {
    s += "; calls using features after v1 are not sent to it";
  } else {
    uint32_t top = 1;  // the versions it took from 1 up without a gap
    while (top < kNewestAbiVersion && takes(top + 1)) ++top;
    if (top < kNewestAbiVersion)
      s += top + 1 == kNewestAbiVersion
               ? fmt::format("; calls using v{} features are not sent to it", kNewestAbiVersion)
               : fmt::format("; calls using features of v{} to v{} are not sent to it", top + 1, kNewestAbiVersion);
  }
  if (!takes(1)) s += fmt::format("; neutral calls go as abi_version {}", version_for(1));
  return s;
}

std::string AbiVersions::refusal() const {
  if (!probed || accepted != 0 || probes.empty()) return "";
  // A probe that crashed or hung is a fault, not a refusal: the rows report it (and its cause) as they find it.
  for (const AbiProbe& p : probes)
    if (!p.outcome.empty()) return "";
  // The simplest call at each version: the first probe made at it.
  std::string s;
  std::map<uint32_t, const AbiProbe*> first;
  for (const AbiProbe& p : probes) first.emplace(p.version, &p);
  const AbiProbe& p1 = *first.begin()->second;
  bool all_declined = true;
  for (const AbiProbe& p : probes) all_declined &= p.outcome.empty() && p.rc == RC_UNSUPPORTED;
  s = fmt::format("{}: the simplest one ({}) {} at abi_version {}",
                  all_declined ? "coverage: the kernel declined every call" : "coverage: the kernel rejected every call",
                  p1.call,
                  outcome_text(p1), p1.version);
  for (const auto& [v, p] : first)
    if (p != &p1) s += fmt::format(", {} at {}", outcome_text(*p), v);
  bool any_unsupported = false, any_error = false;
  for (const AbiProbe& p : probes) {
    any_unsupported |= p.outcome.empty() && p.rc == RC_UNSUPPORTED;
    any_error |= p.outcome.empty() && p.rc != RC_UNSUPPORTED && p.rc != RC_OK;
  }
  s += "; likely causes: ";
  std::vector<std::string> causes;
  if (any_error)
    causes.push_back(fmt::format("a version check that returns an error (the kernel was sent abi_version 1..{}: "
                                 "does it compare with a literal or macro of another header?)",
                                 kNewestAbiVersion));
  causes.push_back("a dtype, layout or head_dim it does not implement (the probes tried f32/f16/bf16 x both "
                   "layouts at head_dim 64 and 128)");
  if (any_unsupported) causes.push_back("a check that declines (RC_UNSUPPORTED) more than it should");
  for (size_t k = 0; k < causes.size(); ++k) s += (k ? "; " : "") + causes[k];
  return s;
}

std::vector<RopeCase> abi_probe_cases(const std::vector<Dtype>& dtypes, const std::vector<Layout>& layouts) {
  std::vector<RopeCase> cases;
  for (uint32_t dim : {64u, 128u})
    for (Dtype d : dtypes)
      for (Layout l : layouts) {
        RopeCase c;
        c.dtype = d;
        c.layout = l;
        c.head_dim = c.rotary_dim = dim;
        c.n_heads = 1;
        c.positions = {1};
        c.base = 10000.0;
        c.input.assign(c.n_bytes(), 0);
        for (uint32_t k = 0; k < dim; ++k)  // small exact values: 1/2, -3/4, 5/8, ...
          store_f32(d, c.input.data(), k, float((k % 2 ? -1.0 : 1.0) * (0.5 + 0.125 * (k % 5))));
        cases.push_back(std::move(c));
      }
  return cases;
}

AbiVersions negotiate_abi(const AbiProbeCall& call, const std::vector<Dtype>& dtypes,
                          const std::vector<Layout>& layouts, const std::function<bool()>& stop) {
  AbiVersions v;
  v.probed = true;
  const std::vector<RopeCase> cases = abi_probe_cases(dtypes, layouts);
  bool ended = false;  // a probe did not return, or `stop` said so: nothing more is asked
  auto probe = [&](const RopeCase& c, uint32_t version) {
    if (ended || (stop && stop())) {
      ended = true;
      return false;
    }
    AbiProbe p = call(c, version);
    p.version = version;
    p.call = fmt::format("{} {} head_dim {}, 1 head, 1 token at position 1", to_string(c.dtype), to_string(c.layout),
                         c.head_dim);
    v.probes.push_back(p);
    if (!p.outcome.empty()) ended = true;  // a crash or hang: one is enough to know
    if (p.outcome.empty() && p.rc == RC_UNSUPPORTED && version <= kNewestAbiVersion) v.declined |= 1u << version;
    return p.ok();
  };
  // Shape by shape, every version on each, until some version takes a shape: the simplest shapes first, and
  // a kernel that takes one answers in about three calls.
  for (const RopeCase& c : cases) {
    uint32_t took = 0;
    for (uint32_t ver = 1; ver <= kNewestAbiVersion && !took && !ended; ++ver)
      if (probe(c, ver)) took = ver;
    if (took) {
      // The shape is fine: the versions after `took` are decided on it (those before were refused on it).
      v.accepted |= 1u << took;
      for (uint32_t ver = took + 1; ver <= kNewestAbiVersion; ++ver)
        if (probe(c, ver)) v.accepted |= 1u << ver;
      v.blind = probe(c, kUndefinedAbiVersion);
      break;
    }
    if (ended) break;
  }
  return v;
}

const AbiVersions& abi_versions_of(rc_rope_apply_fn fn) {
  static std::mutex mu;
  static std::map<rc_rope_apply_fn, std::unique_ptr<AbiVersions>> known;
  std::lock_guard<std::mutex> lock(mu);
  auto& slot = known[fn];
  if (!slot) {
    const std::vector<Dtype> d(std::begin(kAllDtypes), std::end(kAllDtypes));
    const std::vector<Layout> l(std::begin(kAllLayouts), std::end(kAllLayouts));
    slot = std::make_unique<AbiVersions>(negotiate_abi(
        [fn](const RopeCase& c, uint32_t version) {
          Bytes out(c.n_bytes(), 0);
          const rc_rope_args a = c.args(c.input.data(), out.data(), version);
          AbiProbe p;
          p.rc = fn(&a);
          return p;
        },
        d, l));
  }
  return *slot;
}

}  // namespace ropecheck
