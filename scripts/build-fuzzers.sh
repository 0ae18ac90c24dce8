#!/usr/bin/env bash
# Build the libFuzzer targets with clang-14 (ASan + UBSan + libFuzzer) into
# build-fuzz/, the fuzzers themselves into build-fuzz/out/. This is the
# ClusterFuzzLite build script (.clusterfuzzlite/build.sh) with the variables
# OSS-Fuzz would set, defaulted for a local or CI machine.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
. scripts/ccache-env.sh
flags="-fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer"
export CC="${CC:-clang-14}" CXX="${CXX:-clang++-14}"
export CFLAGS="${CFLAGS:-$flags}" CXXFLAGS="${CXXFLAGS:-$flags}"
export LIB_FUZZING_ENGINE="${LIB_FUZZING_ENGINE:--fsanitize=fuzzer}"
export ROPECHECK_FUZZ_BUILD_DIR="${ROPECHECK_FUZZ_BUILD_DIR:-$root/build-fuzz}"
export OUT="${OUT:-$ROPECHECK_FUZZ_BUILD_DIR/out}" WORK="${WORK:-$ROPECHECK_FUZZ_BUILD_DIR}"
command -v "$CXX" >/dev/null || { echo "build-fuzzers: $CXX not found (apt-get install clang-14 libclang-rt-14-dev)" >&2; exit 2; }
exec .clusterfuzzlite/build.sh
