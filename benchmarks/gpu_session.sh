#!/usr/bin/env bash
# One batched GPU session on the device machine: install from the working tree, run every
# CUDA-marked test and the op contracts on cuda, the benchmarks, and compute-sanitizer's
# memcheck over the kernel tests. Logs go to $OUT (or ./gpu-logs).
# Usage: bash benchmarks/gpu_session.sh [tests|bench|memcheck|all]   (default: all)
set -uo pipefail
out="${OUT:-gpu-logs}"
mode="${1:-all}"
mkdir -p "$out"
export PYTHONUNBUFFERED=1
python3 -m pip install -q --no-deps -e . 2>&1 | tail -1
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$out/device.txt"
date -u +%Y-%m-%dT%H:%MZ >> "$out/device.txt"

run_tests() {
  python3 -m pytest -m cuda -q -p no:cacheprovider tests 2>&1 | tee "$out/pytest_cuda.log" | tail -25
  python3 -m torchlean check --device cuda > "$out/check_cuda.txt" 2>&1
  echo "check --device cuda exit $?" | tee -a "$out/check_cuda.txt"
  tail -3 "$out/check_cuda.txt"
  python3 - <<'PY' 2>&1 | tee "$out/pending_ops_cuda.txt" | tail -20
# Ops whose CUDA kernels are pending: how their contracts fare on cuda today.
from torchlean.testing.checks import run_checks
from torchlean.testing.opinfo import CUDA_PENDING
for op in CUDA_PENDING:
    rs = [r for r in run_checks("cuda", op, all_devices=True) if r.op == op]
    fails = [r for r in rs if not r.passed]
    print(f"{op:24s} {len(rs) - len(fails):3d} pass {len(fails):3d} fail", fails[0].detail[:100] if fails else "")
PY
}

run_bench() {
  timeout 200 python3 benchmarks/bench_cuda_train.py > "$out/bench_cuda_train.txt" 2>&1; echo "train exit $?"
  tail -6 "$out/bench_cuda_train.txt"
  timeout 200 python3 benchmarks/bench_ir.py --device cuda --cuda-graph > "$out/bench_ir.txt" 2>&1; echo "ir exit $?"
  tail -12 "$out/bench_ir.txt"
  timeout 240 python3 benchmarks/bench_cuda_kernels.py > "$out/bench_cuda_kernels.txt" 2>&1; echo "kernels exit $?"
  tail -40 "$out/bench_cuda_kernels.txt"
}

run_memcheck() {
  timeout 420 compute-sanitizer --tool memcheck --print-limit 20 python3 -m pytest -m cuda -q -x \
      -p no:cacheprovider tests/test_cuda_kernels.py > "$out/memcheck.log" 2>&1
  echo "memcheck exit $?"
  grep -E "ERROR SUMMARY|passed|failed" "$out/memcheck.log" | tail -3
}

case "$mode" in
  tests) run_tests ;;
  bench) run_bench ;;
  memcheck) run_memcheck ;;
  all) run_tests; run_bench; run_memcheck ;;
  *) echo "usage: $0 [tests|bench|memcheck|all]" >&2; exit 2 ;;
esac
