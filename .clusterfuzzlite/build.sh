#!/bin/bash -eu
# Build ropecheck's libFuzzer targets, OSS-Fuzz style: the compiler and flags
# come from $CC $CXX $CFLAGS $CXXFLAGS $LIB_FUZZING_ENGINE, the fuzzers and
# their seed corpora, dictionaries and .options files go to $OUT.
# ClusterFuzzLite runs this in its container; CI and local runs call it through
# scripts/build-fuzzers.sh, which sets the same variables for clang-14.
#
# Optional: ROPECHECK_FUZZ_BUILD_DIR (default $WORK/ropecheck-build),
#           ROPECHECK_FUZZ_CMAKE_ARGS (extra cmake arguments, e.g.
#           -DROPECHECK_PLANT_SIMD_TAIL_BUG=ON), CMAKE_GENERATOR_ARGS.
SRC_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD_DIR="${ROPECHECK_FUZZ_BUILD_DIR:-$WORK/ropecheck-build}"

gen=()
if command -v ninja >/dev/null && [ ! -f "$BUILD_DIR/CMakeCache.txt" ]; then gen=(-G Ninja); fi
launcher=()
if command -v ccache >/dev/null; then
  launcher=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
fi
# shellcheck disable=SC2086
cmake -S "$SRC_DIR" -B "$BUILD_DIR" "${gen[@]}" "${launcher[@]}" \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_C_COMPILER="$CC" -DCMAKE_CXX_COMPILER="$CXX" \
  -DCMAKE_C_FLAGS="$CFLAGS" -DCMAKE_CXX_FLAGS="$CXXFLAGS" \
  -DROPECHECK_FUZZ=ON -DROPECHECK_FUZZ_ENGINE="$LIB_FUZZING_ENGINE" \
  -DROPECHECK_BUILD_TESTS=OFF -DROPECHECK_BUILD_BENCH=OFF \
  ${ROPECHECK_FUZZ_CMAKE_ARGS:-} >/dev/null
cmake --build "$BUILD_DIR" -j "${ROPECHECK_FUZZ_BUILD_JOBS:-$(nproc)}" --target ropecheck_fuzzers
mapfile -t TARGETS < "$BUILD_DIR/fuzz/targets.txt"

mkdir -p "$OUT"
for t in "${TARGETS[@]}"; do
  cp "$BUILD_DIR/fuzz/$t" "$OUT/"
  [ -f "$SRC_DIR/fuzz/$t.options" ] && cp "$SRC_DIR/fuzz/$t.options" "$OUT/"
  [ -f "$SRC_DIR/fuzz/$t.dict" ] && cp "$SRC_DIR/fuzz/$t.dict" "$OUT/"
  if command -v zip >/dev/null && [ -d "$SRC_DIR/fuzz/corpus/$t" ]; then
    rm -f "$OUT/${t}_seed_corpus.zip"
    (cd "$SRC_DIR/fuzz/corpus/$t" && zip -q -j "$OUT/${t}_seed_corpus.zip" ./*)
  fi
done
# The example kernel fuzz_plugin loads when ROPECHECK_FUZZ_KERNEL is not set
# otherwise (see fuzz/fuzz_plugin.options and reports/fuzz.md).
cp "$BUILD_DIR/fuzz/libfuzz_example_kernel.so" "$OUT/"
