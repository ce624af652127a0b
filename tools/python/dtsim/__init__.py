"""dtsim from Python: simulate, sweep and search training plans, replay profiler traces
(docs/python.md).

    import dtsim
    result = dtsim.simulate("tools/examples/gpt3_1.3b_16gpu.json",
                            overrides={"parallelism.pipeline": 4})
    print(result["iteration_time_ns"] / 1e9, "s")
    dtsim.to_dataframe(result)          # one row per pipeline stage (needs pandas)

A config is a dict (what a config file holds; relative paths in it are taken from the working
directory) or the path of a config file. `overrides` change fields of it, as `dtsim --set`
does: a dict {"parallelism.data": 16} or a list of "KEY.PATH=VALUE" strings. Each function
returns the document the matching command writes with `-o` (docs/formats/), as a dict, and
raises dtsim.Error for a bad config, naming the JSON path and the value. The simulator runs
with the GIL released.
"""
import json as _json
import numbers as _numbers
import os as _os
from collections.abc import Mapping as _Mapping

from . import _dtsim

__all__ = ["Error", "simulate", "sweep", "search", "model", "replay", "to_dataframe",
           "__version__"]

__version__ = _dtsim.version()
commit = _dtsim.commit()


class Error(ValueError):
    """A config, override or call dtsim cannot run, with where it went wrong.

    Attributes: message (what is wrong), path (the JSON path or argument, "" if none),
    value (the offending value as text, "" if none), file (the file, "" for a dict).
    """

    def __init__(self, text, message, path, value, file):
        super().__init__(text)
        self.message = message
        self.path = path
        self.value = value
        self.file = file


def _config(config, name="config"):
    """(JSON text, path) for the extension: one of the two is empty."""
    if isinstance(config, _Mapping):
        try:
            return _json.dumps(config, allow_nan=False), ""
        except (TypeError, ValueError) as error:
            raise Error(f"{name}: not JSON: {error}", f"not JSON: {error}", name, "", "") from None
    if isinstance(config, (str, _os.PathLike)):
        return "", _os.fspath(config)
    raise TypeError(f"{name} must be a dict or a path, not {type(config).__name__}")


def _value_text(value):
    """A value as --set reads it: text that is not JSON stays text, anything else is JSON."""
    if isinstance(value, str):
        try:
            _json.loads(value)
        except ValueError:
            return value
    return _json.dumps(value, allow_nan=False)


def _checked_value_text(value, where):
    """_value_text, with a value that is not JSON (NaN, a set) a dtsim.Error at `where`."""
    try:
        return _value_text(value)
    except (TypeError, ValueError) as error:
        raise Error(f"{where}: not JSON: {error}", f"not JSON: {error}", where, "", "") from None


def _overrides(overrides):
    if overrides is None:
        return []
    if isinstance(overrides, _Mapping):
        return [f"{key}={_checked_value_text(value, f'overrides[{key!r}]')}"
                for key, value in overrides.items()]
    if isinstance(overrides, str):
        raise TypeError('overrides must be a dict or a list of "KEY.PATH=VALUE" strings')
    return [str(assignment) for assignment in overrides]


def _int(value, name):
    """An integer argument: a float, a bool or a str is a TypeError, where int() would take
    2.5 as 2, True as 1 and "8" as 8 without a word."""
    if isinstance(value, bool) or not isinstance(value, _numbers.Integral):
        raise TypeError(f"{name} must be an integer, not {type(value).__name__} {value!r}")
    return int(value)


def _bool(value, name):
    """A flag: True or False; bool("false") would be True."""
    if not isinstance(value, bool):
        raise TypeError(f"{name} must be True or False, not {type(value).__name__} {value!r}")
    return value


def _outcome(outcome):
    text, error = outcome
    if error is not None:
        raise Error(*error)
    return _json.loads(text)


def simulate(config, *, overrides=None):
    """Simulates one training iteration of `config` (dtsim simulate).

    Returns the simulate result (docs/formats/simulate-result.md): "iteration_time_ns",
    "samples_per_second", "mfu", "stages" (time and memory per pipeline stage), ...
    """
    config_json, path = _config(config)
    return _outcome(_dtsim.simulate(config_json, path, _overrides(overrides)))


def sweep(config, vary, *, overrides=None, threads=0):
    """Simulates `config` at every combination of `vary`'s values (dtsim sweep).

    vary: {"KEY.PATH": [value, ...], ...}; the first key changes slowest. threads: 0 for every
    core. Returns the sweep document (docs/formats/sweep-result.md): "vary" and "points", each
    point with its values and its full simulate result, or its error.
    """
    if not isinstance(vary, _Mapping) or not vary:
        raise TypeError('vary must be a non-empty dict {"KEY.PATH": [values...]}')
    axes = []
    for key, values in vary.items():
        if isinstance(values, (str, bytes)) or not hasattr(values, "__iter__"):
            raise TypeError(f"vary[{key!r}] must be a list of values")
        axes.append((str(key), [_checked_value_text(value, f"vary[{key!r}]")
                                for value in values]))
    config_json, path = _config(config)
    return _outcome(_dtsim.sweep(config_json, path, _overrides(overrides), axes,
                                 _int(threads, "threads")))


def search(config, *, overrides=None, top=10, rerank=3, threads=0, gpus=0, ranks="symmetric"):
    """Searches the parallel plans of `config`'s model on its cluster (dtsim search).

    Returns the search document (docs/formats/search-result.md): "counts", "ranking" (plan
    indices, best first) and "plans" (one row per evaluated plan, named by "columns").
    """
    config_json, path = _config(config)
    return _outcome(_dtsim.search(config_json, path, _overrides(overrides), _int(top, "top"),
                                  _int(rerank, "rerank"), _int(threads, "threads"),
                                  _int(gpus, "gpus"), str(ranks)))


def model(model, *, gpu="a100-sxm4-80gb", micro_batch=1, seq_len=0, dtype="bf16",
          fp8_recipe=None, tensor_parallel=1, sequence_parallel=False,
          flash_attention=False, dropout=True, recompute="none", recompute_modules=(),
          layer=0):
    """Describes a model (dtsim model): a preset name ("llama3-70b"), a model JSON file, or a
    dict (docs/models.md); for a transformer, layer `layer` on one of `tensor_parallel` ranks,
    every op priced on `gpu`'s roofline.

    Returns the model report (docs/formats/model-report.md): "model" (the architecture),
    "parameters", and "layer" with its "ops" per pass, "totals" and "activation_bytes".
    seq_len 0 is the model's max_seq; dtype "fp8" runs the linear layers' GEMMs in FP8
    (fp8_recipe, default "delayed"; given with another dtype, an error); recompute_modules:
    the modules selective recompute re-runs.
    """
    if isinstance(model, _Mapping):
        model_json, name = _config(model)
    elif isinstance(model, (str, _os.PathLike)):
        model_json, name = "", _os.fspath(model)
    else:
        raise TypeError(f"model must be a preset name, a path or a dict, not {type(model).__name__}")
    if isinstance(recompute_modules, str):
        modules = recompute_modules
    else:
        modules = ",".join(recompute_modules)
    return _outcome(_dtsim.model(model_json, name, str(gpu), _int(micro_batch, "micro_batch"),
                                 _int(seq_len, "seq_len"), str(dtype),
                                 "" if fp8_recipe is None else str(fp8_recipe),
                                 _int(tensor_parallel, "tensor_parallel"),
                                 _bool(sequence_parallel, "sequence_parallel"),
                                 _bool(flash_attention, "flash_attention"),
                                 _bool(dropout, "dropout"), str(recompute), modules,
                                 _int(layer, "layer")))


def replay(trace, *, what_if=None, comm_groups=None, element_bytes=None):
    """Replays a trace (dtsim replay): rebuilds what the run waited on, simulates it with the
    measured durations and, for a profiler trace, compares each ProfilerStep.
    trace: a PyTorch profiler (Kineto) or Chrome trace file (.json or .json.gz), a directory of
    them, or a list of files and directories: one job, one trace per rank. Or a Chakra
    execution trace, a list of one per rank, or a PyTorch host execution trace and the Kineto
    trace recorded with it (linked).
    what_if: a dict as a what-if file holds it (docs/replay.md: {"speedups": ["gemm=2"],
    "overlap": "none" | "collectives", "network": "dgx-h100", "data_parallel": N,
    "compression": ..., "gpu": ...}) or the path of such a file; a Chakra trace takes
    "network" (and "gpu" for compute nodes without a duration) only.
    comm_groups, element_bytes: for Chakra traces, as dtsim replay's --comm-groups and
    --element-bytes (None: 2, for traces whose sizes count elements).
    Returns the replay result (docs/formats/replay-result.md): "trace" (import statistics),
    "graph", "steps" (measured and simulated per step) and, with a what-if, "what_if".
    """
    if isinstance(trace, (str, _os.PathLike)):
        traces = [_os.fspath(trace)]
    elif hasattr(trace, "__iter__"):
        traces = [_os.fspath(item) for item in trace]
    else:
        raise TypeError(f"trace must be a path or a list of paths, not {type(trace).__name__}")
    what_if_json, what_if_path = "", ""
    if what_if is not None:
        what_if_json, what_if_path = _config(what_if, "what_if")
    groups = "" if comm_groups is None else _os.fspath(comm_groups)
    size = None if element_bytes is None else _int(element_bytes, "element_bytes")
    return _outcome(_dtsim.replay(traces, what_if_json, what_if_path, groups, size))


def to_dataframe(result):
    """A result of simulate, sweep, search, model or replay as a pandas DataFrame (pandas must
    be installed).

    simulate: one row per pipeline stage (nested fields as "time.compute_ns"); model: one row
    per op of the layer ("part": forward, backward or recompute); sweep: one row
    per point (the varied keys, "status", "error", the result's figures and "memory_bytes"); search: one row per
    evaluated plan, with "rank" (1 is best; empty when not ranked); replay: one row per
    ProfilerStep (measured, simulated, the critical path's parts as "critical_path_ms.gpu", and
    with a what-if its "what_if_ms" and "change").
    """
    import pandas  # noqa: PLC0415 (optional dependency: python3-pandas)

    kind = result.get("format") if isinstance(result, _Mapping) else None
    if kind == "dtsim.simulate_result":
        return pandas.json_normalize(result["stages"])
    if kind == "dtsim.sweep":
        return pandas.json_normalize([_sweep_row(point) for point in result["points"]])
    if kind == "dtsim.search":
        frame = pandas.DataFrame(result["plans"], columns=result["columns"])
        ranks = {index: rank + 1 for rank, index in enumerate(result["ranking"])}
        frame.insert(0, "rank", frame["index"].map(ranks).astype("Int64"))
        return frame
    if kind == "dtsim.replay_result":
        columns = ["rank", "step", "measured_ms", "simulated_ms", "error"]
        frame = pandas.json_normalize(result["steps"]) if result["steps"] else \
            pandas.DataFrame(columns=columns)
        if result.get("what_if"):
            keys = ["rank", "step", "what_if_ms", "change"]
            what_if = pandas.DataFrame([{key: step[key] for key in keys}
                                        for step in result["what_if"]["steps"]], columns=keys)
            frame = frame.merge(what_if, on=["rank", "step"], how="left")
        return frame
    if kind == "dtsim.model":
        layer = result.get("layer") or {"ops": {}}
        rows = [{"part": part, **op} for part in ("forward", "backward", "recompute")
                for op in layer["ops"].get(part, [])]
        return pandas.DataFrame(rows, columns=["part", "name", "kind", "pass", "flops",
                                               "model_flops", "bytes", "seconds", "saved_bytes"])
    raise ValueError(f"not a dtsim simulate, sweep, search, model or replay result "
                     f"(format {kind!r})")


def _sweep_row(point):
    """A sweep point's values, status and the scalar figures of its result, with
    "memory_bytes": the largest stage's peak per GPU, and "time_to_train_s": the training run's
    wall clock where the config has a time_to_train section (docs/time_to_train.md)."""
    row = dict(point["values"])
    row["status"] = point["status"]
    row["error"] = point["error"] or ""
    outcome = point["result"] or {}
    for key, value in outcome.items():
        if not isinstance(value, (dict, list)):
            row[key] = value
    if outcome.get("stages"):
        row["memory_bytes"] = max(stage["memory"]["total_bytes"] for stage in outcome["stages"])
    if outcome.get("time_to_train"):
        row["time_to_train_s"] = outcome["time_to_train"]["wall_s"]
    return row
