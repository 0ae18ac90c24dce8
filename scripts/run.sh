#!/usr/bin/env bash
# The main job: build, run the property suite, then the accuracy sweep of the built-in kernels; exits non-zero on
# any failure. Once built it prints a few lines: the property suite's counts (its whole output in
# out/property-suite.log, failures printed in full), one line per kernel and angle model of the sweep (the largest
# error and the verdict per dtype), the baseline compare, and where the report is (out/report/report.md has the
# full tables, report.html the plots).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/build.sh
mkdir -p out/report
echo "== property suite (every property on every built-in kernel)"
if ./build/properties/ropecheck_properties --gtest_brief=1 > out/property-suite.log 2>&1; then suite=0; else suite=$?; fi
# Skipped tests are the pairs of a property and a kernel that declines what it needs (conventional-fp32 takes no
# table, for one): counted, listed in the log.
grep -E '^\[ +(PASSED|SKIPPED|FAILED) +\] [0-9]+ test|^\[==========\] [0-9]+ tests' out/property-suite.log || true
if [ "$suite" -ne 0 ]; then
  grep -E '^\[  FAILED  \]' out/property-suite.log || true
  echo "property suite: FAILED (exit $suite): out/property-suite.log has its whole output"
fi
echo "== accuracy sweep (compared with the committed baseline)"
if ./build/ropecheck sweep --summary --report-dir out/report --baseline reports/baseline/sweep.json "$@"; then sweep=0
else sweep=$?; fi
echo
echo "full tables: out/report/report.md; plots: out/report/report.html"
[ "$suite" -eq 0 ] && [ "$sweep" -eq 0 ]
