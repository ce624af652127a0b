#!/usr/bin/env bash
# Installs what dtsim needs from Debian's archive (only what is missing) and builds it.
# Idempotent: a second run installs nothing and rebuilds only what changed.
#
# Usage: tools/setup.sh [--all] [--build-dir DIR] [--type BUILD_TYPE] [-- EXTRA_CMAKE_ARGS...]
#   (default)         build what running dtsim needs: the dtsim command and the Python module
#   --all             build every target: the tests and benchmark drivers too (GoogleTest is
#                     installed for them), or the fuzz harnesses under -DDTSIM_FUZZ=ON
#   --build-dir DIR   where to build (default: build, beside this repository's top)
#   --type TYPE       CMake build type (default: Release)
#   EXTRA_CMAKE_ARGS  e.g. -DDTSIM_WERROR=ON -DDTSIM_SANITIZE=ON -DDTSIM_CUPTI=OFF
set -euo pipefail

top="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build_dir="$top/build"
build_type="Release"
all=0
cmake_args=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --all) all=1; shift ;;
    --build-dir) build_dir="$(realpath -m "$2")"; shift 2 ;;
    --type) build_type="$2"; shift 2 ;;
    --) shift; cmake_args=("$@"); break ;;
    -h|--help) sed -n '2,11p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "setup.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done

started=$SECONDS
elapsed() {
  local s=$((SECONDS - started))
  if [[ $s -ge 60 ]]; then echo "$((s / 60)) min $((s % 60)) s"; else echo "$s s"; fi
}

# Debian 12 package names. python3-matplotlib draws the report figures (through /usr/bin/python3);
# python3-dev and pybind11-dev build the Python module for it (python3-pandas, optional, gives
# its results as DataFrames). libsimdjson-dev parses profiler traces, libyaml-cpp-dev NeMo's
# training configs (dtsim import nemo).
packages=(
  cmake ninja-build g++ pkg-config
  libboost-program-options-dev nlohmann-json3-dev libfmt-dev zlib1g-dev libsimdjson-dev
  libyaml-cpp-dev
  python3 python3-matplotlib python3-dev pybind11-dev
)
[[ $all -eq 0 ]] || packages+=(libgtest-dev libgmock-dev python3-pandas)

missing=()
for package in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$package")
  fi
done

if [[ ${#missing[@]} -gt 0 ]]; then
  echo "setup.sh: [1/3] installing ${#missing[@]} Debian packages: ${missing[*]}"
  if [[ $(id -u) -eq 0 ]]; then
    sudo=()
  elif command -v sudo >/dev/null; then
    sudo=(sudo)
  else
    echo "setup.sh: missing packages (${missing[*]}) and not root; install them or run as root" >&2
    exit 1
  fi
  "${sudo[@]}" apt-get update -q
  DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -q --no-install-recommends \
    "${missing[@]}"
else
  echo "setup.sh: [1/3] the ${#packages[@]} Debian packages dtsim needs are installed"
fi

# Without --all, a new build directory leaves the tests out (GoogleTest need not be installed);
# one configured with them keeps them, so the test command's build is never undone.
selection=()
if [[ $all -eq 1 ]]; then
  selection=(-DDTSIM_BUILD_TESTS=ON -DDTSIM_BUILD_BENCH=ON)
elif [[ ! -f "$build_dir/CMakeCache.txt" ]]; then
  selection=(-DDTSIM_BUILD_TESTS=OFF -DDTSIM_BUILD_BENCH=OFF)
fi
echo "setup.sh: [2/3] configuring a $build_type build in $build_dir (CMake, Ninja)"
cmake -S "$top" -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE="$build_type" "${selection[@]}" \
  "${cmake_args[@]}"

targets=()
what="every target"
if [[ $all -eq 0 ]]; then
  targets=(--target dtsim_tool)
  what="dtsim and its Python module"
fi
steps=$(cmake --build "$build_dir" "${targets[@]}" -- -n 2>/dev/null | grep -c '^\[' || true)
echo "setup.sh: [3/3] building $what: $steps steps on $(nproc) cores" \
  "(a first build on 2 cores: about 3 minutes for dtsim, 10 for everything)"
cmake --build "$build_dir" "${targets[@]}" -j "$(nproc)"
echo "setup.sh: built $what in $build_dir in $(elapsed)"
