#!/usr/bin/env bash
# Build and run the kernel benchmarks; write the committed benchmark report:
#   reports/benchmarks.json  (Google Benchmark JSON: every repetition and its aggregates)
#   reports/benchmarks_reference.json  (bench_reference: the exact reference's elements/s)
#   reports/benchmarks_gate.json  (bench_gate: the default scalar gate's CPU seconds per row family)
#   reports/benchmarks_gate_calls.json  (bench_gate_calls: one small call's wall and CPU time)
#   reports/benchmarks.md    (medians, ratios to memcpy and to scalar, CPU model, date)
# Usage: scripts/bench.sh [extra Google Benchmark flags, e.g. --benchmark_filter=prefill]
# BUILD_DIR (default: build) selects the build directory; REPS (default 3) the repetitions.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
build="${BUILD_DIR:-build}"
reps="${REPS:-3}"
if [ ! -f "$build/CMakeCache.txt" ]; then
  gen=()
  command -v ninja >/dev/null && gen=(-G Ninja)
  cmake -S . -B "$build" "${gen[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
fi
# The MLAS comparison (measured outside the repository, hand-written) is appended verbatim when present.
MLAS_MD=""
[ -f reports/mlas-outside.md ] && MLAS_MD=reports/mlas-outside.md
cmake --build "$build" --target bench_kernels bench_reference bench_gate bench_gate_calls -j "$(nproc)"
mkdir -p reports
# The reference's elements/s first (one repetition: ~1 s per call, ~10 s for MPFR-only).
"$build/bench/bench_reference" --benchmark_out=reports/benchmarks_reference.json --benchmark_out_format=json
# The gate: CPU seconds of the default scalar gate per row family (~4 s per run), and one small call.
"$build/bench/bench_gate" --benchmark_repetitions="$reps" \
  --benchmark_out=reports/benchmarks_gate.json --benchmark_out_format=json
"$build/bench/bench_gate_calls" --benchmark_repetitions="$reps" --benchmark_display_aggregates_only=true \
  --benchmark_out=reports/benchmarks_gate_calls.json --benchmark_out_format=json
"$build/bench/bench_kernels" \
  --benchmark_repetitions="$reps" --benchmark_display_aggregates_only=true \
  --benchmark_min_time="${MIN_TIME:-0.3}" \
  --benchmark_out=reports/benchmarks.json --benchmark_out_format=json \
  --report_md=reports/benchmarks.md --reference_json=reports/benchmarks_reference.json \
  --gate_json=reports/benchmarks_gate.json --gate_calls_json=reports/benchmarks_gate_calls.json \
  ${MLAS_MD:+--extra_md="$MLAS_MD"} "$@"
echo "bench.sh: wrote reports/benchmarks.json, reports/benchmarks_reference.json, reports/benchmarks_gate*.json and reports/benchmarks.md"
