#!/bin/sh
# tools/op_benchmark.py has a runner for every op family the plans price: the op list of each
# shipped example config (and of BERT-Large under every compression method, whose kernels are
# ops too, and of the LLaMA-2 and Mixtral examples in FP8, whose GEMMs and casts have runners of
# their own) goes through the benchmark's --dry-run, which fails on an op it cannot run.
# gpt3_175b_1024gpu is left out for time (its op families are gpt3_1.3b's at other shapes).
# Usage: op_benchmark_dry_run.sh DTSIM PYTHON SOURCE_DIR
set -eu
dtsim=$1
python=$2
source=$3
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
check() {
  "$dtsim" simulate "$@" --op-list "$out/ops.json" -q
  "$python" "$source/tools/op_benchmark.py" "$out/ops.json" --dry-run > "$out/dry.txt"
  head -1 "$out/dry.txt"
}
for config in "$source"/tools/examples/*.json; do
  case "$config" in
    *pipeline_2x2.json | *gpt3_175b_1024gpu.json) continue ;;  # a task graph; slow
  esac
  check "$config"
done
for config in llama2_70b_64h100 mixtral_8x7b_ep8_64h100; do
  check "$source/tools/examples/$config.json" --set training.precision=fp8
done
for method in onebit_adam onebit_lamb topk qsgd powersgd fp16 bf16; do
  check "$source/tools/examples/bert_large_64gpu_ethernet.json" --set "compression.method=$method"
done
