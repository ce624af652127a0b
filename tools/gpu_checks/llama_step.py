#!/usr/bin/env python3
"""Llama-style training steps on one GPU: the memory PyTorch's caching allocator holds for them.

A decoder as torchtitan builds its Llama 3 (torchtitan/models/llama3/model/model.py): RMSNorm
(nn.RMSNorm), rotary positions applied in complex fp32 (apply_rotary_emb), grouped-query
attention whose keys and values are repeated to every head (repeat_kv) before flash attention
(scaled_dot_product_attention, causal), a SwiGLU MLP (w2(silu(w1 x) * w3 x)), no biases and an
untied output layer; the loss is cross_entropy over the logits cast to fp32. Random tokens from
a fixed seed. Three ways to train it:

  --mode eager   fp32 parameters under bf16 autocast, fused AdamW: the loop gpt2_step.py runs
  --mode ddp     the same loop under DistributedDataParallel (its defaults: 25 MiB buckets,
                 gradient_as_bucket_view=False) on a process group of one rank (NCCL): the
                 reducer's gradient buckets beside it
  --mode fsdp2   torchtitan's loop on a process group of one rank (NCCL): every block, then the
                 model, wrapped by fully_shard (torch.distributed.fsdp) with
                 MixedPrecisionPolicy(param_dtype=bf16, reduce_dtype=fp32), no autocast,
                 fused AdamW over the sharded parameters. --reshard default: every block but
                 the last reshards after forward (torchtitan's "default" policy); never: none.
                 FSDP2's all-gather and reduce-scatter buffers and streams on one GPU.
                 --fake-world N: rank 0 of N on PyTorch's fake process group (collectives
                 that move no data; torch.testing._internal.distributed.fake_pg), so one GPU
                 holds what a rank of N does — the all-gather's buffers, 1/N shards — though
                 the loss it trains is meaningless.
                 --cp C (with --fake-world N, C dividing N): context parallelism as torchtitan
                 runs it — FSDP2 over all N ranks (data x context), and each step inside
                 torch.distributed.tensor.experimental.context_parallel over the C ranks of
                 rank 0's context group, with the inputs, targets and rotation table as its
                 buffers (the first two not restored): ring attention (all-gathered keys and
                 values, load balanced) on rank 0's 1/C of every sequence.

Recompute per block as torchtitan applies it (checkpoint_wrapper, non-reentrant): none; full;
every-2nd (blocks 1, 3, 5, …: torchtitan's selective layer policy with frequency 2); op
(torchtitan's selective op policy, gpt2_step.op_policy_contexts). --clip-norm clips the
gradients' norm before the optimizer step (clip_grad_norm_, foreach), as torchtitan does.
--accumulate N runs N micro-batches (of --batch each) per step, their gradients accumulated.

The allocator's configuration comes from PYTORCH_CUDA_ALLOC_CONF (expandable_segments:True is
torchtitan's). Writes a JSON summary (--summary) like gpt2_step.py's, and with --history the
allocator's record of every allocation and free (memory_history.py).
"""
import argparse
import contextlib
import json
import os
import time

import torch
import torch.nn as nn
import torch.nn.functional as F
import gpt2_step
import memory_history

# layers, width, heads, key-value heads, MLP width, vocabulary. "1b": Llama 3.2 1B's shape with
# the output layer untied (as in Llama 3.1 8B and larger); "200m": a smaller one with 4 heads
# per key-value head; "mha-200m": the same with one head per key-value head (no repeat_kv
# copies); "8b-4l": four of Llama 3.1 8B's layers (heads of 128) with its embeddings.
SIZES = {"1b": (16, 2048, 32, 8, 8192, 128256), "200m": (12, 1024, 16, 4, 2816, 32000),
         "mha-200m": (12, 1024, 16, 16, 2816, 32000), "8b-4l": (4, 4096, 32, 8, 14336, 128256),
         "8b": (32, 4096, 32, 8, 14336, 128256)}


def rotary_table(head_dim, positions, theta=500000.0):
    """The complex rotations of every position (torchtitan's precompute_freqs_cis)."""
    freqs = 1.0 / (theta ** (torch.arange(0, head_dim, 2)[: head_dim // 2].float() / head_dim))
    angles = torch.outer(torch.arange(positions).float(), freqs)
    return torch.polar(torch.ones_like(angles), angles)  # complex64


def apply_rotary(xq, xk, table):
    xq_ = torch.view_as_complex(xq.float().reshape(*xq.shape[:-1], -1, 2))
    xk_ = torch.view_as_complex(xk.float().reshape(*xk.shape[:-1], -1, 2))
    table = table.view(1, xq_.shape[1], 1, xq_.shape[-1])
    xq_out = torch.view_as_real(xq_ * table).flatten(3)
    xk_out = torch.view_as_real(xk_ * table).flatten(3)
    return xq_out.type_as(xq), xk_out.type_as(xk)


def repeat_kv(x, repeats):
    batch, seq, kv_heads, head_dim = x.shape
    if repeats == 1:
        return x
    return (x[:, :, :, None, :].expand(batch, seq, kv_heads, repeats, head_dim)
            .reshape(batch, seq, kv_heads * repeats, head_dim))


class Attention(nn.Module):
    def __init__(self, width, heads, kv_heads):
        super().__init__()
        self.heads, self.kv_heads, self.head_dim = heads, kv_heads, width // heads
        self.wq = nn.Linear(width, heads * self.head_dim, bias=False)
        self.wk = nn.Linear(width, kv_heads * self.head_dim, bias=False)
        self.wv = nn.Linear(width, kv_heads * self.head_dim, bias=False)
        self.wo = nn.Linear(heads * self.head_dim, width, bias=False)

    def forward(self, x, table):
        batch, seq, _ = x.shape
        xq = self.wq(x).view(batch, seq, -1, self.head_dim)
        xk = self.wk(x).view(batch, seq, -1, self.head_dim)
        xv = self.wv(x).view(batch, seq, -1, self.head_dim)
        xq, xk = apply_rotary(xq, xk, table)
        keys = repeat_kv(xk, self.heads // self.kv_heads)
        values = repeat_kv(xv, self.heads // self.kv_heads)
        out = F.scaled_dot_product_attention(xq.transpose(1, 2), keys.transpose(1, 2),
                                             values.transpose(1, 2), is_causal=True)
        return self.wo(out.transpose(1, 2).contiguous().view(batch, seq, -1))


class FeedForward(nn.Module):
    def __init__(self, width, hidden):
        super().__init__()
        self.w1 = nn.Linear(width, hidden, bias=False)
        self.w2 = nn.Linear(hidden, width, bias=False)
        self.w3 = nn.Linear(width, hidden, bias=False)

    def forward(self, x):
        return self.w2(F.silu(self.w1(x)) * self.w3(x))


class Block(nn.Module):
    def __init__(self, width, heads, kv_heads, hidden):
        super().__init__()
        self.attention_norm = nn.RMSNorm(width, eps=1e-5)
        self.attention = Attention(width, heads, kv_heads)
        self.ffn_norm = nn.RMSNorm(width, eps=1e-5)
        self.feed_forward = FeedForward(width, hidden)

    def forward(self, x, table):
        h = x + self.attention(self.attention_norm(x), table)
        return h + self.feed_forward(self.ffn_norm(h))


class Llama(nn.Module):
    def __init__(self, layers, width, heads, kv_heads, hidden, vocab, seq):
        super().__init__()
        self.tok_embeddings = nn.Embedding(vocab, width)
        self.register_buffer("table", rotary_table(width // heads, seq), persistent=False)
        self.layers = nn.ModuleList(Block(width, heads, kv_heads, hidden) for _ in range(layers))
        self.norm = nn.RMSNorm(width, eps=1e-5)
        self.output = nn.Linear(width, vocab, bias=False)
        for parameter in self.parameters():
            if parameter.dim() == 2:
                nn.init.normal_(parameter, std=0.02)

    def forward(self, tokens):
        h = self.tok_embeddings(tokens)
        for block in self.layers:
            h = block(h, self.table)
        return self.output(self.norm(h))


def apply_recompute(model, recompute):
    from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import checkpoint_wrapper
    for i, block in enumerate(model.layers):
        if recompute == "full" or (recompute == "every-2nd" and i % 2 == 1):
            model.layers[i] = checkpoint_wrapper(block, preserve_rng_state=False)
        elif recompute == "op":
            model.layers[i] = checkpoint_wrapper(block, preserve_rng_state=False,
                                                 context_fn=gpt2_step.op_policy_contexts)


def apply_fsdp2(model, reshard, fake_world):
    import torch.distributed as dist
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
    if fake_world > 0:
        from torch.testing._internal.distributed.fake_pg import FakeStore
        dist.init_process_group("fake", rank=0, world_size=fake_world, store=FakeStore())
    else:
        os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
        os.environ.setdefault("MASTER_PORT", "29517")
        dist.init_process_group("nccl", rank=0, world_size=1)
    policy = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
    for i, block in enumerate(model.layers):
        last = i == len(model.layers) - 1
        fully_shard(block, mp_policy=policy,
                    reshard_after_forward=reshard == "default" and not last)
    fully_shard(model, mp_policy=policy, reshard_after_forward=reshard == "default")


def context_parallel_group(fake_world, cp):
    """Rank 0's context-parallel group: the "cp" dimension of a (data, context) mesh."""
    from torch.distributed.device_mesh import init_device_mesh
    mesh = init_device_mesh("cuda", (fake_world // cp, cp), mesh_dim_names=("dp_shard", "cp"))
    return mesh["cp"]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--mode", choices=("eager", "ddp", "fsdp2"), default="eager")
    parser.add_argument("--model", choices=tuple(SIZES), default="1b")
    parser.add_argument("--recompute", choices=("none", "full", "every-2nd", "op"),
                        default="none")
    parser.add_argument("--reshard", choices=("default", "never"), default="default")
    parser.add_argument("--clip-norm", type=float, default=0.0, help="0: no clipping")
    parser.add_argument("--fake-world", type=int, default=0,
                        help="fsdp2: rank 0 of this many on the fake process group (0: NCCL, 1)")
    parser.add_argument("--cp", type=int, default=1,
                        help="fsdp2 with --fake-world: context-parallel ranks (1: none)")
    parser.add_argument("--batch", type=int, default=2)
    parser.add_argument("--accumulate", type=int, default=1,
                        help="micro-batches per step, their gradients accumulated (loss / N)")
    parser.add_argument("--seq", type=int, default=2048)
    parser.add_argument("--warmup", type=int, default=2, help="steps before the peaks reset")
    parser.add_argument("--steps", type=int, default=3, help="timed steps")
    parser.add_argument("--summary", required=True, help="the JSON summary to write")
    parser.add_argument("--history", help="the allocator's record of the run, written here")
    args = parser.parse_args()
    if args.cp > 1 and (args.mode != "fsdp2" or args.fake_world % args.cp != 0 or
                        args.seq % (2 * args.cp) != 0):
        parser.error("--cp needs --mode fsdp2, a --fake-world it divides and a --seq of "
                     "2 x cp equal chunks")

    if args.history:
        memory_history.start()
    torch.manual_seed(0)
    layers, width, heads, kv_heads, hidden, vocab = SIZES[args.model]
    model = Llama(layers, width, heads, kv_heads, hidden, vocab, args.seq).to("cuda")
    apply_recompute(model, args.recompute)
    if args.mode == "ddp":
        import torch.distributed as dist
        os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
        os.environ.setdefault("MASTER_PORT", "29517")
        dist.init_process_group("nccl", rank=0, world_size=1)
        model = torch.nn.parallel.DistributedDataParallel(model, device_ids=[0])
    if args.mode == "fsdp2":
        apply_fsdp2(model, args.reshard, args.fake_world)
        if args.fake_world > 0:
            # The unsharded model built before fully_shard leaves its blocks cached (N - 1 of N
            # parts of it); torchtitan builds on the meta device instead. Give them back, so
            # that the reserve is the loop's.
            torch.cuda.empty_cache()
    cp_group = context_parallel_group(args.fake_world, args.cp) if args.cp > 1 else None
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)
    generator = torch.Generator(device="cuda").manual_seed(1)
    tokens = torch.randint(0, vocab, (args.batch, args.seq + 1), device="cuda",
                           generator=generator)
    inputs, targets = tokens[:, :-1].contiguous(), tokens[:, 1:].contiguous()

    def context(step_inputs, step_targets):
        if cp_group is None:
            return contextlib.nullcontext()
        from torch.distributed.tensor.experimental import context_parallel
        return context_parallel(cp_group, buffers=[step_inputs, step_targets, model.table],
                                buffer_seq_dims=[1, 1, 0],
                                no_restore_buffers={step_inputs, step_targets})

    def step():
        for _ in range(args.accumulate):
            # Under context parallelism the inputs and targets are sharded in place, as
            # torchtitan's are: each step gets its own, as its data loader hands them out.
            step_inputs, step_targets = ((inputs.clone(), targets.clone()) if cp_group is not None
                                         else (inputs, targets))
            with context(step_inputs, step_targets):
                with torch.autocast("cuda", dtype=torch.bfloat16, enabled=args.mode != "fsdp2"):
                    logits = model(step_inputs)
                loss = F.cross_entropy(logits.flatten(0, 1).float(), step_targets.flatten(0, 1))
                if args.accumulate > 1:
                    loss = loss / args.accumulate
                del logits
                loss.backward()
        if args.clip_norm > 0:
            torch.nn.utils.clip_grad_norm_(model.parameters(), args.clip_norm, foreach=True)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        return loss

    times, losses, step_starts = [], [], []
    for i in range(args.warmup + args.steps):
        if args.history:
            step_starts.append(memory_history.events_so_far())
        if i == args.warmup:
            torch.cuda.reset_peak_memory_stats()
        start = time.perf_counter()
        losses.append(step().item())
        torch.cuda.synchronize()
        if i >= args.warmup:
            times.append((time.perf_counter() - start) * 1e3)
    summary = {
        "mode": args.mode, "model": f"llama-{args.model}", "layers": layers, "width": width,
        "heads": heads, "kv_heads": kv_heads, "ffn": hidden, "vocab": vocab,
        "recompute": args.recompute, "reshard": args.reshard if args.mode == "fsdp2" else None,
        "clip_norm": args.clip_norm, "batch": args.batch, "seq": args.seq,
        "accumulate": args.accumulate,
    }
    if args.fake_world > 0:
        summary["fake_world"] = args.fake_world
    if args.cp > 1:
        summary["cp"] = args.cp
    gpt2_step.write_summary(args, summary, model, times, losses, step_starts)
    if args.mode != "eager":
        torch.distributed.destroy_process_group()
    print(f"llama-{args.model} {args.mode} recompute {args.recompute} {args.batch}x{args.seq} "
          f"({os.environ.get('PYTORCH_CUDA_ALLOC_CONF', 'default allocator')}): median step "
          f"{summary['median_ms']:.1f} ms, loss {losses[0]:.3f} -> {losses[-1]:.3f}; peak "
          f"allocated {summary['peak_allocated_bytes'] / 2**30:.2f} GiB, reserved "
          f"{summary['peak_reserved_bytes'] / 2**30:.2f} GiB")


if __name__ == "__main__":
    main()
