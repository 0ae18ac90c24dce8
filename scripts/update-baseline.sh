#!/usr/bin/env bash
# Regenerate the committed baseline (reports/baseline/sweep.json) from the
# default sweep of the built-in kernels, then show what changed against the
# previous baseline. Run it after a deliberate accuracy change or when kernels
# are added, review the diff, and commit the file.
#
#   scripts/update-baseline.sh [BUILD_DIR]     (default: build)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
cli="$build/ropecheck"
if [[ ! -x "$cli" ]]; then
  echo "error: $cli not found; build first (scripts/build.sh or cmake --build $build)" >&2
  exit 2
fi
out=reports/baseline/sweep.json
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# The default sweep: the same command the CTest test reports.baseline_compare runs.
set +e
"$cli" sweep --report-dir "$tmp" > "$tmp/table.txt"
rc=$?
set -e
if [[ $rc -ne 0 ]]; then
  cat "$tmp/table.txt"
  echo "error: the sweep failed (exit $rc): a kernel breaks its bound; not writing a baseline" >&2
  exit 1
fi
if [[ -f "$out" ]]; then
  echo "== changes against the previous baseline" >&2
  "$cli" report compare --baseline "$out" --current "$tmp/report.json" || true
fi
mkdir -p "$(dirname "$out")"
cp "$tmp/report.json" "$out"
echo "wrote $out" >&2
