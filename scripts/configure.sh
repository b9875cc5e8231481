#!/usr/bin/env bash
# Configures a build directory with the settings every script of the project shares
# (Ninja, RelWithDebInfo, warnings as errors, tests, examples and benchmarks on, every tier and
# the ONNX importer required: a missing package fails here, not as silently skipped tests), so that
# scripts/test.sh, scripts/quickstart.sh and scripts/bench.sh share one build/ instead of
# rebuilding each other's.
#   bash scripts/configure.sh BUILD_DIR [SANITIZERS]
#   bash scripts/configure.sh --fuzz BUILD_DIR    # the fuzz build (README, "Fuzzing"): clang and
#       libFuzzer, ASan + UBSan, the library and the fuzz targets of tests/fuzz/ only
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
FUZZ=0
if [[ "${1:-}" == "--fuzz" ]]; then
  FUZZ=1
  shift
fi
BUILD_DIR="${1:?usage: configure.sh [--fuzz] BUILD_DIR [SANITIZERS]}"
SANITIZE="${2:-}"

# A doctest case's CTest timeout: ThreadSanitizer runs the kernels' reference loops 10-20x
# slower ("tier 1 matmul: every GEMM instruction set, large K and N, two threads": 209 s
# alone, past 300 s beside another build).
CASE_TIMEOUT=300
[[ "$SANITIZE" == *thread* ]] && CASE_TIMEOUT=900

# Reconfigure from scratch only if the directory was configured with another generator.
FRESH=()
if [[ -f "$BUILD_DIR/CMakeCache.txt" ]] && ! grep -q '^CMAKE_GENERATOR:INTERNAL=Ninja$' "$BUILD_DIR/CMakeCache.txt"; then
  echo "configure.sh: $BUILD_DIR was configured with another generator; reconfiguring it"
  FRESH=(--fresh)
fi

echo "==> configure $BUILD_DIR"
if [[ $FUZZ == 1 ]]; then
  exec cmake "${FRESH[@]}" -S "$ROOT" -B "$BUILD_DIR" -G Ninja \
    -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_CXX_COMPILER=clang++ \
    -DKILN_WERROR=ON \
    -DKILN_FUZZ=ON \
    -DKILN_SANITIZE=address,undefined \
    -DKILN_BUILD_TESTS=ON \
    -DKILN_BUILD_EXAMPLES=OFF \
    -DKILN_BUILD_BENCHMARKS=OFF \
    -DKILN_WITH_ASMJIT=ON \
    -DKILN_WITH_ONNX=OFF
fi
cmake "${FRESH[@]}" -S "$ROOT" -B "$BUILD_DIR" -G Ninja \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DKILN_WERROR=ON \
  -DKILN_BUILD_TESTS=ON \
  -DKILN_BUILD_EXAMPLES=ON \
  -DKILN_BUILD_BENCHMARKS=ON \
  -DKILN_WITH_ASMJIT=ON \
  -DKILN_WITH_ONNX=ON \
  "-DKILN_SANITIZE=$SANITIZE" \
  "-DKILN_TEST_TIMEOUT=$CASE_TIMEOUT"
