#!/usr/bin/env bash
# Configure and build the default preset (installing missing packages first).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh "$@"
. scripts/ccache-env.sh
gen=()
command -v ninja >/dev/null && [ ! -f build/CMakeCache.txt ] && gen=(-G Ninja)
cmake --preset default "${gen[@]}" >/dev/null
cmake --build --preset default -j "$(nproc)"
