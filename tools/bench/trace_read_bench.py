#!/usr/bin/env python3
"""How fast dtsim reads a large Kineto trace, and with how much memory: a table to quote.

Usage: trace_read_bench.py DTSIM SOURCE.json[.gz] [SIZE_MB] [--dir DIR] [--runs N]

Builds a SIZE_MB (default 1000) trace from SOURCE with make_large_trace.py (times and ids
shifted, so it stays one self-consistent trace) and a gzip copy of it, in DIR (default a
temporary directory; kept there for later runs), then times `DTSIM replay --stats-only` on each
N times (default 3) and prints the best read rate (MB of JSON per second, as dtsim reports it),
the wall time and the peak resident memory (/usr/bin/time's maximum RSS).
"""
import argparse
import gzip
import os
import re
import shutil
import subprocess
import sys
import tempfile


def run(dtsim, trace):
    """(seconds, MB/s, peak RSS in MB) of one read."""
    completed = subprocess.run(
        ["/usr/bin/time", "-f", "%M %e", dtsim, "replay", "--stats-only", trace],
        check=True, capture_output=True, text=True)
    rate = re.search(r"read in\s+([0-9.]+) s \(([0-9]+) MB/s", completed.stdout)
    if rate is None:
        sys.exit(f"no read rate in dtsim's output:\n{completed.stdout}")
    rss_kb, _ = completed.stderr.strip().splitlines()[-1].split()
    return float(rate.group(1)), float(rate.group(2)), int(rss_kb) / 1024


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dtsim")
    parser.add_argument("source")
    parser.add_argument("size_mb", nargs="?", type=float, default=1000)
    parser.add_argument("--dir", default=None)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    directory = args.dir or tempfile.mkdtemp(prefix="dtsim_trace_bench_")
    os.makedirs(directory, exist_ok=True)
    plain = os.path.join(directory, f"trace_{int(args.size_mb)}mb.json")
    if not os.path.exists(plain):
        here = os.path.dirname(os.path.abspath(__file__))
        subprocess.run([sys.executable, os.path.join(here, "make_large_trace.py"), args.source,
                        plain, str(args.size_mb)], check=True)
    packed = plain + ".gz"
    if not os.path.exists(packed):
        with open(plain, "rb") as source, gzip.open(packed, "wb", compresslevel=6) as target:
            shutil.copyfileobj(source, target, 1 << 20)
    print(f"| trace | file MB | JSON MB | best read s | MB/s of JSON | peak RSS MB |")
    print(f"|---|---|---|---|---|---|")
    json_mb = os.path.getsize(plain) / 1e6
    for label, path in (("plain", plain), ("gzip", packed)):
        results = [run(args.dtsim, path) for _ in range(args.runs)]
        seconds, rate, _ = min(results)
        rss = max(result[2] for result in results)
        print(f"| {label} | {os.path.getsize(path) / 1e6:.1f} | {json_mb:.1f} | {seconds:.2f} "
              f"| {rate:.0f} | {rss:.0f} |")
    if args.dir is None:
        shutil.rmtree(directory)


if __name__ == "__main__":
    main()
