#!/usr/bin/env bash
# Packs what scripts/gpu_check.sh runs into one archive (about 5 MB), for a GPU machine that
# has the GPU driver but none of the build's packages (and need not build anything). The
# archive holds one folder, kiln-gpu/:
#   bin         kiln_gpu_tests, gpu_bench and onnx_conformance, built as the project's scripts
#               build (RelWithDebInfo: -O2; GCC 12 warns falsely at -O3) but without the LLVM
#               tier (no GPU check needs it), debug info stripped
#   lib         the shared libraries they load, but the C library's and the C++ runtime's (the
#               GPU vendors' libraries are opened at run time, never packed)
#   lib-std     the C++ runtime, used by gpu_check.sh only where the machine's is older
#   node-tests  ONNX's node tests, for the conformance run on the device
#   bash scripts/gpu_bundle.sh ARCHIVE.tar.xz [BUILD_DIR]      (BUILD_DIR: build-gpu by default;
#       e.g. ARCHIVE build-gpu/kiln-gpu.tar.xz, a path git ignores)
# Then, on the GPU machine, from the repository root (gpu_check.sh exits 1 where a check
# failed or skipped, e.g. without a GPU):
#   tar -xJf ARCHIVE.tar.xz -C /tmp &&
#     ONNX_NODE_TESTS=/tmp/kiln-gpu/node-tests bash scripts/gpu_check.sh /tmp/kiln-gpu/bin OUT_DIR
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
ARCHIVE="${1:?usage: gpu_bundle.sh ARCHIVE.tar.xz [BUILD_DIR]}"
BUILD="${2:-$ROOT/build-gpu}"
PROGRAMS=(tests/kiln_gpu_tests bench/gpu_bench tests/onnx/onnx_conformance)

cmake -S "$ROOT" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DKILN_WITH_LLVM=OFF \
  -DKILN_BUILD_EXAMPLES=OFF -DKILN_WERROR=ON >/dev/null
ninja -C "$BUILD" -j"${JOBS:-2}" kiln_gpu_tests gpu_bench onnx_conformance

STAGE="$(mktemp -d)"
trap 'rm -rf "$STAGE"' EXIT
BUNDLE="$STAGE/kiln-gpu"
mkdir -p "$BUNDLE/bin" "$BUNDLE/lib" "$BUNDLE/lib-std"
for p in "${PROGRAMS[@]}"; do
  [[ -x "$BUILD/$p" ]] || { echo "gpu_bundle.sh: $BUILD/$p was not built" >&2; exit 1; }
  cp "$BUILD/$p" "$BUNDLE/bin/"
  strip --strip-debug "$BUNDLE/bin/$(basename "$p")"
done
# Every library the programs load, by the path the loader resolves here.
for p in "$BUNDLE"/bin/*; do ldd "$p"; done | awk '$2 == "=>" && $3 ~ /^\// { print $1, $3 }' | sort -u |
  while read -r name path; do
    case "$name" in
      libc.so.*|libm.so.*|libpthread.so.*|libdl.so.*|librt.so.*|ld-linux*|linux-vdso*) ;;  # the C library's
      libstdc++.so.*|libgcc_s.so.*) cp -L "$path" "$BUNDLE/lib-std/$name" ;;
      *) cp -L "$path" "$BUNDLE/lib/$name" ;;
    esac
  done
DATA="${ONNX_NODE_TESTS:-/usr/share/libonnx-testdata/data/node}"
if [[ -d "$DATA" ]]; then
  cp -r "$DATA" "$BUNDLE/node-tests"
else
  echo "gpu_bundle.sh: no ONNX node tests at $DATA (libonnx-testdata): the conformance run will be skipped"
fi
# With the bundle's folders on the path, every library but the C library's resolves into the
# bundle, and the programs start.
export LD_LIBRARY_PATH="$BUNDLE/lib:$BUNDLE/lib-std"
for p in "$BUNDLE"/bin/*; do
  outside="$(ldd "$p" | awk '$2 == "=>" { print $1, $3 }' |
    grep -Ev '^(libc|libm|libpthread|libdl|librt)\.so|^ld-linux|^linux-vdso' | grep -v " $BUNDLE/" || true)"
  [[ -z "$outside" ]] || { echo "gpu_bundle.sh: $(basename "$p") loads from outside the bundle: $outside" >&2; exit 1; }
  "$p" --help >/dev/null 2>&1 || "$p" --version >/dev/null 2>&1 ||
    { echo "gpu_bundle.sh: $(basename "$p") does not start from the bundle" >&2; exit 1; }
done
unset LD_LIBRARY_PATH
mkdir -p "$(dirname "$ARCHIVE")"
tar -cJf "$ARCHIVE" -C "$STAGE" kiln-gpu
du -sh "$BUNDLE"/* "$ARCHIVE"
