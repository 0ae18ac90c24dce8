// Table fidelity (ABI v3 draft, docs/abi-v3/README.md): a cos/sin (or angle) table the caller built, judged
// against the exact angles of its case under the contract's angle and cos-sin clauses (docs/error-model.md,
// "Table fidelity"). The kernel's arithmetic on the table is judged separately, against the table as given
// (judge_output): a verdict can say "your arithmetic is right, your table is not" or the reverse.
#pragma once

#include <cstdint>
#include <string>

#include "core/rope_case.hpp"
#include "properties/error_model.hpp"

namespace ropecheck {

struct TableJudgement {
  uint64_t entries = 0;   // (row, pair) entries judged
  uint64_t failures = 0;  // entries beyond their allowance
  double worst_ratio = 0;  // the worst entry's error / allowance
  size_t worst_row = 0;
  uint32_t worst_pair = 0;
  double given[2] = {0, 0};  // the worst entry: (af cos, af sin) as given (angle tables: the angle, 0)
  double exact[2] = {0, 0};  // and exactly
  std::string cause;         // the named cause when some entry fails ("" when none does)
  bool ok() const { return failures == 0; }
  // One paragraph: the verdict, the cause, the worst entry with its bits.
  std::string report() const;
  Dtype dtype = Dtype::f32;
  TableKind kind = TableKind::cos_sin_2;
};

// Every entry of `t` (rows 0..t.rows-1, every pair) against the angles and attention factor of `angles`
// (which has no table) under model `m` (KernelErrorModel::for_contract of the kernel's contract). Throws
// std::invalid_argument when `angles` has a table or the table's size does not match.
TableJudgement judge_table(const RopeCase& angles, const CosSinTable& t, const KernelErrorModel& m);

}  // namespace ropecheck
