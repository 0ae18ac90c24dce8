// Which versions of the kernel ABI a kernel speaks, learnt by asking it (docs/gate.md, "ABI versions").
//
// A kernel is never called with a version it does not speak. Before the first real call, the harness makes
// the simplest neutral call (one token at position 1, one head, base 10000, every field added after v1 at
// its neutral value) at each version 1..ROPECHECK_ABI_VERSION and at a version no header defines
// (kUndefinedAbiVersion). RC_OK means "speaks this version"; any other outcome (RC_UNSUPPORTED, an error
// code, a crash) means "does not", never a failure. The probes then decide how each case is sent:
//
//  - a case every kernel understands (neutral: abi_version 1 expresses it) goes at version 1 when the kernel
//    took version 1, else at the lowest version it took: a kernel that took only version K != 1 is the
//    idiom `if (a->abi_version != ROPECHECK_ABI_VERSION) return ...;` built against header K (the v1 header
//    told kernels to compare with the macro), and gets neutral calls as K with explicit neutral values;
//  - a case using features of version V (>= 2) goes at the lowest version >= V the kernel took, but only to
//    a kernel that took version 1 too and refused the undefined version: a kernel that accepts any
//    abi_version, or only one, cannot be told apart from one that never reads the fields of V, and is not
//    sent such cases (its rows say so) unless the user declared the features (--supports);
//  - a kernel that took no neutral probe is asked, at version 3 (ABI v3), the simplest call with a caller-given
//    table of each kind (one token at position 1, a 2-row table; the table in the call's dtype, then f32; the
//    call in the legacy form, then the tensor form). RC_OK there, with the undefined version refused, is "speaks
//    v3, caller-given tables only" (AbiVersions::tables_only): the gate gives it its cases with tables it builds
//    (gate/gate.cpp, docs/gate.md "Kernels that take tables");
//  - a kernel that took no neutral probe in the legacy form is asked the same neutral call in the tensor form
//    (ABI v3, angles computed by the kernel) in each way of passing positions (TensorForm: explicit int64 or
//    int32, implicit with varlen cu_seqlens or as {B, S} rows), out of place then in place: FlashInfer's
//    apply_rope_pos_ids and MLX's fast.rope take their arguments only so. RC_OK there, with the undefined version
//    refused, is "speaks v3, the tensor form only" (AbiVersions::tensor_form_only without tables_only): every case
//    is sent in the form it took (in_tensor_form), and the table probes are not made;
//  - a kernel that took no probe at all is called as before (the lowest version that expresses each case),
//    except that neutral calls go at the lowest version it declined (RC_UNSUPPORTED) when version 1 got only
//    error codes (AbiVersions::declined): its rows then show what it does with real cases, and the verdict
//    names the refusal.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "core/rope_case.hpp"

namespace ropecheck {

// The newest version this build describes (the header's ROPECHECK_ABI_VERSION).
inline constexpr uint32_t kNewestAbiVersion = ROPECHECK_ABI_VERSION;
// A version no header will define: a kernel that accepts it does not look at abi_version.
inline constexpr uint32_t kUndefinedAbiVersion = 0x7fff;

// How a kernel that takes the tensor form only passes positions: the form its probe took.
struct TensorForm {
  PositionForm pos = PositionForm::int64;  // explicit int64 or int32, or implicit
  uint32_t rank = 3;                       // implicit: 3 (varlen: cu_seqlens and an offset per sequence) or 4
                                           // ({B, S} rows, an offset per row); explicit: 3
  bool index_int32 = false;                // implicit: seq_offsets and cu_seqlens of int32
};
bool operator==(const TensorForm& a, const TensorForm& b);
// "explicit int32 positions", "implicit positions of varlen sequences (cu_seqlens, int64 offsets)", ...
std::string to_string(const TensorForm& f);

// A way of passing a call that a probe found the kernel takes (ABI v3): the flat form (v1's in, out, positions)
// or a tensor form, out of place or in place.
struct CallForm {
  std::optional<TensorForm> tensor;  // nullopt: the flat form
  bool in_place = false;
  bool operator==(const CallForm& o) const = default;
};
// "the flat form", "the tensor form (explicit int32 positions), in place", ...
std::string to_string(const CallForm& f);
// Every form the probes try, in order: the flat form, then each tensor form (tensor_probe_forms), each out of
// place then in place.
std::vector<CallForm> probe_forms();

// Where a probe call's angles come from: computed by the kernel (no table), or a caller-given table of a kind,
// its rows by position (v3) or by token (v4: RC_ROWS_BY_TOKEN), in the call's dtype or f32 (angle: f32).
struct AngleSource {
  std::optional<TableKind> kind;  // nullopt: computed
  bool by_token = false;
  bool call_dtype = false;        // the table in the call's dtype (else f32)
  bool operator==(const AngleSource& o) const = default;
};
// "computed angles", "a cos-sin-2 table of bf16", "a per-token cos-sin-full table of f32", ...
std::string to_string(const AngleSource& s, Dtype call);
// The forms the tensor-form probes try, in order.
std::vector<TensorForm> tensor_probe_forms();
// The call of `c` (no tensor form) in the tensor form `f`: q of rank 3 (or 4), no k, its positions as `f` passes
// them -- implicit positions as runs of consecutive positions, each run a sequence (rank 3: cu_seqlens and an
// offset per sequence; rank 4: equal runs, one row of the batch each). nullopt (and *why) when `f` cannot
// express the case (several position axes implicitly, a position or offset beyond int32). A case already in the
// tensor form keeps its tensors; its positions go as `f` passes them: explicit int64 ones as int32 to a kernel
// that takes int32 positions, explicit ones as implicit (q's rank kept: rank 3 as sequences, rank 4 as its rows
// when each row's positions are consecutive) to one that takes implicit positions only, and int64 offsets and
// cu_seqlens as int32 to one that takes int32 offsets. Otherwise it is returned as it is.
std::optional<RopeCase> in_tensor_form(const RopeCase& c, const TensorForm& f, std::string* why = nullptr);

// One probe call: the version it carried, the case, and what came back.
struct AbiProbe {
  uint32_t version = 0;
  std::string call;     // the case in words ("f32 interleaved head_dim 64, 1 token at position 1")
  int rc = 0;           // the return value when the call returned
  std::string outcome;  // "returned RC_OK", "returned RC_UNSUPPORTED", "returned the error code 2", "crashed ..."
  std::string said;     // an error code's explanation from a kernel served by another process (the Python exception)
  bool made = true;     // false: the call could not be made (an in-process kernel is not asked the tensor form)
  // What the call was (for the refusal's list of what was tried): its dtype, layout and head_dim, where its angles
  // came from and its form (the neutral probes: computed angles, the flat form).
  Dtype dtype = Dtype::f32;
  Layout layout = Layout::interleaved;
  uint32_t head_dim = 0;
  AngleSource source;
  CallForm form;
  bool ok() const { return outcome.empty() && rc == RC_OK; }
};

struct AbiVersions {
  bool probed = false;    // the probes ran (false: nothing known; every case goes as before)
  bool stopped = false;   // `stop` (the gate's budget) ended the probing: what was not asked is not known
  uint32_t accepted = 0;  // bit v (1 <= v <= kNewestAbiVersion): a neutral probe at version v returned RC_OK
  bool blind = false;     // the probe at kUndefinedAbiVersion returned RC_OK
  // bit v: some probe at version v returned RC_UNSUPPORTED. With nothing accepted, neutral calls go at the
  // lowest such version when version 1 got only error codes: an error code is no answer to a well-formed call
  // (the header asks RC_UNSUPPORTED for what a kernel does not implement), so a version answered with
  // RC_UNSUPPORTED is one the kernel's version check let through before it declined the shape.
  uint32_t declined = 0;
  // The first refused probe of each version (for the verdict), and every probe made.
  std::vector<AbiProbe> probes;
  // Took no neutral probe but a v3 table probe: it takes caller-given tables only (accepted then has bit 3).
  // table_dtypes[k]: bit d, the table kind k (TableKind) took a probe with a table of Dtype d;
  // table_in_call_dtype[k]: it took a table of the call's own dtype on a call that is not f32 (vLLM, ONNX
  // Runtime: the cache has the activations' type); tensor_form_only: it took table probes in the tensor form only.
  bool tables_only = false;
  uint8_t table_dtypes[5] = {};
  bool table_in_call_dtype[5] = {};
  bool tensor_form_only = false;
  // With tables_only false, tensor_form_only: it took no neutral call in the legacy form but took it in the tensor
  // form of tensor_form (computed angles; accepted then has bit 3 only).
  TensorForm tensor_form;
  bool in_place_only = false;  // it took the (table or tensor-form) probes in place only
  // A kernel that took no neutral call (v3_form_only): every form it took (the first the preferred one: its
  // tensor form is tensor_form), found from the first probe it took by varying one thing at a time -- the form,
  // where the angles come from, the dtype and layout -- so that one refusal never hides another form it takes.
  std::vector<CallForm> forms;
  // Per-token tables (v4, RC_ROWS_BY_TOKEN) of kind k: bit d, it took one of Dtype d (as table_dtypes);
  // token_table_in_call_dtype[k]: of the call's own dtype on a call that is not f32.
  uint8_t token_table_dtypes[5] = {};
  bool token_table_in_call_dtype[5] = {};
  bool computed = false;  // v3_form_only: it took a call that computes its angles (in some tensor form)
  // The asked dtype x layout combinations its first taken probe's call was taken in (v3_form_only; the matrix
  // then says which of them it takes for real). What the rows run over when the matrix accepts nothing.
  std::vector<std::pair<Dtype, Layout>> combos;
  std::vector<std::pair<Dtype, Layout>> asked_combos;  // the asked ones those probes were made on
  // The tensor forms it took, in the order of forms (v3_form_only).
  std::vector<TensorForm> tensor_forms() const;
  bool takes_flat_form() const;
  bool takes_token_table(TableKind k) const { return token_table_dtypes[size_t(k)] != 0; }
  // Speaks v3 only, in a form the neutral v1 call does not take (caller-given tables, or the tensor form).
  bool v3_form_only() const { return tables_only || tensor_form_only; }
  bool takes_table(TableKind k) const { return table_dtypes[size_t(k)] != 0; }

  bool takes(uint32_t v) const { return v >= 1 && v <= 31 && (accepted >> v & 1u); }
  // Features of versions >= 2 may be sent (see the file comment; `declared`: the user named them).
  bool features_sent(bool declared = false) const;
  // The version a case that needs version `needed` (RopeCase::min_abi_version) is sent at, or 0: not sent.
  uint32_t version_for(uint32_t needed, bool declared = false) const;
  // Why a case that needs `needed` is not sent (version_for gave 0), in words for a row's note.
  std::string why_not_sent(uint32_t needed) const;
  // What the probes tried, counted from the probes made: their dtypes, layouts and head_dims, the versions and
  // forms of the calls, the tables.
  std::string tried() const;
  // One line for the verdict: "speaks ABI v1 and v2", "speaks ABI v1 only (v2 features not run)", ...
  std::string summary() const;
  // Every probe refused: one line naming the simplest call and what it returned at each version, and the
  // likely causes. Empty when some probe was accepted.
  std::string refusal() const;
  // The same for the verdict line (at most ~150 characters: gate/verdict_format.cpp, fit_verdict_reason): that the
  // kernel declined or rejected every call, how many probe calls, and the first likely cause.
  std::string refusal_brief() const;

 private:
  // The likely causes of a refusal, most specific first (brief: each in a few words).
  std::vector<std::string> refusal_causes(bool brief) const;
};

// The probe cases, simplest first: for each of two head shapes (64 and 128, fully rotated) each asked dtype x
// layout, one token at position 1, one head, base 10000. slice: the heads take its rotated slice instead
// (apply_rotary_slice; a slice of one head_dim: one head shape).
std::vector<RopeCase> abi_probe_cases(const std::vector<Dtype>& dtypes, const std::vector<Layout>& layouts,
                                      const RotarySlice* slice = nullptr);

// The table probes (v3): the simplest call of `d`, `l` (head_dim 64, one head, one token at position 1) with a
// 2-row table of kind `k` in `table_dtype` (angle: f32), in the legacy form or the tensor form. The probes try
// the asked dtypes, f16 and bf16 before f32 (a table in the call's dtype is then told apart from an f32 one),
// each with a table of its own dtype and of f32, until one is taken.
RopeCase abi_table_probe_case(Dtype d, Layout l, TableKind k, Dtype table_dtype, bool tensor_form,
                              bool by_token = false, const RotarySlice* slice = nullptr);
// The probe call of dtype d and layout l with its angles from `s` in form `f` (head_dim 64, one head, one token at
// position 1; a table of 2 rows, or per token of 1); nullopt when the form cannot express it.
std::optional<RopeCase> abi_probe_call(Dtype d, Layout l, const AngleSource& s, const CallForm& f,
                                       const RotarySlice* slice = nullptr);

// A probe's call: make `c` at abi_version `version` (explicit neutral values in every later field), in place or
// not, and say what happened (AbiProbe::rc / outcome: empty outcome and rc when it returned). The neutral probes
// are out of place; the table probes try in place too (vLLM's kernel writes only in place).
using AbiProbeCall = std::function<AbiProbe(const RopeCase& c, uint32_t version, bool in_place)>;

// Ask a kernel which versions it speaks (the probes of the file comment). Each probe case in turn is tried at
// every version until some version takes it; then the remaining versions and the undefined one are asked on
// that case alone (the shape is known to be fine: only the version differs). A probe that does not return
// (crash, hang) ends the probing, and so does `stop` (the gate's budget). slice: every probe's head takes that
// rotated slice (a kernel of one partial rotary shape); neutral_only: the neutral probes only (flat form, computed
// angles: the gate's search for such a slice, which then probes in full on the slice found).
AbiVersions negotiate_abi(const AbiProbeCall& call, const std::vector<Dtype>& dtypes,
                          const std::vector<Layout>& layouts, const std::function<bool()>& stop = {},
                          const RotarySlice* slice = nullptr, bool neutral_only = false);

// An in-process kernel's versions, probed once per entry point and remembered (thread-safe): what
// run_kernel and the in-process property handle send.
const AbiVersions& abi_versions_of(rc_rope_apply_fn fn);

}  // namespace ropecheck
