#!/usr/bin/env python3
"""Measures the ops a plan needs on this GPU and writes dtsim's op-cost table.

Usage:
  dtsim simulate CONFIG --op-list ops.json        # every op signature the plan prices
  python3 tools/op_benchmark.py ops.json -o table.json [--gpu PRESET] [--reps N] [--warmup N]
  python3 tools/op_benchmark.py ops.json --dry-run  # show what would run (no torch needed)

Each signature of the op list (docs/formats/op-list.md) is run in PyTorch at its shape and
dtype: `warmup` untimed repetitions, then `reps` repetitions under torch.profiler, each inside
its own record_function ended by a device synchronize; an op's time per repetition is the summed
duration of the kernels, copies and sets launched inside that range (matched through the
launching call's correlation id, on whichever thread autograd ran it), so host overhead between
launches is not counted. The table
(docs/formats/op-costs.md) gives per signature the mean, median and minimum over the
repetitions; `simulate` reads it with "profile" in its config (profile once on one GPU,
predict any cluster). How each op family is run is in RUNNERS below and in docs/profiler.md.
"""
import argparse
import bisect
import datetime
import json
import os
import re
import signal
import statistics
import sys
import tempfile

DTYPES = {"fp32": "float32", "tf32": "float32", "fp16": "float16", "bf16": "bfloat16",
          "fp64": "float64", "fp8": "bfloat16"}  # fp8: BF16 tensors quantized by the runner
# Memory-bound ops are keyed by element count only: they run on an array of that many
# elements whose last dimension is the first of these that divides it.
ROW_SIZES = (8192, 4096, 2048, 1024, 512, 256, 128, 64, 32, 16, 8, 4, 2, 1)
VOCAB_SIZES = (151936, 128256, 50304, 50257, 32000, 1000)


def row_shape(elements, sizes=ROW_SIZES):
    for size in sizes:
        if elements % size == 0:
            return (elements // size, size)
    return (elements, 1)


def describe(op):
    dims = ", ".join(f"{k}={v}" for k, v in sorted(op["dims"].items()))
    return f"{op['op']} {op['dtype']} {dims}"


class Runner:
    """Builds the inputs of one signature once; run() launches the op once."""

    def __init__(self, torch, op):
        self.torch = torch
        self.dims = op["dims"]
        self.dtype = getattr(torch, DTYPES[op["dtype"]])
        self.device = "cuda"

    def tensor(self, *shape, grad=False):
        t = self.torch.randn(*shape, device=self.device, dtype=self.dtype)
        return t.requires_grad_(grad)


class Gemm(Runner):
    shape = "A[batch,m,k] @ B[batch,k,n] (torch.matmul)"

    def __init__(self, torch, op):
        super().__init__(torch, op)
        b, m, n, k = (self.dims.get("batch", 1), self.dims["m"], self.dims["n"], self.dims["k"])
        self.a = self.tensor(b, m, k) if b > 1 else self.tensor(m, k)
        self.b = self.tensor(b, k, n) if b > 1 else self.tensor(k, n)

    def run(self):
        return self.torch.matmul(self.a, self.b)


class Fp8Gemm(Runner):
    """An FP8 GEMM as Transformer Engine runs one under per-tensor (delayed or current) scaling:
    cuBLASLt through torch._scaled_mm, E4M3 operands with float32 scales, a BF16 output. The
    split (full-precision) accumulator is used, as TE does for the two backward GEMMs of every
    linear (fast accumulation, its forward choice, is timed beside it by
    tools/gpu_checks/gemm_curves.py). A batch (MoE experts' grouped GEMM) runs one GEMM per
    member, one after another, as TE's grouped linear does on one stream."""
    shape = ("torch._scaled_mm(A[m,k] e4m3, B[k,n] e4m3 column-major, per-tensor scales) -> bf16,"
             " once per batch member")
    fast_accum = False

    def __init__(self, torch, op):
        super().__init__(torch, op)
        m, n, k = self.dims["m"], self.dims["n"], self.dims["k"]
        if k % 16 or n % 16:
            raise ValueError(f"FP8 GEMMs need k and n multiples of 16 (k={k}, n={n})")
        e4m3 = torch.float8_e4m3fn
        self.pairs = [(self.tensor(m, k).to(e4m3), self.tensor(n, k).to(e4m3).t())  # B: [k, n]
                      for _ in range(self.dims.get("batch", 1))]
        self.scale_a = torch.ones((), device=self.device, dtype=torch.float32)
        self.scale_b = torch.ones((), device=self.device, dtype=torch.float32)

    def run(self):
        return [self.torch._scaled_mm(a, b, self.scale_a, self.scale_b,
                                      out_dtype=self.torch.bfloat16,
                                      use_fast_accum=self.fast_accum) for a, b in self.pairs]


class Fp8GemmFastAccum(Fp8Gemm):
    shape = Fp8Gemm.shape + ", fast accumulation"
    fast_accum = True


_CAST_TRANSPOSE = None


def _cast_transpose_kernel():
    """A Triton kernel that does what Transformer Engine's fused cast-transpose does: reads a
    BF16 [rows, cols] tensor once, writes its E4M3 quantization row-wise and column-wise
    (transposed), and folds the tile's amax into a float32 (the delayed-scaling history)."""
    global _CAST_TRANSPOSE
    if _CAST_TRANSPOSE is None:
        import triton
        import triton.language as tl

        @triton.jit
        def cast_transpose(x, out, out_t, amax, scale, rows, cols, BLOCK: tl.constexpr):
            # 64-bit offsets: a rank's FP8 weights can pass 2^31 elements.
            r = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
            c = tl.program_id(1).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
            mask = (r[:, None] < rows) & (c[None, :] < cols)
            v = tl.load(x + r[:, None] * cols + c[None, :], mask=mask, other=0.0).to(tl.float32)
            tl.atomic_max(amax, tl.max(tl.max(tl.abs(v), axis=1), axis=0))
            q = tl.clamp(v * scale, -448.0, 448.0).to(tl.float8e4nv)
            tl.store(out + r[:, None] * cols + c[None, :], q, mask=mask)
            tl.store(out_t + c[:, None] * rows + r[None, :], tl.trans(q), mask=tl.trans(mask))

        _CAST_TRANSPOSE = cast_transpose
    return _CAST_TRANSPOSE


class Quantize(Runner):
    """An FP8 cast of `elements` BF16 activations or gradients (op kind `quantize`)."""
    shape = ("fused cast-transpose (Triton): bf16 [elements/cols, cols] -> e4m3 row- and "
             "column-wise, and the amax")
    block = 64

    def __init__(self, torch, op):
        super().__init__(torch, op)
        self.dtype = torch.bfloat16
        self.rows, self.cols = row_shape(self.dims["elements"], ROW_SIZES[:-6])
        self.x = self.tensor(self.rows, self.cols)
        e4m3 = torch.float8_e4m3fn
        self.out = torch.empty(self.rows, self.cols, device=self.device, dtype=e4m3)
        self.out_t = torch.empty(self.cols, self.rows, device=self.device, dtype=e4m3)
        self.amax = torch.zeros(1, device=self.device, dtype=torch.float32)
        self.kernel = _cast_transpose_kernel()
        import triton
        self.grid = (triton.cdiv(self.rows, self.block), triton.cdiv(self.cols, self.block))

    def run(self):
        self.kernel[self.grid](self.x, self.out, self.out_t, self.amax, 1.0, self.rows, self.cols,
                               BLOCK=self.block)


class FlashAttention(Runner):
    """Keys and values of kv_seq when the signature has one (a context-parallel rank's share:
    seq queries against kv_seq keys, half the pairs under its load-balanced causal mask, run as
    seq queries against kv_seq / 2 keys unmasked: SDPA aligns a causal mask of unequal lengths
    at the top left, which would leave far fewer pairs), values of v_head_dim when it has one
    (MLA). A sliding window (window) has no runner: SDPA's flash kernels take no window."""
    shape = ("scaled_dot_product_attention(q[batch,heads,seq,head_dim], k[.., kv_seq, ..], "
             "v[.., kv_seq, v_head_dim]) (kv heads repeated)")
    backward = False

    def __init__(self, torch, op):
        super().__init__(torch, op)
        d = self.dims
        b, h, s, hd = d["batch"], d["heads"], d["seq"], d["head_dim"]
        if d.get("window"):
            raise ValueError("sliding-window attention has no runner (SDPA's flash kernels take "
                             "no window)")
        self.causal = bool(d.get("causal", 1))
        keys = d.get("kv_seq", s)
        if keys != s and self.causal:
            keys, self.causal = keys // 2, False  # the same pairs as the load-balanced mask
        self.q = self.tensor(b, h, s, hd, grad=self.backward)
        self.k = self.tensor(b, h, keys, hd, grad=self.backward)
        self.v = self.tensor(b, h, keys, d.get("v_head_dim", hd), grad=self.backward)
        if self.backward:
            self.out = self.forward()
            self.grad = self.torch.randn_like(self.out)

    def forward(self):
        import torch.nn.functional as F
        return F.scaled_dot_product_attention(self.q, self.k, self.v, is_causal=self.causal)

    def run(self):
        if self.backward:
            return self.torch.autograd.grad(self.out, (self.q, self.k, self.v), self.grad,
                                            retain_graph=True)
        return self.forward()


class FlashAttentionBackward(FlashAttention):
    shape = FlashAttention.shape + ", backward"
    backward = True


class Conv(Runner):
    shape = "conv2d x[batch,in,size,size] * w[out,in,kernel,kernel], padding kernel//2"
    mode = "forward"

    def __init__(self, torch, op):
        super().__init__(torch, op)
        d = self.dims
        self.stride, self.padding = d.get("stride", 1), d["kernel"] // 2
        self.x = self.tensor(d["batch"], d["in_channels"], d["size"], d["size"])
        self.w = self.tensor(d["out_channels"], d["in_channels"], d["kernel"], d["kernel"])
        import torch.nn.functional as F
        self.y = F.conv2d(self.x, self.w, stride=self.stride, padding=self.padding)
        self.grad = torch.randn_like(self.y)

    def run(self):
        import torch.nn.functional as F
        from torch.nn import grad
        if self.mode == "dgrad":
            return grad.conv2d_input(self.x.shape, self.w, self.grad, stride=self.stride,
                                     padding=self.padding)
        if self.mode == "wgrad":
            return grad.conv2d_weight(self.x, self.w.shape, self.grad, stride=self.stride,
                                      padding=self.padding)
        return F.conv2d(self.x, self.w, stride=self.stride, padding=self.padding)


class ConvDgrad(Conv):
    shape = Conv.shape + ", input gradient"
    mode = "dgrad"


class ConvWgrad(Conv):
    shape = Conv.shape + ", weight gradient"
    mode = "wgrad"


class Elementwise(Runner):
    """A memory-bound op on `elements` elements; backward forms run autograd of the forward."""
    backward = False
    shape = "x + y"

    def __init__(self, torch, op):
        super().__init__(torch, op)
        self.rows = row_shape(self.dims["elements"], self.row_sizes())
        self.x = self.tensor(*self.rows, grad=self.backward)
        self.setup()
        if self.backward:
            self.out = self.forward()
            self.grad = torch.randn_like(self.out)

    def row_sizes(self):
        return ROW_SIZES

    def setup(self):
        self.y = self.tensor(*self.rows)

    def forward(self):
        return self.x + self.y

    def run(self):
        if self.backward:
            return self.torch.autograd.grad(self.out, self.x, self.grad, retain_graph=True)
        return self.forward()


def make(name, forward, shape, setup=None, row_sizes=None):
    """An Elementwise runner class and its backward form from a forward function."""
    members = {"forward": forward, "shape": shape}
    if setup:
        members["setup"] = setup
    if row_sizes:
        members["row_sizes"] = lambda self: row_sizes
    fwd = type(name, (Elementwise,), members)
    bwd = type(name + "Backward", (fwd,), {"backward": True, "shape": shape + ", backward"})
    return fwd, bwd


def _functional():
    import torch.nn.functional as F
    return F


Norm, NormBackward = make(
    "Norm", lambda s: _functional().layer_norm(s.x, (s.rows[1],), s.weight),
    "layer_norm over the last dimension",
    setup=lambda s: setattr(s, "weight", s.tensor(s.rows[1])))
Softmax, SoftmaxBackward = make(
    "Softmax", lambda s: s.torch.softmax(s.x, dim=-1), "softmax over the last dimension")
Dropout, DropoutBackward = make(
    "Dropout", lambda s: _functional().dropout(s.x, p=0.1, training=True), "dropout p=0.1")
Activation, ActivationBackward = make(
    "Activation", lambda s: _functional().gelu(s.x), "gelu")
Residual, ResidualBackward = make("Residual", Elementwise.forward, "x + y")
CrossEntropy, CrossEntropyBackward = make(
    "CrossEntropy", lambda s: _functional().cross_entropy(s.x.float(), s.labels),
    "cross_entropy of logits [tokens, vocab]",
    setup=lambda s: setattr(s, "labels", s.torch.randint(0, s.rows[1], (s.rows[0],),
                                                          device=s.device)),
    row_sizes=VOCAB_SIZES + ROW_SIZES)
Router, RouterBackward = make(
    "Router", lambda s: s.torch.topk(s.torch.softmax(s.x, dim=-1), k=min(2, s.rows[1]), dim=-1)[0],
    "softmax and top-2 over [tokens, experts]", row_sizes=(64, 32, 16, 8, 4, 2, 1))
# Rotary embeddings as torchtitan's apply_rotary_emb writes them, eager: the fp32 copy, its
# complex product with the per-position rotation (freqs_cis), the cast back (three kernels; the
# fused kernel Megatron-Core and inductor run moves 2 of their 2e + 16 bytes an element).
def _rotary_setup(s):
    rows, columns = s.rows
    pairs = max(1, columns // 2)
    angles = s.torch.rand(rows, pairs, device=s.device)
    s.freqs = s.torch.polar(s.torch.ones_like(angles), angles)


def _rotary(s):
    rows, columns = s.rows
    pairs = s.torch.view_as_complex(s.x.float().reshape(rows, -1, 2))
    return s.torch.view_as_real(pairs * s.freqs[:, : pairs.shape[1]]).flatten(1).type_as(s.x)


Rotary, RotaryBackward = make(
    "Rotary", _rotary, "apply_rotary_emb of [tokens, heads x head_dim] (eager, complex)",
    setup=_rotary_setup, row_sizes=tuple(size for size in ROW_SIZES if size % 2 == 0))
Permute, PermuteBackward = make(
    "Permute", lambda s: s.x.index_select(0, s.order), "index_select of rows (token permutation)",
    setup=lambda s: setattr(s, "order", s.torch.randperm(s.rows[0], device=s.device)))


# PyTorch autocast over fp32 weights (docs/models.md, "PyTorch eager under autocast"): the copies
# between fp32 and the op's dtype (`cast`: fp32 in, the op's dtype out; `cast_bwd` the other
# way), and a linear's bias gradient, a sum over the tokens of its output gradient (`bias_bwd`).
def _fp32_input(s):
    s.x = s.torch.randn(*s.rows, device=s.device, dtype=s.torch.float32)


Cast, _ = make("Cast", lambda s: s.x.to(s.dtype), "x.to(dtype) of an fp32 x", setup=_fp32_input)
CastBackward, _ = make("CastBackward", lambda s: s.x.float(), "x.float() of an x in dtype",
                       setup=lambda s: None)


class BiasGradient(Runner):
    shape = "grad[elements/columns, columns].sum(0)"

    def __init__(self, torch, op):
        super().__init__(torch, op)
        columns = self.dims.get("columns") or row_shape(self.dims["elements"])[1]
        self.grad = self.tensor(self.dims["elements"] // columns, columns)

    def run(self):
        return self.grad.sum(0)


# Gradient-compression kernels (strategies/compression.cc), on `elements` fp32 gradients.
def _onebit(s):
    scale = s.x.abs().mean()
    signs = s.torch.sign(s.x)
    s.error = s.x - signs * scale
    return signs > 0


def _qsgd(s):
    norm = s.x.norm()
    level = (s.x.abs() / norm * 127 + s.torch.rand_like(s.x)).floor()
    return (level * s.torch.sign(s.x)).to(s.torch.int8)


CastCompress, _ = make("CastCompress", lambda s: s.x.to(s.torch.bfloat16), "cast to bf16")
CastDecompress, _ = make("CastDecompress", lambda s: s.half_x.float(), "cast bf16 back to fp32",
                         setup=lambda s: setattr(s, "half_x", s.x.to(s.torch.bfloat16)))
OnebitCompress, _ = make("OnebitCompress", _onebit,
                         "sign, mean |x| scale and error feedback (1-bit Adam)")
OnebitDecompress, _ = make("OnebitDecompress", lambda s: s.signs * s.scale,
                           "signs times scale",
                           setup=lambda s: (setattr(s, "signs", s.torch.sign(s.x)),
                                            setattr(s, "scale", s.x.abs().mean())))
TopkSelect, _ = make("TopkSelect",
                     lambda s: s.torch.topk(s.x.abs().flatten(), max(1, s.x.numel() // 1000)),
                     "top-k (density 0.001) of |x|")
TopkZero, _ = make("TopkZero", lambda s: s.torch.zeros_like(s.x), "zero a dense buffer")
TopkScatter, _ = make("TopkScatter",
                      lambda s: s.dense.index_add_(0, s.index, s.x.flatten()),
                      "scatter-add `elements` (index, value) pairs",
                      setup=lambda s: (setattr(s, "dense", s.torch.zeros(s.x.numel(),
                                                                         device=s.device,
                                                                         dtype=s.dtype)),
                                       setattr(s, "index", s.torch.randint(
                                           0, s.x.numel(), (s.x.numel(),), device=s.device))))
QsgdQuantize, _ = make("QsgdQuantize", _qsgd, "norm and stochastic 8-bit quantization")
QsgdDequantize, _ = make("QsgdDequantize", lambda s: s.levels.float() * (s.norm / 127),
                         "8-bit levels times norm",
                         setup=lambda s: (setattr(s, "levels", _qsgd(s)),
                                          setattr(s, "norm", s.x.norm())))
ErrorAdd, _ = make("ErrorAdd", lambda s: s.x.add_(s.y), "M += error (in place)")
Orthogonalize, _ = make("Orthogonalize", lambda s: s.torch.linalg.qr(s.x.float())[0],
                        "QR of [elements/4, 4] (PowerSGD rank 4)", row_sizes=(4, 2, 1))
ErrorUpdate, _ = make("ErrorUpdate", lambda s: s.x - s.y, "error = M - rebuilt M")


class Embedding(Elementwise):
    shape = "embedding lookup of [tokens] ids in a [32000, hidden] table"

    def setup(self):
        self.table = self.tensor(32000, self.rows[1], grad=self.backward)
        self.ids = self.torch.randint(0, 32000, (self.rows[0],), device=self.device)
        self.x = self.table  # what the backward differentiates against

    def forward(self):
        return _functional().embedding(self.ids, self.table)


class EmbeddingBackward(Embedding):
    shape = Embedding.shape + ", backward"
    backward = True


class BatchNorm(Elementwise):
    shape = "batch_norm of [elements/(64*16*16), 64, 16, 16], training"

    def setup(self):
        n = max(1, self.dims["elements"] // (64 * 16 * 16))
        self.x = self.tensor(n, 64, 16, 16, grad=self.backward)
        self.mean = self.torch.zeros(64, device=self.device, dtype=self.torch.float32)
        self.var = self.torch.ones(64, device=self.device, dtype=self.torch.float32)

    def forward(self):
        return _functional().batch_norm(self.x, self.mean, self.var, training=True)


class BatchNormBackward(BatchNorm):
    shape = BatchNorm.shape + ", backward"
    backward = True


class Pool(BatchNorm):
    shape = "max_pool2d 3x3 stride 2 of [elements/(64*16*16), 64, 16, 16]"

    def forward(self):
        return _functional().max_pool2d(self.x, 3, stride=2, padding=1)


class PoolBackward(Pool):
    shape = Pool.shape + ", backward"
    backward = True


class Optimizer(Runner):
    """One fused optimizer kernel over the parameters, as Megatron's and DeepSpeed's fused Adam
    run it (torch's default multi-tensor Adam makes several passes: 2.5x slower on an H100)."""
    shape = "torch.optim.Adam(fused=True) step on one fp32 parameter of `elements`"
    algorithm = "Adam"

    def __init__(self, torch, op):
        super().__init__(torch, op)
        p = torch.zeros(self.dims["elements"], device=self.device, dtype=torch.float32,
                        requires_grad=True)
        p.grad = torch.randn_like(p)
        optimizer = getattr(torch.optim, self.algorithm)
        try:
            self.optimizer = optimizer([p], lr=1e-4, fused=True)
        except (TypeError, RuntimeError):  # a torch without the fused kernel
            self.optimizer = optimizer([p], lr=1e-4)

    def run(self):
        self.optimizer.step()


class Sgd(Optimizer):
    shape = "torch.optim.SGD(fused=True) step on one fp32 parameter of `elements`"
    algorithm = "SGD"


RUNNERS = {
    "gemm": Gemm, "quantize": Quantize, "quantize_bwd": Quantize,
    "flash_attention": FlashAttention,
    "flash_attention_bwd": FlashAttentionBackward,
    "conv2d": Conv, "conv2d_dgrad": ConvDgrad, "conv2d_wgrad": ConvWgrad,
    "norm": Norm, "norm_bwd": NormBackward, "softmax": Softmax, "softmax_bwd": SoftmaxBackward,
    "dropout": Dropout, "dropout_bwd": DropoutBackward,
    "activation": Activation, "activation_bwd": ActivationBackward,
    "elementwise": Residual, "elementwise_bwd": ResidualBackward,
    "embedding": Embedding, "embedding_bwd": EmbeddingBackward,
    "cross_entropy": CrossEntropy, "cross_entropy_bwd": CrossEntropyBackward,
    "router": Router, "router_bwd": RouterBackward,
    "permute": Permute, "permute_bwd": PermuteBackward,
    "batch_norm": BatchNorm, "batch_norm_bwd": BatchNormBackward,
    "pool": Pool, "pool_bwd": PoolBackward,
    "adam": Optimizer, "sgd": Sgd,
    "cast": Cast, "cast_bwd": CastBackward, "bias_bwd": BiasGradient,
    "rotary": Rotary, "rotary_bwd": RotaryBackward,
    "cast_compress": CastCompress, "cast_decompress": CastDecompress,
    "onebit_compress": OnebitCompress, "onebit_server": OnebitCompress,
    "onebit_decompress": OnebitDecompress,
    "topk_select": TopkSelect, "topk_zero": TopkZero, "topk_scatter": TopkScatter,
    "qsgd_quantize": QsgdQuantize, "qsgd_dequantize": QsgdDequantize,
    "powersgd_error_add": ErrorAdd, "powersgd_orthogonalize": Orthogonalize,
    "powersgd_error_update": ErrorUpdate,
}


# Runners that depend on the dtype as well as the op: (op, dtype) -> runner.
DTYPE_RUNNERS = {("gemm", "fp8"): Fp8Gemm}


def runner_class(op):
    return DTYPE_RUNNERS.get((op["op"], op["dtype"]), RUNNERS[op["op"]])


def reads_version(version, major):
    """docs/formats/README.md: "MAJOR.MINOR" with this MAJOR, or the integer MAJOR of old files."""
    if isinstance(version, bool):
        return False
    if isinstance(version, int):
        return version == major
    match = re.fullmatch(r"(\d+)\.(\d+)", version) if isinstance(version, str) else None
    return match is not None and int(match.group(1)) == major


def load_op_list(path):
    with open(path) as f:
        document = json.load(f)
    if document.get("format") != "dtsim.op_list" or not reads_version(document.get("version"), 1):
        sys.exit(f"{path}: not a dtsim op list (format dtsim.op_list, version 1.x); write one with "
                 "`dtsim simulate CONFIG --op-list FILE`")
    problems = []
    for i, op in enumerate(document["ops"]):
        if op["op"] not in RUNNERS:
            problems.append(f"ops[{i}].op: no runner for {op['op']!r}; known: "
                            + ", ".join(sorted(RUNNERS)))
        if op["dtype"] not in DTYPES:
            problems.append(f"ops[{i}].dtype: {op['dtype']!r} is not run here; runs "
                            + ", ".join(DTYPES))
    if problems:
        sys.exit(f"{path}:\n  " + "\n  ".join(problems))
    return document


REP_PREFIX = "dtsim_op_rep_"
LAUNCH_CATS = ("cuda_runtime", "cuda_driver")
GPU_CATS = ("kernel", "gpu_memcpy", "gpu_memset")


def rep_gpu_times(events):
    """GPU time of each rep in a torch.profiler Chrome trace's events, in microseconds.

    A rep is a host range named REP_PREFIX + N that ends with a device synchronize, so every GPU
    op it launched ran inside it. A GPU op (kernel, copy, set) belongs to the rep whose range
    holds the CUDA runtime or driver call that launched it (matched by `correlation`), whichever
    thread made the call: autograd runs backward ops on a thread of its own, so the op's own
    record_function would not see them. A rep's time is the sum of its GPU ops' durations (host
    gaps between launches are not counted); reps that launched nothing are left out.
    """
    reps = sorted((float(e["ts"]), float(e["ts"]) + float(e["dur"]), e["name"]) for e in events
                  if e.get("ph") == "X" and e.get("name", "").startswith(REP_PREFIX)
                  and e.get("cat") in ("user_annotation", "cpu_op"))
    launches = {e["args"]["correlation"]: float(e["ts"]) for e in events
                if e.get("cat") in LAUNCH_CATS and "correlation" in e.get("args", {})}
    starts = [start for start, _, _ in reps]
    totals = {}
    for e in events:
        if e.get("cat") not in GPU_CATS:
            continue
        launch = launches.get(e.get("args", {}).get("correlation"))
        if launch is None:
            continue
        i = bisect.bisect_right(starts, launch) - 1
        if i >= 0 and launch <= reps[i][1]:
            totals[reps[i][2]] = totals.get(reps[i][2], 0.0) + float(e["dur"])
    return [totals[name] for _, _, name in reps if totals.get(name, 0.0) > 0]


def measure(torch, runner, reps, warmup):
    for _ in range(warmup):
        runner.run()
    torch.cuda.synchronize()
    from torch.profiler import ProfilerActivity, profile, record_function
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for rep in range(reps):
            with record_function(f"{REP_PREFIX}{rep}"):
                runner.run()
                torch.cuda.synchronize()
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "trace.json")
        prof.export_chrome_trace(path)
        with open(path) as f:
            return rep_gpu_times(json.load(f)["traceEvents"])


def write_json(path, document, indent=1):
    """Writes `document` to `path` atomically: a failed write leaves any earlier file whole."""
    with open(path + ".tmp", "w") as f:
        json.dump(document, f, indent=indent)
        f.write("\n")
    os.replace(path + ".tmp", path)


def interrupt(signum, frame):
    raise KeyboardInterrupt


def measure_all(torch, ops, args, entries):
    """Measures each op of `ops` into `entries`; an op that cannot run is reported and left out."""
    for i, op in enumerate(ops):
        try:
            runner = runner_class(op)(torch, op)
            times = measure(torch, runner, args.reps, args.warmup)
        except Exception as error:  # one op that cannot run must not lose the others
            print(f"  [{i + 1}/{len(ops)}] {describe(op)}: {type(error).__name__}: {error}; "
                  "left out", file=sys.stderr)
            try:
                torch.cuda.synchronize()
            except Exception:  # a sticky error (an illegal address): no later op can run
                print(f"the CUDA context is broken; the other {len(ops) - i - 1} signatures "
                      "were not measured (rerun them in a new process)", file=sys.stderr)
                return
            continue
        del runner
        torch.cuda.empty_cache()
        if not times:
            print(f"  [{i + 1}/{len(ops)}] {describe(op)}: no GPU time recorded, left out",
                  file=sys.stderr)
            continue
        mean = statistics.fmean(times)
        entries.append({"op": op["op"], "dtype": op["dtype"], "dims": op["dims"],
                        "time": f"{mean:.3f} us", "median": f"{statistics.median(times):.3f} us",
                        "min": f"{min(times):.3f} us", "samples": len(times)})
        print(f"  [{i + 1}/{len(ops)}] {describe(op)}: {mean:.1f} us", file=sys.stderr)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("op_list", help="an op list from `dtsim simulate CONFIG --op-list FILE`")
    parser.add_argument("-o", "--output", help="the op-cost table to write")
    parser.add_argument("--gpu", help="the table's GPU name (default: the op list's GPU)")
    parser.add_argument("--reps", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--dry-run", action="store_true",
                        help="print how each op would run and stop (no GPU or torch needed)")
    args = parser.parse_args()
    document = load_op_list(args.op_list)
    ops = document["ops"]
    if args.dry_run:
        print(f"{len(ops)} op signatures of {document['model']} ({document['config']}):")
        for op in ops:
            print(f"  {describe(op):<60} {runner_class(op).shape}")
        return 0
    if not args.output:
        sys.exit("-o TABLE.json is required (or --dry-run)")
    import torch
    if not torch.cuda.is_available():
        sys.exit("no CUDA device: torch.cuda.is_available() is False")
    torch.backends.cuda.matmul.allow_tf32 = any(op["dtype"] == "tf32" for op in ops)
    gpu = args.gpu or document["gpu"]
    if gpu.split("-")[0].lower() not in torch.cuda.get_device_name().lower():
        print(f"warning: the table is named for {gpu!r} but runs on "
              f"{torch.cuda.get_device_name()!r}; name it with --gpu", file=sys.stderr)
    entries = []
    # Interrupted (Ctrl-C, or SIGTERM from a time limit), it still writes what it measured.
    signal.signal(signal.SIGTERM, interrupt)
    try:
        measure_all(torch, ops, args, entries)
    except KeyboardInterrupt:
        print(f"interrupted after {len(entries)} of {len(ops)} signatures; writing those",
              file=sys.stderr)
    # Each op runs alone, in a short burst, at boost clock: "isolated" (docs/formats/op-costs.md).
    table = {"format": "dtsim.op_costs", "version": "1.1",
             "gpu": gpu,
             "source": (f"tools/op_benchmark.py on {torch.cuda.get_device_name()} "
                        f"(torch {torch.__version__}), {args.reps} reps, "
                        f"{datetime.date.today().isoformat()}, ops of {document['config']}"),
             "timing": "isolated",
             "ops": entries}
    write_json(args.output, table)
    print(f"wrote {args.output}: {len(entries)} of {len(ops)} signatures", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
