#!/usr/bin/python3
"""dtsim beside Calculon and ASTRA-sim (issue 36; docs/peers.md).

Runs each workload in dtsim and in a peer and prints markdown tables: per workload the predicted
iteration time (and, for Calculon, the memory per GPU) of each tool, their difference, and each
tool's wall time and peak RSS. Calculon is given the same model, plan and batch as dtsim's config
(its own system file for the GPUs); ASTRA-sim's analytical backend runs dtsim's Chakra export of
the config on a network with the rates and latencies of dtsim's cluster preset.

Run by hand, not in CI (tools/peers/README.md builds the peers):

  tools/peers/run_peers.py --astra-sim DIR --calculon DIR [--dtsim build/dtsim] [--only NAME]
                           [--stage PREFIX ...]
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# GPT-3 1.3B as Calculon's model files write it (dtsim's preset gpt3-1.3b: 24 layers, hidden
# 2,048, 16 heads of 128, FFN 8,192, sequence 2,048).
GPT3_1_3B = {"hidden": 2048, "feedforward": 8192, "seq_size": 2048, "attn_heads": 16,
             "attn_size": 128, "num_blocks": 24}

# The workloads Calculon can express: dense GPT models under Megatron-style TP/SP, PP and DP.
CALCULON_WORKLOADS = [
    {"name": "GPT-3 175B, 1,024 A100s (shipped example)",
     "config": "tools/examples/gpt3_175b_1024gpu.json", "sets": [],
     "model": "models/gpt3-175B.json", "system": "systems/a100_80g.json"},
    {"name": "GPT-3 175B, 1,024 A100s, full recompute, no SP",
     "config": "tools/examples/gpt3_175b_1024gpu.json",
     "sets": ["training.recompute=full", "parallelism.tensor.sequence_parallel=false"],
     "model": "models/gpt3-175B.json", "system": "systems/a100_80g.json"},
    {"name": "GPT-3 1.3B, 16 A100s (shipped example)",
     "config": "tools/examples/gpt3_1.3b_16gpu.json", "sets": [],
     "model": GPT3_1_3B, "system": "systems/a100_80g.json"},
]

NO_SP = "parallelism.tensor.sequence_parallel=false"
# dtsim's exports ASTRA-sim runs (up to 256 GPUs).
ASTRA_WORKLOADS = [
    {"name": "GPT-3 1.3B, 16 A100s (shipped example)",
     "config": "tools/examples/gpt3_1.3b_16gpu.json", "sets": []},
    {"name": "GPT-3 1.3B, 8 A100s, DP 1 × TP 4 × PP 2",
     "config": "tools/examples/gpt3_1.3b_16gpu.json",
     "sets": ["cluster.nodes=1", "parallelism.data=1"]},
    {"name": "GPT-3 1.3B, 4 A100s, DP 1 × PP 4",
     "config": "tools/examples/gpt3_1.3b_16gpu.json",
     "sets": ["cluster.nodes=1", "cluster.gpus_per_node=4", "parallelism.data=1",
              "parallelism.tensor.size=1", NO_SP, "parallelism.pipeline.size=4"]},
    {"name": "LLaMA-2 70B, 64 H100s (shipped example)",
     "config": "tools/examples/llama2_70b_64h100.json", "sets": []},
    {"name": "Mixtral 8x7B, 64 H100s, EP 8 (shipped example)",
     "config": "tools/examples/mixtral_8x7b_ep8_64h100.json", "sets": []},
    {"name": "ResNet-50, 256 A100s (shipped example)",
     "config": "tools/examples/resnet50_256gpu.json", "sets": []},
    {"name": "BERT-large, 64 V100s on 40 Gb/s Ethernet (shipped example)",
     "config": "tools/examples/bert_large_64gpu_ethernet.json", "sets": [],
     "network": "ethernet-40g-4gpu"},
    {"name": "BERT-large, 64 V100s, 1-bit Adam (shipped example)",
     "config": "tools/examples/bert_large_64gpu_ethernet_onebit_adam.json", "sets": [],
     "network": "ethernet-40g-4gpu"},
]

# ASTRA-sim's network for a dtsim cluster preset: two switch dimensions (the node's NVLink
# switch, the NICs' fat-tree), each with the per-GPU rate dtsim's analytical model uses there
# (line rate × the preset's efficiency, docs/network.md "Presets") and half dtsim's per-step
# latency α: ASTRA-sim's analytical Switch counts two hops for every transfer (src → switch →
# dest, congestion_unaware/basic-topology/Switch.cpp, compute_hops_count) and charges each the
# configured latency (BasicTopology.cpp, compute_communication_delay), where dtsim's α is the
# whole step (2 µs on a node, 5 µs across nodes).
ASTRA_NETWORKS = {
    "dgx-a100": {"intra_GBps": 300 * 0.775, "inter_GBps": 25 * 0.96,
                 "intra_ns": 1000, "inter_ns": 2500},
    "dgx-h100": {"intra_GBps": 450 * 0.822, "inter_GBps": 50 * 0.97,
                 "intra_ns": 1000, "inter_ns": 2500},
    # The BERT-large examples' cluster: preset ethernet-25g (PCIe 3.0 in the node, 12 GB/s a GPU
    # at efficiency 1.0, α 5 µs; TCP between nodes, α 25 µs) with four GPUs a node and a 40 Gb/s
    # NIC, which the node's four GPUs share: 5 GB/s / 4 a GPU when all of them cross at once, as
    # ASTRA-sim's hierarchical collectives have them do.
    "ethernet-40g-4gpu": {"intra_GBps": 12.0, "inter_GBps": 40 / 8 / 4,
                          "intra_ns": 2500, "inter_ns": 12500},
}

ASTRA_SYSTEM = {
    "scheduling-policy": "LIFO",
    "endpoint-delay": 0,
    "active-chunks-per-dimension": 1,
    "preferred-dataset-splits": 1,
    "collective-optimization": "localBWAware",
    "local-mem-bw": 1600,
    "boost-mode": 0,
}


def timed(cmd, workdir, timeout, env=None):
    """Runs cmd; returns (completed process, wall seconds, peak RSS in MiB)."""
    stats = os.path.join(workdir, "time.txt")
    proc = subprocess.run(["/usr/bin/time", "-f", "%e %M", "-o", stats] + cmd, cwd=workdir,
                          capture_output=True, text=True, timeout=timeout, check=False, env=env)
    with open(stats, encoding="utf-8") as f:
        last = f.read().strip().splitlines()[-1].split()
    return proc, float(last[0]), int(last[1]) / 1024


def run_dtsim(args, workload, workdir, extra=()):
    """dtsim's result JSON, wall time and peak RSS for a workload."""
    result = os.path.join(workdir, "dtsim.json")
    cmd = [args.dtsim, "simulate", os.path.join(ROOT, workload["config"]), "--quiet", "-o",
           result]
    for assignment in workload["sets"]:
        cmd += ["--set", assignment]
    proc, wall, rss = timed(cmd + list(extra), workdir, args.timeout)
    if proc.returncode != 0:
        raise RuntimeError(f"dtsim failed on {workload['name']}: {proc.stderr.strip()}")
    with open(result, encoding="utf-8") as f:
        return json.load(f), wall, rss


def peak_memory_gib(result):
    return max(s["memory"]["total_bytes"] for s in result["stages"]) / 2**30


def calculon_execution(plan, gpus):
    """Calculon's execution file for dtsim's resolved plan (its "input"."plan")."""
    if plan["schedule"] != "1f1b":
        raise RuntimeError(f"schedule {plan['schedule']}: only 1F1B is translated to Calculon")
    recompute = {"none": "none", "selective": "attn_only", "full": "full"}[plan["recompute"]]
    sp = plan["sequence_parallel"]
    return {
        "num_procs": gpus, "tensor_par": plan["tensor"], "pipeline_par": plan["pipeline"],
        "data_par": plan["data"],
        # Tensor parallelism on the node's NVLink network (0), the rest on the NICs' (1).
        "tensor_par_net": 0, "pipeline_par_net": 1, "data_par_net": 1,
        "batch_size": plan["global_batch"], "microbatch_size": plan["micro_batch"],
        # Calculon's A100 system knows float16 only (same tensor-core rate as bf16).
        "datatype": "float16", "fused_activation": True, "attention_type": "multihead",
        "activation_recompute": recompute,
        "pipeline_interleaving": 1,
        "optimizer_sharding": plan["zero_stage"] >= 1,
        "tensor_par_comm_type": "rs_ag" if sp else "ar", "tensor_par_overlap": "none",
        "seq_par_ag_redo": sp, "data_par_overlap": True, "weight_offload": False,
        "activations_offload": False, "optimizer_offload": False, "training": True,
    }


def run_calculon(args, workload, workdir):
    result, wall, rss = run_dtsim(args, workload, workdir)
    gpus = result["input"]["nodes"] * result["input"]["gpus_per_node"]
    execution = os.path.join(workdir, "execution.json")
    with open(execution, "w", encoding="utf-8") as f:
        json.dump(calculon_execution(result["input"]["plan"], gpus), f, indent=2)
    model = workload["model"]
    if isinstance(model, dict):
        path = os.path.join(workdir, "model.json")
        with open(path, "w", encoding="utf-8") as f:
            json.dump(model, f, indent=2)
        model = path
    out = os.path.join(workdir, "calculon.json")
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (args.calculon, env.get("PYTHONPATH")) if p)
    proc, peer_wall, peer_rss = timed(
        ["/usr/bin/python3", os.path.join(args.calculon, "bin", "calculon"), "llm",
         os.path.join(args.calculon, model), execution,
         os.path.join(args.calculon, workload["system"]), out], workdir, args.timeout, env)
    if proc.returncode != 0:
        raise RuntimeError(f"Calculon failed on {workload['name']}: {proc.stderr.strip()[-800:]}")
    with open(out, encoding="utf-8") as f:
        peer = json.load(f)
    # Where the time goes, on dtsim's first stage (the one that ends last in 1F1B) and in
    # Calculon's totals, both in seconds.
    first = result["stages"][0]["time"]
    parts = {
        "compute": (first["compute_ns"] / 1e9, peer["fw_time"] + peer["bw_time"]),
        "recompute": (first["recompute_ns"] / 1e9, peer["recompute_time"]),
        "tensor-parallel exposed": (first["tp_exposed_ns"] / 1e9,
                                    peer["tp_comm_exposed_time"] + peer["recomm_exposed_time"]),
        "pipeline (bubble and transfers)": (first["pp_wait_ns"] / 1e9,
                                            peer["bubble_time"] + peer["pp_comm_exposed_time"]),
        "data-parallel exposed": (first["dp_exposed_ns"] / 1e9, peer["dp_comm_exposed_time"]),
        "optimizer": (first["optimizer_ns"] / 1e9, peer["optim_step_time"]),
    }
    return {"dtsim_s": result["iteration_time_ns"] / 1e9, "peer_s": peer["total_time"],
            "parts": parts, "dtsim_gib": peak_memory_gib(result),
            "peer_gib": peer["proc_mem_tier1_cap_req"] / 2**30,
            "dtsim_wall": wall, "dtsim_rss": rss, "peer_wall": peer_wall, "peer_rss": peer_rss}


def astra_inputs(result, workdir, network=None):
    """The network and system files ASTRA-sim runs dtsim's export on (`network`: an entry of
    ASTRA_NETWORKS other than the config's cluster preset)."""
    return astra_files(network or result["input"]["cluster"], result["input"]["nodes"],
                       result["input"]["gpus_per_node"], workdir)


def astra_files(cluster, nodes, per_node, workdir, local_mem_bw=None):
    """ASTRA-sim's network and system files for `nodes` nodes of a dtsim cluster preset."""
    if cluster not in ASTRA_NETWORKS:
        raise RuntimeError(f"no ASTRA-sim network for cluster preset {cluster}")
    net = ASTRA_NETWORKS[cluster]
    dims = [("Switch", per_node, net["intra_GBps"], net["intra_ns"])]
    if nodes > 1:
        dims.append(("Switch", nodes, net["inter_GBps"], net["inter_ns"]))
    network = os.path.join(workdir, "network.yml")
    with open(network, "w", encoding="utf-8") as f:
        f.write("topology: [ %s ]\n" % ", ".join(d[0] for d in dims))
        f.write("npus_count: [ %s ]\n" % ", ".join(str(d[1]) for d in dims))
        # ASTRA-sim's "GB/s" is 2^30 bytes a second (bw_GBps_to_Bpns, common/NetworkFunction.cpp
        # of astra-network-analytical); dtsim's rates are 10^9.
        f.write("bandwidth: [ %s ]  # GiB/s\n" % ", ".join(f"{d[2] * 1e9 / 2**30:.3f}"
                                                            for d in dims))
        f.write("latency: [ %s ]  # ns\n" % ", ".join(f"{d[3]:.1f}" for d in dims))
    system = dict(ASTRA_SYSTEM)
    # Rings, as NCCL runs these collectives; NCCL's all-to-all is direct point-to-point.
    for collective in ("all-reduce", "all-gather", "reduce-scatter"):
        system[f"{collective}-implementation"] = ["ring"] * len(dims)
    system["all-to-all-implementation"] = ["direct"] * len(dims)
    if local_mem_bw is not None:
        system["local-mem-bw"] = local_mem_bw
    system_path = os.path.join(workdir, "system.json")
    with open(system_path, "w", encoding="utf-8") as f:
        json.dump(system, f, indent=2)
    return network, system_path


def astra_run(args, prefix, comm_groups, network, system, ranks, workdir):
    """ASTRA-sim's slowest rank in seconds (None unless every rank finished), a note, wall, RSS."""
    binary = os.path.join(args.astra_sim, "build", "astra_analytical", "build", "bin",
                          "AstraSim_Analytical_Congestion_Unaware")
    memory = os.path.join(args.astra_sim, "examples", "remote_memory", "analytical",
                          "no_memory_expansion.json")
    try:
        proc, peer_wall, peer_rss = timed(
            [binary, f"--workload-configuration={prefix}", f"--system-configuration={system}",
             f"--remote-memory-configuration={memory}", f"--network-configuration={network}",
             f"--comm-group-configuration={comm_groups}"], workdir, args.timeout)
        output = proc.stdout + proc.stderr
    except subprocess.TimeoutExpired:
        proc, output, peer_wall, peer_rss = None, "", float(args.timeout), 0.0
    cycles = [int(c) for c in re.findall(r"sys\[\d+\] finished, (\d+) cycles", output)]
    if len(cycles) < ranks:
        status = "timed out" if proc is None else f"exit {proc.returncode}"
        return None, f"{len(cycles)} of {ranks} ranks finished ({status})", peer_wall, peer_rss
    return max(cycles) / 1e9, "", peer_wall, peer_rss


def check_export(args, prefix):
    """Decodes the export with the Chakra schema ASTRA-sim builds (check_chakra_export.py):
    "" when every check passes, else the first failure."""
    chakra = os.path.join(args.astra_sim, "extern", "graph_frontend", "chakra")
    proc = subprocess.run([sys.executable, os.path.join(ROOT, "tools", "peers",
                                                        "check_chakra_export.py"),
                           "--chakra-src", chakra, prefix],
                          capture_output=True, text=True, check=False)
    if proc.returncode == 0:
        return ""
    failures = [line.strip() for line in proc.stdout.splitlines() if "FAIL " in line]
    return "Chakra schema check failed: " + (failures[0] if failures else proc.stderr.strip())


def run_astra(args, workload, workdir):
    prefix = os.path.join(workdir, "workload")
    # Every rank's trace: configs that simulate one rank per class of identical ranks too.
    result, wall, rss = run_dtsim(args, workload, workdir,
                                  ["--chakra", prefix, "--set", "simulation.ranks=full"])
    schema_note = check_export(args, prefix)
    network, system = astra_inputs(result, workdir, workload.get("network"))
    ranks = result["input"]["nodes"] * result["input"]["gpus_per_node"]
    peer_s, note, peer_wall, peer_rss = astra_run(
        args, prefix, f"{prefix}.comm_groups.json", network, system, ranks, workdir)
    note = "; ".join(n for n in (schema_note, note) if n)
    return {"dtsim_s": result["iteration_time_ns"] / 1e9, "peer_s": peer_s, "note": note,
            "dtsim_wall": wall, "dtsim_rss": rss, "peer_wall": peer_wall, "peer_rss": peer_rss}


def run_stage(args, prefix, workdir):
    """A STAGE job (PREFIX.<rank>.et, PREFIX.json) in both tools on DGX H100s, communication
    only (its traces record no compute time; each tool would price num_ops on its own roofline),
    sizes read as ASTRA-sim reads them (1 byte an element); then with the two mechanisms only one
    of them has taken out: dtsim's per-collective base latency, ASTRA-sim's local-memory passes."""
    prefix = os.path.abspath(prefix)
    ranks = 0
    while os.path.exists(f"{prefix}.{ranks}.et"):
        ranks += 1
    per_node = 8
    nodes = -(-ranks // per_node)
    row = {"ranks": ranks}
    for label, cluster in (("dtsim", "dgx-h100"), ("dtsim_no_base", "no_base")):
        if cluster == "no_base":
            cluster = os.path.join(workdir, "no_base.json")
            with open(cluster, "w", encoding="utf-8") as f:
                json.dump({"preset": "dgx-h100", "collective_latency": "0 us"}, f)
        result = os.path.join(workdir, f"{label}.json")
        proc, wall, rss = timed(
            [args.dtsim, "replay", f"{prefix}.0.et", "--all-ranks", "--comm-groups",
             f"{prefix}.json", "--network", cluster, "--element-bytes", "1", "-o", result],
            workdir, args.timeout)
        if proc.returncode != 0:
            raise RuntimeError(f"dtsim failed on {prefix}: {proc.stderr.strip()}")
        with open(result, encoding="utf-8") as f:
            row[label] = json.load(f)["network"]["span_ms"] / 1e3
        row.setdefault("dtsim_wall", wall)
        row.setdefault("dtsim_rss", rss)
    for label, memory_bw in (("peer", None), ("peer_unbounded_memory", 10**6)):
        network, system = astra_files("dgx-h100", nodes, per_node, workdir, memory_bw)
        peer_s, note, wall, rss = astra_run(args, prefix, f"{prefix}.json", network, system,
                                            ranks, workdir)
        row[label] = peer_s
        row.setdefault("note", note)
        row.setdefault("peer_wall", wall)
        row.setdefault("peer_rss", rss)
    return row


def difference(row):
    if row.get("peer_s") is None:
        return "—"
    return f"{(row['peer_s'] / row['dtsim_s'] - 1) * 100:+.1f}%"


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--astra-sim", help="ASTRA-sim source tree, built (README)")
    parser.add_argument("--calculon", help="Calculon source tree")
    parser.add_argument("--dtsim", default=os.path.join(ROOT, "build", "dtsim"))
    parser.add_argument("--only", help="run the workloads whose name contains this")
    parser.add_argument("--timeout", type=int, default=900, help="seconds a run may take")
    parser.add_argument("--stage", action="append", default=[], metavar="PREFIX",
                        help="with --astra-sim: also a STAGE job, PREFIX.<rank>.et and "
                             "PREFIX.json (repeatable; README)")
    args = parser.parse_args()
    if args.dtsim and not os.path.isabs(args.dtsim):
        args.dtsim = os.path.abspath(args.dtsim)

    def chosen(workloads):
        return [w for w in workloads if not args.only or args.only in w["name"]]

    if args.calculon:
        print("| workload | dtsim s | Calculon s | Calculon − dtsim | dtsim GiB | Calculon GiB "
              "| dtsim wall, RSS | Calculon wall, RSS |")
        print("|---|---:|---:|---:|---:|---:|---|---|")
        parts = []
        for w in chosen(CALCULON_WORKLOADS):
            with tempfile.TemporaryDirectory() as workdir:
                r = run_calculon(args, w, workdir)
            print(f"| {w['name']} | {r['dtsim_s']:.3f} | {r['peer_s']:.3f} | {difference(r)} "
                  f"| {r['dtsim_gib']:.1f} | {r['peer_gib']:.1f} "
                  f"| {r['dtsim_wall']:.2f} s, {r['dtsim_rss']:.0f} MiB "
                  f"| {r['peer_wall']:.2f} s, {r['peer_rss']:.0f} MiB |", flush=True)
            parts.append((w["name"], r["parts"]))
        print()
        for name, split in parts:
            print(f"{name}, seconds (dtsim's first stage; Calculon's totals):\n")
            print("| part | dtsim | Calculon | Calculon − dtsim |")
            print("|---|---:|---:|---:|")
            for part, (mine, theirs) in split.items():
                print(f"| {part} | {mine:.3f} | {theirs:.3f} | {theirs - mine:+.3f} |")
            print()
    if args.astra_sim:
        print("| workload | dtsim s | ASTRA-sim s | ASTRA − dtsim | dtsim wall, RSS (with export) "
              "| ASTRA-sim wall, RSS | note |")
        print("|---|---:|---:|---:|---|---|---|")
        for w in chosen(ASTRA_WORKLOADS):
            with tempfile.TemporaryDirectory() as workdir:
                try:
                    r = run_astra(args, w, workdir)
                except RuntimeError as error:
                    print(f"| {w['name']} | — | — | — | — | — | {error} |", flush=True)
                    continue
            peer = f"{r['peer_s']:.3f}" if r["peer_s"] is not None else "—"
            print(f"| {w['name']} | {r['dtsim_s']:.3f} | {peer} | {difference(r)} "
                  f"| {r['dtsim_wall']:.2f} s, {r['dtsim_rss']:.0f} MiB "
                  f"| {r['peer_wall']:.2f} s, {r['peer_rss']:.0f} MiB | {r['note']} |",
                  flush=True)
    if args.astra_sim and args.stage:
        print("\n| STAGE job | ranks | dtsim ms | ASTRA-sim ms | ASTRA − dtsim | dtsim without base "
              "latency | ASTRA-sim, unbounded local memory | difference | dtsim wall, RSS "
              "| ASTRA-sim wall, RSS | note |")
        print("|---|---:|---:|---:|---:|---:|---:|---:|---|---|---|")
        for prefix in args.stage:
            with tempfile.TemporaryDirectory() as workdir:
                r = run_stage(args, prefix, workdir)

            def ms(value):
                return f"{value * 1e3:.3f}" if value is not None else "—"

            def diff(peer, mine):
                return f"{(peer / mine - 1) * 100:+.1f}%" if peer is not None else "—"

            print(f"| {os.path.basename(prefix)} | {r['ranks']} | {ms(r['dtsim'])} "
                  f"| {ms(r['peer'])} | {diff(r['peer'], r['dtsim'])} | {ms(r['dtsim_no_base'])} "
                  f"| {ms(r['peer_unbounded_memory'])} "
                  f"| {diff(r['peer_unbounded_memory'], r['dtsim_no_base'])} "
                  f"| {r['dtsim_wall']:.2f} s, {r['dtsim_rss']:.0f} MiB "
                  f"| {r['peer_wall']:.2f} s, {r['peer_rss']:.0f} MiB | {r['note']} |", flush=True)
    if not args.calculon and not args.astra_sim:
        parser.error("give --calculon DIR, --astra-sim DIR or both")
    return 0


if __name__ == "__main__":
    sys.exit(main())
