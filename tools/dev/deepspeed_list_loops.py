#!/usr/bin/python3
"""Host time of DeepSpeed 0.3.13's per-rank list loops (strategies/deepspeed_zero3.h).

Runs, on CPU tensors, the Python loops that deepspeed/runtime/zero/partition_parameters.py at
v0.3.13 runs before each of ZeRO-3's collectives — _allgather_param's narrow() and get_rank()
a rank, _reduce_scatter_gradient's view().narrow() a rank — and a small tensor's copy_ (the
dispatch of the copies ProcessGroupNCCL's list API issues a rank), and prints the host time
per rank of each (the median of 40 runs over 1,536 ranks). No GPU: the CUDA call each copy
makes is the GPU preset's host_launch_time (docs/models.md).

Needs PyTorch (Debian: python3-torch). Usage: tools/dev/deepspeed_list_loops.py
Measured 2026-12-05 on the development machine (AMD EPYC, Zen 5; Python 3.11.2, PyTorch
1.13.1), nothing else running, medians of three runs: 1.74, 2.05 and 0.55 µs a rank (2.8-3.3,
3.3-3.6 and 1.0-1.2 beside two busy processes on its two cores: run it on an idle machine).
"""
import os
import statistics
import sys
import time

import torch
import torch.distributed as dist

WORLD = 1536
PART = 16


def per_rank_us(loop, reps=40):
    times = []
    for _ in range(reps):
        start = time.perf_counter()
        loop()
        times.append(time.perf_counter() - start)
    return statistics.median(times) / WORLD * 1e6


def main():
    torch.set_num_threads(1)
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29555")
    dist.init_process_group("gloo", rank=0, world_size=1)
    group = dist.new_group([0])
    flat = torch.zeros(WORLD * PART, dtype=torch.half)
    grad = torch.zeros(WORLD * PART, dtype=torch.half)
    numel = WORLD * PART
    parts = [flat.narrow(0, PART * i, PART) for i in range(WORLD)]
    outs = [torch.empty(PART, dtype=torch.half) for _ in range(WORLD)]

    def allgather_param():  # as _allgather_param builds its list
        partitions = []
        for i in range(WORLD):
            partitions.append(flat.narrow(0, PART * i, PART))
            if i == dist.get_rank(group=group):
                pass

    def reduce_scatter_gradient():  # as _reduce_scatter_gradient builds its list
        input_list = []
        for i in range(WORLD):
            start = i * PART
            end = start + PART
            if start < numel and end <= numel:
                part = grad.view(-1).narrow(0, start, PART)
            input_list.append(part)

    def copies():
        for i in range(WORLD):
            outs[i].copy_(parts[i])

    print(f"PyTorch {torch.__version__}, Python {sys.version.split()[0]}")
    print(f"_allgather_param loop        {per_rank_us(allgather_param):.2f} us a rank")
    print(f"_reduce_scatter_gradient loop {per_rank_us(reduce_scatter_gradient):.2f} us a rank")
    print(f"copy_ of a small tensor       {per_rank_us(copies):.2f} us a rank")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
