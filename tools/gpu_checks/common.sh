# Sourced by the GPU check scripts (run_all.sh, what_if_and_memory.sh): logging each part and
# remembering which failed, and the environment they ran in.
failures=()

# run_limited NAME LIMIT_S COMMAND...: runs COMMAND (for at most LIMIT_S seconds; 0: no limit),
# logs it and its exit status, and adds NAME to `failures` when it fails.
run_limited() {
  local name=$1 limit=$2
  shift 2
  echo "=== $name: $*"
  timeout "$limit" "$@"
  local status=$?
  echo "=== $name: exit $status"
  [[ $status -eq 0 ]] || failures+=("$name")
}

run() { local name=$1; shift; run_limited "$name" 0 "$@"; }

print_environment() {
  echo "=== environment"
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm --format=csv
  python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, torch.cuda.get_device_name())'
}
