#!/usr/bin/env python3
"""Each op of an op-cost table timed twice on this GPU: in a short burst (how op tables are
timed) and inside a long run of all of them back to back (how a training step keeps the GPU).

Usage (on a machine with a GPU and PyTorch, from the repository's root):
  python3 tools/gpu_checks/sustained_ops.py TABLE.json... -o FILE [--seconds S]
      [--ops gemm,elementwise] [--max-gib G]

1. burst: per signature, 3 untimed runs, then 10 timed back to back, then 50 ms idle (the GPU
   cools between signatures, as in tools/op_benchmark.py);
2. sustained: every signature once per round, round after round for S seconds; the times of
   the rounds in the second half are kept.
Each run is timed with CUDA events (kernel time plus the launch gaps between its kernels, the
same in both phases). Prints, per op family and dtype, the median over signatures of sustained
over burst time, with the quartiles, the SM clock and power draw (NVML) of both phases; writes
every signature's two medians to FILE.
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
        samples.append((time.monotonic(), pynvml.nvmlDeviceGetClockInfo(handle, 1),
                        pynvml.nvmlDeviceGetPowerUsage(handle) / 1000))
        time.sleep(0.1)


def input_bytes(op):
    d = op["dims"]
    if op["op"] == "gemm":
        return 2 * d.get("batch", 1) * (d["m"] * d["k"] + d["k"] * d["n"] + d["m"] * d["n"])
    return 8 * d.get("elements", 0)


def timed(torch, runner, count):
    pairs = []
    for _ in range(count):
        begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        begin.record()
        runner.run()
        end.record()
        pairs.append((begin, end))
    return pairs


def quartiles(values):
    q = statistics.quantiles(values, n=4) if len(values) > 1 else values * 3
    return q[0], statistics.median(values), q[2]


def phase_power(samples, start, end):
    inside = [(mhz, watts) for t, mhz, watts in samples if start <= t <= end]
    if not inside:
        return 0, 0
    return statistics.median(m for m, _ in inside), statistics.median(w for _, w in inside)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("tables", nargs="+")
    parser.add_argument("-o", "--output", required=True)
    parser.add_argument("--seconds", type=float, default=20)
    parser.add_argument("--ops", default="gemm,elementwise,norm,flash_attention")
    parser.add_argument("--max-gib", type=float, default=80,
                        help="leave out signatures once their inputs pass this much memory")
    args = parser.parse_args()
    import torch
    families = set(args.ops.split(","))
    ops, seen, budget = [], set(), args.max_gib * 2 ** 30
    for path in args.tables:
        for op in json.load(open(path))["ops"]:
            key = (op["op"], op["dtype"], tuple(sorted(op["dims"].items())))
            if op["op"] in families and key not in seen and input_bytes(op) <= budget:
                seen.add(key)
                budget -= input_bytes(op)
                ops.append(op)
    runners = []
    for op in ops:
        try:
            runners.append((op, op_benchmark.runner_class(op)(torch, op)))
        except Exception as error:
            print(f"{op_benchmark.describe(op)}: {error}; left out", file=sys.stderr)
    samples, stop = [], threading.Event()
    threading.Thread(target=sampler, args=(samples, stop), daemon=True).start()

    burst_start = time.monotonic()
    burst = []
    for op, runner in runners:
        for _ in range(3):
            runner.run()
        pairs = timed(torch, runner, 10)
        torch.cuda.synchronize()
        burst.append(statistics.median(b.elapsed_time(e) for b, e in pairs))
        time.sleep(0.05)
    burst_end = time.monotonic()

    sustained = [[] for _ in runners]
    start = time.monotonic()
    rounds = 0
    while time.monotonic() - start < args.seconds:
        pairs = [timed(torch, runner, 1)[0] for _, runner in runners]
        torch.cuda.synchronize()
        rounds += 1
        if time.monotonic() - start >= args.seconds / 2:
            for times, (b, e) in zip(sustained, pairs):
                times.append(b.elapsed_time(e))
    end = time.monotonic()
    stop.set()

    rows = []
    for (op, _), cold, hot in zip(runners, burst, sustained):
        rows.append({"op": op["op"], "dtype": op["dtype"], "dims": op["dims"],
                     "burst_ms": cold, "sustained_ms": statistics.median(hot),
                     "ratio": statistics.median(hot) / cold})
    burst_clock = phase_power(samples, burst_start, burst_end)
    hot_clock = phase_power(samples, start + args.seconds / 2, end)
    groups = {}
    for row in rows:
        groups.setdefault((row["op"], row["dtype"]), []).append(row["ratio"])
    summary = []
    for (name, dtype), ratios in sorted(groups.items()):
        q1, median, q3 = quartiles(ratios)
        summary.append({"op": name, "dtype": dtype, "signatures": len(ratios),
                        "ratio_q1": q1, "ratio_median": median, "ratio_q3": q3})
    document = {"format": "dtsim.sustained_ops", "version": "1.0",
                "device": torch.cuda.get_device_name(), "torch": torch.__version__,
                "tables": args.tables, "seconds": args.seconds, "rounds": rounds,
                "burst_sm_mhz_power_w": burst_clock, "sustained_sm_mhz_power_w": hot_clock,
                "summary": summary, "rows": rows}
    op_benchmark.write_json(args.output, document)
    print(f"{len(rows)} signatures, {rounds} rounds of {(end - start) / rounds * 1e3:.1f} ms; "
          f"burst: {burst_clock[0]:.0f} MHz {burst_clock[1]:.0f} W; "
          f"sustained: {hot_clock[0]:.0f} MHz {hot_clock[1]:.0f} W")
    print(f"{'op':<18} {'dtype':<5} {'n':>4} {'sustained/burst q1':>19} {'median':>7} {'q3':>6}")
    for s in summary:
        print(f"{s['op']:<18} {s['dtype']:<5} {s['signatures']:4d} {s['ratio_q1']:19.3f} "
              f"{s['ratio_median']:7.3f} {s['ratio_q3']:6.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
