#!/bin/bash
# Runs every real-GPU check of the profiler in one go, on a machine with a GPU, PyTorch and nvcc
# (docs/profiler.md, "On a GPU"). Usage, from the repository's root:
#
#   tools/gpu_checks/run_all.sh DTSIM INJECTION_LIBRARY OUT_DIR [OP_LIST...]
#
# 1. the CUDA C++ program with known kernels (profile_known_kernels.sh): exact counts, replay;
# 2. GPT-2 small training steps (gpt2_step.py): no profiler and `dtsim profile` (NVTX steps)
#    alternating, then --all-api-calls, emit_nvtx alone and under dtsim, torch.profiler: step
#    times (overhead);
#    kernels and GPU time per step of dtsim's trace against torch.profiler's (compare_traces.py);
#    each trace replayed with `dtsim replay`; a two-step capture kept as test data;
# 3. the op benchmark (tools/op_benchmark.py) on each OP_LIST, written as OUT_DIR/<name>.costs.json.
# Every part runs even when an earlier one fails; the exit status says whether all passed.
set -u
dtsim=$(realpath "$1")
export DTSIM_INJECTION_LIBRARY=$(realpath "$2")
out=$(realpath -m "$3")
shift 3
here=$(dirname "$0")
mkdir -p "$out"
work=$(mktemp -d)
# shellcheck source=tools/gpu_checks/common.sh
source "$here/common.sh"
print_environment
ldd "$dtsim" "$DTSIM_INJECTION_LIBRARY" | grep -E 'not found|cupti|fmt|boost' || true

run known_kernels sh "$here/profile_known_kernels.sh" "$dtsim" "$out/known_kernels"

gpt2=(python3 "$here/gpt2_step.py" --batch 8 --warmup 5 --steps 30)
# Overhead: unprofiled and `dtsim profile` runs alternate, ${REPEATS:-3} of each, so drift in
# the machine's speed falls on both; the other configurations run once.
for i in $(seq "${REPEATS:-3}"); do
  run "gpt2_none_$i" "${gpt2[@]}" --profiler none --summary "$out/gpt2_none_$i.json"
  run "gpt2_dtsim_$i" "$dtsim" profile -o "$work/gpt2_dtsim_$i.json" -- "${gpt2[@]}" \
    --profiler nvtx --summary "$out/gpt2_dtsim_$i.json"
done
run gpt2_dtsim_all_api_calls "$dtsim" profile --all-api-calls -o "$work/gpt2_dtsim_all_api_calls.json" \
  -- "${gpt2[@]}" --profiler nvtx --summary "$out/gpt2_dtsim_all_api_calls.json"
run gpt2_emit_nvtx_unprofiled "${gpt2[@]}" --profiler nvtx --emit-nvtx \
  --summary "$out/gpt2_emit_nvtx_unprofiled.json"
run gpt2_dtsim_emit_nvtx "$dtsim" profile -o "$work/gpt2_dtsim_emit_nvtx.json" -- "${gpt2[@]}" \
  --profiler nvtx --emit-nvtx --summary "$out/gpt2_dtsim_emit_nvtx.json"
run gpt2_torch "${gpt2[@]}" --profiler torch --trace "$work/gpt2_torch.json" \
  --summary "$out/gpt2_torch.json"

run compare python3 "$here/compare_traces.py" "$work/gpt2_dtsim_1.json" "$work/gpt2_torch.json" \
  --json "$out/compare_dtsim_torch.json"
run compare_emit_nvtx python3 "$here/compare_traces.py" "$work/gpt2_dtsim_emit_nvtx.json" \
  "$work/gpt2_torch.json" --json "$out/compare_emit_nvtx_torch.json"
for trace in gpt2_dtsim_1 gpt2_dtsim_all_api_calls gpt2_dtsim_emit_nvtx gpt2_torch; do
  run "replay_$trace" "$dtsim" replay "$work/$trace.json" -o "$out/replay_$trace.json"
done
ls -l "$work"
python3 - "$out" "${REPEATS:-3}" <<'PY'
import json, statistics, sys
out, repeats = sys.argv[1], int(sys.argv[2])
def times(names):
    return [t for name in names for t in json.load(open(f"{out}/{name}.json"))["step_ms"]]
rows = {"unprofiled": times([f"gpt2_none_{i}" for i in range(1, repeats + 1)]),
        "dtsim profile": times([f"gpt2_dtsim_{i}" for i in range(1, repeats + 1)])}
for name in ("gpt2_dtsim_all_api_calls", "gpt2_emit_nvtx_unprofiled", "gpt2_dtsim_emit_nvtx",
             "gpt2_torch"):
    rows[name] = times([name])
base = statistics.median(rows["unprofiled"])
print("step times (ms) over every timed step; overhead = median against the unprofiled median")
print(f"  {'configuration':28} {'steps':>5} {'median':>8} {'mean':>8} {'min':>8} {'overhead':>9}")
for name, t in rows.items():
    m = statistics.median(t)
    print(f"  {name:28} {len(t):5} {m:8.3f} {statistics.fmean(t):8.3f} {min(t):8.3f} "
          f"{100 * (m - base) / base:+8.2f}%")
PY

# A small capture kept as test data: two steps after one warm-up step, emit_nvtx ranges on.
run gpt2_capture "$dtsim" profile -o "$out/gpt2_small_step.json" -- python3 "$here/gpt2_step.py" \
  --batch 2 --seq 256 --warmup 1 --steps 2 --profiler nvtx --emit-nvtx \
  --summary "$out/gpt2_small_step.summary.json"
for trace in gpt2_dtsim_1 gpt2_torch; do gzip -c "$work/$trace.json" > "$out/$trace.json.gz"; done

for list in "$@"; do
  name=$(basename "$list" .json)
  run "op_benchmark_$name" timeout 240 python3 tools/op_benchmark.py "$list" \
    -o "$out/$name.costs.json" --gpu "${GPU_PRESET:-h100-sxm5-80gb}"
done

rm -rf "$work"
echo "=== failed: ${failures[*]:-none}"
[[ ${#failures[@]} -eq 0 ]]
