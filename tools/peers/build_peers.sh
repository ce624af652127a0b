#!/usr/bin/env bash
# Fetches Calculon and ASTRA-sim at the commits tools/peers/README.md names and builds
# ASTRA-sim's analytical (congestion-unaware) simulator, for tools/peers/run_peers.py.
#
# Usage: tools/peers/build_peers.sh DIR
#   DIR/calculon and DIR/astra-sim are created (or reused when they are already there).
#   ASTRA_SIM_SRC=TREE, CALCULON_SRC=TREE: copy these source trees (with ASTRA-sim's
#   submodules filled in) instead of cloning from GitHub.
set -euo pipefail

[[ $# -eq 1 ]] || { sed -n '2,8p' "$0" | sed 's/^# \{0,1\}//'; exit 2; }
dir="$(realpath -m "$1")"
mkdir -p "$dir"

astra_commit=c459ab6
calculon_commit=caa4b11
# What ASTRA-sim's analytical build compiles: Chakra's feeder and schema, the analytical
# network backend (with its yaml-cpp), the remote-memory backend, fmt and spdlog.
astra_submodules=(extern/graph_frontend/chakra extern/network_backend/analytical
                  extern/remote_memory_backend/analytical extern/helper/fmt extern/helper/spdlog)

packages=(protobuf-compiler libprotobuf-dev python3-numpy python3-pandas python3-psutil python3-protobuf)
missing=()
for p in "${packages[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
if [[ ${#missing[@]} -gt 0 ]]; then
  echo "build_peers: installing ${missing[*]}"
  apt-get update -qq && apt-get install -y -qq "${missing[@]}"
fi

fetch() {  # name, repository, commit, source tree override
  local name="$1" repo="$2" commit="$3" src="$4"
  [[ -d "$dir/$name" ]] && return 0
  if [[ -n "$src" ]]; then
    cp -a "$src" "$dir/$name"
  else
    git clone -q "https://github.com/$repo.git" "$dir/$name"
    git -C "$dir/$name" checkout -q "$commit"
  fi
}

fetch calculon calculon-ai/calculon "$calculon_commit" "${CALCULON_SRC:-}"
fetch astra-sim astra-sim/astra-sim "$astra_commit" "${ASTRA_SIM_SRC:-}"
if [[ -z "${ASTRA_SIM_SRC:-}" ]]; then
  git -C "$dir/astra-sim" submodule update -q --init "${astra_submodules[@]}"
  git -C "$dir/astra-sim/extern/network_backend/analytical" submodule update -q --init \
    extern/yaml-cpp
fi

binary="$dir/astra-sim/build/astra_analytical/build/bin/AstraSim_Analytical_Congestion_Unaware"
if [[ ! -x "$binary" ]]; then
  echo "build_peers: building ASTRA-sim's analytical backend (about 10 minutes on two cores)"
  bash "$dir/astra-sim/build/astra_analytical/build.sh" -t congestion_unaware \
    > "$dir/astra-sim-build.log" 2>&1 || { tail -20 "$dir/astra-sim-build.log"; exit 1; }
fi
echo "build_peers: Calculon in $dir/calculon, ASTRA-sim in $binary"
echo "run: tools/peers/run_peers.py --calculon $dir/calculon --astra-sim $dir/astra-sim"
