# Sourced by the build scripts (build.sh, test-asan.sh, build-fuzzers.sh) from the repository root: compile
# through ccache when it is installed, so a build of sources compiled before on this machine (CI on a fresh
# clone of a commit built already, a second build directory) takes seconds instead of minutes. Paths are
# hashed relative to the repository root (CCACHE_BASEDIR) and the working directory is not hashed, so clones
# at different paths share the cache. Nothing changes without ccache; ROPECHECK_NO_CCACHE=1 turns it off.
# (CMake reads CMAKE_<LANG>_COMPILER_LAUNCHER from the environment when it first configures a build directory.)
if [ -z "${ROPECHECK_NO_CCACHE:-}" ] && command -v ccache >/dev/null; then
  export CMAKE_C_COMPILER_LAUNCHER="${CMAKE_C_COMPILER_LAUNCHER:-ccache}"
  export CMAKE_CXX_COMPILER_LAUNCHER="${CMAKE_CXX_COMPILER_LAUNCHER:-ccache}"
  # An inherited base dir is kept only when this clone lies under it: one that does not (another project's, or
  # another clone's from a shell that sourced this file there) made every path absolute and every compile a miss
  # (a CI run of 25 min instead of 15).
  rc_root=$(pwd)
  if [ -z "${CCACHE_BASEDIR:-}" ] || [ "${rc_root#"${CCACHE_BASEDIR%/}"/}" = "$rc_root" ]; then
    export CCACHE_BASEDIR="$rc_root"
  fi
  unset rc_root
  export CCACHE_NOHASHDIR="${CCACHE_NOHASHDIR:-1}"
fi
