#!/usr/bin/env bash
# One batched GPU run on a CUDA machine: install from the working tree, run every
# CUDA-marked test and the op contracts on cuda, the benchmarks, and compute-sanitizer's
# memcheck over the kernel tests. Logs go to $OUT (or ./gpu-logs).
# Usage: bash benchmarks/gpu_session.sh [tests|bench|layers|memcheck|all]   (default: all)
set -uo pipefail
out="${OUT:-gpu-logs}"
mode="${1:-all}"
mkdir -p "$out"
export PYTHONUNBUFFERED=1
python3 -m pip install -q --no-deps --no-build-isolation -e . 2>&1 | tail -1
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$out/device.txt"
date -u +%Y-%m-%dT%H:%MZ >> "$out/device.txt"

run_tests() {
  python3 -m pytest -m cuda -q -p no:cacheprovider tests 2>&1 | tee "$out/pytest_cuda.log" | tail -25
  python3 -m torchlean check --device cuda > "$out/check_cuda.txt" 2>&1
  echo "check --device cuda exit $?" | tee -a "$out/check_cuda.txt"
  tail -3 "$out/check_cuda.txt"
}

run_bench() {
  timeout 200 python3 -m torchlean.bench.bench_cuda_train > "$out/bench_cuda_train.txt" 2>&1; echo "train exit $?"
  tail -6 "$out/bench_cuda_train.txt"
  timeout 200 python3 -m torchlean.bench.bench_ir --device cuda --cuda-graph > "$out/bench_ir.txt" 2>&1; echo "ir exit $?"
  tail -12 "$out/bench_ir.txt"
  timeout 240 python3 -m torchlean.bench.bench_cuda_kernels > "$out/bench_cuda_kernels.txt" 2>&1; echo "kernels exit $?"
  tail -40 "$out/bench_cuda_kernels.txt"
  timeout 300 python3 -m torchlean.bench.bench_onnx --device cuda --opsets 17 --resnet18 1,32 \
      > "$out/bench_onnx_cuda.txt" 2>&1; echo "onnx exit $?"
  tail -18 "$out/bench_onnx_cuda.txt"
}

run_layers() {
  timeout 240 python3 -m torchlean.bench.bench_layers_cuda > "$out/bench_layers_cuda.txt" 2>&1; echo "layers exit $?"
  tail -8 "$out/bench_layers_cuda.txt"
  timeout 240 python3 -m torchlean.bench.bench_models --device cuda --graph > "$out/bench_models_cuda.txt" 2>&1; echo "models exit $?"
  tail -12 "$out/bench_models_cuda.txt"
  timeout 300 python3 -m torchlean.bench.bench_nn_train > "$out/bench_nn_train.txt" 2>&1; echo "nn train exit $?"
  tail -8 "$out/bench_nn_train.txt"
}

run_memcheck() {
  timeout 420 compute-sanitizer --tool memcheck --print-limit 20 python3 -m pytest -m cuda -q \
      -p no:cacheprovider tests/test_cuda_kernels.py tests/test_capture.py > "$out/memcheck.log" 2>&1
  echo "memcheck exit $?"
  grep -E "ERROR SUMMARY|passed|failed" "$out/memcheck.log" | tail -3
}

case "$mode" in
  tests) run_tests ;;
  bench) run_bench ;;
  layers) run_layers ;;
  memcheck) run_memcheck ;;
  all) run_tests; run_bench; run_layers; run_memcheck ;;
  *) echo "usage: $0 [tests|bench|layers|memcheck|all]" >&2; exit 2 ;;
esac
