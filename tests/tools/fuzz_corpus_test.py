#!/usr/bin/env python3
"""make_corpus.py writes seed corpora and dictionaries libFuzzer accepts.

Usage: fuzz_corpus_test.py SOURCE_DIR WORK_DIR

A dictionary libFuzzer cannot parse stops its harness before the first execution
("ParseDictionaryFile: error in line N"); CI's fuzz smoke run once reported no executions for
result_file because a seed's string "gemm kernels ×2 faster" went into its dictionary raw. This
test runs make_corpus.py, reads every dictionary with the grammar of libFuzzer's
ParseOneDictionaryEntry (make_corpus.parse_dict_line), and checks the escaping both ways.
"""
import pathlib
import shutil
import subprocess
import sys


def main():
    source, work = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
    sys.path.insert(0, str(source / "tests/fuzz"))
    import make_corpus

    failures = []

    def check(condition, what):
        if not condition:
            failures.append(what)

    # Escaping: each word comes back byte for byte, and the line is printable ASCII.
    for word in ["gemm kernels ×2 faster", 'say "hi"', "back\\slash", "tab\there", "µs", "a"]:
        line = make_corpus.dict_entry(word)
        check(line.isascii() and line.isprintable(), f"{line!r} is not printable ASCII")
        check(make_corpus.parse_dict_line(line) == word.encode("utf-8"),
              f"{word!r} -> {line!r} -> {make_corpus.parse_dict_line(line)!r}")
    # What libFuzzer refuses, the checker refuses too.
    for bad in ['"gemm ×2"', '""', '"unterminated', '"bad \\q escape"', 'word', '"a\x1cb"']:
        try:
            make_corpus.parse_dict_line(bad)
            failures.append(f"{bad!r} accepted")
        except ValueError:
            pass
    check(make_corpus.parse_dict_line("# comment") is None, "a comment is not skipped")
    check(make_corpus.parse_dict_line('kw1="a\\x41"') == b"aA", "NAME= or \\xNN misread")

    # The corpora as fuzz.sh writes them: every harness has seeds and a dictionary that parses.
    shutil.rmtree(work, ignore_errors=True)
    run = subprocess.run([sys.executable, str(source / "tests/fuzz/make_corpus.py"), str(work)],
                         capture_output=True, text=True)
    check(run.returncode == 0, f"make_corpus.py exited {run.returncode}: {run.stderr[-2000:]}")
    for harness in make_corpus.HARNESSES:
        seeds = work / "corpus" / harness
        check(seeds.is_dir() and any(seeds.iterdir()), f"{harness}: no seeds")
        path = work / "dicts" / f"{harness}.dict"
        if not path.is_file():
            failures.append(f"{harness}: no dictionary")
            continue
        words = 0
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            try:
                words += make_corpus.parse_dict_line(line) is not None
            except ValueError as error:
                failures.append(f"{path}:{number}: {error}: {line}")
        check(words >= 20, f"{harness}: {words} dictionary words")
        print(f"  {harness:<12} {len(list(seeds.iterdir())):>4} seeds {words:>5} words")

    for failure in failures:
        print("FAIL:", failure)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
