#!/usr/bin/python3
"""Runs the README's worked examples exactly as written and checks their reports.

Usage: worked_examples_test.py DTSIM_BINARY SOURCE_DIR

Each example is a ```sh block between `<!-- worked-example NAME: FIGURE... -->` and
`<!-- /worked-example -->` in README.md. The block runs with bash in a fresh directory where
`build/dtsim` is the binary under test and `tools/` the source tree's; then every FIGURE.png the
marker names must be in the report, be a real PNG of a useful size with non-trivial content, and
be shown by the report's index.html.
"""

import os
import re
import subprocess
import sys
import tempfile

import matplotlib

matplotlib.use("Agg")
import matplotlib.image  # noqa: E402

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def examples(readme):
    pattern = re.compile(r"<!-- worked-example (\w+): ([\w ]+) -->\s*```sh\n(.*?)```\s*<!-- /worked-example -->",
                         re.S)
    return [(m.group(1), m.group(2).split(), m.group(3)) for m in pattern.finditer(readme)]


def check_png(path):
    with open(path, "rb") as f:
        head = f.read(24)
    if head[:8] != PNG_SIGNATURE or head[12:16] != b"IHDR":
        return "not a PNG"
    width, height = int.from_bytes(head[16:20], "big"), int.from_bytes(head[20:24], "big")
    if width < 400 or height < 200:
        return f"too small: {width}×{height}"
    pixels = matplotlib.image.imread(path)[:, :, :3]
    flat = pixels.reshape(-1, 3)
    colours = len({tuple(p) for p in flat[:: max(1, len(flat) // 20000)].round(2).tolist()})
    inked = float((flat.sum(axis=1) < 2.7).mean())  # not white
    if colours < 8 or inked < 0.02:
        return f"no content: {colours} colours, {100 * inked:.1f}% non-white"
    return None


def main(binary, source):
    with open(os.path.join(source, "README.md"), encoding="utf-8") as f:
        found = examples(f.read())
    if len(found) < 2:
        print(f"expected the README's worked examples, found {len(found)}")
        return 1
    failures = []
    for name, figures, script in found:
        with tempfile.TemporaryDirectory(prefix=f"dtsim_example_{name}_") as work:
            os.makedirs(os.path.join(work, "build"))
            os.symlink(os.path.abspath(binary), os.path.join(work, "build", "dtsim"))
            os.symlink(os.path.join(source, "tools"), os.path.join(work, "tools"))
            run = subprocess.run(["bash", "-euo", "pipefail", "-c", script], cwd=work,
                                 capture_output=True, text=True)
            if run.returncode != 0:
                failures.append(f"{name}: exit {run.returncode}\n{run.stdout[-2000:]}{run.stderr[-2000:]}")
                continue
            reports = re.findall(r"-o (\S+/report)\b", script)
            report = os.path.join(work, reports[-1])
            with open(os.path.join(report, "index.html"), encoding="utf-8") as f:
                page = f.read()
            for figure in figures:
                path = os.path.join(report, f"{figure}.png")
                if not os.path.exists(path):
                    failures.append(f"{name}: {figure}.png missing")
                    continue
                problem = check_png(path)
                if problem:
                    failures.append(f"{name}: {figure}.png: {problem}")
                if f'src="{figure}.png"' not in page:
                    failures.append(f"{name}: index.html does not show {figure}.png")
            print(f"{name}: {len(figures)} figures checked in {reports[-1]}")
    for failure in failures:
        print(f"FAIL {failure}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
