// A report's pieces from the judge's findings, for every run that writes one:
// the sweep (runs/sweep_report.hpp) and the gate (gate/gate_report.hpp). The
// run side: it reads the judge's ErrorStats and this build's kernels and
// machine; reports/ only reads the Report they make.
#pragma once

#include <cstdint>
#include <vector>

#include "core/dtype.hpp"
#include "properties/error_model.hpp"
#include "properties/judge.hpp"
#include "reports/report.hpp"

namespace ropecheck::report {

// This build and machine. simd_compiled_targets: the Highway targets the `simd-<target>` kernels were
// compiled for; simd_targets: those this CPU runs, i.e. exactly the targets of the registered
// `simd-<target>` kernels (what a compare uses to tell a series this CPU cannot run from one that went
// missing; docs/reports.md, "Baselines from other CPUs").
Environment current_environment();

// A bucket's statistics from judged pairs (bucket -1: all); w, when given, its worst pair (with bits).
BucketStats bucket_stats(int bucket, const ErrorStats& s, const WorstPair* w, Dtype d);
// Counts of values per bin of edges (bin i is [edges[i], edges[i+1]), the last one unbounded).
std::vector<uint64_t> histogram(const std::vector<float>& values, const std::vector<double>& edges);

}  // namespace ropecheck::report
