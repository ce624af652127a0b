#!/usr/bin/python3
"""Draws dtsim's comparison report: OUT/index.html and the figures it shows (docs/report.md).

Run by `dtsim report` (which checks the inputs first) with Debian's /usr/bin/python3 and
python3-matplotlib. Inputs: simulate results (dtsim.simulate_result), sweeps (dtsim.sweep),
searches (dtsim.search), replays (dtsim.replay_result) and optionally one timeline (Chrome
trace) for the pipeline Gantt chart.
"""

import argparse
import gzip
import html
import json
import math
import os
import re
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import matplotlib.ticker  # noqa: E402

PARTS = [  # breakdown key in a simulate result's stage time, label, colour
    ("compute_ns", "compute", "#4c72b0"),
    ("recompute_ns", "recompute", "#8172b2"),
    ("tp_exposed_ns", "exposed TP", "#dd8452"),
    ("ep_exposed_ns", "exposed EP", "#937860"),
    ("cp_exposed_ns", "exposed CP", "#64b5cd"),  # since simulate_result 1.2; 0 when absent
    ("pp_wait_ns", "PP wait", "#da8bc3"),
    ("dp_exposed_ns", "exposed DP", "#c44e52"),
    ("optimizer_ns", "optimizer", "#55a868"),
    ("idle_ns", "idle / bubble", "#bbbbbb"),
]
MEMORY = [
    ("parameters_bytes", "parameters", "#4c72b0"),
    ("gradients_bytes", "gradients", "#dd8452"),
    ("optimizer_state_bytes", "optimizer state", "#55a868"),
    ("activations_bytes", "activations", "#c44e52"),
    ("temporary_bytes", "working set at the peak", "#8172b2"),
]
PATH_PARTS = [  # a replayed step's critical path (docs/replay.md, "Where the time goes")
    ("gpu", "GPU", "#4c72b0"),
    ("communication", "communication", "#c44e52"),
    ("host", "host", "#55a868"),
    ("cuda_api", "CUDA API", "#8172b2"),
    ("sync_wait", "sync wait", "#dd8452"),
    ("fixed_gap", "fixed gap", "#bbbbbb"),
    ("peer_wait", "peer wait", "#da8bc3"),
]
# Parts a result may lack (added in later versions of its format): drawn when present.
MEMORY_OPTIONAL = [("fp8_weights_bytes", "FP8 weights", "#ccb974"),
                   ("allocator_reserve_bytes", "allocator reserve", "#937860"),
                   ("runtime_bytes", "CUDA context", "#8c8c8c"),
                   ("nccl_bytes", "NCCL buffers", "#64b5cd")]
SEARCH_TOP = 10  # ranked plans of a search shown as runs
GIB = 2.0**30


class ReportError(Exception):
    pass


def plan_label(plan, batch=None):
    tensor = f"TP {plan['tensor']}"
    if plan.get("tensor_mode", "1d") != "1d":
        tensor += f" ({plan['tensor_mode']})"
    elif plan.get("sequence_parallel"):
        tensor += " (SP)"
    label = f"DP {plan['data']} × {tensor} × PP {plan['pipeline']}"
    if plan["pipeline"] > 1:
        v = plan.get("virtual_stages", 1)
        label += f" (interleaved ×{v})" if v > 1 else f" ({plan['schedule']})"
    if plan.get("expert", 1) > 1:
        label += f" × EP {plan['expert']}"
    if batch is not None:  # a search over several global batches names each plan's
        label += f" · batch {batch}"
    return (label + f" · mb {plan['micro_batch']} · ZeRO {plan['zero_stage']}"
            f" · recompute {plan.get('recompute', 'none')}")


def flatten(value, prefix):
    """{"a": {"b": 1}} under "p" → {"p.a.b": 1}; lists and scalars are leaves."""
    if isinstance(value, dict) and value:
        out = {}
        for key, child in value.items():
            out.update(flatten(child, f"{prefix}.{key}"))
        return out
    return {prefix: value}


def run_from_simulate(result, label, extra_inputs):
    """One run from a simulate result (docs/formats/simulate-result.md)."""
    inputs = {k: v for k, v in result["input"].items() if k not in ("plan", "calibration")}
    inputs.update(result["input"]["plan"])
    # What the cluster resolved to (its bandwidths, latencies, efficiencies: docs/formats/
    # provenance.md), so that two runs on one preset with different NICs differ in an input.
    resolved = (result.get("provenance") or {}).get("resolved") or {}
    if resolved.get("cluster"):
        inputs.update(flatten(resolved["cluster"], "resolved.cluster"))
    # The training run's settings (docs/time_to_train.md), which only the config holds.
    run_config = ((result.get("provenance") or {}).get("config") or {}).get("time_to_train")
    if run_config:
        inputs.update(flatten(run_config, "time_to_train"))
    # DiLoCo's settings (docs/diloco.md), which only the config holds; the replicas named even
    # when absent, so that a synchronous and a DiLoCo run differ in an input.
    diloco_config = ((result.get("provenance") or {}).get("config") or {}).get("diloco")
    if diloco_config:
        inputs.update(flatten(diloco_config, "diloco"))
    inputs["diloco.replicas"] = (diloco_config or {}).get("replicas", "none")
    # Named even when absent, so that a calibrated and an uncalibrated run differ in an input.
    inputs["calibration"] = result["input"].get("calibration", {}).get("source", "none")
    inputs["compression"] = result["compression"]["method"]
    inputs["gpus"] = inputs["nodes"] * inputs["gpus_per_node"]
    inputs.update(extra_inputs)
    iteration = result["iteration_time_ns"]
    average = result["compression"]["average_iteration_time_ns"] or iteration
    stages = result["stages"]
    breakdown = {key: sum(s["time"].get(key, 0) for s in stages) / len(stages) / 1e6 for key, _, _ in PARTS}
    largest = max(stages, key=lambda s: s["memory"]["total_bytes"])["memory"]
    return {
        "label": label,
        "inputs": inputs,
        "gpus": inputs["gpus"],
        "iteration_s": average / 1e9,
        "samples_per_second": result["samples_per_second"] * iteration / average,
        "mfu": result["mfu"] * iteration / average,
        "breakdown_ms": breakdown,
        "memory": largest,
        # The calibration's error band (docs/calibration.md), in percent; None without one.
        "band": result.get("error_band", {}).get("mape_percent"),
        # The whole training run's wall clock in days, with a time_to_train section; else None.
        "train_days": (result["time_to_train"]["wall_s"] / 86400
                       if result.get("time_to_train") else None),
    }


def runs_from_sweep(sweep, source):
    runs, axes = [], [axis["key"] for axis in sweep["vary"]]
    for point in sweep["points"]:
        if point["status"] != "ok":
            continue
        values = point["values"]
        label = ", ".join(f"{k.split('.')[-1]}={short(values[k])}" for k in axes)
        runs.append(run_from_simulate(point["result"], label, {k: values[k] for k in axes}))
    return runs


def runs_from_search(search, source):
    settings = search["settings"]
    columns = search["columns"]
    rows = {plan["index"]: plan for plan in (dict(zip(columns, row)) for row in search["plans"])}
    methods = settings["space"]["compression"]
    several = len(settings["space"].get("global_batches", [])) > 1
    runs = []
    for rank, index in enumerate(search["ranking"][:SEARCH_TOP], start=1):
        row = rows[index]
        plan = {k: row[k] for k in ("data", "tensor", "tensor_mode", "tensor_depth", "sequence_parallel",
                                     "pipeline", "schedule", "virtual_stages", "expert", "zero_stage",
                                     "micro_batch", "recompute")}
        training = settings.get("simulation_config", {}).get("training", {})
        inputs = {"model": settings["model"], "gpu": settings["gpu"], "cluster": settings["cluster"],
                  "gpus": settings["gpus"], "compression": methods[int(row["compression"])],
                  "network_model": "analytical", "config": settings["config"],
                  **{k: training[k] for k in ("global_batch", "seq_len") if k in training}, **plan}
        if row.get("global_batch"):  # since 1.6: the plan's own, when the search varied it
            inputs["global_batch"] = row["global_batch"]
        # The analytical model's time, as every other run's (the flow model's is in the search's
        # own printout and files).
        time = row["average_iteration_time_ns"]
        runs.append({
            "label": f"#{rank} {plan_label(plan, row.get('global_batch') if several else None)}",
            "inputs": inputs,
            "gpus": settings["gpus"],
            "iteration_s": time / 1e9,
            "samples_per_second": row["samples_per_second"],
            "mfu": row["mfu"],
            "breakdown_ms": {key: row.get(key, 0) / 1e6 for key, _, _ in PARTS},
            "memory": {"total_bytes": row["memory_bytes"],
                       "capacity_bytes": settings.get("gpu_memory_bytes", 0)},
            # Since 1.6, with a time_to_train section: the run's wall clock (analytical, as the
            # iteration above), by which the search ranked.
            "train_days": (row["time_to_train_ns"] / 1e9 / 86400
                           if row.get("time_to_train_ns") is not None else None),
        })
    return runs


def read_json(path):
    """A JSON file, plain or gzip-compressed (detected by its first bytes, as dtsim reads it)."""
    with open(path, "rb") as f:
        compressed = f.read(2) == b"\x1f\x8b"
    opener = gzip.open if compressed else open
    with opener(path, "rt", encoding="utf-8") as f:
        return json.load(f)


def short(value):
    """A value as a label: a compression or cluster section by its method or preset name."""
    if isinstance(value, dict):
        name = value.get("method") or value.get("preset")
        return name if isinstance(name, str) else json.dumps(value, separators=(",", ":"))
    return str(value)


def load(paths):
    """The runs of the simulate, sweep and search results, and the replay results apart."""
    runs, replays = [], []
    for path in paths:
        try:
            data = read_json(path)
        except (OSError, EOFError, ValueError) as e:
            raise ReportError(f"{path}: cannot read a result: {e}")
        kind = data.get("format") if isinstance(data, dict) else None
        stem = os.path.splitext(os.path.basename(path))[0]
        try:
            if kind == "dtsim.simulate_result":
                added = [run_from_simulate(data, stem, {})]
            elif kind == "dtsim.sweep":
                added = runs_from_sweep(data, path)
            elif kind == "dtsim.search":
                added = runs_from_search(data, path)
            elif kind == "dtsim.replay_result":
                replays.append(replay_from_result(data, path))
                added = []
            else:
                raise ReportError(f"{path}: not a dtsim result (format {kind!r})")
        except (KeyError, IndexError, AttributeError, TypeError, ZeroDivisionError, ValueError) as e:
            raise ReportError(f"{path}: malformed {kind}: missing or bad field {e}")
        for run in added:
            run["series"] = path
        runs.extend(added)
    if not runs and not replays:
        raise ReportError("no successful run in the inputs")
    distinct_labels(runs)
    return runs, replays


def distinct_labels(runs):
    """Makes every run's label its own: matplotlib draws runs with one label as one bar, so two
    sweeps over the same key became three bars for six runs. A label two runs share is prefixed
    by its file's name, then numbered if that is not enough."""
    def clashes():
        counts = {}
        for r in runs:
            counts[r["label"]] = counts.get(r["label"], 0) + 1
        return {label for label, n in counts.items() if n > 1}
    shared = clashes()
    for r in runs:
        if r["label"] in shared:
            r["label"] = f"{os.path.splitext(os.path.basename(r['series']))[0]}: {r['label']}"
    shared = clashes()
    seen = {}
    for r in runs:
        if r["label"] in shared:
            seen[r["label"]] = seen.get(r["label"], 0) + 1
            r["label"] = f"{r['label']} #{seen[r['label']]}"


def replay_from_result(result, path):
    """A replay's steps: measured and replayed, with the what-if when it has one, and the
    critical path of each (ms per part)."""
    what_if = result.get("what_if")
    ranks = len(result["job"]["traces"]) if "job" in result else 1
    steps = []
    for i, step in enumerate(result["steps"]):
        row = {"label": f"r{step['rank']} #{step['step']}" if ranks > 1 else f"#{step['step']}",
               "measured_ms": step["measured_ms"], "replayed_ms": step["simulated_ms"],
               "path": step.get("critical_path_ms", {})}
        if what_if and i < len(what_if.get("steps", [])):
            changed = what_if["steps"][i]
            row.update(what_if_ms=changed["what_if_ms"], change=changed["change"],
                       what_if_path=changed.get("what_if_critical_path_ms", {}),
                       why=changed.get("why_unmoved", ""))
        steps.append(row)
    return {"source": path, "trace": result["trace"]["file"], "steps": steps,
            "what_if": what_if["description"] if what_if else None, "ranks": ranks}


def figure_replay(replay, index, out):
    """Each step's critical path split by what ran on it, replayed and (with one) under the
    what-if."""
    bars = []
    for step in replay["steps"]:
        bars.append((f"{step['label']} replayed", step["path"]))
        if "what_if_path" in step:
            bars.append((f"{step['label']} what-if", step["what_if_path"]))
    shown = bars[:40]
    truncated = len(shown) < len(bars)
    bars = shown
    fig, ax = plt.subplots(figsize=(12, 0.35 * len(bars) + 1.8))
    labels = [label for label, _ in bars][::-1]
    left = [0.0] * len(bars)
    for key, name, colour in PATH_PARTS:
        widths = [path.get(key, 0.0) for _, path in bars][::-1]
        if any(widths):
            ax.barh(labels, widths, left=left, color=colour, label=name)
            left = [a + b for a, b in zip(left, widths)]
    ax.set_xlabel("ms on the step's critical path")
    title = os.path.basename(replay["trace"])
    if replay["ranks"] > 1:
        title += f" and {replay['ranks'] - 1} more rank(s)"
    ax.set_title(f"Where each step's time goes: {title}"
                 + (f" — what-if: {replay['what_if']}" if replay["what_if"] else "")
                 + (f" (the first {len(bars)} bars)" if truncated else ""), fontsize=10)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    return save(fig, out, f"replay{index}.png")


def bandwidth_gbps(value):
    """'25 Gbps' / '100 Gb/s' / '12.5 GB/s' → Gb/s, else None."""
    m = re.fullmatch(r"\s*([0-9.]+)\s*([GMT])(b|B)(ps|/s)\s*", str(value))
    if not m:
        return None
    scale = {"M": 1e-3, "G": 1.0, "T": 1e3}[m.group(2)] * (8 if m.group(3) == "B" else 1)
    return float(m.group(1)) * scale


def save(fig, out, name, rect=None):
    """Writes the figure beside its final name and renames it: never a half-written PNG.
    `rect`: the part of the figure the axes fill (room for a legend below them)."""
    fig.tight_layout(rect=rect)
    temporary = os.path.join(out, f".{name}.tmp")
    fig.savefig(temporary, dpi=110, format="png")
    plt.close(fig)
    os.replace(temporary, os.path.join(out, name))
    return name


def figure_throughput(runs, out):
    fig, ax = plt.subplots(figsize=(12, 0.4 * len(runs) + 1.5))
    labels = [r["label"] for r in runs][::-1]
    rates = [r["samples_per_second"] for r in runs][::-1]
    bands = [r.get("band") for r in runs][::-1]
    ax.barh(labels, rates, color="#4c72b0")
    clip_outlier(ax, rates)
    banded = [i for i, band in enumerate(bands) if band]
    if banded:  # only where a calibration gives a band: no zero-width bars on the others
        ax.errorbar([rates[i] for i in banded], banded, xerr=[rates[i] * bands[i] / 100 for i in banded],
                    fmt="none", ecolor="black", capsize=4)
    ax.set_xlabel("samples / s" + (" (error bars: the calibration's error band)" if banded else ""))
    ax.set_title("Throughput per run")
    return save(fig, out, "throughput.png")


def clip_outlier(ax, values):
    """One bar far longer than the rest (over 3x the next) would squeeze them into slivers: the
    axis ends past the next longest and the long bar is labelled with its value."""
    if len(values) < 3:
        return
    order = sorted(range(len(values)), key=lambda i: values[i])
    longest, next_longest = values[order[-1]], values[order[-2]]
    if next_longest <= 0 or longest <= 3 * next_longest:
        return
    limit = 1.35 * next_longest
    ax.set_xlim(0, limit)
    ax.text(limit * 0.99, order[-1], f"{longest:.4g} (axis cut) →", ha="right", va="center",
            fontsize=8, color="white", fontweight="bold")


def figure_breakdown(runs, out):
    fig, ax = plt.subplots(figsize=(12, 0.4 * len(runs) + 1.8))
    labels = [r["label"] for r in runs][::-1]
    left = [0.0] * len(runs)
    for key, name, colour in PARTS:
        values = [r["breakdown_ms"][key] for r in runs][::-1]
        ax.barh(labels, values, left=left, label=name, color=colour)
        left = [a + b for a, b in zip(left, values)]
    clip_outlier(ax, left)
    ax.set_xlabel("ms per iteration (mean over pipeline stages)")
    ax.set_title("Where the time goes")
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))  # beside: never over a bar
    return save(fig, out, "breakdown.png")


def figure_memory(runs, out):
    fig, ax = plt.subplots(figsize=(12, 0.4 * len(runs) + 1.8))
    labels = [r["label"] for r in runs][::-1]
    left = [0.0] * len(runs)

    def split(r):
        return all(key in r["memory"] for key, _, _ in MEMORY)

    # Search rows carry the total only: drawn as one grey bar.
    parts = MEMORY + MEMORY_OPTIONAL + [("total_bytes", "total (not split)", "#999999")]
    for key, name, colour in parts:
        values = [(r["memory"].get(key, 0) if split(r) != (key == "total_bytes") else 0) / GIB
                  for r in runs][::-1]
        if any(values):
            ax.barh(labels, values, left=left, label=name, color=colour)
        left = [a + b for a, b in zip(left, values)]
    capacities = {r["memory"].get("capacity_bytes", 0) for r in runs} - {0}
    for capacity in sorted(capacities):
        # Named in the legend: a label at the line crossed the axes' frame or the title.
        ax.axvline(capacity / GIB, color="black", linestyle="--", linewidth=1,
                   label=f"capacity {capacity / GIB:.0f} GiB")
    ax.set_xlabel("GiB per GPU (largest pipeline stage)")
    ax.set_title("Memory per GPU at its peak against capacity")
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))  # beside: never over a bar
    return save(fig, out, "memory.png")


def figure_scaling(runs, out):
    """GPUs → throughput and efficiency against the smallest run, one line per input file whose
    runs differ in GPU count (a sweep over nodes or data parallelism; the best per count)."""
    series = {}
    for r in runs:
        # Log-log axes hold positive values only (a result that says 0 GPUs or 0 samples/s is
        # not drawn here; its row in the tables shows it).
        if not (r["gpus"] > 0 and r["samples_per_second"] > 0):
            continue
        best = series.setdefault(r["series"], {})
        if r["gpus"] not in best or r["samples_per_second"] > best[r["gpus"]]:
            best[r["gpus"]] = r["samples_per_second"]
    series = {name: best for name, best in series.items() if len(best) >= 2}
    if not series:
        return None, "no input file holds runs that differ in GPU count"
    fig, ax = plt.subplots(figsize=(10, 4.2))
    right = ax.twinx()
    for i, (name, best) in enumerate(sorted(series.items())):
        colour = f"C{i}"
        gpus = sorted(best)
        throughput = [best[g] for g in gpus]
        base = throughput[0] / gpus[0]
        label = os.path.splitext(os.path.basename(name))[0]
        ax.plot(gpus, throughput, "o-", color=colour, label=f"{label}: throughput")
        ax.plot(gpus, [base * g for g in gpus], ":", color=colour, label=f"{label}: linear")
        right.plot(gpus, [100 * t / g / base for t, g in zip(throughput, gpus)], "s--", color=colour,
                   alpha=0.6, label=f"{label}: efficiency")
    # Log-log: linear scaling is a straight line (the dotted one), and plain tick labels.
    ax.set_xscale("log")
    ax.set_yscale("log")
    all_gpus = sorted({g for best in series.values() for g in best})
    ax.set_xticks(all_gpus)
    ax.set_xticklabels([str(g) for g in all_gpus])
    ax.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
    ax.yaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda v, _: f"{v:g}"))
    ax.yaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
    ax.set_xlabel("GPUs")
    ax.set_ylabel("samples / s (log)")
    right.set_ylabel("scaling efficiency (%, dashed)")
    right.set_ylim(0, 130)  # room for the legend above 100%
    lines = ax.get_legend_handles_labels()[0] + right.get_legend_handles_labels()[0]
    ax.legend(lines, [line.get_label() for line in lines], fontsize=8, loc="upper left",
              bbox_to_anchor=(1.12, 1.0))  # beside the axes: never over a line
    ax.set_title("Scaling: GPUs → throughput and efficiency")
    return save(fig, out, "scaling.png"), None


def figure_bandwidth(runs, out):
    """Bandwidth (any input whose key names a bandwidth) → throughput, one line per plan: the
    runs that agree in every other input that varies (two plans at the same bandwidths were one
    zig-zag line when the lines were per compression method)."""
    keys = sorted({k for r in runs for k in r["inputs"] if "bandwidth" in k.lower()})
    varying = differing_inputs(runs)
    for key in keys:
        others = [k for k in varying if "bandwidth" not in k.lower() and k not in ("config",)]
        series = {}
        for r in runs:
            gbps = bandwidth_gbps(r["inputs"].get(key))
            if gbps is not None:
                name = ", ".join(f"{k.split('.')[-1]}={short(r['inputs'].get(k, '—'))}" for k in others)
                series.setdefault(name or "all runs", []).append((gbps, r["samples_per_second"]))
        if not series or max(len({g for g, _ in s}) for s in series.values()) < 2:
            continue
        fig, ax = plt.subplots(figsize=(10, 4.2))
        for name, points in sorted(series.items()):
            points.sort()
            ax.plot([p[0] for p in points], [p[1] for p in points], "o-", label=name)
        speeds = sorted({p[0] for points in series.values() for p in points})
        ax.set_xscale("log")
        ax.set_xticks(speeds)
        ax.set_xticklabels([f"{g:g}" for g in speeds])
        ax.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
        # From zero: a 1% change must not look like a cliff; and room above the highest point,
        # which autoscaling put on the frame when the points differ by little.
        top = max(p[1] for points in series.values() for p in points)
        ax.set_ylim(0, 1.08 * top)
        ax.set_xlabel(f"{key} (Gb/s)")
        ax.set_ylabel("samples / s")
        ax.set_title("Bandwidth sensitivity, one line per plan")
        ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))
        return save(fig, out, "bandwidth.png"), None
    return None, "no input names a bandwidth that varies between runs"


# Timeline categories in the breakdown's words (docs/formats/timeline.md, docs/strategies.md).
GANTT_NAMES = {"compute": "compute", "recompute": "recompute", "tp": "exposed TP",
               "ep": "exposed EP", "cp": "exposed CP", "pp": "PP send/recv",
               "rendezvous_wait": "PP wait (and other waits)", "dp": "exposed DP",
               "optimizer": "optimizer"}


def timeline_events(document, timeline):
    """The events of a Chrome trace the Gantt chart draws, checked as it uses them: complete
    events ("X": pid and tid a number or a string, ts and dur numbers, dur not negative, cat a
    string when given) and the thread and process names ("M": args.name); other events are not
    drawn. An event it cannot draw is an error naming it, not a traceback."""
    events = document.get("traceEvents") if isinstance(document, dict) else None
    if not isinstance(events, list):
        raise ReportError(f"{timeline}: not a timeline: expected an array \"traceEvents\"")
    kept = []
    for i, e in enumerate(events):
        where = f"{timeline}: traceEvents[{i}]"
        if not isinstance(e, dict):
            raise ReportError(f"{where}: expected an object, got {json.dumps(e)[:80]}")
        ph = e.get("ph")
        named = ph == "M" and e.get("name") in ("thread_name", "process_name")
        if ph != "X" and not named:
            continue
        for key in ("pid", "tid") if ph == "X" or e.get("name") == "thread_name" else ("pid",):
            if isinstance(e.get(key), bool) or not isinstance(e.get(key), (int, float, str)):
                raise ReportError(f"{where}.{key}: expected a number or a string, got {json.dumps(e.get(key))[:80]}")
        if named:
            args = e.get("args")
            if not isinstance(args, dict) or not isinstance(args.get("name"), (str, int, float)):
                raise ReportError(f"{where}.args.name: expected a name")
            kept.append(e)
            continue
        for key in ("ts", "dur"):
            value = e.get(key)
            if key not in e:
                raise ReportError(f"{where}.{key}: missing (a complete event has ts and dur)")
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
                raise ReportError(f"{where}.{key}: expected a number of microseconds, got {json.dumps(value)[:80]}")
        if e["dur"] < 0:
            raise ReportError(f"{where}.dur: negative, got {e['dur']}")
        if not isinstance(e.get("cat", ""), str):
            raise ReportError(f"{where}.cat: expected a string, got {json.dumps(e.get('cat'))[:80]}")
        kept.append(e)
    return kept


def gantt_phases(rows, pids):
    """The pipeline's warm-up (until the last lane's first backward starts) and cool-down (from
    the first lane's last forward end), in ms; None when the lanes hold no forward/backward."""
    first_backward, last_forward = [], []
    for pid in pids:
        # Layer ops are named "layer3.mlp fwd", "layer3.mlp bwd".
        starts = [e["ts"] for e in rows[pid] if "bwd" in str(e.get("name", "")).split()]
        ends = [e["ts"] + e["dur"] for e in rows[pid] if "fwd" in str(e.get("name", "")).split()]
        if starts and ends:
            first_backward.append(min(starts) / 1e3)
            last_forward.append(max(ends) / 1e3)
    if not first_backward:
        return None
    return max(first_backward), min(last_forward)


def figure_gantt(timeline, out):
    """One iteration's compute streams from a Chrome trace: a lane per rank (one per stage in a
    symmetric simulation: one pipeline), coloured in the breakdown's words, the warm-up and
    cool-down shaded; below, the first micro-batches zoomed in."""
    if not timeline:
        return None, "no timeline given (--timeline)"
    try:
        document = read_json(timeline)
    except (OSError, EOFError, ValueError) as e:
        raise ReportError(f"{timeline}: cannot read a timeline: {e}")
    events = timeline_events(document, timeline)
    names = {(e["pid"], e["tid"]): str(e["args"]["name"]) for e in events
             if e["ph"] == "M" and e.get("name") == "thread_name"}
    ranks = {e["pid"]: str(e["args"]["name"]) for e in events
             if e["ph"] == "M" and e.get("name") == "process_name"}
    rows = {}
    for e in events:
        if e["ph"] != "X" or names.get((e["pid"], e["tid"]), "compute") != "compute":
            continue
        rows.setdefault(e["pid"], []).append(e)
    if not rows:
        raise ReportError(f"{timeline}: no compute-stream events")
    pids = sorted(rows, key=lambda pid: (isinstance(pid, str), pid))[:16]
    end = max(e["ts"] + e["dur"] for pid in pids for e in rows[pid]) / 1e3
    phases = gantt_phases(rows, pids)
    colours = {}
    palette = ["#4c72b0", "#dd8452", "#55a868", "#c44e52", "#8172b2", "#937860", "#da8bc3", "#8c8c8c"]
    fig, axes = plt.subplots(2, 1, figsize=(11, 2 * (0.45 * len(pids) + 1.2) + 1.2))
    # The zoom: the warm-up and as long again of the steady state.
    zoom = min(end, 2 * phases[0]) if phases else end / 4
    for ax, limit in zip(axes, (end, zoom)):
        for y, pid in enumerate(pids):
            by_cat = {}
            for e in rows[pid]:
                by_cat.setdefault(e.get("cat", "other"), []).append((e["ts"] / 1e3, e["dur"] / 1e3))
            for cat, spans in by_cat.items():
                label = GANTT_NAMES.get(cat, cat)
                colour = colours.setdefault(label, palette[len(colours) % len(palette)])
                ax.broken_barh(spans, (y - 0.4, 0.8), facecolors=colour, label=label)
        if phases:
            ax.axvspan(0, phases[0], color="#fff3c4", zorder=0)
            ax.axvspan(phases[1], end, color="#d8ecf7", zorder=0)
            for x, text in ((phases[0] / 2, "warm-up"), ((phases[0] + phases[1]) / 2, "steady state"),
                            ((phases[1] + end) / 2, "cool-down")):
                if x < limit:
                    ax.text(x, -0.75, text, ha="center", va="bottom", fontsize=8, color="#555")
        ax.set_xlim(0, limit)
        ax.set_ylim(len(pids) - 0.5, -1.0)
        ax.set_yticks(range(len(pids)), [ranks.get(p, f"rank {p}") for p in pids])
        ax.set_xlabel("ms")
    other = document.get("otherData")
    source = other.get("source") if isinstance(other, dict) else None
    source = os.path.basename(source) if isinstance(source, str) and source else os.path.basename(timeline)
    axes[0].set_title(f"{source}: one iteration, compute streams (pipeline Gantt)")
    axes[1].set_title(f"the first {zoom:.0f} ms" + (": the warm-up and the start of the steady state"
                                                      if phases else ""))
    handles, labels = axes[0].get_legend_handles_labels()
    unique = dict(zip(labels, handles))
    fig.legend(unique.values(), unique.keys(), fontsize=8, ncol=min(len(unique), 5), loc="lower center")
    return save(fig, out, "gantt.png", rect=(0, 0.08, 1, 1)), None


def differing_inputs(runs):
    """Inputs with two or more values among the runs that have them (a search's rows lack some)."""
    keys = sorted({k for r in runs for k in r["inputs"]})
    return [k for k in keys
            if len({json.dumps(r["inputs"][k], sort_keys=True) for r in runs if k in r["inputs"]}) > 1]


def replay_tables(replays):
    esc = html.escape
    parts = []
    for replay in replays:
        what_if = replay["what_if"]
        head = "<tr><th>step</th><th>measured (ms)</th><th>replayed (ms)</th>" + (
            "<th>what-if (ms)</th><th>change</th><th>why it did not move</th>" if what_if else "") + "</tr>"
        rows = "".join(
            f"<tr><td>{esc(s['label'])}</td><td>{s['measured_ms']:.3f}</td><td>{s['replayed_ms']:.3f}</td>"
            + (f"<td>{s.get('what_if_ms', 0):.3f}</td><td>{100 * s.get('change', 0):+.2f}%</td>"
               f"<td>{esc(s.get('why', ''))}</td>" if what_if else "") + "</tr>"
            for s in replay["steps"])
        parts.append(f"<h3>{esc(replay['trace'])} ({replay['ranks']} rank(s))</h3>"
                     + (f"<p>What-if: {esc(what_if)}</p>" if what_if else "")
                     + f"<table>{head}{rows}</table>")
    return "<h2>Replays</h2>" + "".join(parts) if parts else ""


def conclusion(runs):
    """The page's first statement: the best run, its speed-up over the first, what bounds it.
    When every run has a time to train, the best is the one that trains soonest: a larger batch
    can run more samples a second and still train later (docs/time_to_train.md)."""
    if not runs:
        return ""
    esc = html.escape
    fastest = max(runs, key=lambda r: r["samples_per_second"])
    timed = all(r.get("train_days") is not None for r in runs)
    best = min(runs, key=lambda r: r["train_days"]) if timed else fastest
    first = runs[0]
    parts = sorted(((best["breakdown_ms"].get(key, 0), name) for key, name, _ in PARTS), reverse=True)
    total = sum(ms for ms, _ in parts) or 1.0
    bound = ", then ".join(f"{name} ({100 * ms / total:.0f}%)" for ms, name in parts[:2] if ms > 0)
    speedup = (f"{best['samples_per_second'] / first['samples_per_second']:.2f}× the first run "
               f"({esc(first['label'])})" if best is not first and first["samples_per_second"] > 0
               else "it is the first run")
    trains = ""
    if timed and best is not first and best["train_days"] > 0:
        # Against the first run, in the measure the best was chosen by.
        speedup = (f"{first['train_days'] / best['train_days']:.2f}× sooner than the first run "
                   f"({esc(first['label'])})")
    if timed:
        trains = f"trains in {best['train_days']:.1f} days, "
        if fastest is not best:
            trains = (f"trains soonest, in {best['train_days']:.1f} days (the most samples a second, "
                      f"{esc(fastest['label'])}, take {fastest['train_days']:.1f}), ")
    return (f"<p class=\"conclusion\"><strong>Best: {esc(best['label'])}</strong> — {trains}"
            f"{best['samples_per_second']:.2f} samples/s, {best['iteration_s']:.3f} s per iteration, "
            f"MFU {100 * best['mfu']:.1f}%; {speedup}. Its time goes to {esc(bound)}.</p>")


def write_html(out, title, runs, figures, skipped, sources, replays=()):
    esc = html.escape
    any_trains = any(r.get("train_days") is not None for r in runs)
    rows = "".join(
        f"<tr><td>{esc(r['label'])}</td><td>{r['gpus']}</td><td>{r['iteration_s'] * 1e3:.1f}"
        f"{' ±%.1f%%' % r['band'] if r.get('band') else ''}</td>"
        f"<td>{r['samples_per_second']:.2f}</td><td>{100 * r['mfu']:.1f}%</td>"
        f"<td>{r['memory'].get('total_bytes', 0) / GIB:.1f}</td>"
        + (f"<td>{r['train_days']:.1f}</td>" if r.get("train_days") is not None
           else ("<td>—</td>" if any_trains else "")) + "</tr>" for r in runs)
    keys = differing_inputs(runs)
    diff = "<p>The runs differ in no input.</p>" if not keys else (
        "<table><tr><th>run</th>" + "".join(f"<th>{esc(k)}</th>" for k in keys) + "</tr>"
        + "".join("<tr><td>" + esc(r["label"]) + "</td>"
                  + "".join(f"<td>{esc(short(r['inputs'].get(k, '—')))}</td>" for k in keys) + "</tr>"
                  for r in runs) + "</table>")
    images = "".join(f'<figure><img src="{esc(name)}" alt="{esc(caption)}"><figcaption>{esc(caption)}'
                     f"</figcaption></figure>" for name, caption in figures)
    missing = "".join(f"<li>{esc(caption)}: not drawn — {esc(reason)}</li>" for caption, reason in skipped)
    run_tables = "" if not runs else (
        "<h2>Runs</h2><table><tr><th>run</th><th>GPUs</th><th>iteration (ms)</th><th>samples/s</th>"
        f"<th>MFU</th><th>memory/GPU (GiB)</th>{'<th>time to train (days)</th>' if any_trains else ''}"
        f"</tr>{rows}</table>"
        f"<h2>Inputs that differ between runs</h2>{diff}")
    page = f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{esc(title)}</title>
<style>
body {{ font-family: sans-serif; margin: 2em; max-width: 1200px; color: #222; }}
table {{ border-collapse: collapse; margin: 1em 0; font-size: 14px; display: block; overflow-x: auto; max-width: 100%; }}
td, th {{ border: 1px solid #ccc; padding: 4px 8px; text-align: right; }}
td:first-child, th:first-child {{ text-align: left; white-space: nowrap; }}
figure {{ margin: 1.5em 0; }} img {{ max-width: 100%; border: 1px solid #eee; }}
figcaption {{ color: #555; font-size: 13px; }}
</style></head><body>
<h1>{esc(title)}</h1>
<p>From {len(sources)} result file(s): {esc(', '.join(sources))}. {len(runs)} run(s), {len(replays)} replay(s).</p>
{conclusion(runs)}
{run_tables}
{replay_tables(replays)}
<h2>Figures</h2>{images}
{f"<ul>{missing}</ul>" if missing else ""}
</body></html>
"""
    with open(os.path.join(out, "index.html.tmp"), "w", encoding="utf-8") as f:
        f.write(page)
    os.replace(os.path.join(out, "index.html.tmp"), os.path.join(out, "index.html"))


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("results", nargs="+")
    parser.add_argument("--out", required=True)
    parser.add_argument("--timeline")
    parser.add_argument("--title", default="dtsim report")
    args = parser.parse_args(argv)
    try:
        runs, replays = load(args.results)
        os.makedirs(args.out, exist_ok=True)
        figures, skipped = [], []
        if runs:
            figures.append((figure_throughput(runs, args.out), "Throughput per run"))
            figures.append((figure_breakdown(runs, args.out), "Time breakdown"))
            figures.append((figure_memory(runs, args.out), "Memory per GPU at its peak against capacity"))
            for draw, caption in ((lambda: figure_scaling(runs, args.out), "Scaling curves"),
                                  (lambda: figure_bandwidth(runs, args.out), "Bandwidth sensitivity"),
                                  (lambda: figure_gantt(args.timeline, args.out), "Pipeline Gantt chart")):
                name, reason = draw()
                (figures.append((name, caption)) if name else skipped.append((caption, reason)))
        for index, replay in enumerate(replays):
            if replay["steps"]:
                figures.append((figure_replay(replay, index, args.out),
                                f"Critical path per step: {replay['trace']}"))
            else:
                skipped.append((f"Critical path per step: {replay['trace']}", "the trace has no ProfilerStep"))
        write_html(args.out, args.title, runs, figures, skipped, args.results, replays)
    except ReportError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    for name, _ in figures:
        print(os.path.join(args.out, name))
    for caption, reason in skipped:
        print(f"not drawn: {caption}: {reason}")
    print(os.path.join(args.out, "index.html"))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
