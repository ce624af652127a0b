#!/usr/bin/env python3
"""Builds a large synthetic Kineto trace by repeating a real one, for import benchmarks.

Usage: make_large_trace.py SOURCE.json[.gz] OUT.json SIZE_MB

Each repetition of SOURCE's traceEvents is shifted in time by the source's span and gets its
correlation ids, External ids and ProfilerStep numbers offset, so the result is one long,
self-consistent trace (launches still match their kernels) of at least SIZE_MB megabytes of
uncompressed JSON. Written as a stream; the output is plain JSON.
"""
import gzip
import json
import sys


def load(path):
    opener = gzip.open if open(path, "rb").read(2) == b"\x1f\x8b" else open
    with opener(path, "rt") as f:
        return json.load(f)


def main():
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    source, out_path, size_mb = sys.argv[1], sys.argv[2], float(sys.argv[3])
    trace = load(source)
    events = [e for e in trace["traceEvents"] if e.get("ph") != "M"]
    metadata = [e for e in trace["traceEvents"] if e.get("ph") == "M"]
    timed = [e for e in events if isinstance(e.get("ts"), (int, float))]
    start = min(e["ts"] for e in timed)
    span = max(e["ts"] + e.get("dur", 0) for e in timed) - start + 1
    max_id = 1 + max([e.get("args", {}).get("correlation", 0) for e in events] +
                     [e.get("args", {}).get("External id", 0) for e in events])
    header = {k: v for k, v in trace.items() if k != "traceEvents"}
    target = size_mb * 1e6
    written = 0
    with open(out_path, "w") as out:
        head = json.dumps(header)[:-1] + ', "traceEvents": [\n'
        out.write(head)
        written += len(head)
        first = True
        for e in metadata:
            line = ("" if first else ",\n") + json.dumps(e)
            out.write(line)
            written += len(line)
            first = False
        rep = 0
        while written < target:
            for e in events:
                e2 = dict(e)
                if isinstance(e2.get("ts"), (int, float)):
                    e2["ts"] = e["ts"] + rep * span
                args = e.get("args")
                if args:
                    a2 = dict(args)
                    for key in ("correlation", "External id"):
                        if isinstance(a2.get(key), int) and a2[key] >= 0:
                            a2[key] += rep * max_id
                    e2["args"] = a2
                if str(e2.get("name", "")).startswith("ProfilerStep#"):
                    e2["name"] = "ProfilerStep#%d" % (int(e2["name"][13:]) + rep * 1000)
                if isinstance(e2.get("id"), int):
                    e2["id"] += rep * max_id
                line = ",\n" + json.dumps(e2)
                out.write(line)
                written += len(line)
            rep += 1
        out.write("\n]}\n")
    print("wrote %s: %.1f MB, %d repetitions of %d events" % (out_path, written / 1e6, rep,
                                                               len(events)))


if __name__ == "__main__":
    main()
