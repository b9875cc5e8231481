#!/usr/bin/env bash
# The checks that need an NVIDIA GPU, in one run: the device's description, the GPU test
# binary (tests/gpu/test_gpu.cpp), the GPU benchmark (bench/gpu_bench.cpp) and its PyTorch
# peer (bench/torch_gpu.py), each output saved in OUT_DIR (the GPU tests' output then goes to
# tests/gpu/results/, with the device, driver and date).
#   bash scripts/gpu_check.sh BIN_DIR OUT_DIR
# BIN_DIR holds kiln_gpu_tests and gpu_bench (a build's tests/ and bench/ programs, or a
# folder of both with their shared libraries in BIN_DIR/../lib).
set -uo pipefail
BIN="${1:?usage: gpu_check.sh BIN_DIR OUT_DIR}"
OUT="${2:?usage: gpu_check.sh BIN_DIR OUT_DIR}"
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
mkdir -p "$OUT"
LIB="$(cd "$BIN/.." && pwd)"
export LD_LIBRARY_PATH="$LIB/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
# A C++ runtime older than the one the programs were built with: use the one beside them.
if ! "$BIN/kiln_gpu_tests" --version >/dev/null 2>&1 && [[ -d "$LIB/lib-std" ]]; then
  export LD_LIBRARY_PATH="$LIB/lib-std:$LD_LIBRARY_PATH"
fi
{
  date -u +"date: %Y-%m-%d %H:%M UTC"
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv 2>&1
  (ls /usr/local/cuda/lib64/libnvrtc.so* 2>/dev/null || true)
} | tee "$OUT/device.txt"
status=0
"$BIN/kiln_gpu_tests" --duration=true 2>&1 | tee "$OUT/gpu_tests.txt" || status=1
"$BIN/gpu_bench" 2>&1 | tee "$OUT/gpu_bench.txt" || status=1
# The ONNX conformance node tests on the GPU beside the host's tiers (DATA: ONNX's node tests).
DATA="${ONNX_NODE_TESTS:-/usr/share/libonnx-testdata/data/node}"
if [[ -x "$BIN/onnx_conformance" && -d "$DATA" ]]; then
  "$BIN/onnx_conformance" --gpu --data "$DATA" --verbose 2>&1 > "$OUT/onnx_gpu_verbose.txt"
  grep -v "^\S* \[" "$OUT/onnx_gpu_verbose.txt" | tee "$OUT/onnx_gpu.txt"
  grep "\[gpu\]" "$OUT/onnx_gpu_verbose.txt" | grep -v unsupported | head -40
fi
PYTHONUNBUFFERED=1 python3 "$ROOT/bench/torch_gpu.py" 2>&1 | tee "$OUT/torch_gpu.txt" || true
exit $status
