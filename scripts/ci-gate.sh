#!/usr/bin/env bash
# The gate as a CI step (action.yml at the repository root, docs/ci.md): gates one kernel library, keeps its JUnit
# XML, report (report.json/md/html, replay files) and verdict under one directory, and adds the verdict to the
# job's summary on GitHub Actions. Exit: the gate's (0 PASS, 1 FAIL or a regression against the baseline, 2 usage
# or load error).
#
# Inputs, from the environment (the action's inputs):
#   RC_KERNEL      the kernel library (.so exporting rc_rope_apply; required)
#   RC_CONTRACT    --contract (a SPEC or preset; default: the gate's)
#   RC_SUPPORTS    --supports, RC_REQUIRE --require (comma lists of features)
#   RC_BASELINE    --baseline: a committed report.json to compare with
#   RC_ARGS        further gate options, split on spaces ("--cases 1000 --budget-seconds 120")
#   RC_REPORT_DIR  where the files go (default: ropecheck-report)
#   RC_BIN         the ropecheck executable (default: this checkout's build/ropecheck, else ropecheck on PATH)
set -uo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
: "${RC_KERNEL:?RC_KERNEL: the kernel library to gate}"
bin="${RC_BIN:-}"
if [ -z "$bin" ]; then
  if [ -x "$here/build/ropecheck" ]; then bin="$here/build/ropecheck"; else bin="$(command -v ropecheck || true)"; fi
fi
if [ -z "$bin" ] || [ ! -x "$bin" ]; then
  echo "ci-gate: no ropecheck executable (build it with scripts/build.sh, install it, or set RC_BIN)" >&2
  exit 2
fi
dir="${RC_REPORT_DIR:-ropecheck-report}"
mkdir -p "$dir"
args=(gate --kernel "$RC_KERNEL" --report-dir "$dir" --junit "$dir/junit.xml" --verdict-json "$dir/verdict.json")
[ -n "${RC_CONTRACT:-}" ] && args+=(--contract "$RC_CONTRACT")
[ -n "${RC_SUPPORTS:-}" ] && args+=(--supports "$RC_SUPPORTS")
[ -n "${RC_REQUIRE:-}" ] && args+=(--require "$RC_REQUIRE")
[ -n "${RC_BASELINE:-}" ] && args+=(--baseline "$RC_BASELINE")
read -r -a extra <<< "${RC_ARGS:-}"
"$bin" "${args[@]}" "${extra[@]}" --quiet > "$dir/verdict.txt" 2> "$dir/gate-stderr.txt"
rc=$?
cat "$dir/verdict.txt"
[ -s "$dir/gate-stderr.txt" ] && cat "$dir/gate-stderr.txt" >&2
if [ -n "${GITHUB_STEP_SUMMARY:-}" ]; then
  {
    echo "### ropecheck: $(basename "$RC_KERNEL"): $(grep -m1 '^verdict:' "$dir/verdict.txt" || echo "exit $rc")"
    echo
    echo '```'
    cat "$dir/verdict.txt"
    echo '```'
  } >> "$GITHUB_STEP_SUMMARY"
fi
exit $rc
