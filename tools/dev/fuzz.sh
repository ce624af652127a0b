#!/usr/bin/env bash
# Builds the fuzz harnesses of tests/fuzz with clang, libFuzzer, ASan and UBSan, assembles their
# seed corpora and dictionaries, runs them, and prints what they found (docs/development.md,
# "Fuzzing"). Installs clang and libFuzzer from Debian when they are missing.
#
# Usage: tools/dev/fuzz.sh [--seconds S | --runs N] [--seed N] [--jobs J] [--build-dir DIR]
#                          [--no-build] [--ledger FILE] [HARNESS...]
#        tools/dev/fuzz.sh --totals [--ledger FILE]
#   --seconds S      run each harness for S seconds (default 60: CI's smoke run)
#   --runs N         run each harness for N executions instead (the long run: 10000000)
#   --seed N         libFuzzer's random seed (default: a new one each run). CI passes 1 so that
#                    its smoke run replays the same inputs as a local run with that seed and a
#                    fresh corpus does: a finding there is reproducible, not luck
#   --jobs J         harnesses run side by side (default: the number of cores)
#   --timeout S      seconds one input may take before it is a hang (default 10). libFuzzer
#                    counts wall-clock time: a niced long run beside a build is starved for
#                    seconds at a time, so give it 60 there
#   --build-dir DIR  where to build and keep corpora and findings (default: build-fuzz)
#   --no-build       run the harnesses already built in DIR (a long run in a copy, say, while
#                    the tree changes)
#   --ledger FILE    the campaign's ledger (default: tests/fuzz/campaign.tsv, tracked: commit
#                    it, so that the campaign outlasts the machine it ran on)
#   --totals         print the campaign so far (every run's line in the ledger, summed per
#                    harness) and exit
#   HARNESS...       some of: quantity config overrides task_graph kineto chakra comm_groups
#                    op_costs search_file launch_args nemo_config simulate result_file points
#                    (default: all)
# Prints a table (harness, executions, crashes, hangs, out-of-memory) and exits 1 when any
# harness found one; the inputs that did are in DIR/findings/HARNESS/. Inputs that reached new
# code stay in DIR/corpus/HARNESS/ for the next run, so runs add up to one campaign: each appends
# a line per harness (date, commit, harness, seconds, executions, findings) to the ledger.
set -euo pipefail

top="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
build_dir="$top/build-fuzz"
seconds=60
runs=""
seed=0
timeout=10
jobs="$(nproc)"
build=1
totals=0
campaign="$top/tests/fuzz/campaign.tsv"
harnesses=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --seconds) seconds="$2"; shift 2 ;;
    --runs) runs="$2"; shift 2 ;;
    --seed) seed="$2"; shift 2 ;;
    --timeout) timeout="$2"; shift 2 ;;
    --jobs) jobs="$2"; shift 2 ;;
    --build-dir) build_dir="$(realpath -m "$2")"; shift 2 ;;
    --no-build) build=0; shift ;;
    --ledger) campaign="$(realpath -m "$2")"; shift 2 ;;
    --totals) totals=1; shift ;;
    -h|--help) sed -n '2,31p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "fuzz.sh: unknown option '$1' (see --help)" >&2; exit 2 ;;
    *) harnesses+=("$1"); shift ;;
  esac
done
all=(quantity config overrides task_graph kineto chakra comm_groups op_costs search_file launch_args
     nemo_config simulate result_file points)
[[ ${#harnesses[@]} -gt 0 ]] || harnesses=("${all[@]}")

if [[ $totals -eq 1 ]]; then
  [[ -f "$campaign" ]] || { echo "fuzz.sh: no campaign yet ($campaign)" >&2; exit 1; }
  printf '%-12s %5s %9s %12s %8s %6s %5s  %s\n' harness runs seconds executions crashes hangs oom \
    commits
  awk -F'\t' 'NR > 1 { runs[$3]++; secs[$3] += $4; ex[$3] += $5; cr[$3] += $6; hg[$3] += $7;
                        om[$3] += $8; c = $2; commits[$3] = commits[$3] (index(commits[$3], c) ? "" : " " c) }
    END { for (h in runs) printf "%-12s %5d %9d %12d %8d %6d %5d %s\n", h, runs[h], secs[h], ex[h],
                                 cr[h], hg[h], om[h], commits[h] }' "$campaign" | sort
  exit 0
fi

mkdir -p "$build_dir"
if [[ $build -eq 1 ]]; then
  # clang 16: the oldest Debian clang that compiles dtsim's C++20 (parenthesized aggregate
  # initialization); its libFuzzer is in libclang-rt-16-dev.
  if ! command -v clang++-16 >/dev/null || ! ls /usr/lib/llvm-16/lib/clang/16/lib/linux/libclang_rt.fuzzer-x86_64.a >/dev/null 2>&1; then
    echo "fuzz.sh: installing clang 16 and libFuzzer (clang-16, libclang-rt-16-dev)"
    sudo=(); [[ $(id -u) -eq 0 ]] || sudo=(sudo)
    "${sudo[@]}" apt-get update -q
    DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -q --no-install-recommends \
      clang-16 libclang-rt-16-dev
  fi

  # -O1 and line tables: what fuzzing needs (speed, stack traces), and quicker to build than -O2 -g.
  "$top/tools/setup.sh" --all --build-dir "$build_dir" --type RelWithDebInfo -- \
    -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -gline-tables-only -DNDEBUG" -DCMAKE_CXX_COMPILER=clang++-16 -DDTSIM_FUZZ=ON -DDTSIM_BUILD_BENCH=OFF -DDTSIM_CUPTI=OFF \
    >"$build_dir/setup.log" 2>&1 || { tail -40 "$build_dir/setup.log"; exit 1; }
  /usr/bin/python3 "$top/tests/fuzz/make_corpus.py" "$build_dir" >/dev/null
  git -C "$top" rev-parse --short HEAD >"$build_dir/built-commit" 2>/dev/null || echo unknown >"$build_dir/built-commit"
  git -C "$top" diff --quiet HEAD 2>/dev/null || sed -i 's/$/+changes/' "$build_dir/built-commit"
fi

# One harness: its corpus (grown in place), its dictionary, limits that make a hang or a
# memory blow-up a finding: 10 s for one input (--timeout), 2 GiB of memory.
run_one() {
  local name="$1" corpus="$build_dir/corpus/$1" findings="$build_dir/findings/$1"
  mkdir -p "$corpus" "$findings"
  local budget=(-max_total_time="$seconds")
  [[ -z "$runs" ]] || budget=(-runs="$runs")
  local max_len=65536 started_at=$SECONDS
  [[ "$name" == kineto || "$name" == chakra ]] && max_len=131072
  # Result and measurements files parse twice an input (reader, then diff or the simulation):
  # their seeds are under 13 KiB, and larger inputs only slow the run.
  [[ "$name" == result_file || "$name" == points ]] && max_len=16384
  ASAN_OPTIONS=detect_leaks=1:allocator_may_return_null=1 UBSAN_OPTIONS=print_stacktrace=1 \
    "$build_dir/tests/fuzz/${name}_fuzzer" "${budget[@]}" -seed="$seed" -timeout="$timeout" -rss_limit_mb=2048 \
    -malloc_limit_mb=2048 -max_len="$max_len" -dict="$build_dir/dicts/$name.dict" \
    -artifact_prefix="$findings/" -print_final_stats=1 "$corpus" \
    "$top/tests/fuzz/regressions/$name" >"$build_dir/$name.log" 2>&1 || true
  # Wall-clock seconds, for a run libFuzzer did not finish itself (stopped with SIGINT: no
  # "Done ... in S seconds" line).
  echo $((SECONDS - started_at)) >"$build_dir/$name.seconds"
}
# Findings are counted from this run's start: a campaign's findings dir keeps earlier ones; the
# commit is the one the harnesses were built from when the run starts.
started="$build_dir/.run-started"
touch "$started"
commit="$(cat "$build_dir/built-commit" 2>/dev/null || echo unknown)"
export -f run_one
export build_dir top seconds runs seed timeout
printf '%s\n' "${harnesses[@]}" | xargs -P "$jobs" -I{} bash -c 'run_one {}'

[[ -f "$campaign" ]] || printf 'date\tcommit\tharness\tseconds\texecutions\tcrashes\thangs\toom\n' >"$campaign"
status=0
printf '\n%-12s %12s %8s %6s %5s  %s\n' harness executions crashes hangs oom log
for name in "${harnesses[@]}"; do
  log="$build_dir/$name.log" findings="$build_dir/findings/$name"
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  found=(find "$findings" -newer "$started" -name)
  crashes=$("${found[@]}" 'crash-*' -o -newer "$started" -name 'leak-*' -o -newer "$started" -name 'deadly-*' | wc -l)
  hangs=$("${found[@]}" 'timeout-*' -o -newer "$started" -name 'slow-unit-*' | wc -l)
  ooms=$("${found[@]}" 'oom-*' | wc -l)
  printf '%-12s %12s %8s %6s %5s  %s\n' "$name" "${execs:-none}" "$crashes" "$hangs" "$ooms" "$log"
  secs=$(sed -n 's/^Done [0-9]* runs in \([0-9]*\) second.*/\1/p' "$log" | tail -1)
  [[ -n "$secs" ]] || secs=$(cat "$build_dir/$name.seconds" 2>/dev/null || true)
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$(date -u +%FT%TZ)" "$commit" "$name" "${secs:-0}" \
    "${execs:-0}" "$crashes" "$hangs" "$ooms" >>"$campaign"
  if [[ -z "$execs" || $crashes -gt 0 || $hangs -gt 0 || $ooms -gt 0 ]]; then
    status=1
    echo "  findings in $findings; the end of the log:"
    tail -25 "$log" | sed 's/^/    /'
  fi
done
exit $status
