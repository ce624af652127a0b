#!/usr/bin/env python3
"""The GPU-side scripts' trace arithmetic, checked on the CPU (no torch, no GPU).

Usage: gpu_scripts_test.py SOURCE_DIR

- tools/op_benchmark.py's runner choice: FP8 GEMMs and FP8 casts have runners of their own.
- tools/op_benchmark.py's rep_gpu_times: a GPU op belongs to the rep whose host range holds its
  launching call, whichever thread (autograd's) or API (driver) made it; ops launched outside
  every rep, and the profiler's GPU-side copies of the rep ranges, count nowhere.
- tools/gpu_checks/compare_traces.py's steps_of on a trace dtsim profile captured on an H100
  (tests/data/captured): known_kernels.cu's 15 kernels, 2 copies and a set in each of 3 steps.
"""
import os
import sys
import unittest

SOURCE = sys.argv.pop(1) if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "../..")
sys.path.insert(0, os.path.join(SOURCE, "tools"))
sys.path.insert(0, os.path.join(SOURCE, "tools", "gpu_checks"))

import compare_traces  # noqa: E402
import op_benchmark  # noqa: E402


def event(cat, name, ts, dur, correlation=None, tid=1):
    e = {"ph": "X", "cat": cat, "name": name, "ts": ts, "dur": dur, "pid": 1, "tid": tid}
    if correlation is not None:
        e["args"] = {"correlation": correlation}
    return e


class RunnerChoice(unittest.TestCase):
    def test_fp8_gemms_and_casts_have_their_own_runners(self):
        choose = op_benchmark.runner_class
        self.assertIs(choose({"op": "gemm", "dtype": "fp8"}), op_benchmark.Fp8Gemm)
        self.assertIs(choose({"op": "gemm", "dtype": "bf16"}), op_benchmark.Gemm)
        self.assertIs(choose({"op": "quantize", "dtype": "bf16"}), op_benchmark.Quantize)
        self.assertIs(choose({"op": "quantize_bwd", "dtype": "bf16"}), op_benchmark.Quantize)
        self.assertIn("fp8", op_benchmark.DTYPES)


class RepGpuTimes(unittest.TestCase):
    def test_ops_go_to_the_rep_that_launched_them(self):
        events = [
            event("user_annotation", "dtsim_op_rep_0", 100, 50),
            event("user_annotation", "dtsim_op_rep_1", 200, 50),
            event("gpu_user_annotation", "dtsim_op_rep_0", 100, 50),  # GPU-side copy: ignored
            event("cuda_runtime", "cudaLaunchKernel", 110, 2, correlation=1),
            event("cuda_driver", "cuLaunchKernelEx", 120, 2, correlation=2, tid=7),  # autograd
            event("cuda_runtime", "cudaLaunchKernel", 210, 2, correlation=3, tid=7),
            event("cuda_runtime", "cudaLaunchKernel", 300, 2, correlation=4),  # after every rep
            event("kernel", "k1", 115, 7, correlation=1),
            event("gpu_memset", "set", 125, 3, correlation=2),
            event("kernel", "k2", 215, 11, correlation=3),
            event("kernel", "late", 305, 100, correlation=4),
            event("kernel", "unlaunched", 130, 40, correlation=99),
        ]
        self.assertEqual(op_benchmark.rep_gpu_times(events), [7 + 3, 11])

    def test_a_rep_without_gpu_work_is_left_out(self):
        events = [event("user_annotation", "dtsim_op_rep_0", 100, 50),
                  event("user_annotation", "dtsim_op_rep_1", 200, 50),
                  event("cuda_runtime", "cudaLaunchKernel", 210, 2, correlation=3),
                  event("kernel", "k", 215, 11, correlation=3)]
        self.assertEqual(op_benchmark.rep_gpu_times(events), [11])


class CompareTraces(unittest.TestCase):
    def test_steps_of_a_captured_trace(self):
        path = os.path.join(SOURCE, "tests/data/captured/h100_known_kernels_all_kinds.json.gz")
        steps, unlaunched = compare_traces.steps_of(path)
        self.assertEqual(sorted(steps), [1, 2, 3])
        self.assertEqual(unlaunched, 0)
        for number, step in steps.items():
            self.assertEqual((step["kernels"], step["memcpys"], step["memsets"]), (15, 2, 1), number)
            self.assertEqual(sum(step["names"].values()), 15)
            self.assertGreater(step["kernel_us"], 0)


if __name__ == "__main__":
    unittest.main(verbosity=2)
