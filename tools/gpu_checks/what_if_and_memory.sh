#!/bin/bash
# Records, on a machine with a GPU and PyTorch, the measurements two checks need and CI cannot
# make (docs/replay.md, docs/validation.md). Usage, from the repository's root:
#
#   tools/gpu_checks/what_if_and_memory.sh DTSIM INJECTION_LIBRARY OUT_DIR [OP_LIST]
#
# 1. What-if (issue 33): GPT-2 small (8 x 1,024) in FP32 and with TF32 matmuls — the same
#    program, faster GEMM kernels — unprofiled and under `dtsim profile`, alternating; each
#    trace replayed. A replay of the FP32 trace with the per-kernel-class speedups measured
#    between the two should land near the measured TF32 step.
# 2. Memory (issue 37): GPT-2 355M, 774M and 1.5B in bf16 autocast with fused AdamW under each
#    recompute policy (none, full, every-2nd block, selective op): the caching allocator's
#    peak allocated and reserved bytes over the timed steps and the device memory in use.
# 3. The op benchmark on OP_LIST, if given: an op-cost table for this GPU.
# Every result lands in OUT_DIR (step summaries as JSON, gzipped traces, logs); every part runs
# even when an earlier one fails; each has its own time limit so the script ends on its own.
set -u
dtsim=$(realpath "$1")
export DTSIM_INJECTION_LIBRARY=$(realpath "$2")
out=$(realpath -m "$3")
op_list=${4:-}
here=$(dirname "$0")
mkdir -p "$out"
# shellcheck source=tools/gpu_checks/common.sh
source "$here/common.sh"
print_environment

gpt2=(python3 "$here/gpt2_step.py" --batch 8 --seq 1024 --warmup 3 --steps 10)
for i in $(seq "${REPEATS:-2}"); do
  for precision in fp32 tf32; do
    run_limited "${precision}_none_$i" 120 "${gpt2[@]}" --precision "$precision" --profiler none \
      --summary "$out/whatif_${precision}_none_$i.json"
    run_limited "${precision}_dtsim_$i" 120 "$dtsim" profile -o "$out/whatif_${precision}_dtsim_$i.json" -- \
      "${gpt2[@]}" --precision "$precision" --profiler nvtx \
      --summary "$out/whatif_${precision}_dtsim_$i.summary.json"
  done
done
# torch.profiler's trace of each too (Kineto JSON: the other format `dtsim replay` reads).
for precision in fp32 tf32; do
  run_limited "${precision}_torch" 120 "${gpt2[@]}" --precision "$precision" --profiler torch \
    --trace "$out/whatif_${precision}_torch.json" --summary "$out/whatif_${precision}_torch.summary.json"
  gzip -f "$out/whatif_${precision}_torch.json"
done
for precision in fp32 tf32; do
  run_limited "replay_$precision" 60 "$dtsim" replay "$out/whatif_${precision}_dtsim_1.json" \
    -o "$out/whatif_${precision}_replay.json"
done
# Keep one trace of each precision, gzipped; the others were only timed.
for f in "$out"/whatif_*_dtsim_*.json; do
  case "$f" in *_dtsim_1.json) gzip -f "$f" ;; *.summary.json) ;; *) rm -f "$f" ;; esac
done

# model batch recompute: each run in its own process, so each allocator starts empty.
memory_runs=(
  "355m 8 none" "355m 8 full" "355m 8 every-2nd" "355m 8 op"
  "774m 8 none" "774m 8 full" "774m 8 op"
  "1.5b 4 none" "1.5b 4 full"
)
for spec in "${memory_runs[@]}"; do
  read -r model batch recompute <<<"$spec"
  run_limited "memory_${model}_b${batch}_${recompute}" 90 python3 "$here/gpt2_step.py" --model "$model" \
    --batch "$batch" --seq 1024 --recompute "$recompute" --warmup 2 --steps 3 \
    --summary "$out/memory_${model}_b${batch}_${recompute}.json"
done

if [[ -n "$op_list" ]]; then
  run op_benchmark "${OP_BENCHMARK_LIMIT:-200}" python3 tools/op_benchmark.py "$op_list" \
    -o "$out/$(basename "$op_list" .json).costs.json" --reps "${OP_REPS:-10}"
fi

echo "=== failed: ${failures[*]:-none}"
[[ ${#failures[@]} -eq 0 ]]
