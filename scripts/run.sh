#!/usr/bin/env bash
# The main job: build, run the property suite, then the accuracy sweep of the
# built-in kernels (prints the error table; exits non-zero on any failure).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/build.sh
echo "== property suite" >&2
./build/properties/ropecheck_properties --gtest_brief=1
echo "== accuracy sweep" >&2
./build/ropecheck sweep "$@"
