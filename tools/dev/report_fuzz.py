#!/usr/bin/python3
"""Fuzzes `dtsim report`'s plotting script (tools/report/report.py) on results dtsim accepts.

libFuzzer reaches the C++ result readers that `dtsim report` runs first (the result_file
harness), not the Python that draws the figures afterwards. This does for the script what a
harness does: it mutates valid results value by value (numbers to 0, negatives, NaN-free
extremes, wrong types, missing keys, empty or longer lists), keeps the mutants dtsim's readers
accept (`dtsim report` run with DTSIM_PYTHON=/bin/true, so only its checks run) and hands each
to the script, in this process, with a time limit. What dtsim accepts must draw or fail with
the script's own error, never a traceback.

Usage: tools/dev/report_fuzz.py DTSIM [--runs N] [--seed S] [--seconds-per-input S]
                                [--regressions DIR] [--findings DIR] [--keep-accepted DIR]
                                [SEED.json...]
Seeds default to tests/fuzz/seeds/result_file/ (the families the report draws) and any given;
a quarter of the runs instead draw the first simulate seed with a mutant of the timeline
tests/fuzz/seeds/report/timeline.json (`--timeline`, the pipeline Gantt chart), which the script
may refuse with its own error, since dtsim checks no more than its traceEvents.
--regressions DIR: first run every file of DIR as it is (tests/fuzz/regressions/report/: the
inputs that once gave a traceback; each is accepted and drawn or refused by dtsim's readers).
Prints a line: mutants tried, accepted by dtsim, drawn, refused by the script, tracebacks,
time-outs; writes each traceback's input to DIR (default build-fuzz/findings/report/) and
exits 1 when there is one. The same --seed gives the same mutants. docs/development.md,
"Fuzzing".
"""

import argparse
import contextlib
import copy
import glob
import importlib.util
import io
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import traceback

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
REPORT_FORMATS = ("dtsim.simulate_result", "dtsim.sweep", "dtsim.search", "dtsim.replay_result")
EXTREME_NUMBERS = [0, -1, 1, 0.5, -0.0, 1e-300, 1e300, 2**31, 2**53, 2**63 - 1, -(2**63), 7]
ODD_VALUES = [None, True, "", "x", [], {}, "400 Gbps", [0], {"a": 1}, {"method": 0}]


class TimedOut(Exception):
    pass


def load_report():
    spec = importlib.util.spec_from_file_location("report", os.path.join(TOP, "tools", "report", "report.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def paths(value, prefix=()):
    """Every place in a JSON value, as a tuple of keys and indices, the root included."""
    yield prefix
    if isinstance(value, dict):
        for key, child in value.items():
            yield from paths(child, prefix + (key,))
    elif isinstance(value, list):
        for index, child in enumerate(value):
            yield from paths(child, prefix + (index,))


def parent_of(doc, path):
    node = doc
    for step in path[:-1]:
        node = node[step]
    return node


def mutate_one(doc, rng):
    """One change at a random place of `doc` (in place)."""
    places = [p for p in paths(doc) if p]
    if not places:
        return
    path = rng.choice(places)
    parent, key = parent_of(doc, path), path[-1]
    value = parent[key]
    choice = rng.random()
    if isinstance(value, (int, float)) and not isinstance(value, bool) and choice < 0.5:
        parent[key] = rng.choice(EXTREME_NUMBERS + [value * 1000, -value, value / 1000])
    elif isinstance(value, list) and value and choice < 0.6:
        action = rng.choice(("empty", "one", "repeat", "drop"))
        if action == "empty":
            parent[key] = []
        elif action == "one":
            parent[key] = value[:1]
        elif action == "repeat":
            parent[key] = value + copy.deepcopy(value[: rng.randint(1, len(value))])
        else:
            del value[rng.randrange(len(value))]
    elif isinstance(value, str) and choice < 0.4:
        parent[key] = rng.choice(["", value * 3, value[: len(value) // 2], "\u00e9\n<b>&", value + " "])
    elif isinstance(parent, dict) and choice < 0.7:
        del parent[key]
    else:
        parent[key] = copy.deepcopy(rng.choice(ODD_VALUES))


def accepted(dtsim, path, scratch, timeline=None):
    """Whether `dtsim report` accepts the input: its checks run, the script does not."""
    env = dict(os.environ, DTSIM_PYTHON="/bin/true")
    more = ["--timeline", timeline] if timeline else []
    run = subprocess.run([dtsim, "report", path, "--out", os.path.join(scratch, "checked")] + more,
                         env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, timeout=60)
    if run.returncode not in (0, 1, 2):
        raise RuntimeError(f"dtsim report exited {run.returncode} on {path}: {run.stderr.decode()[-2000:]}")
    return run.returncode == 0


def draw(report, path, out, seconds, timeline=None):
    """Runs the script on one input: 'drawn', 'refused' (its own error) or a traceback."""
    def alarm(signum, frame):
        raise TimedOut()
    previous = signal.signal(signal.SIGALRM, alarm)
    signal.alarm(seconds)
    stderr = io.StringIO()
    try:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(stderr):
            code = report.main([path, "--out", out] + (["--timeline", timeline] if timeline else []))
        return ("drawn" if code == 0 else "refused"), stderr.getvalue()
    except TimedOut:
        return "timeout", ""
    except Exception:  # noqa: BLE001: any escape is the finding
        return "traceback", traceback.format_exc()
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
        import matplotlib.pyplot as plt
        plt.close("all")


def seeds(given):
    files = given or sorted(glob.glob(os.path.join(TOP, "tests", "fuzz", "seeds", "result_file", "*.json")))
    docs = []
    for name in files:
        with open(name, encoding="utf-8") as f:
            doc = json.load(f)
        if isinstance(doc, dict) and doc.get("format") in REPORT_FORMATS:
            docs.append((os.path.basename(name), doc))
    if not docs:
        sys.exit("report_fuzz.py: no seed is a result the report draws (" + ", ".join(REPORT_FORMATS) + ")")
    return docs


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("dtsim")
    parser.add_argument("seeds", nargs="*")
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--seconds-per-input", type=int, default=60)
    parser.add_argument("--regressions", help="run every file of this directory first")
    parser.add_argument("--findings", default=os.path.join(TOP, "build-fuzz", "findings", "report"))
    parser.add_argument("--keep-accepted", help="also write every accepted mutant here (a corpus)")
    args = parser.parse_args(argv)
    rng = random.Random(args.seed)
    report = load_report()
    pool = seeds(args.seeds)
    timeline_seed = os.path.join(TOP, "tests", "fuzz", "seeds", "report", "timeline.json")
    timelines = []
    if os.path.exists(timeline_seed):
        with open(timeline_seed, encoding="utf-8") as f:
            timelines.append(json.load(f))
    counts = dict.fromkeys(("tried", "accepted", "drawn", "refused", "traceback", "timeout"), 0)
    regressions = sorted(glob.glob(os.path.join(args.regressions, "*"))) if args.regressions else []
    with tempfile.TemporaryDirectory() as scratch:
        # A seed dtsim refuses would leave only mutants of the others: say so, not fuzz less.
        for name, seed in pool:
            path = os.path.join(scratch, name)
            with open(path, "w", encoding="utf-8") as f:
                json.dump(seed, f)
            if not accepted(args.dtsim, path, scratch):
                sys.exit(f"report_fuzz.py: dtsim report refuses the seed {name}; regenerate it")
        plain = os.path.join(scratch, "timeline_base.json")  # drawn with mutated timelines
        base = next((seed for _, seed in pool if seed["format"] == "dtsim.simulate_result"), None)
        if base is None:
            timelines, regressions = [], [r for r in regressions if not os.path.basename(r).startswith("timeline_")]
        else:
            with open(plain, "w", encoding="utf-8") as f:
                json.dump(base, f)
        for run in range(-len(regressions), args.runs):
            timeline = None
            if run < 0:  # a regression input, as it is; a timeline_*.json one is a timeline
                name = os.path.basename(regressions[run + len(regressions)])
                path = os.path.join(scratch, name)
                shutil.copy(regressions[run + len(regressions)], path)
                if name.startswith("timeline_"):
                    path, timeline = plain, path
            elif timelines and rng.random() < 0.25:
                name = "timeline.json"
                doc = copy.deepcopy(timelines[0])
                for _ in range(rng.randint(1, 3)):
                    mutate_one(doc, rng)
                path, timeline = plain, os.path.join(scratch, name)
                with open(timeline, "w", encoding="utf-8") as f:
                    json.dump(doc, f)
            else:
                name, seed = rng.choice(pool)
                doc = copy.deepcopy(seed)
                for _ in range(rng.randint(1, 3)):
                    mutate_one(doc, rng)
                path = os.path.join(scratch, f"{os.path.splitext(name)[0]}.json")
                with open(path, "w", encoding="utf-8") as f:
                    json.dump(doc, f)
            counts["tried"] += 1
            if not accepted(args.dtsim, path, scratch, timeline):
                continue
            counts["accepted"] += 1
            kept_input = timeline or path  # what was mutated
            if args.keep_accepted:
                os.makedirs(args.keep_accepted, exist_ok=True)
                shutil.copy(kept_input, os.path.join(args.keep_accepted, f"{run:06d}-{name}"))
            out = os.path.join(scratch, "report")
            outcome, detail = draw(report, path, out, args.seconds_per_input, timeline)
            shutil.rmtree(out, ignore_errors=True)
            counts[outcome] += 1
            if outcome in ("traceback", "timeout"):
                os.makedirs(args.findings, exist_ok=True)
                kept = os.path.join(args.findings, f"{outcome}-{run:06d}-{name}")
                shutil.copy(kept_input, kept)
                print(f"{outcome}: {kept}\n{detail}", file=sys.stderr)
            elif outcome == "refused" and not timeline:
                # Not a crash (the script's own error), but dtsim's readers should have refused
                # it first, naming the JSON path: kept to look at.
                os.makedirs(args.findings, exist_ok=True)
                kept = os.path.join(args.findings, f"refused-{run:06d}-{name}")
                shutil.copy(kept_input, kept)
                print(f"refused what dtsim accepted: {kept}: {detail.strip()}", file=sys.stderr)
    print("  ".join(f"{key} {value}" for key, value in counts.items()))
    return 1 if counts["traceback"] or counts["timeout"] else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
