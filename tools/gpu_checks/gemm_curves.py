#!/usr/bin/env python3
"""Times GEMMs in BF16 and FP8 and memory-bound kernels over a range of sizes on this GPU, the
measurements the roofline's efficiency curves are fitted to (docs/models.md, "How the curves
were fitted"; fitted by tools/dev/fit_efficiency.py).

Usage (on a machine with a GPU and PyTorch, from the repository's root):
  python3 tools/gpu_checks/gemm_curves.py -o curves.json [--reps N] [--warmup N]

Every kernel is timed as tools/op_benchmark.py times an op (torch.profiler, the GPU time of the
kernels each repetition launched; host gaps are not counted):
- square GEMMs m = n = k from 256 to 16384 in BF16 (torch.matmul), in FP8 with the split
  accumulator (torch._scaled_mm, E4M3 operands, per-tensor scales, BF16 output: Transformer
  Engine's backward GEMMs) and in FP8 with fast accumulation (TE's forward GEMMs);
- x + y on BF16 tensors (reads 2, writes 1 element) from 2^14 to 2^30 elements;
- the FP8 cast-transpose (tools/op_benchmark.py's Quantize) from 2^16 to 2^28 elements.
"""
import argparse
import datetime
import os
import signal
import statistics
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import op_benchmark  # noqa: E402

SQUARE = (256, 384, 512, 768, 1024, 1536, 2048, 3072, 4096, 6144, 8192, 12288, 16384)
ELEMENTWISE = tuple(2 ** p for p in range(14, 31, 2))
QUANTIZE = tuple(2 ** p for p in range(16, 29, 2))


def gemm_rows():
    for size in SQUARE:
        dims = {"m": size, "n": size, "k": size}
        flops = 2 * size ** 3
        yield ("gemm", "bf16", dims, op_benchmark.Gemm, flops, 3 * 2 * size ** 2)
        yield ("gemm", "fp8", dims, op_benchmark.Fp8Gemm, flops, 2 * size ** 2 + 2 * size ** 2)
        yield ("gemm_fast_accum", "fp8", dims, op_benchmark.Fp8GemmFastAccum, flops,
               2 * size ** 2 + 2 * size ** 2)


def memory_rows():
    for elements in ELEMENTWISE:
        yield ("elementwise", "bf16", {"elements": elements}, op_benchmark.Residual, elements,
               3 * 2 * elements)
    for elements in QUANTIZE:
        # Reads BF16 (2 bytes), writes E4M3 row- and column-wise (1 + 1).
        yield ("quantize", "bf16", {"elements": elements}, op_benchmark.Quantize, 0, 4 * elements)


def check(torch):
    """The FP8 kernels compute what they stand for, on fresh random inputs: the cast-transpose
    equals torch's cast (row-wise and transposed) and its amax the input's; the FP8 GEMM equals
    a float32 product of the same quantized operands to within BF16 output rounding."""
    op = {"op": "quantize", "dtype": "bf16", "dims": {"elements": 3 * 4096}}
    quantize = op_benchmark.Quantize(torch, op)
    quantize.run()
    torch.cuda.synchronize()
    expected = quantize.x.float().clamp(-448, 448).to(torch.float8_e4m3fn)
    mismatched = (quantize.out.view(torch.uint8) != expected.view(torch.uint8)).sum().item()
    assert mismatched == 0, f"row-wise: {mismatched} of {expected.numel()} differ"
    assert torch.equal(quantize.out_t.view(torch.uint8), expected.t().contiguous().view(
        torch.uint8)), "column-wise"
    assert quantize.amax.item() == quantize.x.float().abs().max().item(), "amax"
    for runner_class in (op_benchmark.Fp8Gemm, op_benchmark.Fp8GemmFastAccum):
        gemm = runner_class(torch, {"op": "gemm", "dtype": "fp8",
                                    "dims": {"m": 256, "n": 512, "k": 1024, "batch": 2}})
        for (a, b), out in zip(gemm.pairs, gemm.run()):
            reference = a.float() @ b.float()
            error = ((out.float() - reference).norm() / reference.norm()).item()
            assert error < 1e-2, f"{runner_class.__name__}: relative error {error}"
    print("check: cast-transpose exact, FP8 GEMMs within 1e-2 of float32", flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("-o", "--output", required=True)
    parser.add_argument("--reps", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=5)
    args = parser.parse_args()
    import torch
    if not torch.cuda.is_available():
        sys.exit("no CUDA device: torch.cuda.is_available() is False")
    try:
        check(torch)
        checked = "passed"
    except Exception as error:  # still time the kernels; the document says the check failed
        checked = f"FAILED: {type(error).__name__}: {error}"
        print(f"check {checked}", file=sys.stderr, flush=True)
    rows = []
    signal.signal(signal.SIGTERM, op_benchmark.interrupt)  # a time limit keeps what was timed
    try:
        kernels = list(gemm_rows()) + list(memory_rows())
        for name, dtype, dims, runner_class, flops, nbytes in kernels:
            label = f"{name} {dtype} " + " ".join(f"{k}={v}" for k, v in dims.items())
            try:
                runner = runner_class(torch, {"op": name, "dtype": dtype, "dims": dims})
                times = op_benchmark.measure(torch, runner, args.reps, args.warmup)
                del runner
            except Exception as error:  # report and go on: one kernel must not lose the others
                print(f"{label}: {type(error).__name__}: {error}", file=sys.stderr)
                continue
            torch.cuda.empty_cache()
            if not times:
                print(f"{label}: no GPU time recorded", file=sys.stderr)
                continue
            median = statistics.median(times)
            rate = f"{flops / median / 1e6:8.1f} TFLOP/s" if flops else ""
            print(f"{label:<44} {median:10.2f} us  {nbytes / median / 1e3:8.1f} GB/s  {rate}",
                  flush=True)
            rows.append({"kernel": name, "dtype": dtype, "dims": dims, "flops": flops,
                         "bytes": nbytes, "median_us": median, "mean_us": statistics.fmean(times),
                         "min_us": min(times), "samples": len(times)})
    except KeyboardInterrupt:
        print(f"interrupted after {len(rows)} kernels; writing those", file=sys.stderr)
    document = {"format": "dtsim.kernel_curves", "version": "1.0",
                "device": torch.cuda.get_device_name(), "torch": torch.__version__,
                "date": datetime.date.today().isoformat(), "reps": args.reps, "check": checked,
                "rows": rows}
    op_benchmark.write_json(args.output, document)
    print(f"wrote {args.output}: {len(rows)} kernels", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
