"""The CUDA caching allocator's own record of a run: every allocation, free and segment, in order.

torch.cuda.memory._record_memory_history keeps one entry per allocator event (alloc,
free_requested, free_completed, segment_alloc, segment_free, segment_map, segment_unmap,
oom…) with the block's address, size and stream; torch.cuda.memory._snapshot returns them with
the segments held at the end. Recording starts before the model is built, so the record holds
the parameters, the optimizer's state and every tensor of every step: the sequence
models/eager_allocations.cc replays, to compare tensor by tensor. No stack frames are taken
(context=None), so recording costs little and changes no allocation.

The file written is JSON (gzipped when its name ends in .gz):
  {"format": "dtsim.allocator_history", "version": 1, "fields": [...],
   "events": [[action, address, size, stream, ...], ...],
   "steps": [index of the first event of each step, ...],
   "segments": [{"address", "total_size", "allocated_size", "stream", "segment_type",
                 "is_expandable"}, ...]}
"""
import gzip
import json
import os

import torch

FIELDS = ("action", "addr", "size", "stream")
SEGMENT_FIELDS = ("address", "total_size", "allocated_size", "active_size", "stream",
                  "segment_type", "is_expandable")


def memory_facts():
    """For a run's summary: the allocator's peaks since the last reset, the device memory in
    use (what nvidia-smi shows: the CUDA context included), the allocator's configuration and
    counters."""
    stats = torch.cuda.memory_stats()
    free, total = torch.cuda.mem_get_info()
    return {"peak_allocated_bytes": torch.cuda.max_memory_allocated(),
            "peak_reserved_bytes": torch.cuda.max_memory_reserved(),
            "device_used_bytes_at_end": total - free, "device_total_bytes": total,
            "alloc_conf": os.environ.get("PYTORCH_CUDA_ALLOC_CONF", ""),
            "device_allocations": stats.get("num_device_alloc"),
            "device_frees": stats.get("num_device_free"),
            "alloc_retries": stats.get("num_alloc_retries"),
            "peak_requested_bytes": stats.get("requested_bytes.all.peak"),
            "peak_inactive_split_bytes": stats.get("inactive_split_bytes.all.peak")}


def start():
    """Starts recording (before anything is allocated)."""
    torch.cuda.memory._record_memory_history(enabled="all", context=None, stacks="python")


def events_so_far():
    """How many events are recorded: where the next step's events begin."""
    return len(torch.cuda.memory._snapshot()["device_traces"][torch.cuda.current_device()])


def write(path, step_starts):
    """Writes what was recorded to `path` (atomically) and stops recording."""
    snapshot = torch.cuda.memory._snapshot()
    torch.cuda.memory._record_memory_history(enabled=None)
    trace = snapshot["device_traces"][torch.cuda.current_device()]
    record = {
        "format": "dtsim.allocator_history", "version": 1, "fields": list(FIELDS),
        "events": [[entry.get(field) for field in FIELDS] for entry in trace],
        "steps": step_starts,
        "segments": [{field: segment.get(field) for field in SEGMENT_FIELDS}
                     for segment in snapshot["segments"]],
    }
    temporary = path + ".partial"
    opener = gzip.open if path.endswith(".gz") else open
    with opener(temporary, "wt") as out:
        json.dump(record, out, separators=(",", ":"))
    os.replace(temporary, path)
