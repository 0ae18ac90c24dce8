// What a kernel promises: its contract. A contract names the inexactness a
// pipeline is designed with (f32 angles, a cos/sin cache in a narrow type,
// arithmetic in the activation dtype, flushed subnormals, position 0 as values
// or bits); each clause widens the error model's per-pair allowance by a bound
// derived in docs/error-model.md ("Contracts"), never tuned.
//
// SPEC grammar (fixed; scripts depend on it): a comma list of clauses
//   angles=exact | angles=f32[:K]      K > 0 ulps of f32 at |phi| (default: derived per pair)
//   cos-sin=f32|f16|bf16               cos and sin rounded to that type before use
//   arith=f32|f16|bf16                 each product and the sum rounded in that type
//   denormals=keep|flush               subnormal inputs, intermediates, outputs may be flushed
//   identity=values|bits               an angle of 0 gives the input's values / its exact bits
//   stores=nearest|truncate            the output's conversion to its type rounds to nearest even / toward zero
// or the name of a preset (contract_presets()). A clause given twice is an error. spec() names stores= only
// when it is truncate (a contract without it reads as before the clause existed).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/dtype.hpp"

namespace ropecheck {

struct Contract {
  enum class Angles { exact, f32 };
  Angles angles = Angles::exact;
  double angle_ulps = 0;          // K of angles=f32:K; 0: the derived default (per pair)
  Dtype cos_sin = Dtype::f32;     // the type cos and sin are rounded to before use
  Dtype arith = Dtype::f32;       // the type each product and the sum are rounded to
  bool flush_denormals = false;   // denormals=flush
  bool identity_bits = false;     // identity=bits
  bool truncating_stores = false; // stores=truncate

  // The canonical SPEC: every clause, in grammar order ("angles=exact,cos-sin=f32,...").
  std::string spec() const;
  // Only the clauses that differ from the default ("default" when none).
  std::string short_spec() const;
  bool operator==(const Contract&) const = default;
};

// Parse a SPEC or a preset name. On failure returns nullopt and sets *error.
std::optional<Contract> parse_contract(std::string_view spec, std::string* error);

struct ContractPreset {
  const char* name;
  const char* spec;
  const char* what;  // the pipeline it describes
};
const std::vector<ContractPreset>& contract_presets();

// The loosest contract the power test names:
// angles=f32:64,cos-sin=bf16,arith=bf16,denormals=flush.
Contract loosest_contract();

}  // namespace ropecheck
