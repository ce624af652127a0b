#!/usr/bin/env python3
"""Checks dtsim's layering rules (docs/architecture.md, DESIGN §3) on the source tree.

Rules:
  1. A module includes only itself and the modules below it (the arrows of the layer
     diagram, followed transitively). No upward includes, none between L2 siblings.
  2. <cupti.h> and the other CUPTI headers only under profiler/cupti/.
  3. exit(), _Exit() and quick_exit() only in program entry files: the CLI's main
     (tools/cli/main.cc) and the standalone benchmark drivers (tools/bench/*_bench.cc).
  4. Every directory of a module that holds C++ sources has a README.md naming each of its
     source files and scripts in backticks (`name.cc`), and naming no file it lacks: the
     module maps stay true.

Usage: check_layering.py [ROOT]        check the tree at ROOT (default: the repository)
       check_layering.py --self-test   check that the checker catches each kind of violation
Exits 0 when clean, 1 with one line per violation otherwise. Standard library only.
"""
import os
import re
import sys
import tempfile

# Direct "may include" arrows; the check allows their transitive closure.
ARROWS = {
    "sim/base": [],
    "sim/graph": ["sim/base"],
    "sim/engine": ["sim/graph", "sim/base"],
    "traces": ["sim/graph", "sim/base"],
    "network": ["sim/engine", "sim/graph", "sim/base"],
    "models": ["traces", "sim/base"],
    "profiler": ["traces", "sim/base"],
    "strategies": ["models", "network", "sim/engine", "sim/graph", "sim/base", "traces"],
    "tools": ["strategies", "models", "network", "profiler", "traces", "sim/engine",
              "sim/graph", "sim/base"],
    "tests": None,  # anything
}
SOURCE_SUFFIXES = (".h", ".hpp", ".cc", ".cpp", ".cu")
INCLUDE = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]')
CUPTI_HEADER = re.compile(r"^(cupti[^/]*\.h|generated_cuda.*_meta\.h)$")
EXIT_CALL = re.compile(r"(?<![\w:.>])(?:std::)?(?:_?exit|_Exit|quick_exit)\s*\(")
README_LISTED = (".h", ".hpp", ".cc", ".cpp", ".cu", ".py", ".sh")
README_FILE_NAME = re.compile(r"`([\w.+-]+\.(?:h|hpp|cc|cpp|cu|py|sh))`")
ENTRY_FILES = re.compile(r"^(tools/cli/main\.cc|tools/bench/[a-z_]+_bench\.cc)$")


def closure(module):
    seen, stack = set(), list(ARROWS[module] or [])
    while stack:
        name = stack.pop()
        if name not in seen:
            seen.add(name)
            stack.extend(ARROWS[name] or [])
    return seen


def module_of(path):
    best = None
    for module in ARROWS:
        if path == module or path.startswith(module + "/"):
            if best is None or len(module) > len(best):
                best = module
    return best


def strip_comments(line):
    return line.split("//", 1)[0]


def check_file(root, relative):
    problems = []
    module = module_of(relative)
    allowed = None if ARROWS.get(module, []) is None else closure(module) | {module}
    with open(os.path.join(root, relative), encoding="utf-8", errors="replace") as handle:
        for number, line in enumerate(handle, 1):
            where = f"{relative}:{number}"
            match = INCLUDE.match(line)
            if match:
                bracket, target = match.groups()
                if bracket == "<" and CUPTI_HEADER.match(os.path.basename(target)) and \
                        not relative.startswith("profiler/cupti/"):
                    problems.append(f"{where}: includes <{target}>; CUPTI headers belong "
                                    "under profiler/cupti/ only")
                target_module = module_of(target) if bracket == '"' else None
                if target_module and allowed is not None and target_module not in allowed:
                    problems.append(f"{where}: {module} includes \"{target}\" from "
                                    f"{target_module}; {module} may include only "
                                    f"{', '.join(sorted(allowed))}")
                continue
            code = strip_comments(line)
            if not ENTRY_FILES.match(relative) and module != "tests" and EXIT_CALL.search(code):
                problems.append(f"{where}: ends the process; only program entry files "
                                "(tools/cli/main.cc) may (return an Error instead)")
    return problems


def check_readme(root, directory, files):
    """Rule 4 for one directory holding C++ sources."""
    relative = os.path.relpath(directory, root).replace(os.sep, "/")
    readme = os.path.join(directory, "README.md")
    if not os.path.exists(readme):
        return [f"{relative}: no README.md (one line per file, in pipeline order)"]
    with open(readme, encoding="utf-8", errors="replace") as handle:
        named = set(README_FILE_NAME.findall(handle.read()))
    problems = [f"{relative}/README.md: does not name `{name}`"
                for name in sorted(files) if name.endswith(README_LISTED) and name not in named]
    problems += [f"{relative}/README.md: names `{name}`, which {relative}/ does not hold"
                 for name in sorted(named - set(files))]
    return problems


def check_tree(root):
    problems = []
    for module in ARROWS:
        if module == "tests":
            continue
        top = os.path.join(root, module)
        for directory, _, files in os.walk(top):
            if any(name.endswith(SOURCE_SUFFIXES) for name in files):
                problems.extend(check_readme(root, directory, files))
    for module in ARROWS:
        top = os.path.join(root, module)
        for directory, _, files in os.walk(top):
            for name in sorted(files):
                if name.endswith(SOURCE_SUFFIXES):
                    relative = os.path.relpath(os.path.join(directory, name), root)
                    problems.extend(check_file(root, relative.replace(os.sep, "/")))
    return problems


def self_test():
    cases = {
        "sim/base/bad_upward.h": '#include "sim/engine/simulator.h"\n',
        "network/bad_sibling.cc": '#include "models/gpu.h"\n',
        "traces/bad_cupti.cc": "#include <cupti.h>\n",
        "sim/engine/bad_exit.cc": "void F() { std::exit(1); }\n",
        "network/bad_quick_exit.cc": "void F() { std::_Exit(1); }\n",
        "tools/cli/run_command.cc": "void F() { exit(2); }\n",
    }
    clean = {
        "network/good.cc": '#include "sim/engine/simulator.h"\n#include "sim/base/time.h"\n',
        "strategies/good.cc": '#include "sim/graph/task.h"  // transitively allowed\n',
        "profiler/cupti/good.cc": "#include <cupti.h>\n",
        "tools/cli/main.cc": "int main() { exit(0); }\n",
        "tools/bench/engine_bench.cc": "int main() { std::_Exit(0); }\n",
        "sim/base/good.cc": "// exit( in a comment is fine\nint on_exit_count = 0;\n",
    }
    # Rule 4: each (README text or None, source files) directory, and the problem it must get.
    readme_cases = {
        "models": (None, ["a.cc"], "models: no README.md"),
        "sim/graph": ("- `a.h` — one\n", ["a.h", "b.cc"], "sim/graph/README.md: does not name `b.cc`"),
        "sim/engine": ("- `a.h`, `gone.cc`\n", ["a.h"],
                       "sim/engine/README.md: names `gone.cc`, which sim/engine/ does not hold"),
    }
    with tempfile.TemporaryDirectory() as root:
        for relative, text in {**cases, **clean}.items():
            os.makedirs(os.path.join(root, os.path.dirname(relative)), exist_ok=True)
            with open(os.path.join(root, relative), "w") as handle:
                handle.write(text)
        for directory, (readme, files, _) in readme_cases.items():
            os.makedirs(os.path.join(root, directory), exist_ok=True)
            for name in files:
                open(os.path.join(root, directory, name), "w").close()
            if readme is not None:
                with open(os.path.join(root, directory, "README.md"), "w") as handle:
                    handle.write(readme)
        problems = check_tree(root)
    failures = [f"not caught: {expected}" for _, _, expected in readme_cases.values()
                if not any(p.startswith(expected) for p in problems)]
    for relative in cases:
        if not any(p.startswith(relative + ":") for p in problems):
            failures.append(f"not caught: {relative}")
    for relative in clean:
        failures += [f"false alarm: {p}" for p in problems if p.startswith(relative + ":")]
    for failure in failures:
        print(failure)
    print(f"self-test: {len(cases) + len(readme_cases)} violations, {len(clean)} clean files, "
          f"{'ok' if not failures else 'FAILED'}")
    return 1 if failures else 0


def main(argv):
    if len(argv) > 1 and argv[1] == "--self-test":
        return self_test()
    root = argv[1] if len(argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "..")
    problems = check_tree(os.path.abspath(root))
    for problem in problems:
        print(problem)
    if problems:
        print(f"{len(problems)} layering violation(s); see docs/architecture.md")
        return 1
    print("layering: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
