#include "properties/localisation.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <set>

namespace ropecheck {

namespace {

// "56-59", "3, 7, 9", "0-3, 8-11": ascending indices as ranges (at most `most` ranges, then "...").
template <typename T>
std::string ranges(const std::vector<T>& v, size_t most = 4) {
  std::string s;
  size_t shown = 0;
  for (size_t k = 0; k < v.size();) {
    size_t e = k;
    while (e + 1 < v.size() && v[e + 1] == v[e] + 1) ++e;
    if (shown == most) return s + ", ...";
    s += (s.empty() ? "" : ", ") + (e == k ? fmt::format("{}", v[k]) : fmt::format("{}-{}", v[k], v[e]));
    ++shown;
    k = e + 1;
  }
  return s;
}

template <typename T>
std::string which(const char* what, const char* whats, const std::vector<T>& v, uint64_t n) {
  if (v.size() == n) return fmt::format("every {}", what);
  std::string s = fmt::format("{} {} of {}", v.size() == 1 ? what : whats, ranges(v), n);
  if (n - v.size() == 1) {  // the one right: named
    for (uint64_t k = 0; k < n; ++k)
      if (!std::binary_search(v.begin(), v.end(), T(k))) return s + fmt::format(" ({} {} right)", what, k);
  }
  return s;
}

void add_violations(const RopeCase& c, const Judgement& j, std::set<uint32_t>& pairs, std::set<uint32_t>& heads,
                    std::set<uint64_t>& tokens) {
  const uint32_t np = c.rotary_dim / 2;
  if (j.violated.empty() || np == 0) return;
  for (size_t k = 0; k < j.violated.size(); ++k) {
    if (!j.violated[k]) continue;
    pairs.insert(uint32_t(k % np));
    heads.insert(uint32_t(k / np % c.n_heads));
    tokens.insert(k / np / c.n_heads);
  }
}

}  // namespace

Localisation localise(const RopeCase& c, const Judgement& j, const Judgement* kj, const std::vector<double>& angles) {
  Localisation L;
  L.n_pairs = c.rotary_dim / 2;
  L.n_heads = c.n_heads;
  L.n_tokens = c.n_tokens();
  L.passthrough = j.passthrough_violations + (kj ? kj->passthrough_violations : 0);
  std::set<uint32_t> pairs, heads;
  std::set<uint64_t> tokens;
  add_violations(c, j, pairs, heads, tokens);
  if (kj) {
    const RopeCase kc = c.k_case();
    std::set<uint32_t> kheads;
    add_violations(kc, *kj, pairs, kheads, tokens);
    const bool q = !j.violated.empty(), k = !kj->violated.empty();
    L.tensors = q && k ? "q and k" : q ? "q" : k ? "k" : "";
    if (!q && k) {  // (k's heads are k's own)
      heads = kheads;
      L.n_heads = kc.n_heads;
    } else if (q && k) {
      heads.clear();  // (q's and k's heads are not one set: each tensor's heads are said only alone)
      L.n_heads = 0;
    }
  }
  L.pairs.assign(pairs.begin(), pairs.end());
  L.heads.assign(heads.begin(), heads.end());
  L.tokens.assign(tokens.begin(), tokens.end());
  if (!L.pairs.empty())
    for (uint32_t w : {4u, 8u, 16u, 32u}) {
      const uint32_t start = L.n_pairs / w * w;
      if (L.n_pairs % w == 0 || start == 0) continue;
      if (L.pairs.front() >= start) {
        L.tail_width = w;
        break;
      }
    }
  // An angle threshold: on q's pairs (the flat form's), where the angles are the reference's [token][pair].
  if (!j.violated.empty() && angles.size() == L.n_tokens * L.n_pairs && L.n_pairs) {
    double min_bad = INFINITY, max_good = 0;
    for (size_t k = 0; k < j.violated.size(); ++k) {
      const size_t t = k / L.n_pairs / c.n_heads, i = k % L.n_pairs;
      const double a = std::fabs(angles[t * L.n_pairs + i]);
      if (j.violated[k]) min_bad = std::min(min_bad, a);
      else max_good = std::max(max_good, a);
    }
    // (a threshold worth saying: failing pairs only far out, right ones below; not the trivial 0)
    if (min_bad > max_good && min_bad > 1.0 && max_good > 0) L.from_angle = min_bad;
  }
  return L;
}

std::string Localisation::text() const {
  if (!any()) return "";
  std::vector<std::string> parts;
  if (!tensors.empty() && tensors != "q and k") parts.push_back(tensors + " only");
  if (!pairs.empty()) {
    std::string p = which("pair", "pairs", pairs, n_pairs);
    if (tail_width)
      p = fmt::format("pairs {} of {} only (the tail after the last full vector of {} pairs)", ranges(pairs), n_pairs,
                      tail_width);
    if (n_heads) {
      parts.push_back(p);
      parts.push_back(which("head", "heads", heads, n_heads));
    } else {
      parts.push_back(p);
    }
    parts.push_back(which("token", "tokens", tokens, n_tokens));
    if (pairs.size() == n_pairs && (!n_heads || heads.size() == n_heads) && tokens.size() == n_tokens &&
        tensors.empty())
      parts = {"every pair, head and token"};
  }
  if (from_angle > 0)
    parts.push_back(fmt::format("from |angle| {:.3g} (2^{:.1f}) on, every pair below it right", from_angle,
                                std::log2(from_angle)));
  if (passthrough) parts.push_back(fmt::format("{} pass-through element(s) changed", passthrough));
  return fmt::format("{}", fmt::join(parts, "; "));
}

}  // namespace ropecheck
