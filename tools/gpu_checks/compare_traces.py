#!/usr/bin/env python3
"""Compares the steps of two Kineto-format traces of the same program: kernels and GPU time.

Usage: compare_traces.py OURS.json[.gz] THEIRS.json[.gz] [--json OUT]

Meant for `dtsim profile` against torch.profiler on tools/gpu_checks/gpt2_step.py. Each trace's
steps are its host-side "ProfilerStep#N" ranges; a GPU op (kernel, copy, set) belongs to the
step whose range holds the CUDA runtime or driver call that launched it (matched by
`correlation`), so a step counts exactly the work its host code issued, wherever that ran on the
GPU. Steps with the same number in both traces are compared: kernel count, copies, sets and the
sum of kernel durations (GPU time), per step and in total, with the relative difference; and
for the first common step, the kernel names whose counts differ.
"""
import argparse
import bisect
import collections
import gzip
import json
import re
import statistics
import sys

STEP = re.compile(r"^ProfilerStep#(\d+)$")
LAUNCH_CATS = {"cuda_runtime", "cuda_driver", "Runtime", "Driver"}
GPU_CATS = {"kernel": "kernels", "Kernel": "kernels", "gpu_memcpy": "memcpys", "Memcpy": "memcpys",
            "gpu_memset": "memsets", "Memset": "memsets"}


def load(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt") as f:
        return json.load(f)


def steps_of(path):
    """{step number: {"kernels", "memcpys", "memsets", "kernel_us", "names": Counter}}."""
    events = load(path)["traceEvents"]
    ranges = []
    launches = {}
    ops = []
    for e in events:
        if e.get("ph") != "X":
            continue
        cat = e.get("cat", "")
        args = e.get("args") or {}
        if cat in ("user_annotation", "cpu_op") and STEP.match(e.get("name", "")):
            ranges.append((float(e["ts"]), float(e["ts"]) + float(e["dur"]),
                           int(STEP.match(e["name"]).group(1))))
        elif cat in LAUNCH_CATS and "correlation" in args:
            launches[args["correlation"]] = float(e["ts"])
        elif cat in GPU_CATS and "correlation" in args:
            ops.append((GPU_CATS[cat], args["correlation"], float(e["dur"]), e.get("name", "")))
    ranges.sort()
    starts = [r[0] for r in ranges]
    steps = {n: {"kernels": 0, "memcpys": 0, "memsets": 0, "kernel_us": 0.0,
                 "names": collections.Counter()} for _, _, n in ranges}
    unlaunched = 0
    for kind, correlation, duration, name in ops:
        launch = launches.get(correlation)
        if launch is None:
            unlaunched += 1
            continue
        i = bisect.bisect_right(starts, launch) - 1
        if i < 0 or launch > ranges[i][1]:
            continue
        step = steps[ranges[i][2]]
        step[kind] += 1
        if kind == "kernels":
            step["kernel_us"] += duration
            step["names"][name] += 1
    return steps, unlaunched


def relative(a, b):
    return (a - b) / b * 100 if b else float("nan")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("ours")
    parser.add_argument("theirs")
    parser.add_argument("--json", help="write the comparison as JSON")
    args = parser.parse_args()
    ours, ours_unlaunched = steps_of(args.ours)
    theirs, theirs_unlaunched = steps_of(args.theirs)
    common = sorted(set(ours) & set(theirs))
    if not common:
        sys.exit(f"no common ProfilerStep numbers: ours {sorted(ours)}, theirs {sorted(theirs)}")
    print(f"{'step':>5} {'kernels':>15} {'memcpys':>9} {'memsets':>9} {'kernel time (us)':>24} {'diff':>7}")
    rows = []
    for n in common:
        a, b = ours[n], theirs[n]
        rows.append({"step": n, "ours": {k: a[k] for k in ("kernels", "memcpys", "memsets", "kernel_us")},
                     "theirs": {k: b[k] for k in ("kernels", "memcpys", "memsets", "kernel_us")}})
        print(f"{n:>5} {a['kernels']:>7}/{b['kernels']:<7} {a['memcpys']:>4}/{b['memcpys']:<4} "
              f"{a['memsets']:>4}/{b['memsets']:<4} {a['kernel_us']:>11.1f}/{b['kernel_us']:<12.1f} "
              f"{relative(a['kernel_us'], b['kernel_us']):>+6.2f}%")
    total = {side: {k: sum(s[k] for n, s in steps.items() if n in common)
                    for k in ("kernels", "memcpys", "memsets", "kernel_us")}
             for side, steps in (("ours", ours), ("theirs", theirs))}
    median = {side: statistics.median(s["kernel_us"] for n, s in steps.items() if n in common)
              for side, steps in (("ours", ours), ("theirs", theirs))}
    kernels_diff = relative(total["ours"]["kernels"], total["theirs"]["kernels"])
    time_diff = relative(total["ours"]["kernel_us"], total["theirs"]["kernel_us"])
    median_diff = relative(median["ours"], median["theirs"])
    print(f"total over {len(common)} steps: kernels {total['ours']['kernels']} vs "
          f"{total['theirs']['kernels']} ({kernels_diff:+.3f}%), GPU time "
          f"{total['ours']['kernel_us'] / 1e3:.3f} vs {total['theirs']['kernel_us'] / 1e3:.3f} ms "
          f"({time_diff:+.3f}%); median step GPU time {median['ours'] / 1e3:.3f} vs "
          f"{median['theirs'] / 1e3:.3f} ms ({median_diff:+.3f}%)")
    print(f"GPU ops without a launching call: ours {ours_unlaunched}, theirs {theirs_unlaunched}")
    first = common[0]
    differing = {name: (ours[first]["names"][name], theirs[first]["names"][name])
                 for name in set(ours[first]["names"]) | set(theirs[first]["names"])
                 if ours[first]["names"][name] != theirs[first]["names"][name]}
    for name, (a, b) in sorted(differing.items(), key=lambda kv: -abs(kv[1][0] - kv[1][1]))[:10]:
        print(f"  step {first}: {a} vs {b} x {name[:120]}")
    if args.json:
        with open(args.json, "w") as out:
            json.dump({"steps": rows, "total": total, "median_kernel_us": median,
                       "kernels_diff_percent": kernels_diff, "kernel_time_diff_percent": time_diff,
                       "median_kernel_time_diff_percent": median_diff,
                       "unlaunched": {"ours": ours_unlaunched, "theirs": theirs_unlaunched},
                       "differing_kernel_names": {k: list(v) for k, v in differing.items()}},
                      out, indent=1)


if __name__ == "__main__":
    main()
