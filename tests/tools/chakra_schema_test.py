#!/usr/bin/python3
"""dtsim's Chakra exports decoded with Chakra's own et_def.proto (issue 36).

Registered in ctest only where a Chakra source tree is configured (-DDTSIM_CHAKRA_SRC=DIR:
ASTRA-sim's extern/graph_frontend/chakra, or a clone of github.com/mlcommons/chakra), since the
schema is Chakra's and dtsim keeps no copy of it; tools/peers/run_peers.py runs the same check on
every export it gives ASTRA-sim. Needs Debian's protobuf-compiler and python3-protobuf.

  chakra_schema_test.py DTSIM CHAKRA_SRC REPO

Exports each config below with every rank and runs tools/peers/check_chakra_export.py on it
(every record decodes and re-encodes to the same bytes, ids, dependencies, groups, pairs); then
breaks one export three ways and expects the check to fail on each, naming what broke.
"""
import json
import os
import subprocess
import sys
import tempfile

GPT3 = "tools/examples/gpt3_1.3b_16gpu.json"
# (name, config, --set overrides): each a different part of the exporter.
EXPORTS = [
    ("gpt3-1.3b", GPT3, []),  # TP + SP, PP, DP: all-gathers, reduce-scatters, send/recv pairs
    ("dp1-pipeline", GPT3, ["cluster.nodes=1", "parallelism.data=1"]),
    ("interleaved", GPT3, ["parallelism.pipeline.schedule=interleaved",
                           "parallelism.pipeline.virtual_stages=2"]),
    ("zero3", GPT3, ["parallelism.zero_stage=3"]),
    ("context-2", GPT3, ["parallelism.context=2", "parallelism.data=1",
                         "training.flash_attention=true"]),  # ring shifts as send/recv pairs
    ("mixtral-ep8", "tools/examples/mixtral_8x7b_ep8_64h100.json", []),  # all-to-alls
    ("onebit-adam", "tools/examples/bert_large_64gpu_ethernet_onebit_adam.json", []),
    ("resnet50-256", "tools/examples/resnet50_256gpu.json", []),
]


def check(repo, chakra, prefix):
    proc = subprocess.run([sys.executable, os.path.join(repo, "tools", "peers",
                                                        "check_chakra_export.py"),
                           "--chakra-src", chakra, prefix],
                          capture_output=True, text=True, check=False)
    return proc.returncode, proc.stdout + proc.stderr


def main():
    dtsim, chakra, repo = sys.argv[1:4]
    failures = []
    with tempfile.TemporaryDirectory() as workdir:
        for name, config, sets in EXPORTS:
            prefix = os.path.join(workdir, name)
            command = [dtsim, "simulate", os.path.join(repo, config), "--quiet", "--chakra",
                       prefix, "--set", "simulation.ranks=full"]
            for setting in sets:
                command += ["--set", setting]
            subprocess.run(command, check=True)
            rc, output = check(repo, chakra, prefix)
            print(output, end="")
            if rc != 0:
                failures.append(f"{name}: the check failed on dtsim's export")
        # The check must fail when the export is wrong: a group that lost a member, a file cut
        # short, a send whose receive is gone (the receiving rank's file without its nodes).
        prefix = os.path.join(workdir, "gpt3-1.3b")
        groups_path = prefix + ".comm_groups.json"
        with open(groups_path, encoding="utf-8") as f:
            groups = json.load(f)
        broken = dict(groups)
        first = sorted(broken, key=int)[0]
        broken[first] = broken[first][1:]
        with open(groups_path, "w", encoding="utf-8") as f:
            json.dump(broken, f)
        rc, output = check(repo, chakra, prefix)
        if rc == 0 or "is not a member of group" not in output:
            failures.append(f"a group without its first member passed:\n{output}")
        with open(groups_path, "w", encoding="utf-8") as f:
            json.dump(groups, f)
        with open(prefix + ".3.et", "rb") as f:
            data = f.read()
        with open(prefix + ".3.et", "wb") as f:
            f.write(data[:-3])
        rc, output = check(repo, chakra, prefix)
        if rc == 0 or "left in the file" not in output:
            failures.append(f"a file cut short passed:\n{output}")
        with open(prefix + ".3.et", "wb") as f:
            f.write(b"")
        rc, output = check(repo, chakra, prefix)
        if rc == 0 or "receives" not in output:
            failures.append(f"an empty rank file (its sends and receives gone) passed:\n{output}")
    for failure in failures:
        print("FAIL", failure)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
