#include "properties/contract.hpp"

#include <fmt/format.h>

#include <cmath>
#include <cstdlib>

namespace ropecheck {

namespace {

std::string angles_text(const Contract& c) {
  if (c.angles == Contract::Angles::exact) return "angles=exact";
  if (c.angle_ulps == 0) return "angles=f32";
  return fmt::format("angles=f32:{}", c.angle_ulps);  // shortest text that reads back exactly
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

}  // namespace

std::string Contract::spec() const {
  return fmt::format("{},cos-sin={},arith={},denormals={},identity={}{}", angles_text(*this), to_string(cos_sin),
                     to_string(arith), flush_denormals ? "flush" : "keep", identity_bits ? "bits" : "values",
                     truncating_stores ? ",stores=truncate" : "");
}

std::string Contract::short_spec() const {
  const Contract d;
  std::string s;
  auto add = [&](const std::string& c) { s += (s.empty() ? "" : ",") + c; };
  if (angles != d.angles || angle_ulps != d.angle_ulps) add(angles_text(*this));
  if (cos_sin != d.cos_sin) add(fmt::format("cos-sin={}", to_string(cos_sin)));
  if (arith != d.arith) add(fmt::format("arith={}", to_string(arith)));
  if (flush_denormals) add("denormals=flush");
  if (identity_bits) add("identity=bits");
  if (truncating_stores) add("stores=truncate");
  return s.empty() ? "default" : s;
}

const std::vector<ContractPreset>& contract_presets() {
  static const std::vector<ContractPreset> p = {
      {"default", "angles=exact", "angles as exact as double arithmetic gives, f32 cos/sin within 1 ulp, f32 arithmetic"},
      {"builtin", "identity=bits", "ropecheck's own kernels: the default, and position 0 copies the input's bits"},
      {"pytorch-f32", "angles=f32",
       "the PyTorch/Hugging Face f32 pipeline: f32 inv_freq from pow, f32 positions and product, f32 cos/sin and "
       "arithmetic (also an ONNX-style kernel fed that pipeline's f32 cos/sin cache)"},
      {"hf-eager-bf16", "angles=f32,cos-sin=bf16,arith=bf16",
       "Hugging Face eager rotate_half on bf16 activations: f32 angles, cos/sin cast to bf16, q*cos + "
       "rotate_half(q)*sin in bf16"},
      {"hf-eager-f16", "angles=f32,cos-sin=f16,arith=f16", "the same on f16 activations"},
      {"ggml", "angles=f32:256",
       "ggml's CPU rope: theta = p * theta_scale^i by repeated f32 multiplication (rotary_dim <= 160; "
       "docs/error-model.md derives K)"},
      {"loosest", "angles=f32:64,cos-sin=bf16,arith=bf16,denormals=flush",
       "the loosest contract the power test uses: every planted structural bug still fails under it"},
  };
  return p;
}

Contract loosest_contract() {
  std::string err;
  return *parse_contract("angles=f32:64,cos-sin=bf16,arith=bf16,denormals=flush", &err);
}

std::optional<Contract> parse_contract(std::string_view spec, std::string* error) {
  auto fail = [&](const std::string& why) -> std::optional<Contract> {
    if (error) *error = "--contract: " + why;
    return std::nullopt;
  };
  spec = trim(spec);
  if (spec.empty()) return fail("empty contract");
  if (spec.find('=') == std::string_view::npos) {
    for (const auto& p : contract_presets())
      if (spec == p.name) return parse_contract(p.spec, error);
    std::string names;
    for (const auto& p : contract_presets()) names += std::string(names.empty() ? "" : ", ") + p.name;
    return fail(fmt::format("'{}' is neither a clause list (KEY=VALUE,...) nor a preset ({})", spec, names));
  }
  Contract c;
  std::vector<std::string> seen;
  size_t pos = 0;
  while (pos <= spec.size()) {
    const size_t comma = spec.find(',', pos);
    const std::string_view item = trim(spec.substr(pos, comma == std::string_view::npos ? std::string_view::npos : comma - pos));
    pos = comma == std::string_view::npos ? spec.size() + 1 : comma + 1;
    const size_t eq = item.find('=');
    if (eq == std::string_view::npos) return fail(fmt::format("expected KEY=VALUE, got '{}'", item));
    const std::string key(trim(item.substr(0, eq))), value(trim(item.substr(eq + 1)));
    for (const auto& s : seen)
      if (s == key) return fail(fmt::format("clause '{}' given twice", key));
    seen.push_back(key);
    if (key == "angles") {
      if (value == "exact") {
        c.angles = Contract::Angles::exact;
      } else if (value == "f32") {
        c.angles = Contract::Angles::f32;
      } else if (value.rfind("f32:", 0) == 0) {
        const std::string k = value.substr(4);
        char* end = nullptr;
        const double v = std::strtod(k.c_str(), &end);
        if (k.empty() || end != k.c_str() + k.size() || !std::isfinite(v) || !(v > 0) || v > 0x1p40)
          return fail(fmt::format("angles=f32:K needs a number K in (0, 2^40], got '{}'", k));
        c.angles = Contract::Angles::f32;
        c.angle_ulps = v;
      } else {
        return fail(fmt::format("angles: expected exact, f32 or f32:K, got '{}'", value));
      }
    } else if (key == "cos-sin" || key == "arith") {
      const auto d = parse_dtype(value);
      if (!d) return fail(fmt::format("{}: expected f32, f16 or bf16, got '{}'", key, value));
      (key == "arith" ? c.arith : c.cos_sin) = *d;
    } else if (key == "denormals") {
      if (value != "keep" && value != "flush") return fail(fmt::format("denormals: expected keep or flush, got '{}'", value));
      c.flush_denormals = value == "flush";
    } else if (key == "identity") {
      if (value != "values" && value != "bits") return fail(fmt::format("identity: expected values or bits, got '{}'", value));
      c.identity_bits = value == "bits";
    } else if (key == "stores") {
      if (value != "nearest" && value != "truncate")
        return fail(fmt::format("stores: expected nearest or truncate, got '{}'", value));
      c.truncating_stores = value == "truncate";
    } else {
      return fail(fmt::format("unknown clause '{}' (angles, cos-sin, arith, denormals, identity, stores)", key));
    }
  }
  return c;
}

}  // namespace ropecheck
