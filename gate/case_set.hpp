// Case sets for kernels that cannot be loaded (GPU, Python): export the gate's
// cases as NumPy inputs plus a JSON manifest; an external program writes the
// outputs as .npy; check them with the same verdict and exit codes.
//
//   D/manifest.json   {"format": "ropecheck-case-set", "version": 2, "angle_model": ..., "contract": SPEC,
//                      ["tolerance": {"f32": U, ...}], "cases": [
//                        {"id", "check", "input": "NNNN.in.npy", "output": "NNNN.out.npy", "bound", "case": {...}}]}
//   Each case's "bound" is informational: `check` derives every allowance from the case's parameters and
//   the contract (or a --tolerance given to check itself), never from a number in the manifest.
//   D/NNNN.in.npy     [n_tokens, n_heads, head_dim], '<f4' (f32), '<f2' (f16) or '<u2' (bf16 bit patterns)
//   D/NNNN.out.npy    written by the external program: the same shape and element type
#pragma once

#include <map>
#include <string>

#include "gate/gate.hpp"

namespace ropecheck::gate {

// `cases check` refuses, before reading them, a manifest larger than this and any input or output file
// whose data is larger than this (the export writes small cases: a manifest of ~600 bytes per case).
inline constexpr uint64_t kMaxManifestBytes = uint64_t(128) << 20;
inline constexpr uint64_t kMaxCaseFileBytes = uint64_t(64) << 20;
inline constexpr uint64_t kMaxManifestValues = uint64_t(6) << 20;  // JSON values (~25 per exported case)

struct ExportOptions {
  std::vector<Dtype> dtypes{std::begin(kAllDtypes), std::end(kAllDtypes)};
  std::vector<Layout> layouts{std::begin(kAllLayouts), std::end(kAllLayouts)};
  int64_t max_position = int64_t(1) << 24;
  AngleModel angle_model = AngleModel::exact;
  Contract contract;
  std::map<Dtype, double> tolerance;
  uint64_t seed = 1;
  size_t random_cases = 32;
};

// Writes the manifest and the inputs; returns the number of cases. Throws std::runtime_error.
size_t export_case_set(const std::string& dir, const ExportOptions& opt);

// Judges the outputs. Throws std::runtime_error (exit 2) on malformed or
// mismatched files; failures of the kernel are in the result (exit 1).
// contract / tolerance: overrides given to `check` (nullopt / empty: the manifest's).
GateResult check_case_set(const std::string& dir, const std::optional<Contract>& contract,
                          const std::map<Dtype, double>& tolerance);

}  // namespace ropecheck::gate
