#!/usr/bin/env python3
"""GPT-2 small training steps on one GPU, for checking `dtsim profile` against torch.profiler.

A self-contained GPT-2 small (124M parameters: 12 layers, 12 heads, width 768, context 1024,
vocabulary 50257 padded to 50304) in plain PyTorch, trained on random tokens from a fixed
seed, so every run launches the same kernels: bf16 autocast, flash attention through
scaled_dot_product_attention, AdamW (fused). Each step is one forward, backward and optimizer
step, wrapped in an NVTX range "ProfilerStep#N" (the name torch.profiler gives its steps, which
dtsim's trace reader splits steps by) and ended by a device synchronize, so the host clock
measures the step.

  --profiler none    no profiler: the step time the overhead is measured against
  --profiler nvtx    run under `dtsim profile`: NVTX step ranges, optionally --emit-nvtx
                     (torch.autograd.profiler.emit_nvtx: one NVTX range per ATen op)
  --profiler torch   torch.profiler (CPU + CUDA activities, record_shapes) over the timed
                     steps, the trace exported to --trace

  --precision bf16   bf16 autocast (the default); fp32: no autocast and no TF32 anywhere;
                     tf32: fp32 tensors with TF32 matmuls and convolutions (the same program,
                     faster GEMM kernels: the what-if `dtsim replay --speedup` is checked on)
  --model            the GPT-2 size: 124m (default), 355m, 774m, 1.5b (the released configs)
  --recompute        activation checkpointing per block, as torchtitan configures it:
                     none; full (every block); every-2nd (every second block, torchtitan's
                     "selective layer" with frequency 2); op (selective op checkpointing:
                     save the outputs of matmuls and attention except every second matmul,
                     recompute the rest: torchtitan's "selective op" policy)

Writes a JSON summary (--summary): the step wall times (ms) of the timed steps and their median,
and the CUDA caching allocator's peaks over the timed steps (allocated and reserved bytes) with
the device memory in use at the end (what nvidia-smi shows: the CUDA context included).
"""
import argparse
import contextlib
import json
import math
import statistics
import time

import torch
import torch.nn as nn
import torch.nn.functional as F
import memory_history
from torch.utils.checkpoint import (CheckpointPolicy, checkpoint,
                                    create_selective_checkpoint_contexts)

# The released GPT-2 configurations: layers, heads, width.
SIZES = {"124m": (12, 12, 768), "355m": (24, 16, 1024), "774m": (36, 20, 1280),
         "1.5b": (48, 25, 1600)}

# Selective op checkpointing: the ops whose outputs a block keeps; every second matmul of a
# pass is recomputed all the same (torchtitan's "op" policy; nn.Linear with a bias is addmm).
_MATMULS = {torch.ops.aten.mm.default, torch.ops.aten.addmm.default}
_SAVED = _MATMULS | {torch.ops.aten._scaled_dot_product_flash_attention.default,
                     torch.ops.aten._scaled_dot_product_efficient_attention.default,
                     torch.ops.aten._scaled_dot_product_cudnn_attention.default}


def op_policy_contexts():
    counts = {"forward": 0, "recompute": 0}

    def policy(ctx, op, *args, **kwargs):
        if op in _MATMULS:
            counts["recompute" if ctx.is_recompute else "forward"] += 1
            if counts["recompute" if ctx.is_recompute else "forward"] % 2 == 0:
                return CheckpointPolicy.PREFER_RECOMPUTE
        return CheckpointPolicy.MUST_SAVE if op in _SAVED else CheckpointPolicy.PREFER_RECOMPUTE

    return create_selective_checkpoint_contexts(policy)


class Block(nn.Module):
    def __init__(self, width, heads):
        super().__init__()
        self.heads = heads
        self.ln1 = nn.LayerNorm(width)
        self.qkv = nn.Linear(width, 3 * width)
        self.proj = nn.Linear(width, width)
        self.ln2 = nn.LayerNorm(width)
        self.fc1 = nn.Linear(width, 4 * width)
        self.fc2 = nn.Linear(4 * width, width)

    def forward(self, x):
        batch, seq, width = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(width, dim=2)
        shape = (batch, seq, self.heads, width // self.heads)
        q, k, v = (t.view(shape).transpose(1, 2) for t in (q, k, v))
        attention = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(attention.transpose(1, 2).reshape(batch, seq, width))
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x)), approximate="tanh"))


class Gpt2(nn.Module):
    def __init__(self, layers=12, heads=12, width=768, context=1024, vocab=50304,
                 recompute="none"):
        super().__init__()
        self.recompute = recompute
        self.tokens = nn.Embedding(vocab, width)
        self.positions = nn.Embedding(context, width)
        self.blocks = nn.ModuleList(Block(width, heads) for _ in range(layers))
        self.ln = nn.LayerNorm(width)
        self.head = nn.Linear(width, vocab, bias=False)
        self.head.weight = self.tokens.weight  # tied, as in GPT-2
        for name, parameter in self.named_parameters():
            if parameter.dim() == 2:
                std = 0.02 / math.sqrt(2 * layers) if name.endswith(("proj.weight", "fc2.weight")) else 0.02
                nn.init.normal_(parameter, std=std)
            elif name.endswith("bias"):
                nn.init.zeros_(parameter)

    def forward(self, tokens, targets):
        positions = torch.arange(tokens.shape[1], device=tokens.device)
        x = self.tokens(tokens) + self.positions(positions)
        for i, block in enumerate(self.blocks):
            if self.recompute == "full" or (self.recompute == "every-2nd" and i % 2 == 1):
                x = checkpoint(block, x, use_reentrant=False)
            elif self.recompute == "op":
                x = checkpoint(block, x, use_reentrant=False, context_fn=op_policy_contexts)
            else:
                x = block(x)
        logits = self.head(self.ln(x))
        return F.cross_entropy(logits.float().view(-1, logits.shape[-1]), targets.view(-1))


def write_summary(args, summary, model, times, losses, step_starts):
    """Completes a run's summary (steps, losses, memory) and writes it, and the allocator's
    record with --history."""
    summary.update({
        "warmup": args.warmup, "steps": args.steps, "gpu": torch.cuda.get_device_name(),
        "torch": torch.__version__, "parameters": sum(p.numel() for p in model.parameters()),
        "step_ms": times, "median_ms": statistics.median(times),
        "first_loss": losses[0], "last_loss": losses[-1], **memory_history.memory_facts()})
    with open(args.summary, "w") as out:
        json.dump(summary, out, indent=1)
    if args.history:
        memory_history.write(args.history, step_starts)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--profiler", choices=("none", "nvtx", "torch"), default="none")
    parser.add_argument("--emit-nvtx", action="store_true", help="one NVTX range per ATen op")
    parser.add_argument("--precision", choices=("bf16", "fp32", "tf32"), default="bf16")
    parser.add_argument("--model", choices=tuple(SIZES), default="124m")
    parser.add_argument("--recompute", choices=("none", "full", "every-2nd", "op"),
                        default="none")
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--seq", type=int, default=1024)
    parser.add_argument("--warmup", type=int, default=5, help="untimed steps first")
    parser.add_argument("--steps", type=int, default=20, help="timed steps")
    parser.add_argument("--trace", help="torch.profiler's trace (with --profiler torch)")
    parser.add_argument("--summary", required=True, help="the JSON summary to write")
    parser.add_argument("--history", help="the allocator's record of every allocation and "
                        "free of the run (memory_history.py), written here")
    args = parser.parse_args()

    if args.history:
        memory_history.start()
    torch.manual_seed(0)
    device = "cuda"
    torch.backends.cuda.matmul.allow_tf32 = args.precision == "tf32"
    torch.backends.cudnn.allow_tf32 = args.precision == "tf32"
    layers, heads, width = SIZES[args.model]
    model = Gpt2(layers, heads, width, recompute=args.recompute).to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)
    generator = torch.Generator(device=device).manual_seed(1)
    tokens = torch.randint(0, 50257, (args.batch, args.seq + 1), device=device, generator=generator)
    inputs, targets = tokens[:, :-1].contiguous(), tokens[:, 1:].contiguous()

    def step():
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=args.precision == "bf16"):
            loss = model(inputs, targets)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        return loss

    profiler = contextlib.nullcontext()
    if args.profiler == "torch":
        profiler = torch.profiler.profile(
            activities=[torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA],
            schedule=torch.profiler.schedule(wait=0, warmup=args.warmup, active=args.steps,
                                             repeat=1),
            on_trace_ready=(lambda p: p.export_chrome_trace(args.trace)) if args.trace else None,
            record_shapes=True)
    nvtx_ops = torch.autograd.profiler.emit_nvtx(record_shapes=True) if args.emit_nvtx \
        else contextlib.nullcontext()

    times = []
    losses = []
    step_starts = []
    with profiler as prof, nvtx_ops:
        for i in range(args.warmup + args.steps):
            if args.history:
                step_starts.append(memory_history.events_so_far())
            if i == args.warmup:
                torch.cuda.reset_peak_memory_stats()
            if args.profiler != "torch":
                torch.cuda.nvtx.range_push(f"ProfilerStep#{i}")
            start = time.perf_counter()
            losses.append(step().item())
            torch.cuda.synchronize()
            elapsed = time.perf_counter() - start
            if args.profiler != "torch":
                torch.cuda.nvtx.range_pop()
            else:
                prof.step()
            if i >= args.warmup:
                times.append(elapsed * 1e3)
    summary = {
        "profiler": args.profiler, "emit_nvtx": args.emit_nvtx, "precision": args.precision,
        "model": f"gpt2-{args.model}", "layers": layers, "heads": heads, "width": width,
        "vocab": 50304, "recompute": args.recompute, "batch": args.batch,
        "seq": args.seq,
    }
    write_summary(args, summary, model, times, losses, step_starts)
    print(f"gpt2-{args.model} {args.precision} recompute {args.recompute} "
          f"{args.batch}x{args.seq}, {args.profiler}{' +emit_nvtx' if args.emit_nvtx else ''}: "
          f"median step {summary['median_ms']:.3f} ms over {args.steps} steps, loss "
          f"{losses[0]:.3f} -> {losses[-1]:.3f}; peak allocated "
          f"{summary['peak_allocated_bytes'] / 2**30:.2f} GiB, reserved "
          f"{summary['peak_reserved_bytes'] / 2**30:.2f} GiB, device in use "
          f"{summary['device_used_bytes_at_end'] / 2**30:.2f} GiB")


if __name__ == "__main__":
    main()
