#!/usr/bin/env bash
# Installs the Debian packages ropecheck builds with, when any is missing.
# As root it runs apt-get; otherwise it prints the exact command to run.
set -euo pipefail
pkgs=(cmake g++ make ninja-build pkg-config libboost-dev libmpfr-dev libgmp-dev librapidcheck-dev libgtest-dev
      libgmock-dev libfmt-dev libhwy-dev libbenchmark-dev nlohmann-json3-dev libcli11-dev
      libseccomp-dev  # libseccomp: the kernel host's system-call filter (docs/gate.md, "The sandbox")
      dpkg-dev  # dpkg-shlibdeps: the .deb's Depends from the executable's libraries (`cpack -G DEB`, docs/install.md)
      ccache)  # ccache: a clone of sources built before on this machine (CI's clean clones) compiles from the cache
               # (scripts/ccache-env.sh; a cold build of the default preset: 427 s on 2 cores)
# Optional groups: --fuzz (clang-14 with libFuzzer and the sanitizer runtimes, llvm-14 for coverage),
# --browser (Debian's chromium, which renders report.html in the report tests) and --pytorch (Debian's
# PyTorch 1.13 and NumPy for /usr/bin/python3: the PyTorch pipeline tests, docs/real-kernels.md, and the Python
# package's tests, docs/python.md; 175 packages, 147 MB download, 635 MB installed, ~35 s; with pytest for the
# package's pytest plugin and its test, 7 more packages, ~1 MB; with pip and setuptools, which install the package
# offline in its pip test, docs/install.md).
for group in "$@"; do
  case "$group" in
    --fuzz) pkgs+=(clang-14 libclang-rt-14-dev llvm-14) ;;
    --browser) pkgs+=(chromium) ;;
    --pytorch) pkgs+=(python3-torch python3-numpy python3-pytest python3-pip python3-setuptools) ;;
    *) echo "install-deps: unknown option $group (use --fuzz, --browser, --pytorch)" >&2; exit 2 ;;
  esac
done
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
cmd="apt-get install -y --no-install-recommends ${missing[*]}"
if [ "$(id -u)" -eq 0 ]; then
  echo "install-deps: installing ${missing[*]}" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  $cmd >/dev/null
else
  echo "install-deps: missing packages; run as root:" >&2
  echo "  sudo apt-get update && sudo $cmd" >&2
  exit 1
fi
