#!/bin/bash
# Where `dtsim profile`'s overhead comes from: GPT-2 small steps (gpt2_step.py) unprofiled and
# under `dtsim profile --kinds` with one more group of activity kinds each time, unprofiled runs
# in between so drift in the machine's speed shows. Prints each run's median and minimum step.
# Usage, from the repository's root: overhead_ablation.sh DTSIM OUT_DIR [GPT2_ARGS...]
set -u
dtsim=$(realpath "$1")
out=$(realpath -m "$2")
shift 2
here=$(dirname "$0")
mkdir -p "$out"
gpt2=(python3 "$here/gpt2_step.py" --warmup 5 --steps 30 "$@")
runs=()
none() {
  "${gpt2[@]}" --profiler none --summary "$out/$1.json" && runs+=("$1")
}
profiled() {  # profiled NAME KINDS
  "$dtsim" profile --kinds "$2" -o "$out/$1.trace.json" -- "${gpt2[@]}" --profiler nvtx \
    --summary "$out/$1.json" > /dev/null && runs+=("$1")
  rm -f "$out/$1.trace.json"
}
# NAME=KINDS pairs; KIND_SETS in the environment replaces them.
sets=(${KIND_SETS:-kernel=kernel kernel_copies=kernel,memcpy,memset
  kernel_copies_runtime=kernel,memcpy,memset,runtime
  kernel_copies_api=kernel,memcpy,memset,runtime,driver
  all_but_nvtx=kernel,memcpy,memset,runtime,driver,sync,cuda_event,external,overhead all=all})
none none_1
for i in "${!sets[@]}"; do
  profiled "${sets[$i]%%=*}" "${sets[$i]#*=}"
  (( i % 2 == 1 )) && none "none_$(( i / 2 + 2 ))"
done
(( ${#sets[@]} % 2 == 1 )) && none "none_last"
python3 - "$out" "${runs[@]}" <<'PY'
import json, statistics, sys
out, names = sys.argv[1], sys.argv[2:]
print(f"{'run':24} {'median ms':>10} {'min ms':>8}")
for name in names:
    t = json.load(open(f"{out}/{name}.json"))["step_ms"]
    print(f"{name:24} {statistics.median(t):10.3f} {min(t):8.3f}")
PY
