#!/usr/bin/env bash
# The main job: build, run the property suite, then the accuracy sweep of the
# built-in kernels (prints the error table; exits non-zero on any failure).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/build.sh
echo "== property suite" >&2
./build/properties/ropecheck_properties --gtest_brief=1
echo "== accuracy sweep (report in out/report, compared with the committed baseline)" >&2
mkdir -p out/report
./build/ropecheck sweep --report-dir out/report --baseline reports/baseline/sweep.json "$@"
