#!/usr/bin/env python3
"""Predicted against measured peak memory for the runs what_if_and_memory.sh recorded.

Usage: memory_table.py DTSIM MEASURED_JSON [--markdown]

For each run of MEASURED_JSON (tests/data/measured/h200_gpt2_memory.json), simulates the same
model, batch, sequence and recompute policy on one h200-sxm-141gb with flash attention, no
dropout and "framework": "pytorch" (gpt2_step.py trains under bf16 autocast over fp32 weights),
and prints dtsim's per-GPU memory less the CUDA context (its tensors) against the measured peak
allocated and reserved bytes and the device memory in use, with the error against the
allocated peak; and dtsim's iteration time (the roofline cost model) against the median of
the measured steps.
Every policy has a dtsim counterpart (a run with none would be listed without a prediction).
Exits 1 if a simulation fails.
"""
import json
import os
import subprocess
import sys
import tempfile

GIB = 2**30
# gpt2_step.py's recompute policies and dtsim's training.recompute and recompute_every (None: no
# counterpart). every-2nd checkpoints blocks 2, 4, … (torchtitan's per-layer frequency 2).
POLICIES = {"none": ("none", 1), "full": ("full", 1), "every-2nd": ("full", 2),
            "op": ("selective_op", 1)}


def predict(dtsim, run, work):
    recompute, every = POLICIES[run["recompute"]]
    config = {
        "model": run["model"],
        "training": {"global_batch": run["batch"], "micro_batch": run["batch"],
                     "seq_len": run["seq"], "precision": "bf16", "framework": "pytorch",
                     "recompute": recompute,
                     "recompute_every": every, "flash_attention": True, "dropout": False},
        "cluster": {"preset": "dgx-a100", "gpu": "h200-sxm-141gb", "nodes": 1,
                    "gpus_per_node": 1},
        "parallelism": {"data": 1},
    }
    config_path = os.path.join(work, "config.json")
    result_path = os.path.join(work, "result.json")
    with open(config_path, "w") as out:
        json.dump(config, out)
    done = subprocess.run([dtsim, "simulate", config_path, "-o", result_path],
                          capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"dtsim simulate failed for {run['model']}: {done.stderr.strip()}")
    with open(result_path) as result:
        result = json.load(result)
        memory = result["stages"][0]["memory"]
        # The allocator's tensors: the total less the CUDA context (runtime_bytes), NCCL's
        # buffers (nccl_bytes; none on one GPU) and the allocator's reserve where modelled
        # (allocator_reserve_bytes), which are not allocated tensors.
        outside = (memory.get("runtime_bytes", 0) + memory.get("nccl_bytes", 0) +
                   memory.get("allocator_reserve_bytes", 0))
        return memory["total_bytes"] - outside, result["iteration_time_ns"] / 1e6


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    dtsim, measured_path = sys.argv[1], sys.argv[2]
    with open(measured_path) as measured:
        runs = json.load(measured)["runs"]
    header = ("run", "measured allocated", "reserved", "device in use", "dtsim", "error",
              "step (median)", "dtsim step", "error")
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    errors = []
    step_errors = []
    with tempfile.TemporaryDirectory() as work:
        for run in runs:
            name = f"{run['model']} {run['batch']}×{run['seq']}, recompute {run['recompute']}"
            allocated = run["peak_allocated_bytes"]
            cells = [name, f"{allocated / GIB:.2f} GiB", f"{run['peak_reserved_bytes'] / GIB:.2f} GiB",
                     f"{run['device_used_bytes_at_end'] / GIB:.2f} GiB"]
            if POLICIES[run["recompute"]] is None:
                cells += ["no such policy", "—", f"{run['median_ms']:.1f} ms", "—", "—"]
            else:
                predicted, step = predict(dtsim, run, work)
                error = (predicted - allocated) / allocated
                errors.append(abs(error))
                step_error = step / run["median_ms"] - 1
                step_errors.append(step_error)
                cells += [f"{predicted / GIB:.2f} GiB", f"{100 * error:+.1f}%",
                          f"{run['median_ms']:.1f} ms", f"{step:.1f} ms", f"{100 * step_error:+.1f}%"]
            print("| " + " | ".join(cells) + " |")
    print(f"\nmean absolute error against the allocated peak over {len(errors)} runs: "
          f"{100 * sum(errors) / len(errors):.1f}%; the step time's mean error over "
          f"{len(step_errors)} runs: {100 * sum(step_errors) / len(step_errors):+.1f}% (the roofline; "
          "negative: faster than measured)")


if __name__ == "__main__":
    main()
