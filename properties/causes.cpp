#include "properties/causes.hpp"

#include <array>
#include <cctype>

namespace ropecheck {

namespace {

// Ids are stable: never change one, only add. Names follow the diagnosis (properties/diagnosis.hpp), the fault
// checks (gate/gate_checks.cpp) and the gate's rows (gate/gate.cpp).
constexpr std::array kCauses = {
    // what the rotation computes instead (structural hypotheses)
    CauseName{"angle-negated", "angle negated"},
    CauseName{"inverse-computed-as-forward", "inverse computed as forward"},
    CauseName{"other-layout", "other layout"},
    CauseName{"position-plus-1", "position m+1"},
    CauseName{"position-minus-1", "position m-1"},
    CauseName{"position-plus-2", "position m+2"},
    CauseName{"position-minus-2", "position m-2"},
    CauseName{"theta-from-head-dim", "theta from head_dim"},
    CauseName{"exponent-i-over-d", "exponent i/d"},
    CauseName{"token-index-as-position", "token index as position"},
    CauseName{"table-row-indexed-by-token", "table row indexed by token"},
    CauseName{"cos-and-sin-swapped", "cos and sin swapped"},
    CauseName{"positions-rounded-to-f32", "positions rounded to f32"},
    CauseName{"positions-rounded-to-bf16", "positions rounded to bf16"},
    CauseName{"positions-truncated-to-32-bits", "positions truncated to 32 bits"},
    CauseName{"frequencies-rounded-to-bf16", "frequencies rounded to bf16"},
    CauseName{"sequence-start-not-subtracted", "sequence start not subtracted"},
    CauseName{"first-sequence-offset-for-every-sequence", "first sequence's offset for every sequence"},
    CauseName{"sequence-offsets-ignored", "sequence offsets ignored"},
    CauseName{"k-laid-out-with-q-strides", "k laid out with q's strides"},
    CauseName{"strides-ignored", "strides ignored"},
    CauseName{"attention-factor-applied-twice", "attention factor applied twice"},
    CauseName{"attention-factor-not-applied", "attention factor not applied"},
    CauseName{"position-axes-ignored", "position axes ignored"},
    CauseName{"axis-map-read-as-sections", "axis map read as sections"},
    CauseName{"frequency-rule-ignored", "frequency rule ignored"},
    CauseName{"yarn-ramp-reversed", "YaRN ramp reversed"},
    CauseName{"llama3-smoothing-inverted", "llama3 smoothing inverted"},
    CauseName{"pairs-left-unrotated", "pairs left unrotated"},
    CauseName{"cos-sin-not-unit-length", "cos/sin not of unit length"},
    // outside the rotated pairs
    CauseName{"pass-through-touched", "pass-through touched"},
    CauseName{"identity-changed", "identity changed"},
    CauseName{"nan-inputs-zeroed", "NaN inputs zeroed"},
    // precision (what a contract clause allows)
    CauseName{"radial-bias", "radial bias"},
    CauseName{"f32-angle-drift", "f32 angle drift"},
    CauseName{"cos-sin-f16", "cos/sin at f16 precision"},
    CauseName{"cos-sin-bf16", "cos/sin at bf16 precision"},
    CauseName{"arith-f16", "arithmetic at f16 precision"},
    CauseName{"arith-bf16", "arithmetic at bf16 precision"},
    CauseName{"subnormals-flushed", "subnormals flushed"},
    CauseName{"mixed-precision", "mixed precision"},
    CauseName{"unexplained", "unexplained"},
    CauseName{"truncating-stores", "truncating stores"},
    CauseName{"truncating-stores-tail", "truncating stores in a tail loop"},
    // faults of a call (gate/gate_checks.cpp)
    CauseName{"crash", "crash"},
    CauseName{"hang", "hang"},
    CauseName{"forbidden-system-call", "forbidden system call"},
    CauseName{"element-offsets-in-32-bits", "element offsets computed in 32 bits"},
    CauseName{"exception", "exception"},
    CauseName{"error-code", "error code"},
    CauseName{"out-of-bounds-write", "out-of-bounds write"},
    CauseName{"input-modified", "input modified"},
    CauseName{"in-place-aliasing", "in-place aliasing"},
    CauseName{"argument-modified", "argument modified"},
    CauseName{"declined-after-writing", "declined after writing"},
    CauseName{"unwritten-output", "unwritten output"},
    CauseName{"guard-page", "guard page"},
    CauseName{"fp-environment", "fp environment"},
    // the gate's own rows
    CauseName{"state-across-calls", "state across calls"},
    CauseName{"stale-state-across-calls", "stale state across calls"},
    CauseName{"not-reproduced", "not reproduced on a rerun"},
    CauseName{"coverage", "coverage"},
    CauseName{"budget-reached", "the budget was reached"},
};

bool starts_with(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }

}  // namespace

std::span<const CauseName> known_causes() { return kCauses; }

std::string_view cause_id(std::string_view t) {
  for (std::string_view p : {"diagnosis: ", "precision: "})
    if (starts_with(t, p)) t.remove_prefix(p.size());
  for (std::string_view p : {"k: ", "q: "})
    if (starts_with(t, p)) t.remove_prefix(p.size());
  if (starts_with(t, "diagnosis: ")) t.remove_prefix(11);
  const CauseName* best = nullptr;
  for (const CauseName& c : kCauses)
    if (starts_with(t, c.name) && (t.size() == c.name.size() || !std::isalnum(static_cast<unsigned char>(t[c.name.size()]))) &&
        (!best || c.name.size() > best->name.size()))
      best = &c;
  return best ? best->id : std::string_view{};
}

}  // namespace ropecheck
