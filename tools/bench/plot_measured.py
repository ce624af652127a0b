#!/usr/bin/env python3
"""Predicted against measured NCCL bus bandwidth, one panel per curve (issue 25's yardstick).

Usage: /usr/bin/python3 tools/bench/plot_measured.py POINTS.csv OUT.png

POINTS.csv is what `build/dtsim_network_bench --busbw FILE --csv POINTS.csv` writes: every
measured point of ../shared/network/measured-collectives.json with the analytical model's
time and both bus bandwidths (nccl-tests' convention). Each panel shows one curve (system,
GPUs/nodes, collective): the measured bus bandwidth as dots, the model's as a line, against the
message size on a log2 axis, with the geometric mean of predicted / measured time in the title.
The figure is written atomically; OUT must not be the input.
"""
import csv
import math
import os
import sys
import tempfile


def read_points(path):
    curves = {}
    with open(path, newline="") as handle:
        reader = csv.DictReader(handle)
        needed = {"curve", "size_bytes", "measured_us", "predicted_us", "measured_busbw_gbps",
                  "predicted_busbw_gbps"}
        missing = needed - set(reader.fieldnames or [])
        if missing:
            sys.exit(f"{path}: not a dtsim_network_bench --csv file (missing {sorted(missing)})")
        for line, row in enumerate(reader, start=2):
            try:
                point = (int(row["size_bytes"]), float(row["measured_busbw_gbps"]),
                         float(row["predicted_busbw_gbps"]),
                         float(row["predicted_us"]) / float(row["measured_us"]))
            except (ValueError, ZeroDivisionError) as error:
                sys.exit(f"{path}:{line}: {error}")
            curves.setdefault(row["curve"], []).append(point)
    if not curves:
        sys.exit(f"{path}: no points")
    return curves


def main(argv):
    if len(argv) != 3:
        sys.exit(__doc__.strip().splitlines()[2])
    source, out = argv[1], argv[2]
    if os.path.exists(out) and os.path.samefile(source, out):
        sys.exit(f"{out}: refusing to write over the input")
    curves = read_points(source)
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    columns = 4
    rows = math.ceil(len(curves) / columns)
    figure, axes = plt.subplots(rows, columns, figsize=(4.2 * columns, 3.0 * rows),
                                squeeze=False)
    for axis in axes.flat[len(curves):]:
        axis.set_visible(False)
    for axis, (name, points) in zip(axes.flat, sorted(curves.items())):
        points.sort()
        sizes = [p[0] for p in points]
        geomean = math.exp(sum(math.log(p[3]) for p in points) / len(points))
        within = sum(abs(p[3] - 1) <= 0.1 for p in points)
        axis.plot(sizes, [p[1] for p in points], "o", markersize=3, label="measured")
        axis.plot(sizes, [p[2] for p in points], "-", linewidth=1.2, label="dtsim")
        axis.set_xscale("log", base=2)
        axis.set_ylim(bottom=0)
        axis.set_title(f"{name}\ntime ratio {geomean:.3f}, {within}/{len(points)} within ±10%",
                       fontsize=8)
        axis.tick_params(labelsize=7)
        axis.set_xlabel("bytes (nccl-tests size)", fontsize=7)
        axis.set_ylabel("bus bandwidth GB/s", fontsize=7)
        axis.grid(alpha=0.3)
    axes.flat[0].legend(fontsize=7, loc="upper left")
    figure.tight_layout()
    directory = os.path.dirname(os.path.abspath(out))
    handle, temp = tempfile.mkstemp(prefix=".plot-", suffix=".png", dir=directory)
    os.close(handle)
    try:
        figure.savefig(temp, dpi=110)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(temp, 0o666 & ~umask)  # mkstemp's file is private; the figure is not
        os.replace(temp, out)
    finally:
        if os.path.exists(temp):
            os.remove(temp)
    print(f"wrote {out}: {len(curves)} curves")


if __name__ == "__main__":
    main(sys.argv)
