#include "properties/causes.hpp"

#include <array>
#include <cctype>

namespace ropecheck {

namespace {

// Ids are stable: never change one, only add. Names follow the diagnosis (properties/diagnosis.hpp), the fault
// checks (gate/gate_checks.cpp) and the gate's rows (gate/gate.cpp).
constexpr std::array kCauses = {
    CauseName{Cause::none, "", "none"},
    // what the rotation computes instead (structural hypotheses)
    CauseName{Cause::angle_negated, "angle-negated", "angle negated"},
    CauseName{Cause::inverse_computed_as_forward, "inverse-computed-as-forward", "inverse computed as forward"},
    CauseName{Cause::other_layout, "other-layout", "other layout"},
    CauseName{Cause::position_plus_1, "position-plus-1", "position m+1"},
    CauseName{Cause::position_minus_1, "position-minus-1", "position m-1"},
    CauseName{Cause::position_plus_2, "position-plus-2", "position m+2"},
    CauseName{Cause::position_minus_2, "position-minus-2", "position m-2"},
    CauseName{Cause::theta_from_head_dim, "theta-from-head-dim", "theta from head_dim"},
    CauseName{Cause::exponent_i_over_d, "exponent-i-over-d", "exponent i/d"},
    CauseName{Cause::token_index_as_position, "token-index-as-position", "token index as position"},
    CauseName{Cause::table_row_indexed_by_token, "table-row-indexed-by-token", "table row indexed by token"},
    CauseName{Cause::token_table_indexed_by_position, "per-token-table-indexed-by-position",
              "per-token table indexed by position"},
    CauseName{Cause::cos_and_sin_swapped, "cos-and-sin-swapped", "cos and sin swapped"},
    CauseName{Cause::positions_rounded_to_f32, "positions-rounded-to-f32", "positions rounded to f32"},
    CauseName{Cause::positions_rounded_to_bf16, "positions-rounded-to-bf16", "positions rounded to bf16"},
    CauseName{Cause::positions_truncated_to_32_bits, "positions-truncated-to-32-bits", "positions truncated to 32 bits"},
    CauseName{Cause::frequencies_rounded_to_bf16, "frequencies-rounded-to-bf16", "frequencies rounded to bf16"},
    CauseName{Cause::sequence_start_not_subtracted, "sequence-start-not-subtracted", "sequence start not subtracted"},
    CauseName{Cause::first_sequence_offset_for_every_sequence, "first-sequence-offset-for-every-sequence", "first sequence's offset for every sequence"},
    CauseName{Cause::sequence_offsets_ignored, "sequence-offsets-ignored", "sequence offsets ignored"},
    CauseName{Cause::k_laid_out_with_q_strides, "k-laid-out-with-q-strides", "k laid out with q's strides"},
    CauseName{Cause::strides_ignored, "strides-ignored", "strides ignored"},
    CauseName{Cause::k_head_stride_from_q, "k-head-stride-from-q", "k's head stride from q"},
    CauseName{Cause::attention_factor_applied_twice, "attention-factor-applied-twice", "attention factor applied twice"},
    CauseName{Cause::attention_factor_not_applied, "attention-factor-not-applied", "attention factor not applied"},
    CauseName{Cause::position_axes_ignored, "position-axes-ignored", "position axes ignored"},
    CauseName{Cause::axis_map_read_as_sections, "axis-map-read-as-sections", "axis map read as sections"},
    CauseName{Cause::mrope_sections_on_other_axes, "mrope-sections-on-other-axes", "M-RoPE sections on other axes"},
    CauseName{Cause::mrope_section_boundary_shifted, "mrope-section-boundary-shifted",
              "M-RoPE section boundary shifted"},
    CauseName{Cause::frequency_rule_ignored, "frequency-rule-ignored", "frequency rule ignored"},
    CauseName{Cause::yarn_ramp_reversed, "yarn-ramp-reversed", "YaRN ramp reversed"},
    CauseName{Cause::llama3_smoothing_inverted, "llama3-smoothing-inverted", "llama3 smoothing inverted"},
    CauseName{Cause::pairs_left_unrotated, "pairs-left-unrotated", "pairs left unrotated"},
    CauseName{Cause::cos_sin_not_unit_length, "cos-sin-not-unit-length", "cos/sin not of unit length"},
    // outside the rotated pairs
    CauseName{Cause::pass_through_touched, "pass-through-touched", "pass-through touched"},
    CauseName{Cause::identity_changed, "identity-changed", "identity changed"},
    CauseName{Cause::nan_inputs_zeroed, "nan-inputs-zeroed", "NaN inputs zeroed"},
    // precision (what a contract clause allows)
    CauseName{Cause::radial_bias, "radial-bias", "radial bias"},
    CauseName{Cause::f32_angle_drift, "f32-angle-drift", "f32 angle drift"},
    CauseName{Cause::cos_sin_f16, "cos-sin-f16", "cos/sin at f16 precision"},
    CauseName{Cause::cos_sin_bf16, "cos-sin-bf16", "cos/sin at bf16 precision"},
    CauseName{Cause::arith_f16, "arith-f16", "arithmetic at f16 precision"},
    CauseName{Cause::arith_bf16, "arith-bf16", "arithmetic at bf16 precision"},
    CauseName{Cause::subnormals_flushed, "subnormals-flushed", "subnormals flushed"},
    CauseName{Cause::mixed_precision, "mixed-precision", "mixed precision"},
    CauseName{Cause::unexplained, "unexplained", "unexplained"},
    CauseName{Cause::truncating_stores, "truncating-stores", "truncating stores"},
    CauseName{Cause::truncating_stores_tail, "truncating-stores-tail", "truncating stores in a tail loop"},
    CauseName{Cause::truncating_cos_sin_table, "truncating-cos-sin-table", "truncating cos/sin table"},
    // faults of a call (gate/gate_checks.cpp)
    CauseName{Cause::crash, "crash", "crash"},
    CauseName{Cause::hang, "hang", "hang"},
    CauseName{Cause::forbidden_system_call, "forbidden-system-call", "forbidden system call"},
    CauseName{Cause::element_offsets_in_32_bits, "element-offsets-in-32-bits", "element offsets computed in 32 bits"},
    CauseName{Cause::exception, "exception", "exception"},
    CauseName{Cause::error_code, "error-code", "error code"},
    CauseName{Cause::out_of_bounds_write, "out-of-bounds-write", "out-of-bounds write"},
    CauseName{Cause::input_modified, "input-modified", "input modified"},
    CauseName{Cause::in_place_aliasing, "in-place-aliasing", "in-place aliasing"},
    CauseName{Cause::argument_modified, "argument-modified", "argument modified"},
    CauseName{Cause::declined_after_writing, "declined-after-writing", "declined after writing"},
    CauseName{Cause::unwritten_output, "unwritten-output", "unwritten output"},
    CauseName{Cause::guard_page, "guard-page", "guard page"},
    CauseName{Cause::fp_environment, "fp-environment", "fp environment"},
    // the gate's own rows
    CauseName{Cause::state_across_calls, "state-across-calls", "state across calls"},
    CauseName{Cause::stale_state_across_calls, "stale-state-across-calls", "stale state across calls"},
    CauseName{Cause::not_reproduced, "not-reproduced", "not reproduced on a rerun"},
    CauseName{Cause::coverage, "coverage", "coverage"},
    CauseName{Cause::budget_reached, "budget-reached", "the budget was reached"},
};

bool starts_with(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }

// The table is in the enum's order: a cause's entry is kCauses[value].
constexpr bool in_enum_order() {
  for (size_t k = 0; k < kCauses.size(); ++k)
    if (static_cast<size_t>(kCauses[k].cause) != k) return false;
  return true;
}
static_assert(in_enum_order(), "kCauses lists the causes in the order of enum class Cause");

}  // namespace

std::span<const CauseName> known_causes() { return std::span<const CauseName>(kCauses).subspan(1); }

std::string_view name_of(Cause c) { return kCauses[static_cast<size_t>(c)].name; }
std::string_view id_of(Cause c) { return kCauses[static_cast<size_t>(c)].id; }

std::string_view cause_id(std::string_view t) {
  for (std::string_view p : {"diagnosis: ", "precision: "})
    if (starts_with(t, p)) t.remove_prefix(p.size());
  for (std::string_view p : {"k: ", "q: "})
    if (starts_with(t, p)) t.remove_prefix(p.size());
  if (starts_with(t, "diagnosis: ")) t.remove_prefix(11);
  const CauseName* best = nullptr;
  for (const CauseName& c : known_causes())
    if (starts_with(t, c.name) && (t.size() == c.name.size() || !std::isalnum(static_cast<unsigned char>(t[c.name.size()]))) &&
        (!best || c.name.size() > best->name.size()))
      best = &c;
  return best ? best->id : std::string_view{};
}

}  // namespace ropecheck
