#include "core/abi_versions.hpp"

#include <fmt/format.h>

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
  if (v3_form_only()) return needed <= 3 && features_sent(declared) ? 3 : 0;
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
  if (tables_only) {
    std::string kinds;
    for (TableKind k : {TableKind::cos_sin_2, TableKind::cos_sin_cat, TableKind::cos_sin_full, TableKind::angle})
      if (takes_table(k)) kinds += (kinds.empty() ? "" : ", ") + std::string(to_string(k));
    s += fmt::format(" with caller-given tables only ({}{}{}): every case is sent with a table the gate builds", kinds,
                     !tensor_form_only                          ? ""
                     : tensor_form.pos == PositionForm::int64 ? ", in the tensor form"
                                                                : ", in the tensor form with " + to_string(tensor_form),
                     in_place_only ? ", in place" : "");
    if (blind) s += fmt::format("; it accepts abi_version {} too (it does not check the version): calls are not "
                                "sent unless its features are declared",
                                kUndefinedAbiVersion);
    return s;
  }
  if (tensor_form_only) {
    s += fmt::format(" in the tensor form only ({}{}): every case is sent in that form", to_string(tensor_form),
                     in_place_only ? ", in place" : "");
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
  const AbiProbe* raised = nullptr;
  for (const AbiProbe& p : probes) {
    any_unsupported |= p.outcome.empty() && p.rc == RC_UNSUPPORTED;
    any_error |= p.outcome.empty() && p.rc != RC_UNSUPPORTED && p.rc != RC_OK && p.said.empty();
    if (!p.said.empty() && !raised) raised = &p;
  }
  s += "; likely causes: ";
  std::vector<std::string> causes;
  if (raised) causes.push_back("the exception it raised: " + raised->said.substr(0, 600));
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

RopeCase abi_table_probe_case(Dtype d, Layout l, TableKind k, Dtype table_dtype, bool tensor_form) {
  RopeCase c = abi_probe_cases({d}, {l}).front();  // head_dim 64, one head, one token at position 1
  CosSinTable t;
  t.kind = k;
  t.dtype = k == TableKind::angle ? Dtype::f32 : table_dtype;
  t.rows = 2;
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

AbiVersions negotiate_abi(const AbiProbeCall& call, const std::vector<Dtype>& dtypes,
                          const std::vector<Layout>& layouts, const std::function<bool()>& stop) {
  AbiVersions v;
  v.probed = true;
  const std::vector<RopeCase> cases = abi_probe_cases(dtypes, layouts);
  bool ended = false;  // a probe did not return, or `stop` said so: nothing more is asked
  auto probe = [&](const RopeCase& c, uint32_t version, bool in_place = false) {
    if (ended || (stop && stop())) {
      ended = true;
      return false;
    }
    AbiProbe p = call(c, version, in_place);
    p.version = version;
    p.call = fmt::format("{} {} head_dim {}, 1 head, 1 token at position 1", to_string(c.dtype), to_string(c.layout),
                         c.head_dim);
    if (c.table)
      p.call += fmt::format(", a 2-row {} table of {}{}{}", to_string(c.table->kind), to_string(c.table->dtype),
                            c.tensor ? ", the tensor form" : "", in_place ? ", in place" : "");
    else if (c.tensor)
      p.call += fmt::format(", the tensor form{}", in_place ? ", in place" : "");
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
  if (v.accepted || ended || kNewestAbiVersion < 3 || cases.empty()) return v;
  // No neutral call taken in the legacy form: the same calls in the tensor form (angles computed by the kernel),
  // each way of passing positions, out of place then in place.
  for (const RopeCase& c : cases) {
    for (const TensorForm& f : tensor_probe_forms())
      for (bool in_place : {false, true}) {
        const std::optional<RopeCase> t = in_tensor_form(c, f);
        if (!t || !probe(*t, 3, in_place)) continue;
        v.accepted |= 1u << 3;
        v.tensor_form_only = true;
        v.tensor_form = f;
        v.in_place_only = in_place;
        v.blind = probe(*t, kUndefinedAbiVersion, in_place);
        return v;
      }
    if (ended) return v;
  }
  // No neutral call taken: a kernel that takes caller-given tables only? The simplest table call of each kind,
  // the table in the call's dtype then f32 (the first asked shape); the form of the call (legacy, or the tensor
  // form in each way of passing positions; out of place or in place) is the first the kernel takes, found on the
  // first kind it takes. (FlashAttention's apply_rotary takes no positions: implicit ones, int32 offsets.)
  std::vector<Dtype> order;  // the asked dtypes, f32 last
  for (Dtype x : dtypes)
    if (x != Dtype::f32) order.push_back(x);
  if (std::find(dtypes.begin(), dtypes.end(), Dtype::f32) != dtypes.end()) order.push_back(Dtype::f32);
  const Layout l = cases.front().layout;
  struct Form {
    std::optional<TensorForm> tensor;
    bool in_place;
    bool operator==(const Form& o) const {
      return in_place == o.in_place && tensor.has_value() == o.tensor.has_value() &&
             (!tensor || (tensor->pos == o.tensor->pos && tensor->rank == o.tensor->rank &&
                          tensor->index_int32 == o.tensor->index_int32));
    }
  };
  std::vector<Form> forms = {{std::nullopt, false}, {std::nullopt, true}};
  for (const TensorForm& f : tensor_probe_forms())
    for (bool in_place : {false, true}) forms.push_back({f, in_place});
  std::optional<RopeCase> took;
  std::optional<Form> took_form;
  for (TableKind k : {TableKind::cos_sin_2, TableKind::cos_sin_cat, TableKind::cos_sin_full, TableKind::angle})
    for (const Form& f : forms) {
      if (took_form && !(f == *took_form)) continue;  // the form is known
      bool kind_taken = false;
      for (Dtype d : order) {
        for (Dtype td : {d, Dtype::f32}) {
          if ((k == TableKind::angle || d == Dtype::f32) && td != d) continue;  // one table dtype to try
          std::optional<RopeCase> c = abi_table_probe_case(d, l, k, td, false);
          if (f.tensor) c = in_tensor_form(*c, *f.tensor);
          if (!c || !probe(*c, 3, f.in_place)) continue;
          kind_taken = true;
          v.table_dtypes[size_t(k)] |= uint8_t(1u << unsigned(td));
          if (td == d && d != Dtype::f32) v.table_in_call_dtype[size_t(k)] = true;
          if (!took) {
            took = c;
            took_form = f;
          }
        }
        if (kind_taken) break;  // the first call dtype it takes tells
      }
    }
  if (!took) return v;
  v.accepted |= 1u << 3;
  v.tables_only = true;
  v.tensor_form_only = took_form->tensor.has_value();
  if (took_form->tensor) v.tensor_form = *took_form->tensor;
  v.in_place_only = took_form->in_place;
  v.blind = probe(*took, kUndefinedAbiVersion, took_form->in_place);
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
          if (c.tensor) {  // RopeCase::args makes the legacy form only: in process, the tensor form is not asked
            p.rc = RC_UNSUPPORTED;
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
