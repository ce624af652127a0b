#!/usr/bin/env python3
"""How fast GEMMs run when the GPU is kept busy, against the short bursts op tables are timed in.

Usage (on a machine with a GPU and PyTorch): python3 tools/gpu_checks/sustained_gemm.py -o FILE
  [--seconds S] [--size N]

Three phases of S seconds each, one after another on a GPU that starts idle:
  bf16   N³ BF16 GEMMs back to back (torch.matmul);
  fp8    N³ FP8 GEMMs back to back (torch._scaled_mm, E4M3, split accumulator);
  mixed  a BF16 N³ GEMM, then a memory-bound x + y over 2^28 BF16 elements, repeated: the GEMM
         share of a training step's kernels, so the chip's power draw is nearer a step's.
Each GEMM is timed with CUDA events; every 0.25 s the SM clock and power draw are read through
NVML. The summary gives per phase the GEMM rate in its first 0.5 s and in its last half, and the
clock and power then: a ratio under 1 is what a sustained run loses to the power limit.
"""
import argparse
import json
import os
import statistics
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import op_benchmark  # noqa: E402


def sampler(samples, stop):
    import pynvml
    pynvml.nvmlInit()
    handle = pynvml.nvmlDeviceGetHandleByIndex(0)
    while not stop.is_set():
        samples.append({"t": time.monotonic(),
                        "sm_mhz": pynvml.nvmlDeviceGetClockInfo(handle, pynvml.NVML_CLOCK_SM),
                        "power_w": pynvml.nvmlDeviceGetPowerUsage(handle) / 1000})
        time.sleep(0.25)


def run_phase(torch, name, seconds, size):
    a = torch.randn(size, size, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(size, size, device="cuda", dtype=torch.bfloat16)
    if name == "fp8":
        a8, b8 = a.to(torch.float8_e4m3fn), b.to(torch.float8_e4m3fn).t()
        one = torch.ones((), device="cuda", dtype=torch.float32)
        gemm = lambda: torch._scaled_mm(a8, b8, one, one, out_dtype=torch.bfloat16)  # noqa: E731
    else:
        gemm = lambda: a @ b  # noqa: E731
    x = torch.randn(2 ** 28, device="cuda", dtype=torch.bfloat16)
    y = torch.randn_like(x)
    gemm()
    torch.cuda.synchronize()
    records = []  # (host time at launch, start event, end event)
    start = time.monotonic()
    while time.monotonic() - start < seconds:
        for _ in range(8):
            begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            begin.record()
            gemm()
            end.record()
            records.append((time.monotonic(), begin, end))
            if name == "mixed":
                x.add_(y)
        records[-1][2].synchronize()  # keep the host within a few kernels of the GPU
    torch.cuda.synchronize()
    return [(t - start, begin.elapsed_time(end)) for t, begin, end in records]


def summarize(name, timings, samples, t0, size):
    flops = 2 * size ** 3
    duration = timings[-1][0]
    early = [ms for t, ms in timings if t < 0.5]
    late = [ms for t, ms in timings if t >= duration / 2]
    late_samples = [s for s in samples if s["t"] - t0 >= duration / 2 and s["t"] - t0 <= duration]
    row = {"phase": name, "gemms": len(timings),
           "early_tflops": flops / statistics.median(early) / 1e9,
           "late_tflops": flops / statistics.median(late) / 1e9,
           "late_sm_mhz": statistics.median([s["sm_mhz"] for s in late_samples] or [0]),
           "late_power_w": statistics.median([s["power_w"] for s in late_samples] or [0])}
    row["late_over_early"] = row["late_tflops"] / row["early_tflops"]
    return row


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("-o", "--output", required=True)
    parser.add_argument("--seconds", type=float, default=15)
    parser.add_argument("--size", type=int, default=8192)
    args = parser.parse_args()
    import torch
    samples, stop = [], threading.Event()
    thread = threading.Thread(target=sampler, args=(samples, stop), daemon=True)
    thread.start()
    phases, rows = {}, []
    for name in ("bf16", "fp8", "mixed"):
        time.sleep(3)  # let the chip cool a little between phases
        t0 = time.monotonic()
        timings = run_phase(torch, name, args.seconds, args.size)
        phases[name] = {"t0": t0, "gemm_ms": timings}
        rows.append(summarize(name, timings, samples, t0, args.size))
        print(json.dumps(rows[-1]), flush=True)
    stop.set()
    thread.join()
    document = {"format": "dtsim.sustained_gemm", "version": "1.0",
                "device": torch.cuda.get_device_name(), "torch": torch.__version__,
                "size": args.size, "seconds": args.seconds, "summary": rows,
                "phases": {name: {"t0": p["t0"], "gemm_ms": [[round(t, 4), round(ms, 4)]
                                                             for t, ms in p["gemm_ms"]]}
                           for name, p in phases.items()},
                "nvml": samples}
    op_benchmark.write_json(args.output, document, indent=None)
    print(f"{'phase':<6} {'early TFLOP/s':>14} {'late TFLOP/s':>13} {'late/early':>10} "
          f"{'SM MHz':>7} {'W':>5}")
    for r in rows:
        print(f"{r['phase']:<6} {r['early_tflops']:14.0f} {r['late_tflops']:13.0f} "
              f"{r['late_over_early']:10.3f} {r['late_sm_mhz']:7.0f} {r['late_power_w']:5.0f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
