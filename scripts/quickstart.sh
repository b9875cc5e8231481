#!/usr/bin/env bash
# Installs the dependencies, builds the examples and runs the first one
# (the README's first command). Extra arguments go to the example, e.g. batch sizes:
#   bash scripts/quickstart.sh 1 8 64
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD_DIR="$ROOT/build"
JOBS="${KILN_JOBS:-2}"

bash "$ROOT/scripts/install_deps.sh"

FRESH=()
if [[ -f "$BUILD_DIR/CMakeCache.txt" ]] && ! grep -q '^CMAKE_GENERATOR:INTERNAL=Ninja$' "$BUILD_DIR/CMakeCache.txt"; then
  FRESH=(--fresh)
fi

# The same build directory and settings as scripts/test.sh, so that the two commands
# share one build instead of rebuilding each other's.
echo "==> configure $BUILD_DIR"
cmake "${FRESH[@]}" -S "$ROOT" -B "$BUILD_DIR" -G Ninja \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DKILN_WERROR=ON \
  -DKILN_BUILD_TESTS=ON \
  -DKILN_BUILD_EXAMPLES=ON \
  -DKILN_BUILD_BENCHMARKS=ON \
  -DKILN_SANITIZE=

echo "==> build the examples (-j$JOBS)"
cmake --build "$BUILD_DIR" -j "$JOBS" --target 01_quickstart 02_dynamic_shapes

echo "==> run examples/01_quickstart"
"$BUILD_DIR/examples/01_quickstart" "$@"
