// Reports of a gate run or a `cases check` (reports/report.hpp): what the
// verdict found, as findings the report writers read. One check per row of the
// verdict ("gate/<row>"), one series per dtype with the error decomposition by
// position bucket, the contract and the run's parameters; `--baseline` compares
// it with a committed report by the rules of `report compare` (docs/reports.md),
// so a downstream project fails CI when its kernel got less accurate even while
// every pair stays within its allowance.
#pragma once

#include <iosfwd>
#include <string>

#include <nlohmann/json.hpp>

#include "gate/gate.hpp"
#include "reports/report.hpp"
#include "runs/findings.hpp"

namespace ropecheck::gate {

// kind: "gate" or "cases-check"; parameters: the run's options (recorded as given).
report::Report make_gate_report(const GateResult& g, const std::string& kind, nlohmann::json parameters);

// Write report.{json,md,html} into dir (when not empty) and compare with the baseline (when not empty),
// printing the compare's table to out. Returns 1 on a regression, else 0; throws report::ReportError on an
// unreadable or incompatible baseline (the CLI's exit 2).
int write_and_compare(const report::Report& rep, const std::string& dir, const std::string& baseline,
                      const report::Slack& slack, std::ostream& out);

}  // namespace ropecheck::gate
