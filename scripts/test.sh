#!/usr/bin/env bash
# Build everything and run the whole test suite under CTest.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/build.sh --fuzz --browser --pytorch
ctest --preset default "$@"
