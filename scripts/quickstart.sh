#!/usr/bin/env bash
# Installs the dependencies, builds the examples and runs the first one
# (the README's first command). Extra arguments go to the example, e.g. batch sizes:
#   bash scripts/quickstart.sh 1 8 64
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD_DIR="$ROOT/build"
JOBS="${KILN_JOBS:-2}"

bash "$ROOT/scripts/install_deps.sh"

bash "$ROOT/scripts/configure.sh" "$BUILD_DIR"

echo "==> build the examples (-j$JOBS)"
cmake --build "$BUILD_DIR" -j "$JOBS" --target 01_quickstart 02_dynamic_shapes

echo "==> run examples/01_quickstart"
"$BUILD_DIR/examples/01_quickstart" "$@"
