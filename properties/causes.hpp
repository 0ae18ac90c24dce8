// The causes a verdict names, each with a stable id: --verdict-json's and report.json's `cause_id`. A cause's
// text may be reworded from one release to the next; its id does not change (a CI job that keys on ids keeps
// working). Ids are only ever added.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

namespace ropecheck {

// Every cause, in the order of the table in causes.cpp (docs/gate.md, "Causes"). Code and tests name a cause by
// this value; its text (name_of) is what a verdict prints and its id (id_of) what a CI job keys on.
enum class Cause : uint8_t {
  none,  // the output passes (a diagnosis only; no id)
  angle_negated,
  inverse_computed_as_forward,
  other_layout,
  position_plus_1,
  position_minus_1,
  position_plus_2,
  position_minus_2,
  theta_from_head_dim,
  exponent_i_over_d,
  token_index_as_position,
  table_row_indexed_by_token,
  token_table_indexed_by_position,
  cos_and_sin_swapped,
  positions_rounded_to_f32,
  positions_rounded_to_bf16,
  positions_truncated_to_32_bits,
  frequencies_rounded_to_bf16,
  sequence_start_not_subtracted,
  first_sequence_offset_for_every_sequence,
  sequence_offsets_ignored,
  k_laid_out_with_q_strides,
  strides_ignored,
  k_head_stride_from_q,
  attention_factor_applied_twice,
  attention_factor_not_applied,
  position_axes_ignored,
  axis_map_read_as_sections,
  mrope_sections_on_other_axes,
  mrope_section_boundary_shifted,
  frequency_rule_ignored,
  yarn_ramp_reversed,
  llama3_smoothing_inverted,
  pairs_left_unrotated,
  cos_sin_not_unit_length,
  pass_through_touched,
  identity_changed,
  nan_inputs_zeroed,
  radial_bias,
  f32_angle_drift,
  cos_sin_f16,
  cos_sin_bf16,
  arith_f16,
  arith_bf16,
  subnormals_flushed,
  mixed_precision,
  unexplained,
  truncating_stores,
  truncating_stores_tail,
  truncating_cos_sin_table,
  crash,
  hang,
  forbidden_system_call,
  element_offsets_in_32_bits,
  exception,
  error_code,
  out_of_bounds_write,
  input_modified,
  in_place_aliasing,
  argument_modified,
  declined_after_writing,
  unwritten_output,
  guard_page,
  fp_environment,
  state_across_calls,
  stale_state_across_calls,
  not_reproduced,
  coverage,
  budget_reached,
};

struct CauseName {
  Cause cause;
  std::string_view id;    // "angle-negated", "crash", "cos-sin-bf16", ...
  std::string_view name;  // the text the diagnosis or the fault check names it by: "angle negated", "crash", ...
};

// The text a verdict names a cause by ("angle negated"; "none" for Cause::none) and its stable id ("" for
// Cause::none).
std::string_view name_of(Cause c);
std::string_view id_of(Cause c);

// Every cause a diagnosis, a fault check or the gate's own rows can name (docs/gate.md, "Causes").
std::span<const CauseName> known_causes();

// The id of a row's cause as the verdict says it: a diagnosis ("diagnosis: angle negated (...)"), a fault
// ("crash: the kernel crashed ..."), a joined precision cause ("precision: cos/sin at bf16 precision (...); ...")
// or a bare name; a q/k row's "k: " or "q: " is read past. The longest known name the text starts with; ""
// when none (no id is invented for a text the table does not know).
std::string_view cause_id(std::string_view cause_text);

}  // namespace ropecheck
