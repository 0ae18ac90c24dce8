#!/usr/bin/env bash
# Fuzzing with libFuzzer (clang-14, ASan + UBSan). Modes:
#
#   scripts/fuzz.sh [ci]            CI: build the fuzzers (scripts/build-fuzzers.sh), replay every seed and
#                                   regression input, then fuzz each target for FUZZ_SECONDS (60) with
#                                   FUZZ_JOBS (1; at most 2) processes. Exit 1 on any crash.
#   scripts/fuzz.sh --long [SECS]   a longer local campaign: SECS (3600) per target, one job per core, the
#                                   corpus kept in build-fuzz/campaign/<target>/ across runs.
#   scripts/fuzz.sh planted [DIR]   build fuzz_differential_planted (fuzz_differential with the SIMD tail bug
#                                   planted in simd_kernels.cpp alone) in the fuzz tree DIR (build-fuzz) and
#                                   fuzz from an EMPTY corpus for at most FUZZ_SECONDS: passes only if the
#                                   fuzzer finds the bug (a crash whose report names a SIMD implementation,
#                                   and whose input passes the tree's fuzz_differential, without the bug).
#                                   `ci` runs it last, for FUZZ_PLANTED_SECONDS (60).
#   scripts/fuzz.sh coverage [CORPUS_DIR...]
#                                   source coverage of reference/ and impls/ reached by the seed corpus
#                                   (plus any CORPUS_DIR): clang-14 -fprofile-instr-generate, llvm-cov-14.
#
# fuzz_plugin fuzzes the kernel library named by ROPECHECK_FUZZ_KERNEL (default: the example kernel built
# with the fuzzers). Crash inputs land in build-fuzz/artifacts/<target>/; reproduce one with
#   build-fuzz/out/fuzz_differential CRASH_FILE
# and, once fixed, commit it under fuzz/regressions/<target>/ so the normal test suite replays it.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
# ccache's settings for this clone (paths hashed relative to it): the planted build below compiles
# simd_kernels.cpp again (~190 s under ASan here), which missed the cache at every new clone path without them.
. scripts/ccache-env.sh
mode=${1:-ci}
[ $# -gt 0 ] && shift
secs=${FUZZ_SECONDS:-60}
jobs=${FUZZ_JOBS:-1}

die() { echo "fuzz.sh: $*" >&2; exit 2; }
command -v clang++-14 >/dev/null || die "clang++-14 not found (apt-get install clang-14 libclang-rt-14-dev)"

# Run one target: run_target TARGET BINARY SECONDS JOBS WORK_CORPUS ARTIFACT_DIR [SEED_DIRS...]
# Returns 1 if the fuzzer left a crash/leak/timeout/oom artifact.
run_target() {
  local t=$1 bin=$2 s=$3 j=$4 work=$5 art=$6
  local name=${RUN_NAME:-$t}  # what the log lines call it
  shift 6
  mkdir -p "$work" "$art"
  rm -f "$art"/crash-* "$art"/leak-* "$art"/timeout-* "$art"/oom-* "$art"/fuzz-*.log
  local args=(-max_total_time="$s" -print_final_stats=1 -artifact_prefix="$art/" -timeout=25)
  # The libFuzzer settings of fuzz/<target>.options (ClusterFuzz reads that file itself).
  local opt="$root/fuzz/$t.options" ml
  ml=$( [ -f "$opt" ] && sed -n 's/^max_len *= *\([0-9]*\).*/\1/p' "$opt" || true)
  args+=(-max_len="${ml:-1024}")
  [ -f "$root/fuzz/$t.dict" ] && args+=(-dict="$root/fuzz/$t.dict")
  local log="$art/run.log" rc=0
  if [ "$j" -gt 1 ]; then
    (cd "$art" && "$bin" "${args[@]}" -jobs="$j" -workers="$j" "$work" "$@") >"$log" 2>&1 || rc=$?
    cat "$art"/fuzz-*.log >>"$log" 2>/dev/null || true
  else
    "$bin" "${args[@]}" "$work" "$@" >"$log" 2>&1 || rc=$?
  fi
  local execs
  execs=$(grep -h 'stat::average_exec_per_sec' "$log" | awk '{print $2}' | paste -sd+ - || true)
  echo "== $name: ${s}s x $j job(s), exit $rc, exec/s ${execs:-?}, corpus $(find "$work" -type f | wc -l) files"
  if compgen -G "$art/crash-*" >/dev/null || compgen -G "$art/leak-*" >/dev/null ||
     compgen -G "$art/timeout-*" >/dev/null || compgen -G "$art/oom-*" >/dev/null; then
    grep -h -A30 -E '^ropecheck fuzz:|ERROR: (AddressSanitizer|UndefinedBehaviorSanitizer|libFuzzer)|runtime error' \
      "$log" | head -60 >&2 || true
    echo "== $name: FAILED; inputs: $(ls "$art" | grep -E '^(crash|leak|timeout|oom)-' | tr '\n' ' ')" >&2
    return 1
  fi
  # A fuzzer that stopped with an error but left no input (a bad flag, a missing corpus) fuzzed nothing.
  if [ "$rc" -ne 0 ]; then
    tail -20 "$log" >&2
    echo "== $name: FAILED: the fuzzer exited $rc without a crash input (see $log)" >&2
    return 1
  fi
  return 0
}

plugin_env() {
  export ROPECHECK_FUZZ_KERNEL="${ROPECHECK_FUZZ_KERNEL:-$1/libfuzz_example_kernel.so}"
}

case "$mode" in
  ci|--long)
    scripts/build-fuzzers.sh
    bd=${ROPECHECK_FUZZ_BUILD_DIR:-$root/build-fuzz}
    out=${OUT:-$bd/out}
    plugin_env "$out"
    if [ "$mode" = --long ]; then
      secs=${1:-3600}
      jobs=${FUZZ_JOBS:-$(nproc)}
    elif [ "$jobs" -gt 2 ]; then
      jobs=2
    fi
    status=0
    targets=()
    for t in fuzz_differential fuzz_plugin fuzz_report_json fuzz_case_json fuzz_npy; do
      [ -x "$out/$t" ] && targets+=("$t")
    done
    for t in "${targets[@]}"; do
      inputs=()
      for d in corpus regressions; do
        [ -d "fuzz/$d/$t" ] && while IFS= read -r f; do inputs+=("$f"); done < <(find "fuzz/$d/$t" -type f | sort)
      done
      echo "== $t: replaying ${#inputs[@]} corpus and regression inputs"
      "$out/$t" -runs=1 "${inputs[@]}" >"$bd/replay-$t.log" 2>&1 || { tail -40 "$bd/replay-$t.log" >&2; status=1; continue; }
      if [ "$mode" = --long ]; then work="$bd/campaign/$t"; else work="$bd/ci-corpus/$t"; rm -rf "$work"; fi
      run_target "$t" "$out/$t" "$secs" "$jobs" "$work" "$bd/artifacts/$t" "$root/fuzz/corpus/$t" || status=1
    done
    # CI: the planted SIMD tail bug must be found from an empty corpus (fuzz_differential_planted, built in this
    # same tree), within FUZZ_PLANTED_SECONDS (60).
    if [ "$mode" = ci ]; then
      FUZZ_SECONDS=${FUZZ_PLANTED_SECONDS:-60} "$root/scripts/fuzz.sh" planted "$bd" || status=1
    fi
    exit $status
    ;;
  planted)
    # fuzz_differential_planted: fuzz_differential with only simd_kernels.cpp recompiled with the planted bug
    # (fuzz/CMakeLists.txt), in the fuzz tree the fuzzers use (BUILD_DIR, default build-fuzz); the crash input
    # must also pass the tree's fuzz_differential, which has no planted bug.
    bd=${1:-${ROPECHECK_FUZZ_BUILD_DIR:-$root/build-fuzz}}
    ROPECHECK_FUZZ_BUILD_DIR="$bd" OUT="$bd/out" WORK="$bd" scripts/build-fuzzers.sh
    cmake --build "$bd" -j "${ROPECHECK_FUZZ_BUILD_JOBS:-$(nproc)}" --target fuzz_differential_planted
    FUZZ_UNPLANTED_BINARY=${FUZZ_UNPLANTED_BINARY:-$bd/fuzz/fuzz_differential}
    art="$bd/artifacts/planted"
    work="$bd/planted-corpus-$$"
    others="$bd/artifacts/planted-other"
    rm -rf "$others" && mkdir -p "$others"
    start=$SECONDS
    # Fuzz from an empty corpus until the planted bug is found or the budget is spent. A crash that is
    # not the planted bug (another open finding) is set aside and fuzzing resumes for the time left.
    while left=$((secs - (SECONDS - start))); [ "$left" -gt 0 ]; do
      if RUN_NAME="fuzz_differential_planted (a crash here is the planted bug it must find)" \
           run_target fuzz_differential "$bd/fuzz/fuzz_differential_planted" "$left" 1 "$work" "$art"; then
        break  # ran out of time
      fi
      crash=$(ls "$art"/crash-* 2>/dev/null | head -1)
      [ -n "$crash" ] || { echo "fuzz.sh planted: the fuzzer failed without a crash input" >&2; exit 1; }
      report=$("$bd/fuzz/fuzz_differential_planted" "$crash" 2>&1 || true)
      planted=0
      grep -qE "^ropecheck fuzz: implementation 'simd[^']*'|AddressSanitizer: (heap|stack)-buffer-overflow" \
        <<<"$report" && planted=1
      if [ "$planted" = 1 ]; then
        # The same input must pass the build without the planted bug.
        "$FUZZ_UNPLANTED_BINARY" "$crash" >"$art/unplanted.log" 2>&1 || planted=0
      fi
      if [ "$planted" = 1 ]; then
        rm -rf "$work"
        echo "fuzz.sh planted: FOUND in $((SECONDS - start)) s: $(grep -m1 -E "^ropecheck fuzz:|AddressSanitizer" <<<"$report")"
        echo "fuzz.sh planted: reproducer $crash"
        echo "fuzz.sh planted: it passes without the planted bug ($FUZZ_UNPLANTED_BINARY)"
        exit 0
      fi
      echo "fuzz.sh planted: a different failure (kept in $others), fuzzing on: $(grep -m1 -E '^ropecheck fuzz:|ERROR' <<<"$report")" >&2
      mv "$crash" "$others/"
    done
    rm -rf "$work"
    echo "fuzz.sh planted: NOT FOUND: fuzz_differential ran ${secs}s from an empty corpus without finding the planted bug" >&2
    exit 1
    ;;
  coverage)
    bd=${ROPECHECK_FUZZ_COV_DIR:-$root/build-fuzz-cov}
    cov="-fprofile-instr-generate -fcoverage-mapping"
    gen=()
    command -v ninja >/dev/null && [ ! -f "$bd/CMakeCache.txt" ] && gen=(-G Ninja)
    cmake -S . -B "$bd" "${gen[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_C_COMPILER=clang-14 \
      -DCMAKE_CXX_COMPILER=clang++-14 -DCMAKE_C_FLAGS="$cov" -DCMAKE_CXX_FLAGS="$cov" \
      -DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DROPECHECK_BUILD_TESTS=OFF -DROPECHECK_BUILD_BENCH=OFF >/dev/null
    cmake --build "$bd" -j "${ROPECHECK_FUZZ_BUILD_JOBS:-$(nproc)}" --target fuzz_differential_replay
    rm -f "$bd"/cov-*.profraw
    # Keep going past failing inputs: coverage is measured on every input; failures are listed after.
    rc=0
    ROPECHECK_FUZZ_KEEP_GOING=1 LLVM_PROFILE_FILE="$bd/cov-%p.profraw" "$bd/fuzz/fuzz_differential_replay" \
      fuzz/corpus/fuzz_differential "$@" >/dev/null 2>"$bd/cov-replay.log" || rc=$?
    llvm-profdata-14 merge -sparse "$bd"/cov-*.profraw -o "$bd/cov.profdata"
    llvm-cov-14 report "$bd/fuzz/fuzz_differential_replay" -instr-profile="$bd/cov.profdata" \
      "$root/reference" "$root/impls" "$root/properties/judge.cpp" "$root/core"
    if [ "$rc" -ne 0 ]; then
      echo "fuzz.sh coverage: the replay reported failures ($(tail -1 "$bd/cov-replay.log")); see $bd/cov-replay.log" >&2
      grep -E '^ropecheck fuzz:' "$bd/cov-replay.log" | sort | uniq -c >&2
      exit 1
    fi
    ;;
  *)
    die "unknown mode '$mode' (ci, --long [SECONDS], planted [BUILD_DIR], coverage [CORPUS_DIR...])"
    ;;
esac
