#!/usr/bin/env python3
"""dtsim_network_bench --busbw MEASURED --csv and tools/bench/plot_measured.py, end to end.

Usage: measured_plot_test.py BENCH MEASURED.json SOURCE_DIR

The CSV has one row per measured point of the shared file with both bus bandwidths (nccl-tests'
convention: all-reduce S/t · 2(n−1)/n), the plot is a PNG, and the plot refuses to write over
its input.
"""
import csv
import os
import subprocess
import sys
import tempfile


def main(bench, measured, source):
    with tempfile.TemporaryDirectory() as work:
        table = os.path.join(work, "points.csv")
        run = subprocess.run([bench, "--busbw", measured, "--csv", table], capture_output=True,
                             text=True, check=False)
        assert run.returncode == 0, run.stderr
        with open(table, newline="") as handle:
            rows = list(csv.DictReader(handle))
        assert len(rows) == 272, len(rows)
        for row in rows:
            gpus = int(row["gpus"])
            size = int(row["size_bytes"])
            factor = {"all_reduce": 2 * (gpus - 1) / gpus, "send_recv": 1.0}.get(
                row["collective"], (gpus - 1) / gpus)
            for time, busbw in (("measured_us", "measured_busbw_gbps"),
                                ("predicted_us", "predicted_busbw_gbps")):
                expected = size * factor / (float(row[time]) * 1e3)
                assert abs(float(row[busbw]) - expected) <= 1e-3 * expected + 2e-3, (row, busbw)
        plot = os.path.join(source, "tools", "bench", "plot_measured.py")
        figure = os.path.join(work, "points.png")
        run = subprocess.run([sys.executable, plot, table, figure], capture_output=True, text=True,
                             check=False)
        assert run.returncode == 0, run.stderr
        with open(figure, "rb") as handle:
            assert handle.read(8) == b"\x89PNG\r\n\x1a\n"
        before = open(table).read()
        run = subprocess.run([sys.executable, plot, table, table], capture_output=True, text=True,
                             check=False)
        assert run.returncode != 0 and "refusing" in run.stderr, run.stderr
        assert open(table).read() == before
    print("ok")


if __name__ == "__main__":
    main(*sys.argv[1:4])
