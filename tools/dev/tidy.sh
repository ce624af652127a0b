#!/usr/bin/env bash
# clang-tidy 14 with the repository's .clang-tidy over dtsim's sources (not tests/), every
# finding an error (docs/development.md, "Tooling"). Headers are checked through the sources
# that include them (.clang-tidy's HeaderFilterRegex); a changed header brings every source that
# includes it. Installs clang-tidy-14 from Debian when it is missing.
#
# Usage: tools/dev/tidy.sh [--all | --since REV] [--build-dir DIR] [--jobs J] [--list]
#   --all            every source (the default)
#   --since REV      the sources changed since commit REV, and those including a changed header
#                    directly; .ci/run passes .ci/tidy-base (the tree was clean where it was
#                    last set). A REV this clone does not hold falls back to --all
#   --build-dir DIR  a configured build whose compile_commands.json names the flags (default:
#                    build); for a unity build, DIR/tidy-compile-db is configured with its
#                    sources one by one
#   --jobs J         files checked side by side (default: the number of cores)
#   --list           print the sources that would be checked, and check none
# Exits 1 when any file has a finding; each is printed with its file, line and check.
set -euo pipefail

top="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
build_dir="$top/build"
since=""
jobs="$(nproc)"
list=0
while [[ $# -gt 0 ]]; do
  case "$1" in
    --all) since=""; shift ;;
    --since) since="$2"; shift 2 ;;
    --build-dir) build_dir="$(cd "$2" && pwd)"; shift 2 ;;
    --jobs) jobs="$2"; shift 2 ;;
    --list) list=1; shift ;;
    -h|--help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;;
    *) echo "tidy.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
cd "$top"

if ! command -v clang-tidy-14 >/dev/null; then
  sudo=(); [[ $(id -u) -eq 0 ]] || sudo=(sudo)
  "${sudo[@]}" apt-get update -q
  DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -q --no-install-recommends \
    clang-tidy-14
fi
if [[ ! -f "$build_dir/compile_commands.json" ]]; then
  echo "tidy.sh: $build_dir/compile_commands.json is missing: configure a build first" \
       "(tools/setup.sh)" >&2
  exit 2
fi

# A unity build (DTSIM_UNITY_BUILD, the default) lists its batches, not its sources: clang-tidy
# needs each source's own command, so a build without batches is configured (not built) beside
# it, with the same type and options.
compile_db="$build_dir"
if grep -q '/Unity/unity_' "$build_dir/compile_commands.json"; then
  compile_db="$build_dir/tidy-compile-db"
  cached() { sed -n "s/^$1:[A-Z]*=//p" "$build_dir/CMakeCache.txt"; }
  echo "tidy.sh: $build_dir is a unity build; configuring its sources one by one in $compile_db"
  cmake -S "$top" -B "$compile_db" -G Ninja -DDTSIM_UNITY_BUILD=OFF -DDTSIM_BUILD_TESTS=OFF \
    -DDTSIM_BUILD_BENCH=OFF -DCMAKE_BUILD_TYPE="$(cached CMAKE_BUILD_TYPE)" \
    -DCMAKE_CXX_FLAGS="$(cached CMAKE_CXX_FLAGS)" -DDTSIM_CUPTI="$(cached DTSIM_CUPTI)" \
    -DDTSIM_PYTHON_MODULE="$(cached DTSIM_PYTHON_MODULE)" >/dev/null
fi

modules=(sim traces network models profiler strategies tools)
# The sources the build compiles (a CUPTI file is tidied only where CUPTI was found).
mapfile -t built < <(/usr/bin/python3 -c '
import json, os, sys
top = sys.argv[1]
for entry in json.load(open(sys.argv[2])):
    path = os.path.relpath(os.path.join(entry["directory"], entry["file"]), top)
    print(path)' "$top" "$compile_db/compile_commands.json" | sort -u |
  grep -E "^($(IFS='|'; echo "${modules[*]}"))/.*\.cc$" || true)

if [[ -n "$since" ]] && ! git cat-file -e "$since^{commit}" 2>/dev/null; then
  echo "tidy.sh: commit $since is not in this clone: checking every source" >&2
  since=""
fi
files=()
if [[ -z "$since" ]]; then
  files=("${built[@]}")
else
  mapfile -t changed < <(git diff --name-only "$since" -- "${modules[@]}")
  declare -A wanted=()
  for path in "${changed[@]}"; do
    [[ -f "$path" ]] || continue
    case "$path" in
      *.cc) wanted["$path"]=1 ;;
      *.h)
        for source in "${built[@]}"; do
          grep -qF "#include \"$path\"" "$source" && wanted["$source"]=1
        done ;;
    esac
  done
  for source in "${built[@]}"; do
    [[ -n "${wanted[$source]:-}" ]] && files+=("$source")
  done
fi
echo "tidy.sh: ${#files[@]} of ${#built[@]} sources${since:+ (changed since ${since:0:12})}"
[[ ${#files[@]} -eq 0 ]] && exit 0
if [[ $list -eq 1 ]]; then
  printf '%s\n' "${files[@]}"
  exit 0
fi

log="$(mktemp)"
trap 'rm -f "$log"' EXIT
status=0
printf '%s\0' "${files[@]}" |
  xargs -0 -P "$jobs" -n 1 sh -c \
    'out=$(clang-tidy-14 -p "$0" --quiet --warnings-as-errors="*" "$1" 2>&1) ||
       { printf "tidy.sh: findings in %s\n%s\n" "$1" "$out"; exit 1; }' "$compile_db" \
  >"$log" || status=1
if [[ $status -ne 0 ]]; then
  # Each finding once (a header's is reported by every source including it); the notes that
  # explain one come with `clang-tidy-14 -p COMPILE_DB FILE`.
  grep -E '(warning|error):' "$log" | sort -u
  grep '^tidy.sh: findings in' "$log" | sort
  echo "tidy.sh: clang-tidy found the above (.clang-tidy's checks)" >&2
  exit 1
fi
echo "tidy.sh: clean"
