#!/bin/bash
# Records, on a machine with a GPU and PyTorch, what the caching allocator holds for the
# training loops dtsim replays through its model of it (issue 37; docs/models.md, "The caching
# allocator"): each run's peaks (allocated, reserved) and the allocator's own record of every
# allocation and free (memory_history.py), so a replay can be checked tensor by tensor.
# Usage, from the repository's root:
#
#   tools/gpu_checks/allocator_runs.sh OUT_DIR [RUN...]
#
# (RUN: names from the list below, to run only those.)
# 1. A Llama-style decoder (llama_step.py: RMSNorm, rotary, grouped-query attention, SwiGLU,
#    untied output) in bf16 autocast under each recompute policy, both allocators, two sizes.
# 2. The same decoder as torchtitan trains it: FSDP2 on one rank, gradient clipping, each
#    reshard policy, both allocators; and as rank 0 of 8 or 128 on PyTorch's fake process group
#    (llama_step.py --fake-world), the all-gather's buffers included, and with context
#    parallelism (--cp: ring attention on rank 0's share of each sequence).
# 3. GPT-2 (gpt2_step.py) as in what_if_and_memory.sh, recorded, with the default allocator
#    and with expandable segments.
# Each run is its own process (each allocator starts empty) with its own time limit; every run
# is tried even when an earlier one fails. OUT_DIR gets the summaries (runs/*.json), the
# records (history/*.json.gz) and allocator_runs.tar.gz holding both.
set -u
out=$(realpath -m "$1")
here=$(dirname "$0")
mkdir -p "$out/runs" "$out/history"
# shellcheck source=tools/gpu_checks/common.sh
source "$here/common.sh"
print_environment

expandable=expandable_segments:True
# name, PYTORCH_CUDA_ALLOC_CONF ("-": the default), script, arguments
runs=(
  "llama-1b-b2-none - llama_step.py --model 1b --recompute none"
  "llama-1b-b2-full - llama_step.py --model 1b --recompute full"
  "llama-1b-b2-op - llama_step.py --model 1b --recompute op"
  "llama-1b-b2-every2 - llama_step.py --model 1b --recompute every-2nd"
  "llama-1b-b2-none-exp $expandable llama_step.py --model 1b --recompute none"
  "llama-1b-b2-full-exp $expandable llama_step.py --model 1b --recompute full"
  "llama-200m-b2s4k-none - llama_step.py --model 200m --seq 4096 --recompute none"
  "llama-200m-b2s4k-full - llama_step.py --model 200m --seq 4096 --recompute full"
  "fsdp2-1b-none-exp $expandable llama_step.py --mode fsdp2 --clip-norm 1 --recompute none"
  "fsdp2-1b-full-exp $expandable llama_step.py --mode fsdp2 --clip-norm 1 --recompute full"
  "fsdp2-1b-none-never-exp $expandable llama_step.py --mode fsdp2 --clip-norm 1 --reshard never"
  "fsdp2-1b-none - llama_step.py --mode fsdp2 --clip-norm 1 --recompute none"
  "fsdp2-1b-op-exp $expandable llama_step.py --mode fsdp2 --clip-norm 1 --recompute op"
  "gpt2-355m-b8-none - gpt2_step.py --model 355m --batch 8 --recompute none"
  "gpt2-355m-b8-op - gpt2_step.py --model 355m --batch 8 --recompute op"
  "gpt2-355m-b8-none-exp $expandable gpt2_step.py --model 355m --batch 8 --recompute none"
  "gpt2-355m-b8-full-exp $expandable gpt2_step.py --model 355m --batch 8 --recompute full"
  "gpt2-774m-b8-op-exp $expandable gpt2_step.py --model 774m --batch 8 --recompute op"
  "llama-mha-200m-b2s4k-none - llama_step.py --model mha-200m --seq 4096 --recompute none"
  "llama-mha-200m-b2s4k-op - llama_step.py --model mha-200m --seq 4096 --recompute op"
  "llama-8b-4l-b1s8k-none - llama_step.py --model 8b-4l --batch 1 --seq 8192 --recompute none"
  "llama-8b-4l-b1s8k-full-exp $expandable llama_step.py --model 8b-4l --batch 1 --seq 8192 --recompute full"
  "llama-200m-b2s4k-acc2-none - llama_step.py --model 200m --seq 4096 --accumulate 2 --recompute none"
  "llama-200m-b2s4k-acc2-full - llama_step.py --model 200m --seq 4096 --accumulate 2 --recompute full"
  "llama-1b-b2-acc4-op - llama_step.py --model 1b --accumulate 4 --recompute op"
  # DDP on one rank: the reducer's gradient buckets beside the autocast loop.
  "ddp-1b-none-exp $expandable llama_step.py --mode ddp --recompute none"
  "ddp-1b-op - llama_step.py --mode ddp --recompute op"
  # FSDP2 over more ranks, as rank 0 of a fake process group (the all-gather's buffers):
  # torchtitan's Llama 3.1 8B recipe (Table 1: 2 x 8192 tokens, op checkpointing) at 8 and 128.
  "fsdp2-1b-fake8-none-exp $expandable llama_step.py --mode fsdp2 --fake-world 8 --clip-norm 1 --recompute none"
  "fsdp2-1b-fake8-op - llama_step.py --mode fsdp2 --fake-world 8 --clip-norm 1 --recompute op"
  "fsdp2-8b-fake8-b2s8k-op-exp $expandable llama_step.py --mode fsdp2 --model 8b --fake-world 8 --batch 2 --seq 8192 --clip-norm 1 --recompute op"
  "fsdp2-8b-fake128-b2s8k-op-exp $expandable llama_step.py --mode fsdp2 --model 8b --fake-world 128 --batch 2 --seq 8192 --clip-norm 1 --recompute op"
  # FSDP2 x context parallelism (ring attention), rank 0 of 8: torchtitan's Llama 3.1 8B
  # context-parallel recipe (Table 2: FSDP 4 x CP 2 at 64k tokens, full checkpointing), and the
  # 1B shape at 2 and 4 ranks of context without checkpointing (ring attention's own buffers).
  "fsdp2-8b-fake8-cp2-b1s64k-full-exp $expandable llama_step.py --mode fsdp2 --model 8b --fake-world 8 --cp 2 --batch 1 --seq 65536 --clip-norm 1 --recompute full"
  "fsdp2-1b-fake8-cp2-b1s8k-none-exp $expandable llama_step.py --mode fsdp2 --fake-world 8 --cp 2 --batch 1 --seq 8192 --clip-norm 1 --recompute none"
  "fsdp2-1b-fake8-cp4-b1s16k-full - llama_step.py --mode fsdp2 --fake-world 8 --cp 4 --batch 1 --seq 16384 --clip-norm 1 --recompute full"
)
only=("${@:2}")
for spec in "${runs[@]}"; do
  read -r name conf script arguments <<<"$spec"
  if [[ ${#only[@]} -gt 0 && ! " ${only[*]} " =~ \ $name\  ]]; then continue; fi
  environment=(env -u PYTORCH_CUDA_ALLOC_CONF)
  [[ $conf == - ]] || environment=(env "PYTORCH_CUDA_ALLOC_CONF=$conf")
  # shellcheck disable=SC2086  # the arguments are words
  run_limited "$name" "${RUN_LIMIT:-60}" "${environment[@]}" \
    python3 "$here/$script" $arguments --warmup 2 --steps 3 \
    --summary "$out/runs/$name.json" --history "$out/history/$name.json.gz"
done
tar -C "$out" -czf "$out/allocator_runs.tar.gz" runs history
echo "=== failed: ${failures[*]:-none}"
[[ ${#failures[@]} -eq 0 ]]
