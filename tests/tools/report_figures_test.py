#!/usr/bin/python3
"""The report's figures checked on their data and their drawn layout, not by eye.

Usage: report_figures_test.py DTSIM_BINARY SOURCE_DIR

Two sweeps of BERT-Large over the same NIC bandwidths (one plain, one with 1-bit Adam), a
data-parallel scaling sweep and the timeline of GPT-3 1.3B's two-stage pipeline,
simulated by the binary under test, go through tools/report's
figure functions with `save` intercepted, so every figure is inspected as matplotlib drew it:

- throughput, breakdown and memory: one bar row per run, each labelled by the run's own label,
  no two alike (two sweeps over one key once became half as many bars);
- bandwidth: one line per plan, each over all three bandwidths, log x with plain Gb/s ticks,
  y from zero;
- scaling: log-log axes with plain tick labels;
- the pipeline Gantt chart: drawn;
- every figure: no two pieces of text overlap — tick labels, axis labels, titles, legend
  entries, annotations — and no legend lies over an axes' data area (what a screenshot is
  looked at for), measured on the renderer's extents.
"""

import importlib.util
import itertools
import json
import os
import subprocess
import sys
import tempfile

import matplotlib

matplotlib.use("Agg")


def load_report(source):
    spec = importlib.util.spec_from_file_location("report", os.path.join(source, "tools", "report", "report.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def simulate(binary, source, work):
    config = os.path.join(source, "tools", "examples", "bert_large_64gpu_ethernet.json")
    bandwidths = "cluster.inter_node.nic_bandwidth=10 Gbps,40 Gbps,100 Gbps"
    paths = []
    for name, extra in (("plain", []), ("onebit", ["--set", 'compression={"method": "onebit_adam", '
                                                   '"steps": 152000, "warmup_steps": 23000}'])):
        out = os.path.join(work, name)
        subprocess.run([binary, "sweep", config, "--vary", bandwidths, *extra, "-o", out, "--quiet"],
                       check=True)
        paths.append(out + ".json")
    out = os.path.join(work, "scaling")
    subprocess.run([binary, "sweep", config, "--set", "cluster.nodes=null", "--vary",
                    "parallelism.data=8,16,32,64", "-o", out, "--quiet"], check=True)
    paths.append(out + ".json")
    # A pipeline's timeline for the Gantt chart.
    timeline = os.path.join(work, "pipeline.timeline.json")
    subprocess.run([binary, "simulate", os.path.join(source, "tools", "examples", "gpt3_1.3b_16gpu.json"),
                    "--timeline", timeline, "-o", os.path.join(work, "pipeline.json"), "--quiet"],
                   check=True)
    paths.append(timeline)
    return paths


def texts(fig):
    """Every visible, non-empty text of the figure with its extent on the canvas."""
    renderer = fig.canvas.get_renderer()
    found = []
    for artist in fig.findobj(matplotlib.text.Text):
        if artist.get_visible() and artist.get_text().strip() and artist.get_figure() is fig:
            extent = artist.get_window_extent(renderer)
            if extent.width > 0 and extent.height > 0:
                found.append((artist.get_text(), extent))
    return found


def overlaps(a, b, slack=0.5):
    return (a.x0 + slack < b.x1 and b.x0 + slack < a.x1 and
            a.y0 + slack < b.y1 and b.y0 + slack < a.y1)


def check_layout(name, fig, failures):
    fig.canvas.draw()
    found = texts(fig)
    for (text_a, a), (text_b, b) in itertools.combinations(found, 2):
        if overlaps(a, b):
            failures.append(f"{name}: text {text_a!r} overlaps {text_b!r}")
    renderer = fig.canvas.get_renderer()
    legends = [legend for ax in fig.axes for legend in [ax.get_legend()] if legend] + list(fig.legends)
    for legend in legends:
        box = legend.get_window_extent(renderer)
        for ax in fig.axes:
            if overlaps(box, ax.get_window_extent(renderer)):
                failures.append(f"{name}: a legend lies over the data area of {ax.get_title()!r}")


def main(binary, source):
    report = load_report(source)
    drawn = {}

    def keep(fig, out, name, rect=None):
        fig.tight_layout(rect=rect)
        drawn[name] = fig
        return name

    report.save = keep
    failures = []
    with tempfile.TemporaryDirectory(prefix="dtsim_report_figures_") as work:
        plain, onebit, scaling, timeline = simulate(binary, source, work)
        runs, _ = report.load([plain, onebit])
        assert len(runs) == 6, len(runs)
        labels = [r["label"] for r in runs]
        if len(set(labels)) != 6:
            failures.append(f"run labels not distinct: {labels}")
        report.figure_throughput(runs, work)
        report.figure_breakdown(runs, work)
        report.figure_memory(runs, work)
        name, reason = report.figure_bandwidth(runs, work)
        assert name, reason
        for figure in ("throughput.png", "breakdown.png", "memory.png"):
            ax = drawn[figure].axes[0]
            ticks = [t.get_text() for t in ax.get_yticklabels()]
            if sorted(ticks) != sorted(labels):
                failures.append(f"{figure}: bar rows {ticks} are not the runs {labels}")

        ax = drawn["bandwidth.png"].axes[0]
        lines = [line for line in ax.get_lines() if len(line.get_xdata()) > 1]
        if len(lines) != 2:
            failures.append(f"bandwidth: {len(lines)} lines for 2 plans")
        for line in lines:
            if sorted(line.get_xdata()) != [10.0, 40.0, 100.0]:
                failures.append(f"bandwidth: line {line.get_label()!r} over {list(line.get_xdata())}")
        if ax.get_xscale() != "log" or ax.get_ylim()[0] != 0:
            failures.append(f"bandwidth: x {ax.get_xscale()}, y from {ax.get_ylim()[0]}")
        if [t.get_text() for t in ax.get_xticklabels()] != ["10", "40", "100"]:
            failures.append(f"bandwidth: x ticks {[t.get_text() for t in ax.get_xticklabels()]}")

        scaled, _ = report.load([scaling])
        name, reason = report.figure_scaling(scaled, work)
        assert name, reason
        ax = drawn["scaling.png"].axes[0]
        if (ax.get_xscale(), ax.get_yscale()) != ("log", "log"):
            failures.append(f"scaling: axes {ax.get_xscale()}/{ax.get_yscale()}, not log-log")
        if [t.get_text() for t in ax.get_xticklabels()] != ["8", "16", "32", "64"]:
            failures.append(f"scaling: x ticks {[t.get_text() for t in ax.get_xticklabels()]}")

        name, reason = report.figure_gantt(timeline, work)
        assert name, reason

        # A DiLoCo job against the same plan trained synchronously: the replicas are the input
        # that differs, and the DiLoCo run's iteration is its run average (docs/diloco.md).
        example = os.path.join(source, "tools", "examples", "llama3_70b_diloco_4sites_1024h100.json")
        diloco, synchronous = os.path.join(work, "diloco.json"), os.path.join(work, "sync.json")
        subprocess.run([binary, "simulate", example, "-o", diloco, "--quiet"], check=True)
        subprocess.run([binary, "simulate", example, "--set", "diloco=null", "-o", synchronous,
                        "--quiet"], check=True)
        paired, _ = report.load([diloco, synchronous])
        if "diloco.replicas" not in report.differing_inputs(paired):
            failures.append(f"diloco: differing inputs {report.differing_inputs(paired)}")
        with open(diloco) as f:
            average = json.load(f)["diloco"]["average_step_ns"] / 1e9
        if abs(paired[0]["iteration_s"] - average) > 1e-9:
            failures.append(f"diloco: iteration {paired[0]['iteration_s']} s, not the average {average} s")

        # With a time to train on every run, the best is the one that trains soonest: here the
        # larger batch runs 20% more samples a second but needs 1.5× the tokens, 45 days
        # against 30 (docs/time_to_train.md).
        parts = {key: 1.0 for key, _, _ in report.PARTS}
        timed = [dict(label=label, samples_per_second=sps, iteration_s=1.0, mfu=0.4,
                      breakdown_ms=parts, train_days=days)
                 for label, sps, days in (("batch 1k", 10.0, 30.0), ("batch 2k", 12.0, 45.0))]
        said = report.conclusion(timed)
        if "Best: batch 1k" not in said or "take 45.0" not in said or "it is the first run" not in said:
            failures.append(f"conclusion with times to train: {said}")
        if "Best: batch 2k" not in report.conclusion([dict(r, train_days=None) for r in timed]):
            failures.append("conclusion without times to train is not the most samples a second")
        # The first run slower to train: the speed-up is in days (45 / 30 = 1.50× sooner).
        if "1.50× sooner than the first run" not in report.conclusion(timed[::-1]):
            failures.append(f"conclusion's speed-up in days: {report.conclusion(timed[::-1])}")

        # A search over two global batches (one GPU, one plan each): each ranked plan's label
        # names its batch, its time to train comes from the search file, and the conclusion
        # picks by it (10^9 tokens: 7,630 iterations at 64 sequences of 2,048, 30,518 at 16).
        batches = os.path.join(work, "batches")
        subprocess.run([binary, "search", os.path.join(source, "tools", "examples", "gpt3_1.3b_16gpu.json"),
                        "--set", "cluster.gpus_per_node=1", "--gpus", "1", "--set", "search.micro_batches=[2]",
                        "--set", 'search.recompute=["none"]', "--set", "search.global_batches=[16,64]",
                        "--set", "time_to_train.tokens=1e9", "--rerank", "0", "-o", batches, "--quiet"],
                       check=True)
        searched, _ = report.load([batches + ".json"])
        labels = [r["label"] for r in searched]
        if labels != ["#1 DP 1 × TP 1 × PP 1 · batch 64 · mb 2 · ZeRO 0 · recompute none",
                      "#2 DP 1 × TP 1 × PP 1 · batch 16 · mb 2 · ZeRO 0 · recompute none"]:
            failures.append(f"search over batches: labels {labels}")
        if [r["inputs"]["global_batch"] for r in searched] != [64, 16]:
            failures.append(f"search over batches: inputs {[r['inputs'] for r in searched]}")
        if any(r["train_days"] is None or r["train_days"] <= 0 for r in searched) or \
                searched[0]["train_days"] > searched[1]["train_days"]:
            failures.append(f"search over batches: days {[r['train_days'] for r in searched]}")
        if "Best: #1 DP 1 × TP 1 × PP 1 · batch 64" not in report.conclusion(searched):
            failures.append(f"search over batches: {report.conclusion(searched)}")

        for figure, fig in sorted(drawn.items()):
            check_layout(figure, fig, failures)
    for failure in failures:
        print(failure)
    print(f"{len(drawn)} figures checked, {len(failures)} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
