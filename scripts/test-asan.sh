#!/usr/bin/env bash
# The kernel host and the gate under AddressSanitizer + UBSan (the asan preset): the isolation tests and the
# hostile kernels that exercise the host's process control and memory checks. CI runs this after
# scripts/test.sh (the packages are installed by then). Extra arguments go to ctest.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/ccache-env.sh
gen=()
command -v ninja >/dev/null && [ ! -f build-asan/CMakeCache.txt ] && gen=(-G Ninja)
cmake --preset asan "${gen[@]}" >/dev/null
cmake --build --preset asan --target test_gate test_hostile ropecheck ropecheck_mutants ropecheck_hostile
# The isolation and host tests (the attached host's included), and the hostile kernels whose behaviour goes through the host's every path
# (load failures, signals, fork, exit, closed descriptors, argument and guard writes, declined writes,
# captured output, the FP environment), each gated narrower than in the default tree (one layout, two dtypes,
# fewer cases: gate/tests/test_hostile.cpp, kDefaultOptions); the whole suite runs under the default preset.
hostile='h_(ctor_crash|ctor_exit0|ctor_hang|dtor_exit0|kill_parent_kill|kill_parent_stop|fork_grandchild|close_fds|exit0_in_call|write_args|mprotect_guard|scribble_decline|fake_verdict|fastmath_ctor)'
ctest --preset asan -R "^(Isolation|KernelHost|KernelHostAttached)\.|Hostile\.GateSurvivesAndFails/${hostile}( |$)" "$@"
