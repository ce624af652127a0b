#!/usr/bin/env python3
"""The Python module (tools/python, docs/python.md) against the command line: every function
gives the figures the matching command writes, errors carry the JSON path and value, results
become DataFrames, and the simulator runs with the GIL released.

Usage: python_api_test.py DTSIM_BINARY REPOSITORY_TOP SHARED_DIR   (with the module on PYTHONPATH)
"""
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
import unittest

import dtsim

DTSIM = sys.argv[1] if len(sys.argv) > 1 else "build/dtsim"
TOP = sys.argv[2] if len(sys.argv) > 2 else "."
SMALL = os.path.join(TOP, "tools/examples/gpt3_1.3b_16gpu.json")
LARGE = os.path.join(TOP, "tools/examples/gpt3_175b_1024gpu.json")
SHARED = sys.argv[3] if len(sys.argv) > 3 else os.path.join(TOP, "../shared")
KINETO = os.path.join(SHARED, "traces/kineto/critical_path__alexnet__benchmark_result_2869224_"
                      "1695835535_trace.json.gz")
STEPPED = os.path.join(SHARED, "traces/kineto/timeline_analysis__sampled_rank-0.json.gz")
CHAKRA = os.path.join(SHARED, "traces/chakra/chakra.0.et")


def cli(*args):
    """Runs the dtsim binary with -o into a temporary file; returns that JSON document."""
    with tempfile.TemporaryDirectory() as directory:
        out = os.path.join(directory, "out")
        command = [DTSIM, *args]
        # simulate and model write FILE; sweep and search PREFIX.json and PREFIX.csv.
        if args[0] in ("simulate", "model"):
            out += ".json"
            command += ["-q", "-o", out]
        else:
            command += ["-q", "-o", out]
            out += ".json"
        subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
        with open(out, encoding="utf-8") as file:
            return json.load(file)


def load(path):
    with open(path, encoding="utf-8") as file:
        return json.load(file)


class SimulateTest(unittest.TestCase):
    def test_path_gives_the_commands_result(self):
        expected = cli("simulate", SMALL)
        result = dtsim.simulate(SMALL)
        self.assertEqual(result["format"], "dtsim.simulate_result")
        for key in ("iteration_time_ns", "samples_per_second", "mfu", "stages", "collectives"):
            self.assertEqual(result[key], expected[key], key)
        self.assertEqual(result["provenance"]["command"], "simulate")

    def test_dict_with_overrides_is_the_command_with_set(self):
        expected = cli("simulate", SMALL, "--set", "parallelism.pipeline.size=4",
                       "--set", "training.recompute=full")
        config = load(SMALL)
        as_dict = dtsim.simulate(config, overrides={"parallelism.pipeline.size": 4,
                                                    "training.recompute": "full"})
        as_list = dtsim.simulate(config, overrides=["parallelism.pipeline.size=4",
                                                    "training.recompute=full"])
        self.assertEqual(len(expected["stages"]), 4)
        for result in (as_dict, as_list):
            self.assertEqual(result["iteration_time_ns"], expected["iteration_time_ns"])
            self.assertEqual(result["stages"], expected["stages"])
        # The dict itself is left as it was.
        self.assertEqual(config, load(SMALL))

    def test_unknown_key_names_its_path(self):
        config = load(SMALL)
        config["parallelism"]["pipelin"] = 2
        with self.assertRaises(dtsim.Error) as raised:
            dtsim.simulate(config)
        error = raised.exception
        self.assertEqual(error.path, "parallelism.pipelin")
        self.assertEqual(error.file, "")
        self.assertIn("pipeline", error.message)  # the suggestion
        self.assertIsInstance(error, ValueError)

    def test_bad_value_names_path_and_value(self):
        with self.assertRaises(dtsim.Error) as raised:
            dtsim.simulate(SMALL, overrides={"parallelism.tensor": 3})
        self.assertEqual(raised.exception.path, "parallelism.tensor")
        self.assertEqual(raised.exception.value, "3")
        self.assertEqual(raised.exception.file, SMALL)
        self.assertIn("parallelism.tensor", str(raised.exception))

    def test_missing_file_and_wrong_types(self):
        with self.assertRaises(dtsim.Error) as raised:
            dtsim.simulate(os.path.join(TOP, "no/such/config.json"))
        self.assertIn("no/such/config.json", str(raised.exception))
        with self.assertRaises(dtsim.Error) as raised:
            dtsim.simulate({"model": float("nan")})
        self.assertEqual(raised.exception.path, "config")
        # A value that is not JSON is a dtsim.Error naming the override (it was json's own).
        with self.assertRaises(dtsim.Error) as raised:
            dtsim.simulate(SMALL, overrides={"training.micro_batch": float("nan")})
        self.assertEqual(raised.exception.path, "overrides['training.micro_batch']")
        # A NUL byte ended the path for the system: the file before it was simulated.
        with self.assertRaises(dtsim.Error) as raised:
            dtsim.simulate(SMALL + "\x00x")
        self.assertIn("a path with a NUL byte", str(raised.exception))
        with self.assertRaises(TypeError):
            dtsim.simulate(42)
        with self.assertRaises(TypeError):
            dtsim.simulate(SMALL, overrides="parallelism.data=2")

    def test_dataframe_has_a_row_per_stage(self):
        result = dtsim.simulate(SMALL, overrides={"parallelism.pipeline.size": 2})
        frame = dtsim.to_dataframe(result)
        self.assertEqual(len(frame), 2)
        self.assertEqual(list(frame["time.compute_ns"]),
                         [stage["time"]["compute_ns"] for stage in result["stages"]])
        self.assertIn("memory.total_bytes", frame.columns)
        with self.assertRaises(ValueError):
            dtsim.to_dataframe({"format": "something else"})


class SweepTest(unittest.TestCase):
    def test_points_are_the_commands(self):
        expected = cli("sweep", SMALL, "--vary", "parallelism.pipeline.size=1,2",
                       "--vary", "training.recompute=none,full", "-j", "2")
        result = dtsim.sweep(SMALL, {"parallelism.pipeline.size": [1, 2],
                                     "training.recompute": ["none", "full"]}, threads=2)
        self.assertEqual(result["format"], "dtsim.sweep")
        self.assertEqual([p["values"] for p in result["points"]],
                         [p["values"] for p in expected["points"]])
        for got, want in zip(result["points"], expected["points"]):
            self.assertEqual(got["result"]["iteration_time_ns"],
                             want["result"]["iteration_time_ns"])
        # Each point is what simulate gives for its values.
        single = dtsim.simulate(SMALL, overrides={"parallelism.pipeline.size": 2,
                                                  "training.recompute": "full"})
        self.assertEqual(result["points"][3]["result"]["iteration_time_ns"],
                         single["iteration_time_ns"])

    def test_failed_point_and_dataframe(self):
        result = dtsim.sweep(SMALL, {"parallelism.tensor": [1, 3]})
        frame = dtsim.to_dataframe(result)
        self.assertEqual(list(frame["parallelism.tensor"]), [1, 3])
        self.assertEqual(list(frame["status"]), ["ok", "failed"])
        self.assertIn("parallelism.tensor", frame["error"][1])
        self.assertEqual(frame["iteration_time_ns"][0],
                         result["points"][0]["result"]["iteration_time_ns"])
        self.assertGreater(frame["memory_bytes"][0], 0)

    def test_time_to_train_per_batch(self):
        # A larger global batch past the critical batch needs more tokens (docs/time_to_train.md):
        # at 2 Mi tokens (1,024 × 2,048) against the 1 Mi-token reference with a 1 Mi-token
        # critical batch, (1 + 2) / (1 + 1) = 1.5 times the budget.
        run = {"time_to_train.tokens": 1e10, "time_to_train.critical_batch_tokens": 1 << 20,
               "time_to_train.reference_batch_tokens": 1 << 20}
        result = dtsim.sweep(SMALL, {"training.global_batch": [512, 1024]}, overrides=run)
        frame = dtsim.to_dataframe(result)
        factors = [p["result"]["time_to_train"]["batch_factor"] for p in result["points"]]
        self.assertEqual(factors, [1.0, 1.5])
        self.assertEqual(list(frame["time_to_train_s"]),
                         [p["result"]["time_to_train"]["wall_s"] for p in result["points"]])

    def test_bad_axes(self):
        with self.assertRaises(dtsim.Error) as raised:
            dtsim.sweep(SMALL, {"parallelism.pipelin": [1, 2]})
        self.assertEqual(raised.exception.path, "parallelism.pipelin")
        with self.assertRaises(dtsim.Error) as raised:
            dtsim.sweep(SMALL, {"parallelism.tensor": [3, 5]})
        self.assertIn("every point failed", str(raised.exception))
        with self.assertRaises(TypeError):
            dtsim.sweep(SMALL, {})
        with self.assertRaises(TypeError):
            dtsim.sweep(SMALL, {"parallelism.tensor": "1,2"})
        # Negative threads were taken as every core, where search refused them.
        with self.assertRaises(dtsim.Error) as raised:
            dtsim.sweep(SMALL, {"parallelism.tensor": [1]}, threads=-1)
        self.assertEqual(raised.exception.path, "threads")
        with self.assertRaises(dtsim.Error) as raised:
            dtsim.sweep(SMALL, {"parallelism.tensor": [1, float("inf")]})
        self.assertEqual(raised.exception.path, "vary['parallelism.tensor']")
        # A value twice: two identical points.
        with self.assertRaises(dtsim.Error) as raised:
            dtsim.sweep(SMALL, {"parallelism.tensor": [1, 2, 1]})
        self.assertIn("a value listed twice", str(raised.exception))


class SearchTest(unittest.TestCase):
    def test_ranking_is_the_commands(self):
        expected = cli("search", SMALL, "--gpus", "16", "--top", "3", "-j", "2")
        result = dtsim.search(SMALL, gpus=16, top=3, threads=2)
        self.assertEqual(result["format"], "dtsim.search")
        self.assertEqual(result["counts"], expected["counts"])
        self.assertEqual(result["ranking"], expected["ranking"])
        self.assertEqual(result["plans"], expected["plans"])
        frame = dtsim.to_dataframe(result)
        self.assertEqual(len(frame), result["evaluated"])
        best = frame[frame["rank"] == 1]
        self.assertEqual(list(best["index"]), [result["ranking"][0]])
        self.assertEqual(frame["rank"].count(), len(result["ranking"]))

    def test_bad_call(self):
        with self.assertRaises(dtsim.Error) as raised:
            dtsim.search(SMALL, gpus=16, top=0)
        self.assertEqual(raised.exception.path, "top")
        with self.assertRaises(dtsim.Error) as raised:
            dtsim.search(SMALL, gpus=16, ranks="some")
        self.assertEqual(raised.exception.path, "ranks")
        with self.assertRaises(dtsim.Error) as raised:
            dtsim.search(SMALL)
        self.assertEqual(raised.exception.path, "cluster.nodes")


class ModelTest(unittest.TestCase):
    def test_preset_is_the_commands_report(self):
        expected = cli("model", "gpt3-175b", "--tp", "8", "--sp", "--recompute", "selective")
        result = dtsim.model("gpt3-175b", tensor_parallel=8, sequence_parallel=True,
                             recompute="selective")
        self.assertEqual(result["format"], "dtsim.model")
        self.assertEqual(result["parameters"], expected["parameters"])
        self.assertEqual(result["layer"], expected["layer"])
        self.assertEqual(round(result["parameters"]["total"] / 1e6), 174_604)  # 174.604 B
        frame = dtsim.to_dataframe(result)
        layer = result["layer"]
        self.assertEqual(len(frame), sum(len(layer["ops"][p]) for p in layer["ops"]))
        forward = frame[frame["part"] == "forward"]
        self.assertAlmostEqual(forward["seconds"].sum(), layer["totals"]["forward"]["seconds"])

    def test_dict_and_errors(self):
        config = {"preset": "llama3-8b", "layers": 4}
        result = dtsim.model(config, flash_attention=True, dropout=False)
        self.assertEqual(result["model"]["layers"], 4)
        self.assertTrue(result["layer"]["flash_attention"])
        with self.assertRaises(dtsim.Error) as raised:
            dtsim.model("llama3-8b", tensor_parallel=3)
        self.assertIn("must divide heads (32)", str(raised.exception))
        with self.assertRaises(dtsim.Error) as raised:
            dtsim.model("llama3-8b", recompute="some")
        self.assertEqual(raised.exception.path, "recompute")
        with self.assertRaises(dtsim.Error) as raised:
            dtsim.model("llama3-8", layer=0)
        self.assertIn('did you mean "llama3-8b"', str(raised.exception))
        with self.assertRaises(dtsim.Error) as raised:
            dtsim.model({"preset": "llama3-8b", "kv_heads": 5})
        self.assertIn("kv_heads", str(raised.exception))
        with self.assertRaises(dtsim.Error) as raised:
            dtsim.model("llama3-8b", seq_len=-5)
        self.assertEqual(raised.exception.path, "seq_len")
        with self.assertRaises(dtsim.Error) as raised:
            dtsim.model("llama3-8b", gpu="h1000")
        self.assertEqual((raised.exception.path, raised.exception.value), ("gpu", '"h1000"'))
        self.assertIsNone(dtsim.model("resnet-50")["layer"])
        with self.assertRaises(dtsim.Error) as raised:  # ignored before, as on the command line
            dtsim.model("llama3-8b", fp8_recipe="current")
        self.assertEqual(raised.exception.path, "fp8_recipe")

    def test_arguments_of_the_wrong_type_are_not_converted(self):
        # int() took 2.5 as 2 and True as 1; bool() took "false" as True.
        for call in (lambda: dtsim.model("llama3-8b", micro_batch=2.5),
                     lambda: dtsim.model("llama3-8b", tensor_parallel=True),
                     lambda: dtsim.model("llama3-8b", layer="1"),
                     lambda: dtsim.model("llama3-8b", flash_attention="false"),
                     lambda: dtsim.model("llama3-8b", dropout=0),
                     lambda: dtsim.search(SMALL, gpus=16.0),
                     lambda: dtsim.sweep(SMALL, {"training.micro_batch": [1]}, threads=1.5),
                     lambda: dtsim.replay(CHAKRA, element_bytes=2.0)):
            with self.assertRaises(TypeError):
                call()
        with self.assertRaises(TypeError) as raised:
            dtsim.model("llama3-8b", micro_batch=2.5)
        self.assertEqual(str(raised.exception), "micro_batch must be an integer, not float 2.5")


def cli_replay(*args):
    """dtsim replay ARGS -o FILE; that JSON document without its provenance."""
    with tempfile.TemporaryDirectory() as directory:
        out = os.path.join(directory, "replay.json")
        subprocess.run([DTSIM, "replay", *args, "-o", out], check=True,
                       stdout=subprocess.DEVNULL)
        document = load(out)
    del document["provenance"]
    return document


def without_provenance(document):
    document = dict(document)
    provenance = document.pop("provenance")
    return document, provenance


class ReplayTest(unittest.TestCase):
    def test_profiler_trace_is_the_commands_result(self):
        result, provenance = without_provenance(dtsim.replay(KINETO))
        self.assertEqual(result, cli_replay(KINETO))
        self.assertEqual(result["format"], "dtsim.replay_result")
        self.assertEqual(provenance["command"], "replay")
        self.assertEqual([entry["path"] for entry in provenance["inputs"]], [KINETO])

    def test_what_if_dict_and_file_are_the_commands_flags(self):
        expected = cli_replay(STEPPED, "--speedup", "gemm=2", "--speedup", "conv=2",
                              "--no-overlap")
        what_if = {"speedups": ["gemm=2", "conv=2"], "overlap": "none"}
        result, _ = without_provenance(dtsim.replay(STEPPED, what_if=what_if))
        self.assertEqual(result, expected)
        self.assertEqual(len(result["what_if"]["steps"]), 2)
        with tempfile.TemporaryDirectory() as directory:
            path = os.path.join(directory, "what_if.json")
            with open(path, "w", encoding="utf-8") as file:
                json.dump(what_if, file)
            from_file, _ = without_provenance(dtsim.replay([STEPPED], what_if=path))
        self.assertEqual(from_file, expected)

    def test_chakra_trace_on_a_cluster_is_the_commands_result(self):
        result, _ = without_provenance(dtsim.replay(CHAKRA, what_if={"network": "dgx-a100"}))
        self.assertEqual(result, cli_replay(CHAKRA, "--network", "dgx-a100"))
        self.assertEqual(result["trace"]["format"], "chakra")
        self.assertIn("network", result)

    def test_errors_name_the_key_the_value_and_the_file(self):
        with self.assertRaises(dtsim.Error) as raised:
            dtsim.replay(KINETO, what_if={"speedups": ["gemm=x"]})
        self.assertEqual((raised.exception.path, raised.exception.value), ("speedups[0]", "x"))
        with self.assertRaises(dtsim.Error) as raised:
            dtsim.replay(CHAKRA, what_if={"speedups": ["gemm=2"]})
        self.assertIn("a Chakra trace takes network only", raised.exception.message)
        self.assertEqual(raised.exception.file, CHAKRA)
        with self.assertRaises(dtsim.Error) as raised:
            dtsim.replay(KINETO, element_bytes=4)
        self.assertIn("element_bytes applies to Chakra traces", str(raised.exception))
        with self.assertRaises(dtsim.Error) as raised:
            dtsim.replay(CHAKRA, element_bytes=2)  # its sizes count bytes: not ignored
        self.assertIn("apply to traces whose sizes count elements", raised.exception.message)
        with self.assertRaises(dtsim.Error) as raised:
            dtsim.replay(os.path.join(TOP, "no-such-trace.json"))
        self.assertEqual(raised.exception.file, os.path.join(TOP, "no-such-trace.json"))
        with self.assertRaises(TypeError):
            dtsim.replay(42)

    def test_dataframe_has_a_row_per_step_with_the_what_if(self):
        result = dtsim.replay(STEPPED, what_if={"speedups": ["all=2"]})
        frame = dtsim.to_dataframe(result)
        self.assertEqual(list(frame["step"]), [551, 552])
        for column in ("step", "measured_ms", "simulated_ms", "critical_path_ms.gpu",
                       "what_if_ms", "change"):
            self.assertIn(column, frame.columns)
        self.assertEqual(list(frame["what_if_ms"]),
                         [step["what_if_ms"] for step in result["what_if"]["steps"]])
        # A trace without steps: an empty frame with the step columns.
        self.assertEqual(len(dtsim.to_dataframe(dtsim.replay(KINETO))), 0)


class GilTest(unittest.TestCase):
    def test_python_runs_while_dtsim_simulates(self):
        """A 1,024-GPU simulation on a thread: the main thread's loop never stalls for the call
        (held, the GIL would stop it for the whole simulation)."""
        done = threading.Event()
        span = {}

        def work():
            started = time.perf_counter()
            dtsim.simulate(LARGE)
            span["seconds"] = time.perf_counter() - started
            done.set()

        thread = threading.Thread(target=work)
        last = time.perf_counter()
        longest = 0.0
        thread.start()
        while not done.is_set():
            now = time.perf_counter()
            longest = max(longest, now - last)
            last = now
        thread.join()
        self.assertGreater(span["seconds"], 0.2)
        self.assertLess(longest, 0.25 * span["seconds"])


if __name__ == "__main__":
    unittest.main(argv=[sys.argv[0], "-v"])
