// Case sets for kernels that cannot be loaded (GPU, Python): export the gate's
// cases as NumPy inputs plus a JSON manifest; an external program writes the
// outputs as .npy (or declines a case); check them with the same rows, verdict
// and exit codes as the gate. docs/gate.md, "Kernels that cannot be loaded".
//
//   D/manifest.json   {"format": "ropecheck-case-set", "version": 4 or 5, "run_id": R (16 hex digits, random per export),
//                      "export": {the export's parameters}, "angle_model": ..., "contract": SPEC,
//                      ["tolerance": {"f32": U, ...}], "note": the protocol in one paragraph, "cases": [
//                        {"id": "NNNN", "check": ROW, "in_place": bool, "input": "NNNN.in.npy",
//                         "output": "NNNN.R.out.npy", "declined": "NNNN.R.declined", ["twin": "MMMM"],
//                         "bound", "case": {...}}]}
//   Each case's "bound" is informational: `check` derives every allowance from the case's parameters and
//   the contract (or a --tolerance given to check itself), never from a number in the manifest.
//   "check" names the verdict row the case belongs to ("matrix f32 interleaved", "property: layouts", ...);
//   "twin" pairs an interleaved case of "property: layouts" with its half-split twin (both ways).
//   D/NNNN.in.npy       [n_tokens, n_heads, head_dim], '<f4' (f32), '<f2' (f16) or '<u2' (bf16 bit patterns)
//   D/NNNN.R.out.npy    written by the external program: the same shape and element type; "in_place": true
//                       asks it to compute the case in place (the result written over the input's buffer)
//   D/NNNN.R.declined   written instead (a regular file, its content ignored) when the program declines the
//                       case, as a loaded kernel returns RC_UNSUPPORTED
//   The run id in the names the program writes ties every output to one export: outputs left by an earlier
//   export of the same directory never match, and `check` names them. Versions 1 and 2 (no run id, no
//   declines, no property cases, outputs "NNNN.out.npy") are still checked.
//   The version written is the lowest that can express the cases: 4 (ABI v2 fields -- rotary_offset, n_pos_axes,
//   pair_axis, attention_factor, freq_rule -- and negative positions are additive there, written only for a
//   program that says it implements them: --supports), or 5 when a case carries an ABI v3 field (direction, a
//   table, the tensor form), written only when --supports names an ABI v3 feature. Version 5 adds per such case
//   "direction", "table" {table_kind, dtype, rows, columns, source: export|program, table, table2} and "tensors"
//   {q, q_out, k, k_out: {file, shape, strides, offset, span}; pos, seq_offsets, cu_seqlens: {file, dtype,
//   shape}}: a tensor-form case's input and outputs are the tensors' flat buffers (docs/gate.md, "ABI v3 cases"). "export" also records "features" (the
//   features the cases may use; a property's call outside them was not made, and `check` plays it back as
//   declined), "supports" (when given), "model_case" (a model's case template) and "long_max_position".
#pragma once

#include <map>
#include <string>

#include "gate/gate.hpp"

namespace ropecheck::gate {

// `cases check` refuses, before reading them, a manifest larger than this and any input or output file
// whose data is larger than this (the export writes small cases: a manifest of ~650 bytes per case).
inline constexpr uint64_t kMaxManifestBytes = uint64_t(128) << 20;
inline constexpr uint64_t kMaxCaseFileBytes = uint64_t(64) << 20;
inline constexpr uint64_t kMaxManifestValues = uint64_t(6) << 20;  // JSON values (~26 per exported case)

struct ExportOptions {
  std::vector<Dtype> dtypes{std::begin(kAllDtypes), std::end(kAllDtypes)};
  std::vector<Layout> layouts{std::begin(kAllLayouts), std::end(kAllLayouts)};
  int64_t max_position = kDefaultMaxPosition;
  // The long positions row's largest position (GateOptions::long_max_position) and what bounds it, if anything.
  int64_t long_max_position = kDefaultLongMaxPosition;
  std::string long_positions_bound;
  AngleModel angle_model = AngleModel::exact;
  Contract contract;
  std::map<Dtype, double> tolerance;
  // What the external program implements (--supports): only cases whose features are all in it are written, and
  // `check` requires each of them that the export holds cases of. nullopt: the cases of every ABI v1 feature (a
  // program written before ABI v2 never receives a case it cannot read).
  std::optional<FeatureSet> supports;
  // `--tables program`: the program builds the tables of the cases that have one (docs/gate.md, "Tables
  // the program builds"); `check` judges its arithmetic on them and, in the table fidelity row, the tables.
  bool program_tables = false;
  uint64_t seed = 1;
  size_t random_cases = 32;
  uint64_t property_cases = 8;  // executions of each exportable property per dtype x layout
  // A model's case template (the gate's GateOptions::model): the matrix, special-value and random cases take
  // it; the property rows keep their own shapes (the manifest says so).
  std::optional<RopeCase> model;
  std::string model_name;
  std::vector<std::string> model_description;  // recorded in the manifest
};

struct ExportedSet {
  size_t cases = 0;
  int version = 0;           // the manifest version written: the lowest that can express the cases
  size_t left_out = 0;       // calls of the gate's rows left out: a feature outside the export's
  FeatureSet features;       // the features the written cases use
  std::string run_id;  // stamped into the manifest and the names of the outputs the program writes
};

// Writes the manifest and the inputs under a fresh run id. Throws std::runtime_error.
ExportedSet export_case_set(const std::string& dir, const ExportOptions& opt);

// Judges the outputs (declined cases counted per row, as the gate counts RC_UNSUPPORTED). Throws
// std::runtime_error (exit 2) listing every malformed manifest entry and every missing, refused, malformed or
// ambiguous (output and decline marker both) input or output, naming any file written for another export of
// the directory; failures of the kernel are in the result (exit 1).
// contract / tolerance: overrides given to `check` (nullopt / empty: the manifest's).
// require: features that must have an accepted case (`check --require`), besides those the manifest names (its
// export's --supports) and, for a model's export, a case in the model's configuration.
GateResult check_case_set(const std::string& dir, const std::optional<Contract>& contract,
                          const std::map<Dtype, double>& tolerance, const FeatureSet& require = {});

}  // namespace ropecheck::gate
