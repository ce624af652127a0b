#!/usr/bin/env bash
# Installs what dtsim needs from Debian's archive (only what is missing) and builds dtsim.
# Idempotent: a second run installs nothing and rebuilds only what changed.
#
# Usage: tools/setup.sh [--build-dir DIR] [--type BUILD_TYPE] [-- EXTRA_CMAKE_ARGS...]
#   --build-dir DIR   where to build (default: build, beside this repository's top)
#   --type TYPE       CMake build type (default: Release)
#   EXTRA_CMAKE_ARGS  e.g. -DDTSIM_WERROR=ON -DDTSIM_SANITIZE=ON -DDTSIM_CUPTI=OFF
set -euo pipefail

top="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build_dir="$top/build"
build_type="Release"
cmake_args=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --build-dir) build_dir="$(realpath -m "$2")"; shift 2 ;;
    --type) build_type="$2"; shift 2 ;;
    --) shift; cmake_args=("$@"); break ;;
    -h|--help) sed -n '2,10p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "setup.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done

# Debian 12 package names. python3-matplotlib draws the report figures (through /usr/bin/python3).
packages=(
  cmake ninja-build g++ pkg-config
  libboost-program-options-dev nlohmann-json3-dev libfmt-dev zlib1g-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  python3 python3-matplotlib
)

missing=()
for package in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$package")
  fi
done

if [[ ${#missing[@]} -gt 0 ]]; then
  echo "setup.sh: installing ${missing[*]}"
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
fi

cmake -S "$top" -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE="$build_type" "${cmake_args[@]}"
cmake --build "$build_dir" -j "$(nproc)"
echo "setup.sh: built $build_dir/dtsim"
