#include "core/abi_versions.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
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
  if (!p.said.empty()) return "raised " + p.said.substr(0, p.said.find('\n'));
  return fmt::format("returned the error code {}", p.rc);
}

}  // namespace

bool AbiVersions::features_sent(bool declared) const {
  if (!probed || accepted == 0) return true;  // nothing learnt: as before
  if (v3_form_only()) return !blind || declared;
  if (declared) return true;
  return takes(1) && !blind;
}

uint32_t AbiVersions::version_for(uint32_t needed, bool declared) const {
  if (needed < 1) needed = 1;
  if (probed && accepted == 0 && needed == 1 && !(declined >> 1 & 1u))
    for (uint32_t v = 2; v <= kNewestAbiVersion; ++v)
      if (declined >> v & 1u) return v;
  if (!probed || accepted == 0) return needed;
  // A kernel that takes tables only, or the tensor form only, is sent v3 calls (the gate gives every case a table,
  // or the tensor form, first).
  if (v3_form_only()) {
    if (!features_sent(declared)) return 0;
    for (uint32_t v = std::max(needed, 3u); v <= kNewestAbiVersion; ++v)
      if (takes(v)) return v;
    return 0;
  }
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
  if (tables_only && blind)
    return fmt::format("the kernel takes tables only and accepts any abi_version (even {}, which no header "
                       "defines): not sent (declare the features with --supports to have them run)",
                       kUndefinedAbiVersion);
  if (tensor_form_only && blind)
    return fmt::format("the kernel takes the tensor form only and accepts any abi_version (even {}, which no header "
                       "defines): not sent (declare the features with --supports to have them run)",
                       kUndefinedAbiVersion);
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

namespace {

// "a, b and c".
std::string and_list(const std::vector<std::string>& v) {
  std::string s;
  for (size_t k = 0; k < v.size(); ++k) s += (k == 0 ? "" : k + 1 == v.size() ? " and " : ", ") + v[k];
  return s;
}

template <class T>
void add_once(std::vector<T>& v, const T& x) {
  if (std::find(v.begin(), v.end(), x) == v.end()) v.push_back(x);
}

}  // namespace

// What the probes tried, from the probes themselves, a part per kind of probe with its own dtypes, layouts and head
// dims: "48 call(s) in the flat form with computed angles: f32, f16 and bf16 x interleaved and half-split at head_dim
// 64 and 128, abi_version 1, 2, 3 and 4; 96 in the ABI v3 forms: f32 x half-split at head_dim 64: computed angles in
// the tensor form (...); cos-sin-2, ... tables by position, of f32, in the flat form and the tensor form (...); out of
// place and in place".
std::string AbiVersions::tried() const {
  struct Part {
    size_t n = 0;
    std::vector<std::string> dts, lays, dims;
    void add(const AbiProbe& p) {
      ++n;
      add_once(dts, std::string(to_string(p.dtype)));
      add_once(lays, std::string(to_string(p.layout)));
      add_once(dims, std::to_string(p.head_dim));
    }
    std::string shapes() const {
      return fmt::format("{} x {} at head_dim {}", and_list(dts), and_list(lays), and_list(dims));
    }
  } neutral, forms;
  std::vector<uint32_t> flat_versions;
  std::vector<std::optional<TensorForm>> computed_forms, table_forms;
  std::vector<std::string> table_kinds, rows_by;
  bool table_call_dtype = false, table_f32 = false, in_place = false, out_of_place = false;
  for (const AbiProbe& p : probes) {
    const bool is_neutral = !p.source.kind && !p.form.tensor;
    (is_neutral ? neutral : forms).add(p);
    if (!is_neutral) (p.form.in_place ? in_place : out_of_place) = true;
    if (is_neutral) {
      if (p.version <= kNewestAbiVersion) add_once(flat_versions, p.version);
      continue;
    }
    if (!p.source.kind) {
      add_once(computed_forms, p.form.tensor);
      continue;
    }
    add_once(table_kinds, std::string(to_string(*p.source.kind)));
    add_once(table_forms, p.form.tensor);
    add_once(rows_by, std::string(p.source.by_token ? "per token (abi_version 4)" : "by position"));
    (p.source.call_dtype && p.dtype != Dtype::f32 && *p.source.kind != TableKind::angle ? table_call_dtype : table_f32) =
        true;
  }
  // The forms in few words: "the flat form and the tensor form (explicit int64 and int32 positions; implicit ones of
  // varlen sequences and {B, S} rows, int64 and int32 offsets)".
  auto forms_text = [&](const std::vector<std::optional<TensorForm>>& fs) {
    bool flat = false;
    std::vector<std::string> expl, impl, offs;
    for (const auto& f : fs) {
      if (!f) flat = true;
      else if (f->pos != PositionForm::implicit) add_once(expl, std::string(to_string(f->pos)));
      else {
        add_once(impl, std::string(f->rank == 4 ? "{B, S} rows" : "varlen sequences"));
        add_once(offs, std::string(f->index_int32 ? "int32" : "int64"));
      }
    }
    std::vector<std::string> parts;
    if (flat) parts.push_back("the flat form");
    std::string t;
    if (!expl.empty()) t = "explicit " + and_list(expl) + " positions";
    if (!impl.empty()) t += (t.empty() ? "implicit positions of " : "; implicit ones of ") + and_list(impl) + ", " +
                            and_list(offs) + " offsets";
    if (!t.empty()) parts.push_back("the tensor form (" + t + ")");
    return and_list(parts);
  };
  std::vector<std::string> vers;
  for (uint32_t x : flat_versions) vers.push_back(std::to_string(x));
  std::string s;
  if (neutral.n)
    s = fmt::format("{} call(s) in the flat form with computed angles: {}, abi_version {}", neutral.n,
                    neutral.shapes(), and_list(vers));
  if (forms.n) {
    std::vector<std::string> what;
    if (!computed_forms.empty()) what.push_back("computed angles in " + forms_text(computed_forms));
    if (!table_kinds.empty())
      what.push_back(fmt::format("{} tables {}, {}, in {}", and_list(table_kinds), and_list(rows_by),
                                 table_call_dtype && table_f32 ? "of the call's dtype and of f32"
                                 : table_call_dtype            ? "of the call's dtype"
                                                               : "of f32",
                                 forms_text(table_forms)));
    s += fmt::format("{}{} in the ABI v3 forms: {}: {}; {}", s.empty() ? "" : "; ", forms.n, forms.shapes(),
                     fmt::join(what, "; "),
                     in_place && out_of_place ? "out of place and in place" : in_place ? "in place" : "out of place");
  }
  return s;
}

std::string AbiVersions::summary() const {
  if (!probed) return "ABI versions not probed";
  if (accepted == 0 && stopped)
    return fmt::format("not known: the budget was reached after {} probe call(s) ({}); calls go as abi_version 1",
                       probes.size(), tried());
  if (accepted == 0) {
    for (const AbiProbe& p : probes)
      if (!p.outcome.empty())
        return fmt::format("not known: the probe call ({}) {} at abi_version {}; calls go as abi_version 1", p.call,
                           p.outcome, p.version);
    return "the kernel refused every probe call at every ABI version (" + tried() + ")";
  }
  std::string s = "the kernel speaks ABI " + versions_text(accepted);
  // What else a kernel that took only the v3 forms takes: other forms, and the dtypes and layouts it took.
  auto also = [&] {
    std::string a;
    const CallForm& first = forms.front();
    std::vector<std::string> other;
    for (const CallForm& f : forms)
      if (f.tensor != first.tensor)
        add_once(other, f.tensor ? "the tensor form (" + to_string(*f.tensor) + ")" : std::string("the flat form"));
    if (!other.empty()) a += "; it takes " + and_list(other) + " too";
    std::vector<std::string> lays, dts, asked_lays, asked_dts;
    for (const auto& [d, l] : combos) add_once(lays, std::string(to_string(l))), add_once(dts, std::string(to_string(d)));
    for (const auto& [d, l] : asked_combos)
      add_once(asked_lays, std::string(to_string(l))), add_once(asked_dts, std::string(to_string(d)));
    std::vector<std::string> only;
    if (dts.size() < asked_dts.size()) only.push_back(and_list(dts));
    if (lays.size() < asked_lays.size()) only.push_back(and_list(lays));
    if (!only.empty()) a += fmt::format("; of the asked dtypes and layouts its probe calls were taken in {} only",
                                        and_list(only));
    return a;
  };
  if (tables_only) {
    std::string kinds;
    for (TableKind k : {TableKind::cos_sin_2, TableKind::cos_sin_cat, TableKind::cos_sin_full, TableKind::angle}) {
      if (takes_table(k)) kinds += (kinds.empty() ? "" : ", ") + std::string(to_string(k));
      if (takes_token_table(k)) kinds += (kinds.empty() ? "per-token " : ", per-token ") + std::string(to_string(k));
    }
    s += fmt::format(" with caller-given tables only ({}{}{}): every case is sent with a table the gate builds", kinds,
                     !tensor_form_only                          ? ""
                     : tensor_form.pos == PositionForm::int64 ? ", in the tensor form"
                                                                : ", in the tensor form with " + to_string(tensor_form),
                     in_place_only ? ", in place" : "");
    if (!forms.empty()) s += also();
    if (blind) s += fmt::format("; it accepts abi_version {} too (it does not check the version): calls are not "
                                "sent unless its features are declared",
                                kUndefinedAbiVersion);
    return s;
  }
  if (tensor_form_only) {
    s += fmt::format(" in the tensor form only ({}{}): every case is sent in that form", to_string(tensor_form),
                     in_place_only ? ", in place" : "");
    if (!forms.empty()) s += also();
    if (blind) s += fmt::format("; it accepts abi_version {} too (it does not check the version): calls are not "
                                "sent unless its features are declared",
                                kUndefinedAbiVersion);
    return s;
  }
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
  if (!probed || accepted != 0 || probes.empty() || stopped) return "";  // (cut by the budget: no refusal)
  // A probe that crashed or hung is a fault, not a refusal: the rows report it (and its cause) as they find it.
  for (const AbiProbe& p : probes)
    if (!p.outcome.empty()) return "";
  // The simplest call at each version: the first probe made at it; the same answer at several versions once.
  std::map<uint32_t, const AbiProbe*> first;
  for (const AbiProbe& p : probes)
    if (p.version <= kNewestAbiVersion) first.emplace(p.version, &p);
  const AbiProbe& p1 = *first.begin()->second;
  bool all_declined = true;
  for (const AbiProbe& p : probes) all_declined &= p.outcome.empty() && p.rc == RC_UNSUPPORTED;
  std::vector<std::pair<std::string, std::vector<std::string>>> answers;  // outcome -> versions
  for (const auto& [ver, p] : first) {
    const std::string o = outcome_text(*p);
    auto it = std::find_if(answers.begin(), answers.end(), [&](const auto& a) { return a.first == o; });
    if (it == answers.end()) answers.push_back({o, {std::to_string(ver)}});
    else it->second.push_back(std::to_string(ver));
  }
  std::string s = fmt::format("{}: the simplest one ({})",
                              all_declined ? "coverage: the kernel declined every call"
                                           : "coverage: the kernel rejected every call",
                              p1.call);
  for (size_t k = 0; k < answers.size(); ++k)
    s += fmt::format("{} {} at abi_version {}", k ? "," : "", answers[k].first, and_list(answers[k].second));
  s += "; likely causes: ";
  const std::vector<std::string> causes = refusal_causes(false);
  for (size_t k = 0; k < causes.size(); ++k) s += (k ? "; " : "") + causes[k];
  return s;
}

std::vector<std::string> AbiVersions::refusal_causes(bool brief) const {
  bool any_unsupported = false, any_error = false;
  const AbiProbe* raised = nullptr;
  for (const AbiProbe& p : probes) {
    any_unsupported |= p.outcome.empty() && p.rc == RC_UNSUPPORTED;
    any_error |= p.outcome.empty() && p.rc != RC_UNSUPPORTED && p.rc != RC_OK && p.said.empty();
    if (!p.said.empty() && !raised) raised = &p;
  }
  std::vector<std::string> causes;
  if (raised) {
    const std::string said = raised->said.substr(0, raised->said.find('\n'));
    causes.push_back("the exception it raised: " +
                     (brief && said.size() > 70 ? said.substr(0, 66) + " ..." : said.substr(0, 600)));
  }
  if (any_error)
    causes.push_back(brief ? "a version check that returns an error"
                           : fmt::format("a version check that returns an error (the kernel was sent abi_version "
                                         "1..{}: does it compare with a literal or macro of another header?)",
                                         kNewestAbiVersion));
  causes.push_back(brief ? "a dtype, layout, head_dim or form of call it does not implement"
                         : fmt::format("a dtype, layout, head_dim or form of call it does not implement (all {} "
                                       "probe calls refused; the abi line lists them)",
                                       probes.size()));
  if (any_unsupported) causes.push_back("a check that declines (RC_UNSUPPORTED) more than it should");
  return causes;
}

std::string AbiVersions::refusal_brief() const {
  if (refusal().empty()) return "";
  bool all_declined = true;
  for (const AbiProbe& p : probes) all_declined &= p.outcome.empty() && p.rc == RC_UNSUPPORTED;
  return fmt::format("coverage: the kernel {} every call ({} probe calls; the refusal line says how); likely cause: {}",
                     all_declined ? "declined" : "rejected", probes.size(), refusal_causes(true).front());
}

bool operator==(const TensorForm& a, const TensorForm& b) {
  return a.pos == b.pos && a.rank == b.rank && a.index_int32 == b.index_int32;
}

std::string to_string(const CallForm& f) {
  std::string s = f.tensor ? "the tensor form (" + to_string(*f.tensor) + ")" : "the flat form";
  return f.in_place ? s + ", in place" : s;
}

std::vector<CallForm> probe_forms() {
  std::vector<CallForm> forms = {{std::nullopt, false}, {std::nullopt, true}};
  for (const TensorForm& f : tensor_probe_forms())
    for (bool in_place : {false, true}) forms.push_back({f, in_place});
  return forms;
}

std::string to_string(const AngleSource& s, Dtype call) {
  if (!s.kind) return "computed angles";
  const Dtype td = *s.kind == TableKind::angle || !s.call_dtype ? Dtype::f32 : call;
  return fmt::format("a {}{} table of {}", s.by_token ? "per-token " : "", to_string(*s.kind), to_string(td));
}

std::vector<TensorForm> AbiVersions::tensor_forms() const {
  std::vector<TensorForm> v;
  for (const CallForm& f : forms)
    if (f.tensor && std::find(v.begin(), v.end(), *f.tensor) == v.end()) v.push_back(*f.tensor);
  return v;
}

bool AbiVersions::takes_flat_form() const {
  return std::any_of(forms.begin(), forms.end(), [](const CallForm& f) { return !f.tensor; });
}

std::string to_string(const TensorForm& f) {
  if (f.pos != PositionForm::implicit) return fmt::format("explicit {} positions", to_string(f.pos));
  return fmt::format("implicit positions, {}, {} offsets",
                     f.rank == 4 ? "{B, S} rows with an offset each" : "varlen sequences (cu_seqlens) with an offset each",
                     f.index_int32 ? "int32" : "int64");
}

std::vector<TensorForm> tensor_probe_forms() {
  std::vector<TensorForm> forms = {{PositionForm::int64, 3, false}, {PositionForm::int32, 3, false}};
  for (uint32_t rank : {3u, 4u})
    for (bool i32 : {false, true}) forms.push_back({PositionForm::implicit, rank, i32});
  return forms;
}

namespace {
// The implicit positions of `c`'s tokens in t (rank 3: each run of consecutive positions a sequence, with
// cu_seqlens; rank 4: rows of S tokens, S the longest that divides the tokens and keeps each row in one run,
// or `fixed_s` when the call's q already has its rows), with int32 or int64 offsets. Empty: done; else why not.
std::string implicit_positions(const RopeCase& c, uint32_t rank, uint64_t fixed_s, bool index_int32, TensorCall& t) {
  auto fits = [](int64_t x) { return x == int64_t(int32_t(x)); };
  if (c.n_pos_axes != 1) return "several position axes do not fit its implicit positions (one axis)";
  const uint64_t T = c.n_tokens();
  t.pos = PositionForm::implicit;
  t.axes_first = false;
  t.index_int32 = index_int32;
  t.seq_offsets.clear();
  t.cu_seqlens.clear();
  // Token k (> 0) continues the run of consecutive positions token k - 1 is in.
  auto continues = [&](uint64_t k) {
    int64_t next;
    return !__builtin_add_overflow(c.positions[k - 1], int64_t(1), &next) && next == c.positions[k];
  };
  if (rank == 4) {
    auto rows_fit = [&](uint64_t s) {
      for (uint64_t k = 1; k < T; ++k)
        if (k % s != 0 && !continues(k)) return false;
      return true;
    };
    uint64_t S = T;
    if (fixed_s) {
      S = fixed_s;
      if (T % S != 0 || !rows_fit(S)) return "its rows' positions are not consecutive (implicit positions: offset + s)";
    } else {
      while (S > 1 && (T % S != 0 || !rows_fit(S))) --S;
    }
    t.rank = 4;
    t.batch = S ? T / S : 1;
    for (uint64_t b = 0; b < t.batch; ++b) t.seq_offsets.push_back(T ? c.positions[b * S] : 0);
  } else {
    t.cu_seqlens.push_back(0);
    for (uint64_t k = 0; k < T; ++k) {
      if (k > 0 && continues(k)) continue;
      if (k) t.cu_seqlens.push_back(int64_t(k));
      t.seq_offsets.push_back(c.positions[k]);
    }
    t.cu_seqlens.push_back(int64_t(T));
    if (T == 0) t.seq_offsets.push_back(0);
  }
  if (index_int32)
    for (const std::vector<int64_t>* v : {&t.seq_offsets, &t.cu_seqlens})
      for (int64_t x : *v)
        if (!fits(x)) return fmt::format("offset {} does not fit its int32 offsets", x);
  return "";
}
}  // namespace

std::optional<RopeCase> in_tensor_form(const RopeCase& c, const TensorForm& f, std::string* why) {
  auto refuse = [&](std::string w) -> std::optional<RopeCase> {
    if (why) *why = std::move(w);
    return std::nullopt;
  };
  auto fits = [](int64_t x) { return x == int64_t(int32_t(x)); };
  RopeCase r = c;
  if (c.tensor) {
    TensorCall& t = *r.tensor;
    if (f.pos == PositionForm::int32 && t.pos == PositionForm::int64) {
      // Explicit int64 positions to a kernel that takes int32 ones: the same positions as int32.
      for (int64_t m : c.positions)
        if (!fits(m)) return refuse(fmt::format("position {} does not fit its int32 positions", m));
      t.pos = PositionForm::int32;
    } else if (f.pos == PositionForm::implicit && t.pos != PositionForm::implicit) {
      // Explicit positions to a kernel that takes implicit ones only: the same positions as sequences (rank 3)
      // or rows with an offset each (rank 4, the call's rows), where they are consecutive.
      const uint64_t S = t.rank == 4 && t.batch ? c.n_tokens() / t.batch : 0;
      if (std::string w = implicit_positions(c, t.rank, S, f.index_int32, t); !w.empty()) return refuse(w);
    } else if (f.pos == PositionForm::implicit && f.index_int32 && !t.index_int32) {
      // int64 offsets and cu_seqlens to a kernel that takes int32 ones: the same values as int32.
      for (const std::vector<int64_t>* v : {&t.seq_offsets, &t.cu_seqlens})
        for (int64_t x : *v)
          if (!fits(x)) return refuse(fmt::format("offset {} does not fit its int32 offsets", x));
      t.index_int32 = true;
    } else {
      return c;
    }
    if (std::string w = r.validate(); !w.empty()) return refuse("the tensor form cannot express it: " + w);
    return r;
  }
  TensorCall t;
  if (f.pos == PositionForm::int32) {
    for (int64_t m : c.positions)
      if (!fits(m)) return refuse(fmt::format("position {} does not fit its int32 positions", m));
    t.pos = PositionForm::int32;
  } else if (f.pos == PositionForm::implicit) {
    if (std::string w = implicit_positions(c, f.rank, 0, f.index_int32, t); !w.empty()) return refuse(w);
  }
  r.tensor = std::move(t);
  if (std::string w = r.validate(); !w.empty()) return refuse("the tensor form cannot express it: " + w);
  return r;
}

std::vector<RopeCase> abi_probe_cases(const std::vector<Dtype>& dtypes, const std::vector<Layout>& layouts,
                                      const RotarySlice* slice) {
  std::vector<RopeCase> cases;
  for (uint32_t dim : {64u, 128u}) {
    if (slice && slice->head_dim && dim != 64) break;  // (one head shape)
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
        if (slice) apply_rotary_slice(*slice, c);
        cases.push_back(std::move(c));
      }
  }
  return cases;
}

RopeCase abi_table_probe_case(Dtype d, Layout l, TableKind k, Dtype table_dtype, bool tensor_form, bool by_token,
                              const RotarySlice* slice) {
  RopeCase c = abi_probe_cases({d}, {l}, slice).front();  // head_dim 64, one head, one token at position 1
  CosSinTable t;
  t.kind = k;
  t.dtype = k == TableKind::angle ? Dtype::f32 : table_dtype;
  t.rows = 2;
  t.by_token = by_token;  // (laid out for the kernel as one row: the token's)
  const uint32_t np = c.rotary_dim / 2;
  for (int64_t m = 0; m < 2; ++m)
    for (uint32_t i = 0; i < np; ++i) {
      // The values need not be exact (a probe is not judged), only values of the table's dtype.
      const double a = double(m) * std::pow(10000.0, -2.0 * i / c.rotary_dim);
      unsigned char b[4];
      if (k == TableKind::angle) {
        t.cos.push_back(double(float(a)));
        continue;
      }
      store_f32(t.dtype, b, 0, float(std::cos(a)));
      t.cos.push_back(double(load_f32(t.dtype, b, 0)));
      store_f32(t.dtype, b, 0, float(std::sin(a)));
      t.sin.push_back(double(load_f32(t.dtype, b, 0)));
    }
  c.table = std::move(t);
  if (tensor_form) c.tensor = TensorCall{};
  return c;
}

std::optional<RopeCase> abi_probe_call(Dtype d, Layout l, const AngleSource& s, const CallForm& f,
                                       const RotarySlice* slice) {
  RopeCase c = s.kind ? abi_table_probe_case(d, l, *s.kind, s.call_dtype ? d : Dtype::f32, false, s.by_token, slice)
                      : abi_probe_cases({d}, {l}, slice).front();
  if (!f.tensor) return c;
  return in_tensor_form(c, *f.tensor);
}

namespace {

// The angle sources the probes try, in order: computed angles; tables by position of each kind in the call's
// dtype, then in f32; the same per token (v4).
std::vector<AngleSource> probe_sources() {
  std::vector<AngleSource> v = {{}};
  for (bool by_token : {false, true}) {
    for (TableKind k : {TableKind::cos_sin_2, TableKind::cos_sin_cat, TableKind::cos_sin_full, TableKind::angle})
      v.push_back({k, by_token, k != TableKind::angle});
    for (TableKind k : {TableKind::cos_sin_2, TableKind::cos_sin_cat, TableKind::cos_sin_full})
      v.push_back({k, by_token, false});
  }
  return v;
}

// Whether source s on a call of dtype d is a call the probes make (an f32 table of an f32 call is the "call's
// dtype" one: made once).
bool distinct_on(const AngleSource& s, Dtype d) {
  return !s.kind || *s.kind == TableKind::angle || s.call_dtype || d != Dtype::f32;
}

}  // namespace

AbiVersions negotiate_abi(const AbiProbeCall& call, const std::vector<Dtype>& asked_dtypes,
                          const std::vector<Layout>& asked_layouts, const std::function<bool()>& stop,
                          const RotarySlice* slice, bool neutral_only) {
  AbiVersions v;
  v.probed = true;
  // The neutral probes: the asked dtypes and layouts first, then the others (a kernel restricted to an unasked
  // one still answers the version question).
  std::vector<Dtype> dtypes = asked_dtypes;
  for (Dtype x : kAllDtypes)
    if (std::find(dtypes.begin(), dtypes.end(), x) == dtypes.end()) dtypes.push_back(x);
  std::vector<Layout> layouts = asked_layouts;
  for (Layout x : kAllLayouts)
    if (std::find(layouts.begin(), layouts.end(), x) == layouts.end()) layouts.push_back(x);
  const std::vector<RopeCase> cases = abi_probe_cases(dtypes, layouts, slice);
  bool ended = false;  // a probe did not return, or `stop` said so: nothing more is asked
  auto probe = [&](const RopeCase& c, uint32_t version, bool in_place, const AngleSource& src) {
    if (ended) return false;
    if (stop && stop()) {
      ended = v.stopped = true;
      return false;
    }
    AbiProbe p = call(c, version, in_place);
    p.version = version;
    p.dtype = c.dtype;
    p.layout = c.layout;
    p.head_dim = c.head_dim;
    p.source = src;
    p.form = {c.tensor ? std::optional<TensorForm>(TensorForm{c.tensor->pos, c.tensor->rank, c.tensor->index_int32})
                       : std::nullopt,
              in_place};
    p.call = fmt::format("{} {} head_dim {}{}, 1 head, 1 token at position 1", to_string(c.dtype), to_string(c.layout),
                         c.head_dim,
                         c.rotary_dim == c.head_dim ? std::string()
                         : c.rotary_offset ? fmt::format(" (rotary_dim {} at offset {})", c.rotary_dim, c.rotary_offset)
                                           : fmt::format(" (rotary_dim {})", c.rotary_dim));
    if (c.table)
      p.call += fmt::format(", a {}{}-row {} table of {}{}{}", c.table->by_token ? "per-token " : "",
                            c.table->by_token ? 1 : 2, to_string(c.table->kind), to_string(c.table->dtype),
                            c.tensor ? ", the tensor form" : "", in_place ? ", in place" : "");
    else if (c.tensor)
      p.call += fmt::format(", the tensor form{}", in_place ? ", in place" : "");
    v.probes.push_back(p);
    if (!p.outcome.empty()) ended = true;  // a crash or hang: one is enough to know
    if (p.made && p.outcome.empty() && p.rc == RC_UNSUPPORTED && version <= kNewestAbiVersion)
      v.declined |= 1u << version;
    return p.ok();
  };
  // Shape by shape, every version on each, until some version takes a shape: the simplest shapes first, and
  // a kernel that takes one answers in about four calls.
  for (const RopeCase& c : cases) {
    uint32_t took = 0;
    for (uint32_t ver = std::max(1u, c.min_abi_version()); ver <= kNewestAbiVersion && !took && !ended; ++ver)
      if (probe(c, ver, false, {})) took = ver;
    if (took) {
      // The shape is fine: the versions after `took` are decided on it (those before were refused on it).
      v.accepted |= 1u << took;
      for (uint32_t ver = took + 1; ver <= kNewestAbiVersion; ++ver)
        if (probe(c, ver, false, {})) v.accepted |= 1u << ver;
      v.blind = probe(c, kUndefinedAbiVersion, false, {});
      break;
    }
    if (ended) break;
  }
  if (v.accepted || ended || neutral_only || kNewestAbiVersion < 3 || cases.empty()) return v;

  // No neutral call taken in the flat form: a kernel that takes only the ABI v3 forms of a call -- the tensor form
  // (FlashInfer's apply_rope_pos_ids, MLX's fast.rope), caller-given tables (vLLM, FlashAttention, ONNX Runtime),
  // per-token tables (v4: Hugging Face, Liger). First the simplest call that it takes: each angle source, in each
  // form, on each asked dtype x layout (the one that varies fastest: a kernel restricted to one is found on the
  // first source and form it takes), tables by position at abi_version 3, per-token tables at 4.
  std::vector<std::pair<Dtype, Layout>> combos;  // the asked ones, calls in f16 and bf16 before f32 (a table in the
  for (int f32 = 0; f32 < 2; ++f32)               // call's dtype is then told apart from an f32 one)
    for (Dtype d : asked_dtypes)
      if ((d == Dtype::f32) == bool(f32))
        for (Layout l : asked_layouts) combos.push_back({d, l});
  if (combos.empty()) return v;
  v.asked_combos = combos;
  const std::vector<AngleSource> sources = probe_sources();
  const std::vector<CallForm> forms = probe_forms();
  auto applies = [](const AngleSource& s, const CallForm& f) { return s.kind || f.tensor; };  // (computed angles
                                                                                              // flat: asked above)
  struct Anchor {
    Dtype d;
    Layout l;
    AngleSource s;
    CallForm f;
    uint32_t version;
    RopeCase c;
  };
  std::optional<Anchor> anchor;
  {
    for (const AngleSource& s : sources) {
      const uint32_t ver = s.by_token ? 4 : 3;
      for (const CallForm& f : forms) {
        if (!applies(s, f)) continue;
        for (const auto& [d, l] : combos) {
          if (!distinct_on(s, d)) continue;
          const std::optional<RopeCase> c = abi_probe_call(d, l, s, f, slice);
          if (!c || !probe(*c, ver, f.in_place, s)) {
            if (ended) return v;
            continue;
          }
          anchor = Anchor{d, l, s, f, ver, *c};
          break;
        }
        if (anchor) break;
      }
      if (anchor) break;
    }
  }
  if (!anchor) return v;
  // Then each thing varied alone from that call: its version, its form, where its angles come from, its dtype x
  // layout. Each refusal rules out one thing; everything taken is kept.
  const Anchor& A = *anchor;
  v.accepted |= 1u << A.version;
  if (!A.s.by_token) {
    const uint32_t other = A.version == 3 ? 4 : 3;
    if (probe(A.c, other, A.f.in_place, A.s)) v.accepted |= 1u << other;
  }
  v.blind = probe(A.c, kUndefinedAbiVersion, A.f.in_place, A.s);
  const uint32_t pos_version = v.takes(3) ? 3 : 4;
  auto version_of = [&](const AngleSource& s) { return s.by_token ? 4u : pos_version; };
  auto takes_source = [&](const AngleSource& s) { return !s.by_token || v.takes(4); };
  v.forms = {A.f};
  for (const CallForm& f : forms) {
    if (f == A.f || !applies(A.s, f)) continue;
    const std::optional<RopeCase> c = abi_probe_call(A.d, A.l, A.s, f, slice);
    if (c && probe(*c, version_of(A.s), f.in_place, A.s)) v.forms.push_back(f);
  }
  auto record = [&](const AngleSource& s, Dtype d) {
    if (!s.kind) {
      v.computed = true;
      return;
    }
    const size_t k = size_t(*s.kind);
    const Dtype td = *s.kind == TableKind::angle || !s.call_dtype ? Dtype::f32 : d;
    (s.by_token ? v.token_table_dtypes : v.table_dtypes)[k] |= uint8_t(1u << unsigned(td));
    if (s.call_dtype && d != Dtype::f32 && *s.kind != TableKind::angle)
      (s.by_token ? v.token_table_in_call_dtype : v.table_in_call_dtype)[k] = true;
  };
  // A source in the forms taken (the first's first): a form the source needs that the anchor's does not (a table
  // kind taken only in the tensor form) is found too.
  auto try_source = [&](const AngleSource& s, Dtype d, Layout l) {
    for (const CallForm& f : v.forms) {
      if (!applies(s, f)) continue;
      const std::optional<RopeCase> c = abi_probe_call(d, l, s, f, slice);
      if (c && probe(*c, version_of(s), f.in_place, s)) return true;
    }
    return false;
  };
  record(A.s, A.d);
  for (const AngleSource& s : sources)
    if (!(s == A.s) && distinct_on(s, A.d) && takes_source(s) && try_source(s, A.d, A.l)) record(s, A.d);
  // The tables' dtypes on a call that is not f32, when the first call taken was f32 (vLLM and ONNX Runtime take a
  // cache of the activations' type).
  if (A.d == Dtype::f32)
    if (const auto it = std::find_if(combos.begin(), combos.end(), [](const auto& x) { return x.first != Dtype::f32; });
        it != combos.end())
      for (const AngleSource& s : sources)
        if (s.kind && *s.kind != TableKind::angle &&
            ((s.by_token ? v.token_table_dtypes : v.table_dtypes)[size_t(*s.kind)] != 0) &&
            try_source(s, it->first, A.l))
          record(s, it->first);
  // The asked dtype x layout combinations (the rows run over those taken when the matrix takes nothing).
  v.combos = {{A.d, A.l}};
  for (const auto& [d, l] : combos) {
    if (d == A.d && l == A.l) continue;
    AngleSource s = A.s;
    if (s.kind && s.call_dtype && !(s.by_token ? v.token_table_in_call_dtype : v.table_in_call_dtype)[size_t(*s.kind)])
      s.call_dtype = false;  // (the table dtype the gate would give that call)
    if (!distinct_on(s, d)) s.call_dtype = true;
    if (try_source(s, d, l)) v.combos.push_back({d, l});
  }
  v.tables_only = !v.computed;
  v.tensor_form_only = !v.takes_flat_form();
  const std::vector<TensorForm> tf = v.tensor_forms();
  if (!tf.empty()) v.tensor_form = tf.front();
  v.in_place_only = std::all_of(v.forms.begin(), v.forms.end(), [](const CallForm& f) { return f.in_place; });
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
        [fn](const RopeCase& c, uint32_t version, bool in_place) {
          AbiProbe p;
          if (c.tensor || (c.table && c.table->sparse())) {  // (in process: the flat form's dense buffers only)
            p.rc = RC_UNSUPPORTED;
            p.made = false;
            return p;
          }
          Bytes out = in_place ? c.input : Bytes(c.n_bytes(), 0);
          const rc_rope_args a = c.args(in_place ? out.data() : c.input.data(), out.data(), version);
          p.rc = fn(&a);
          return p;
        },
        d, l));
  }
  return *slot;
}

}  // namespace ropecheck
