#!/bin/sh
# Profiles tools/gpu_checks/known_kernels.cu with `dtsim profile` and checks the trace holds
# exactly the kernels, copies, sets and steps the program says it ran, then replays it.
# Needs a GPU, nvcc and a dtsim built with CUPTI. Usage:
#   profile_known_kernels.sh DTSIM OUT_DIR [DTSIM_PROFILE_OPTION...] [-- PROGRAM_OPTION...]
# e.g. `... --capture-range cuda-profiler-api -- --profiler-api`, `... -- --device-reset`.
set -eu
dtsim=$1
out=$2
shift 2
profile_options=""
while [ $# -gt 0 ] && [ "$1" != "--" ]; do profile_options="$profile_options $1"; shift; done
[ $# -gt 0 ] && shift
here=$(dirname "$0")
mkdir -p "$out"
nvcc=${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
"$nvcc" -O2 -I"$(dirname "$nvcc")/../include" -o "$out/known_kernels" "$here/known_kernels.cu"
# shellcheck disable=SC2086 # the options are words
"$dtsim" profile $profile_options -o "$out/known_kernels.json" -- "$out/known_kernels" "$@" \
  > "$out/profile.txt"
cat "$out/profile.txt"
expected=$("$out/known_kernels" "$@")
python3 - "$out/known_kernels.json" "$expected" <<'PY'
import json, sys
trace = json.load(open(sys.argv[1]))
expected = json.loads(sys.argv[2])
events = trace["traceEvents"]
count = lambda cat: sum(1 for e in events if e.get("cat") == cat)
got = {"kernels": count("kernel"), "memcpys": count("gpu_memcpy"), "memsets": count("gpu_memset"),
       "steps": sum(1 for e in events if e.get("cat") == "user_annotation"
                    and e.get("name", "").startswith("ProfilerStep#"))}
other = trace["otherData"]
print("expected", expected, "got", got, "lost", other["lost"], "unlinked", other["unlinked"],
      "capture", other.get("capture_range"), "windows", other.get("capture_windows"),
      "reset flushes", other.get("device_reset_flushes"))
sys.exit(0 if got == expected else 1)
PY
"$dtsim" replay "$out/known_kernels.json"
