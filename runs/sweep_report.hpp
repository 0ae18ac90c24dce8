// The accuracy sweep's Report (reports/report.hpp): its rows, its options as
// the run parameters, and this build's and machine's Environment
// (runs/findings.hpp). The run side of a report, next to the sweep; reports/
// only reads what it records.
#pragma once

#include <cstdint>
#include <vector>

#include "reports/report.hpp"
#include "runs/findings.hpp"
#include "runs/sweep.hpp"

namespace ropecheck::report {

// A report from a sweep's rows and its options.
Report make_sweep_report(const SweepOptions& opt, const std::vector<SweepRow>& rows);

// Sweep options for the headline plot (render_headline_svg): scalar and
// conventional-fp32, every dtype, interleaved, every octave from 1 to 2^24.
SweepOptions headline_options(uint64_t seed = 1, uint32_t tokens_per_bucket = 16);

}  // namespace ropecheck::report
