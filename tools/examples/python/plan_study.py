#!/usr/bin/env python3
"""A plan study from Python, as a notebook would run it (docs/python.md).

LLaMA-2 70B on 64 H100s: simulate the shipped plan, see where each pipeline stage's time goes,
sweep the NICs' bandwidth against the recompute policy, and search the plans for the best.

Run from the repository's top after tools/setup.sh:
    PYTHONPATH=build/python /usr/bin/python3 tools/examples/python/plan_study.py
"""
import dtsim

CONFIG = "tools/examples/llama2_70b_64h100.json"

# 1. One plan: the figures a `dtsim simulate -o` result holds, as a dict.
result = dtsim.simulate(CONFIG)
print(f"LLaMA-2 70B, shipped plan: {result['iteration_time_ns'] / 1e9:.3f} s an iteration, "
      f"MFU {100 * result['mfu']:.1f}%")

try:
    import pandas  # noqa: F401 (python3-pandas: the DataFrames below)
    have_pandas = True
except ImportError:
    have_pandas = False
    print("(install python3-pandas for the tables)")

if have_pandas:
    stages = dtsim.to_dataframe(result)
    columns = ["stage", "time.compute_ns", "time.pp_wait_ns", "time.dp_exposed_ns",
               "memory.total_bytes"]
    print(stages[columns].to_string(index=False))

# 2. A sweep: every combination, simulated on every core; a failed point keeps its error.
sweep = dtsim.sweep(CONFIG, {"training.recompute": ["selective", "full"],
                             "cluster.inter_node.nic_bandwidth": ["100 Gbps", "400 Gbps"]})
if have_pandas:
    points = dtsim.to_dataframe(sweep)
    points["iteration_s"] = points["iteration_time_ns"] / 1e9
    print(points[["training.recompute", "cluster.inter_node.nic_bandwidth", "status",
                  "iteration_s", "mfu"]].to_string(index=False))
else:
    for point in sweep["points"]:
        print(point["values"], point["status"])

# 3. A search over the plans of the config's model on its cluster; errors name the JSON path.
try:
    dtsim.simulate(CONFIG, overrides={"parallelism.tensor": 3})
except dtsim.Error as error:
    print(f"a plan that cannot run: {error.path} = {error.value}: {error.message}")

found = dtsim.search(CONFIG, top=3, overrides={"search.micro_batches": [1, 2]})
best = found["plans"][[row[0] for row in found["plans"]].index(found["ranking"][0])]
row = dict(zip(found["columns"], best))
print(f"search: {found['counts']['simulated']} plans simulated; the best is DP {row['data']} × "
      f"TP {row['tensor']} × PP {row['pipeline']}")
