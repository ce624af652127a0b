#!/usr/bin/env python3
"""Assembles the fuzz harnesses' seed corpora and dictionaries (docs/development.md, "Fuzzing").

Usage: make_corpus.py OUT_DIR [--shared DIR]

Writes OUT_DIR/corpus/HARNESS/ (seed inputs) and OUT_DIR/dicts/HARNESS.dict from what the
project ships and the real traces beside it: tools/examples (configs, what-ifs, a task graph,
the H100 op-cost table), tests/data, tests/fuzz/seeds (inputs nothing else provides), and
../shared/traces (Kineto, Chakra protobuf and JSON). Large files are cut to small, still valid
documents (the first events or nodes), since libFuzzer mutates small inputs best. The kineto
and chakra harnesses read their first byte as a flag (odd: gzip the rest), so each trace seed
is written twice, plain and gzip.
"""
import argparse
import gzip
import json
import os
import pathlib
import re
import sys

TOP = pathlib.Path(__file__).resolve().parents[2]
HARNESSES = ["quantity", "config", "overrides", "task_graph", "kineto", "chakra", "comm_groups",
             "op_costs", "search_file", "launch_args", "nemo_config", "simulate", "result_file",
             "points"]
MAX_SEED_BYTES = 48 * 1024
QUANTITY = re.compile(r"^\s*[0-9.][0-9.eE+-]*\s*[A-Za-z/]+\s*$")


def read_text(path):
    data = path.read_bytes()
    if data[:2] == b"\x1f\x8b":
        data = gzip.decompress(data)
    return data.decode("utf-8", errors="replace")


def cut_list(document, key, limit=MAX_SEED_BYTES):
    """`document` with its list under `key` cut to the longest prefix that fits in `limit`."""
    items = document.get(key, [])
    lo, hi = 0, len(items)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        trial = dict(document, **{key: items[:mid]})
        if len(json.dumps(trial)) <= limit:
            lo = mid
        else:
            hi = mid - 1
    return dict(document, **{key: items[:lo]})


GPU_CATEGORIES = {"kernel", "gpu_memcpy", "gpu_memset"}
LAUNCH_CATEGORIES = {"cuda_runtime", "cuda_driver"}


def kineto_cut(document, limit=MAX_SEED_BYTES):
    """A Kineto trace cut to fit `limit` with what a replay needs. Kineto writes host events
    first, so a prefix of `traceEvents` held host events only and the replay refused it ("no GPU
    events"): 17 of 21 seeds did. Kept instead: the metadata, and the events of a window from the
    ProfilerStep around the first GPU work on (a GPU event counts at its launch, matched by
    correlation id), as many as fit."""
    events = document.get("traceEvents")
    if not isinstance(events, list):
        return cut_list(document, "traceEvents", limit)
    meta = [e for e in events if isinstance(e, dict) and e.get("ph") == "M"]
    timed = [e for e in events if isinstance(e, dict) and e.get("ph") != "M"
             and isinstance(e.get("ts"), (int, float))]
    gpu = [e for e in timed if e.get("cat") in GPU_CATEGORIES]
    if not gpu:
        return cut_list(document, "traceEvents", limit)
    launched = {e["args"]["correlation"]: e["ts"] for e in timed
                if e.get("cat") in LAUNCH_CATEGORIES and isinstance(e.get("args"), dict)
                and "correlation" in e["args"]}

    def at(event):
        args = event.get("args")
        if event.get("cat") in GPU_CATEGORIES and isinstance(args, dict):
            return launched.get(args.get("correlation"), event["ts"])
        return event["ts"]

    start = min(at(e) for e in gpu)
    steps = [e["ts"] for e in timed
             if str(e.get("name", "")).startswith("ProfilerStep#") and e["ts"] <= start]
    start = max(steps, default=start)
    ordered = sorted((at(e), i) for i, e in enumerate(timed) if at(e) >= start)

    def first(n):
        return dict(document, traceEvents=meta + [timed[i] for i in sorted(i for _, i in ordered[:n])])

    lo, hi = 0, len(ordered)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if len(json.dumps(first(mid))) <= limit:
            lo = mid
        else:
            hi = mid - 1
    return first(lo)


def leaves(value, path=""):
    """(dotted path, JSON text) of every leaf of a config, for --set lines."""
    if isinstance(value, dict):
        for key, child in value.items():
            yield from leaves(child, f"{path}.{key}" if path else key)
    else:
        yield path, json.dumps(value)


def keys_of(value, found):
    if isinstance(value, dict):
        for key, child in value.items():
            found.add(key)
            keys_of(child, found)
    elif isinstance(value, list):
        for child in value:
            keys_of(child, found)
    elif isinstance(value, str) and len(value) < 40:
        found.add(value)


class Corpus:
    def __init__(self, out):
        self.out = out
        self.tokens = {name: set() for name in HARNESSES}

    def add(self, harness, name, data):
        folder = self.out / "corpus" / harness
        folder.mkdir(parents=True, exist_ok=True)
        if isinstance(data, str):
            data = data.encode()
        (folder / name).write_bytes(data)

    def add_json(self, harness, name, document):
        self.add(harness, name, json.dumps(document, indent=1))
        keys_of(document, self.tokens[harness])

    def add_trace(self, harness, name, text):
        self.add(harness, name + ".plain", b"\x00" + text.encode())
        self.add(harness, name + ".gzip", b"\x01" + text.encode())


def small_config(document, folder):
    """`document` cut to what the simulate harness runs (at most 64 GPUs, 16 layers and 16
    micro-batches), its other choices kept, so that the harness simulates it: a data-parallel
    ResNet stays data-parallel, a pipeline's per-stage layer list goes with its size, and an
    op-cost table named relative to the config (`folder`) is named absolute (the harness reads
    the config from a scratch file)."""
    small = json.loads(json.dumps(document))
    if isinstance(small.get("profile"), str) and not os.path.isabs(small["profile"]):
        small["profile"] = str(folder / small["profile"])
    model = small.get("model")
    if isinstance(model, dict) and model.get("layers", 0) > 16:
        model["layers"] = 8
    elif isinstance(model, str) and "resnet" not in model:
        small["model"] = {"preset": model, "layers": 4}
    plan = small.get("parallelism", {})
    size = lambda key: (plan.get(key, {}).get("size", 1) if isinstance(plan.get(key), dict)
                        else plan.get(key, 1))
    resnet = "resnet" in json.dumps(model)
    if size("data") * size("tensor") * size("pipeline") * size("context") > 64:
        # A long-context plan keeps up to 8 context ranks: with none, 128k tokens do not fit.
        shape = (("data", 16),) if resnet else (
            ("data", 2), ("tensor", 2), ("pipeline", 2), ("context", min(size("context"), 8)))
        if isinstance(plan.get("pipeline"), dict):
            plan["pipeline"].pop("layers", None)
        for key, value in shape:
            if isinstance(plan.get(key), dict):
                plan[key]["size"] = value
            elif key in plan or key != "context":
                plan[key] = value
        for key in ("expert", "expert_tensor"):
            plan.pop(key, None)
        if isinstance(small.get("cluster"), dict):
            small["cluster"].pop("nodes", None)
    training = small.get("training")
    if isinstance(training, dict) and isinstance(training.get("global_batch"), int):
        per_step = training.get("micro_batch", 1) * size("data")
        training["global_batch"] = min(training["global_batch"], per_step * 4)
    return small


def add_configs(corpus):
    examples = sorted((TOP / "tools/examples").glob("*.json"))
    examples += sorted((TOP / "tools/examples/what_ifs").glob("*.json"))
    examples += sorted((TOP / "tests/fuzz/seeds/config").glob("*.json"))
    for path in examples:
        document = json.loads(read_text(path))
        if "tasks" in document:
            continue  # a task graph (pipeline_2x2.json)
        corpus.add_json("config", path.name, document)
        if "what_ifs" not in path.parts:
            corpus.add_json("simulate", path.name, small_config(document, path.parent))
        lines = [f"{key}={value}" for key, value in leaves(document)]
        corpus.add("overrides", path.stem + ".txt", "\n".join(lines[:12]) + "\n")
        for key, value in leaves(document):
            if isinstance(json.loads(value), str) and QUANTITY.match(json.loads(value)):
                corpus.add("quantity", f"{path.stem}.{key}.txt", json.loads(value))
    corpus.add("overrides", "vary.txt",
               "vary parallelism.tensor.size=1,2,4\nvary compression=none,{\"method\": \"topk\"}\n"
               "parallelism.pipeline.schedule=gpipe\ncluster.nodes=null\n")


def add_task_graphs(corpus):
    corpus.add_json("task_graph", "pipeline_2x2.json",
                    json.loads(read_text(TOP / "tools/examples/pipeline_2x2.json")))
    corpus.add("task_graph", "broken_graph.json", (TOP / "tests/data/broken_graph.json").read_bytes())
    # Times near int64's end: a chain whose sum overflows, a collective priced past the horizon.
    huge = 9223372036854775807
    corpus.add_json("task_graph", "huge_times.json", {
        "format": "dtsim.task_graph", "version": "1.0",
        "collectives": [{"id": "c", "op": "all_reduce", "size_bytes": huge, "group": [0, 1]}],
        "tasks": [
            {"id": "a", "rank": 0, "stream": "s", "kind": "compute", "duration_ns": huge},
            {"id": "b", "rank": 0, "stream": "s", "kind": "compute", "duration_ns": huge,
             "deps": ["a"]},
            {"id": "c0", "rank": 0, "stream": "c", "kind": "collective", "collective": "c"},
            {"id": "c1", "rank": 1, "stream": "c", "kind": "collective", "collective": "c"}]})


def add_kineto(corpus, shared):
    traces = sorted((shared / "traces/kineto").glob("*.json.gz"))
    traces += sorted((TOP / "tests/data/captured").glob("*.json.gz"))
    for path in traces:
        document = json.loads(read_text(path))
        if "traceEvents" not in document:
            continue  # an execution trace: a chakra seed
        cut = kineto_cut(document)
        corpus.add_trace("kineto", path.name.replace(".json.gz", ""), json.dumps(cut))
        keys_of({k: v for k, v in cut.items() if k != "traceEvents"}, corpus.tokens["kineto"])
        for event in cut["traceEvents"][:200]:
            keys_of(event, corpus.tokens["kineto"])


def protobuf_prefix(data, limit=MAX_SEED_BYTES):
    """The leading varint-length-framed records of a Chakra .et stream that fit in `limit`."""
    position = 0
    while position < len(data):
        length, shift, start = 0, 0, position
        while True:
            byte = data[position]
            position += 1
            length |= (byte & 0x7F) << shift
            shift += 7
            if byte < 0x80:
                break
        if position + length > limit:
            return data[:start]
        position += length
    return data


def add_chakra(corpus, shared):
    chakra = shared / "traces/chakra"
    # The shared traces, and dtsim's own exports (seeds/chakra: a ring attention's shifts as
    # send/recv pairs).
    for path in sorted(chakra.glob("*.et")) + sorted((TOP / "tests/fuzz/seeds/chakra").glob("*.et")):
        corpus.add("chakra", path.name + ".plain", b"\x00" + protobuf_prefix(path.read_bytes()))
    for path in sorted(chakra.glob("*.json*")) + sorted((shared / "traces/kineto").glob("*_et.json.gz")):
        document = json.loads(read_text(path))
        key = "workload_graph" if "workload_graph" in document else "nodes"
        text = json.dumps(cut_list(document, key) if key in document else document)
        corpus.add_trace("chakra", path.name.split(".json")[0], text)
        keys_of(json.loads(text), corpus.tokens["chakra"])
    for path in sorted((TOP / "tests/fuzz/seeds/comm_groups").glob("*")):
        corpus.add("comm_groups", path.name, path.read_bytes())


def add_op_costs(corpus):
    document = json.loads(read_text(TOP / "tools/examples/profiles/h100-sxm5-80gb.json"))
    corpus.add_json("op_costs", "h100-sxm5-80gb.json", cut_list(document, "ops", 16 * 1024))


def add_launch_args(corpus):
    """The launch commands of tests/data/launch, and their flags as dictionary words."""
    for path in sorted((TOP / "tests/data/launch").glob("*.txt")):
        text = path.read_text()
        corpus.add("launch_args", path.name, text.encode())
        corpus.tokens["launch_args"].update(w for w in text.split() if w.startswith("--"))
    # Megatron-DeepSpeed's flags with DeepSpeed's config after them (the harness reads the JSON
    # from the first line that opens an object), as dtsim search --emit writes the pair.
    deepspeed = ("--num-layers 4 --hidden-size 1024 --num-attention-heads 16 --seq-length 2048\n"
                 "--num-experts 8 --topk 2 --expert-interval 1 --disable-moe-token-dropping\n"
                 "--moe-expert-parallel-size 2 --ds-sequence-parallel-size 2 --zero-stage 1\n"
                 "--no-pipeline-parallel --use-flash-attn-v2 --bf16 --deepspeed\n")
    ds_config = {"train_batch_size": 64, "train_micro_batch_size_per_gpu": 1,
                 "gradient_accumulation_steps": 16,
                 "zero_optimization": {"stage": 1, "overlap_comm": True},
                 "bf16": {"enabled": True}, "communication_data_type": "bf16",
                 "optimizer": {"type": "OneBitAdam", "params": {"freeze_step": 100}}}
    corpus.add("launch_args", "deepspeed.txt", (deepspeed + json.dumps(ds_config)).encode())
    # Gemma 3's windows as Megatron-LM takes them: the pattern as a Python list expression.
    windows = ("--num-layers 12 --hidden-size 512 --num-attention-heads 8 --seq-length 4096\n"
               "--global-batch-size 16 --qk-layernorm --window-size 1024,0\n"
               "--window-attn-skip-freq ([1]*5+[0])*2\n")
    corpus.add("launch_args", "windows.txt", windows.encode())
    corpus.tokens["launch_args"].update(w for w in windows.split() if w.startswith("--"))
    corpus.tokens["launch_args"].update(w for w in deepspeed.split() if w.startswith("--"))
    keys_of(ds_config, corpus.tokens["launch_args"])


def add_nemo_configs(corpus):
    """The NeMo training configs of tests/data/launch (the second with its vocabulary on a
    first line, as the harness reads it), their keys and YAML's syntax as dictionary words."""
    for path in sorted((TOP / "tests/data/launch").glob("*.yaml")):
        text = path.read_text()
        if "GPT2BPETokenizer" not in text:
            text = "# vocab 32000\n" + text
        corpus.add("nemo_config", path.name, text.encode())
        corpus.tokens["nemo_config"].update(
            m.group(1) for m in re.finditer(r"^\s*-?\s*([A-Za-z_][A-Za-z0-9_]*):", text, re.M))
    corpus.tokens["nemo_config"].update(
        ["${", "${.", "${..", "${training.model.", "${multiply:", "${divide_ceil:",
         "${divide_floor:", ": ", "- ", "---", "&a ", "*a", "? ", "!!str ", "'", "null", "true",
         "False", "bf16-mixed"])


def add_points(corpus, shared):
    """Measurements files, one point each: the memory points dtsim ships and, beside it, the
    shared training-run points (published-points.json, calibration-points.json)."""
    memory = json.loads((TOP / "tools/validation/memory-points.json").read_text())
    for i, point in enumerate(memory["points"]):
        corpus.add_json("points", f"memory_{i:02d}.json", dict(memory, points=[point]))
    for name in ["published-points.json", "calibration-points.json"]:
        path = shared / "validation" / name
        if not path.is_file():
            continue
        document = json.loads(path.read_text())
        for i, point in enumerate(document.get("points", [])):
            corpus.add_json("points", f"{path.stem}_{i:02d}.json", {"points": [point]})


def add_checked_in(corpus):
    for harness in ["quantity", "search_file", "result_file"]:
        for path in sorted((TOP / "tests/fuzz/seeds" / harness).glob("*")):
            corpus.add(harness, path.name, path.read_bytes())
            if path.suffix == ".json":
                keys_of(json.loads(read_text(path)), corpus.tokens[harness])


def add_result_pairs(corpus):
    """For `dtsim diff`: the result seeds of one family two by two, as the result_file harness
    reads two documents (separated by a line "--- B")."""
    by_family = {}
    for path in sorted((TOP / "tests/fuzz/seeds/result_file").glob("*.json")):
        by_family.setdefault(json.loads(path.read_text()).get("format"), []).append(path)
    for paths in by_family.values():
        for a, b in zip(paths, paths[1:]):
            corpus.add("result_file", f"{a.stem}--{b.stem}",
                       a.read_bytes().rstrip(b"\n") + b"\n--- B\n" + b.read_bytes())


MAX_DICT_WORD = 64  # libFuzzer skips longer dictionary entries (Word::GetMaxSize()).
C_SPACE = " \t\n\v\f\r"  # C's isspace(), which libFuzzer uses (Python's also has \x1c-\x1f)


def dict_entry(word):
    """One dictionary line for WORD, in libFuzzer's grammar (FuzzerUtil.cpp,
    ParseOneDictionaryEntry): printable ASCII kept, `"` and `\\` escaped, every other byte of
    the UTF-8 encoding written as \\xNN (a raw non-ASCII byte makes libFuzzer refuse the file)."""
    out = []
    for byte in word.encode("utf-8"):
        if byte in (0x22, 0x5C):
            out.append("\\" + chr(byte))
        elif 0x20 <= byte < 0x7F:
            out.append(chr(byte))
        else:
            out.append(f"\\x{byte:02x}")
    return '"' + "".join(out) + '"'


def parse_dict_line(line):
    """The bytes libFuzzer reads from one dictionary line, None for a blank line or a comment;
    ValueError where libFuzzer would stop with "ParseDictionaryFile: error in line N"."""
    line = line.strip(C_SPACE)
    if not line or line.startswith("#"):
        return None
    left = line.find('"')
    if len(line) < 3 or not line.endswith('"') or left >= len(line) - 1:
        raise ValueError("an entry is a non-empty quoted string, optionally after NAME=")
    body, out, i = line[left + 1:-1], bytearray(), 0
    while i < len(body):
        char = body[i]
        if not (char.isascii() and char.isprintable()) and char not in C_SPACE:
            raise ValueError(f"raw byte {char!r}: write it as \\xNN")
        if char == "\\":
            if body[i + 1:i + 2] in ("\\", '"'):
                out.append(ord(body[i + 1]))
                i += 2
                continue
            if re.fullmatch(r"x[0-9a-fA-F]{2}", body[i + 1:i + 4]):
                out.append(int(body[i + 2:i + 4], 16))
                i += 4
                continue
            raise ValueError("an escape is \\\\, \\\" or \\xNN")
        out.append(ord(char))
        i += 1
    return bytes(out)


def check_dict(path):
    """Refuses to leave a dictionary libFuzzer would refuse: that stops the fuzz run before
    its first execution (CI's smoke run reported 'none' for the harness)."""
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        try:
            parse_dict_line(line)
        except ValueError as error:
            raise SystemExit(f"{path}:{number}: {error}: {line}") from None


def write_dicts(corpus):
    """The JSON dictionary (tests/fuzz/dicts/json.dict) plus each harness's keys and names,
    each word escaped for libFuzzer; the chakra harness also gets the protobuf dictionary."""
    folder = corpus.out / "dicts"
    folder.mkdir(parents=True, exist_ok=True)
    common = (TOP / "tests/fuzz/dicts/json.dict").read_text()
    protobuf = (TOP / "tests/fuzz/dicts/protobuf.dict").read_text()
    for harness in HARNESSES:
        words = set(corpus.tokens[harness])
        if harness in ("config", "overrides", "simulate"):
            words |= corpus.tokens["config"]
        lines = sorted({dict_entry(w) for w in words
                        if w and len(w.encode("utf-8")) <= MAX_DICT_WORD})
        text = common + (protobuf if harness == "chakra" else "") + "\n".join(lines)
        path = folder / f"{harness}.dict"
        path.write_text(text + "\n", encoding="utf-8")
        check_dict(path)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=pathlib.Path)
    parser.add_argument("--shared", type=pathlib.Path, default=TOP.parent / "shared")
    args = parser.parse_args()
    corpus = Corpus(args.out)
    add_configs(corpus)
    add_task_graphs(corpus)
    if (args.shared / "traces").is_dir():
        add_kineto(corpus, args.shared)
        add_chakra(corpus, args.shared)
    else:
        print(f"make_corpus.py: no {args.shared}/traces: trace seeds from tests/data only",
              file=sys.stderr)
        add_kineto(corpus, TOP / "tests/data")
    add_op_costs(corpus)
    add_launch_args(corpus)
    add_nemo_configs(corpus)
    add_points(corpus, args.shared)
    add_checked_in(corpus)
    add_result_pairs(corpus)
    write_dicts(corpus)
    for harness in HARNESSES:
        folder = args.out / "corpus" / harness
        count = len(list(folder.iterdir())) if folder.is_dir() else 0
        print(f"  {harness:<12} {count:>3} seeds")


if __name__ == "__main__":
    main()
