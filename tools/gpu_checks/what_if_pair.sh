#!/bin/bash
# Records, on a machine with a GPU and PyTorch, one FP32/TF32 what-if pair of GPT-2 training
# steps (docs/replay.md, "Checked on a GPU"): the same program with faster matmuls, a check
# the replay's `--speedup` must pass on traces it was not tuned on. Usage, from the
# repository's root:
#
#   tools/gpu_checks/what_if_pair.sh DTSIM INJECTION_LIBRARY OUT_DIR [MODEL] [BATCH]
#
# For each precision (fp32, tf32) of `gpt2_step.py --model MODEL --batch BATCH` (defaults 355m
# and 4; 1,024 tokens, 3 warm-up and 10 timed steps): one unprofiled run (its step times), one
# under `dtsim profile` and one of 4 timed steps under torch.profiler (Kineto, with host ops and
# the autograd thread's): the traces gzipped into OUT_DIR, the step summaries in
# summaries.tar.gz.
set -u
dtsim=$(realpath "$1")
export DTSIM_INJECTION_LIBRARY=$(realpath "$2")
out=$(realpath -m "$3")
model=${4:-355m}
batch=${5:-4}
here=$(dirname "$0")
mkdir -p "$out"
# shellcheck source=tools/gpu_checks/common.sh
source "$here/common.sh"
print_environment

gpt2=(python3 "$here/gpt2_step.py" --model "$model" --batch "$batch" --seq 1024 --warmup 3 --steps 10)
for precision in fp32 tf32; do
  name="gpt2_${model}_${precision}"
  run_limited "${name}_none" 120 "${gpt2[@]}" --precision "$precision" --profiler none \
    --summary "$out/${name}_none.json"
  run_limited "${name}_dtsim" 150 "$dtsim" profile -o "$out/${name}_dtsim.json" -- \
    "${gpt2[@]}" --precision "$precision" --profiler nvtx --summary "$out/${name}_dtsim.summary.json"
  # torch.profiler's trace, of 4 timed steps (argparse takes the last --steps): with its host
  # ops it is far larger.
  run_limited "${name}_torch" 150 "${gpt2[@]}" --steps 4 --precision "$precision" \
    --profiler torch --trace "$out/${name}_torch.json" --summary "$out/${name}_torch.summary.json"
  gzip -f "$out/${name}_dtsim.json" "$out/${name}_torch.json"
done
# The step summaries in one file (a device run brings back only a few).
tar -czf "$out/summaries.tar.gz" -C "$out" $(cd "$out" && ls ./*.summary.json ./*_none.json 2>/dev/null) &&
  rm -f "$out"/*.summary.json "$out"/*_none.json
echo "=== failed: ${failures[*]:-none}"
[[ ${#failures[@]} -eq 0 ]]
