// Diagnosing a failed case: which named explanation fits the kernel's output.
//
// A finding says where a kernel is wrong; a diagnosis says what it most likely
// computes. diagnose() tests explanations against the output of one case:
//
//  1. structural: a candidate output is computed (the rotation by -phi, the
//     other layout's pairing, positions m+-1 and m+-2, theta from head_dim,
//     theta = base^(-i/d), the token index as position, cos and sin swapped,
//     pairs left unrotated; ABI v3: the inverse computed as forward, implicit
//     positions not reset per sequence; with a caller-given table the
//     candidates read its rows as given, a position is a row -- "table row
//     indexed by token" -- and the hypotheses about computing angles are not
//     tried) and the output is measured against it as if it
//     were exact; it fits when every finite pair is within the contract's
//     allowance (Criteria::allowance) relative to the candidate. The fitting
//     candidate with the smallest residual wins. A kernel that copies a pair
//     whose exact angle is 0 is consistent with every candidate there.
//  2. radial bias: every pair within its tangential allowance, the mean radial
//     component of the rotated pairs below -1/4 u over >= 32 pairs
//     (shortened outputs, as from truncating stores), unless denormals=flush
//     alone accepts the output (flushed pairs are shortened too). Before the
//     precision clauses: a wide enough arith or cos-sin clause also accepts
//     truncated stores, and would hide them.
//  3. precision: the same output re-judged under a widened copy of the
//     contract, one clause at a time (denormals=flush, angles=f32:K with the
//     smallest K, cos-sin=f16, arith=f16, cos-sin=bf16, arith=bf16), then the
//     smallest combination of clauses. The angle clause comes last among sets
//     of one size, except when every pair kept its length (within the radial
//     allowance): an error that is all phase is angle drift, not a narrow
//     cache or narrow arithmetic, which change the length too. The angle
//     clause needs that evidence anyway.
//  4. otherwise "unexplained", naming the closest candidate.
// Failures outside the rotated pairs have their own causes: "identity changed"
// (only pairs at angle 0 fail), "pass-through touched" (only dims
// [rotary_dim, head_dim) fail), "NaN inputs zeroed" (only NaN-input pairs
// fail, and they are the rotation of the pair with its NaN replaced by 0).
//
// Cost: the candidates' cos and sin come from at most three reference
// evaluations of one-head cases whose pairs are all (1, 0): the case's
// positions (with 1, 2 and the token indices; under the fp32 angle model
// m+-1 and m+-2 themselves), theta from head_dim, theta = base^(-i/d).
// Everything else is double arithmetic on those rows and re-judging
// (~2-3 reference evaluations of an 8 x 2 x 128 case in all).
#pragma once

#include <optional>
#include <string>

#include "core/rope_case.hpp"
#include "properties/causes.hpp"
#include "properties/contract.hpp"
#include "properties/judge.hpp"
#include "reference/reference.hpp"

namespace ropecheck {

struct Diagnosis {
  Cause cause = Cause::unexplained;  // what the output is explained by (properties/causes.hpp; its text: name()):
                                     // Cause::none when it passes, a structural hypothesis (angle_negated,
                                     // other_layout, position_plus_1, ..., a HeadMap's cause), outside the
                                     // rotated pairs (pass_through_touched, identity_changed, nan_inputs_zeroed),
                                     // precision (radial_bias, truncating_stores, f32_angle_drift, cos_sin_f16,
                                     // ..., mixed_precision), cos_sin_not_unit_length, or unexplained
  std::string detail;    // one line: the evidence (residual in u, which pairs, the K needed, ...)
  std::string clause;    // precision causes: the clause(s) added to the contract that accept the
                         // output ("angles=f32:37", "cos-sin=bf16", "angles=f32:3,cos-sin=bf16,arith=bf16");
                         // empty otherwise
  std::string contract;  // precision causes, when the widened contract passes the whole case: its
                         // --contract spec (the failed contract's other clauses kept); empty otherwise
  double residual = 0;   // the largest pair error e (u) of the output against this explanation
                         // (precision causes, radial bias, none: against the exact reference)
  bool explained() const { return cause != Cause::unexplained; }
  std::string_view name() const { return name_of(cause); }
  // "diagnosis: <cause> (<detail>)[; would pass with --contract <spec>]"
  std::string text() const;
};

// got: the kernel's output for case c (the storage type's bytes); ref: the
// exact reference of c under `model`; cr: the criteria it failed under (its
// contract). Deterministic. A passing output gives Cause::none.
// A hypothesis about a tensor-form call's strides (gate::stride_hypotheses builds them): for each (token t, head h)
// the kernel loops over, index th = t * n_heads + h, and each element j of that head, the compact element it reads
// (read[th * head_dim + j]) and the compact element it writes its result to (write[th * head_dim + j]); SIZE_MAX
// where that element is none of the tensor's (a gap, past the end). Each pair is rotated by token t's positions.
// Elements it writes nothing into keep what the output held (the poison pattern, or in place the input): they,
// and elements computed from a pair read (in part) from no element, are not predicted.
struct HeadMap {
  Cause cause;        // Cause::k_laid_out_with_q_strides, ...
  std::string what;   // for the detail
  std::vector<size_t> read, write;
};

// head_maps: stride hypotheses tried with the structural explanations.
Diagnosis diagnose(const RopeCase& c, const void* got, const ReferenceOutput& ref, const Criteria& cr,
                   AngleModel model = AngleModel::exact, const std::vector<HeadMap>& head_maps = {});

// The contract a Criteria was made from (Criteria::of): its angle, cos-sin,
// arith, denormals and identity clauses.
Contract contract_of(const Criteria& cr);

// Several rows' precision diagnoses as one cause (the gate's verdict line): each text is a row's diagnosis,
// "diagnosis: <precision cause> (... the worst at Nx it ...); would pass with --contract SPEC", each SPEC the
// smallest widening of `base` (the failed contract) that accepts its row's case. On pairs just past the
// allowance (a bf16 output's rounding dominating) the smallest widening differs from row to row, so the rows
// are read together: the main cause is the widening of the row that exceeds its allowance most; clauses only
// other rows need are named apart with their largest excess. The joined SPEC takes every clause at its widest
// (the largest K, the widest cos-sin and arith types, flushing if any): each clause's allowance only grows as
// it widens, so every row's case passes under it. nullopt when a text is not a precision diagnosis ending in
// such a SPEC, or when K's cannot be ordered (a K against the derived default).
struct PrecisionJoin {
  std::string causes;  // "cos/sin at bf16 precision (up to 8608x the allowance); besides, on rows up to 2.9x it:
                       // f32 angle drift, arithmetic at f16 precision"
  std::string spec;    // the joined --contract SPEC (the failed contract's other clauses kept)
};
std::optional<PrecisionJoin> join_precision(const std::vector<std::string>& diagnoses, const Contract& base);
bool is_precision_cause(std::string_view cause);
bool is_precision_cause(Cause cause);
// A precision diagnosis' excess: its worst pair's error over the failed contract's allowance ("the worst at Nx
// it"); 0 when the text has none.
double precision_excess(std::string_view diagnosis);

}  // namespace ropecheck
