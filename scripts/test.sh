#!/usr/bin/env bash
# Builds Kiln and runs its tests (the README's test command).
#
#   bash scripts/test.sh                              # build/      all tests
#   bash scripts/test.sh --sanitize address,undefined # build-asan/ all tests under ASan+UBSan
#   bash scripts/test.sh --sanitize thread            # build-tsan/ tests whose name matches "threads"
#
# After the suite (except with --sanitize thread), the fuzz build (build-fuzz/: clang, libFuzzer,
# ASan + UBSan) runs each fuzz target for $KILN_FUZZ_SECONDS (default 20) seconds.
#
# Options:
#   --sanitize LIST   sanitizers: address,undefined (or one of them) | thread
#   --no-fuzz         skip the fuzz build and its runs
#   -j, --jobs N      parallel build jobs and ctest jobs (default: 2, or $KILN_JOBS)
#   --timeout S       ctest's default per-test timeout in seconds (default: 900)
#   -- ARGS...        extra arguments for ctest (e.g. -- -R matmul); not for the fuzz runs
#
# Runs scripts/install_deps.sh first. Exits non-zero when the build or a test fails.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
SANITIZE=""
FUZZ=1
JOBS="${KILN_JOBS:-2}"
TIMEOUT=900
CTEST_EXTRA=()

usage() { sed -n '2,18p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; }

while [[ $# -gt 0 ]]; do
  case "$1" in
    --sanitize) [[ $# -ge 2 ]] || { usage >&2; exit 2; }; SANITIZE="$2"; shift 2 ;;
    --sanitize=*) SANITIZE="${1#*=}"; shift ;;
    --no-fuzz) FUZZ=0; shift ;;
    -j|--jobs) [[ $# -ge 2 ]] || { usage >&2; exit 2; }; JOBS="$2"; shift 2 ;;
    -j*) JOBS="${1#-j}"; shift ;;
    --jobs=*) JOBS="${1#*=}"; shift ;;
    --timeout) [[ $# -ge 2 ]] || { usage >&2; exit 2; }; TIMEOUT="$2"; shift 2 ;;
    --timeout=*) TIMEOUT="${1#*=}"; shift ;;
    -h|--help) usage; exit 0 ;;
    --) shift; CTEST_EXTRA=("$@"); break ;;
    *) echo "test.sh: unknown argument '$1'" >&2; usage >&2; exit 2 ;;
  esac
done

BUILD_DIR="$ROOT/build"
CTEST_FILTER=()
case "$SANITIZE" in
  "") ;;
  address|undefined|address,undefined|undefined,address)
    BUILD_DIR="$ROOT/build-asan"
    # use_sigaltstack=0: threads of the HIP runtime (the HIPRTC compile tests) exit with an
    # alternate signal stack that AddressSanitizer then fails to unmap (a CHECK failure of
    # its own, not a finding).
    export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0:halt_on_error=1:strict_string_checks=1:use_sigaltstack=0}"
    export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
    ;;
  thread)
    BUILD_DIR="$ROOT/build-tsan"
    export TSAN_OPTIONS="${TSAN_OPTIONS:-halt_on_error=1:second_deadlock_stack=1:suppressions=$ROOT/tests/tsan.supp}"
    CTEST_FILTER=(-R threads)
    FUZZ=0
    ;;
  *)
    echo "test.sh: --sanitize takes address,undefined (or address, undefined) or thread, not '$SANITIZE'" >&2
    exit 2
    ;;
esac

bash "$ROOT/scripts/install_deps.sh"

bash "$ROOT/scripts/configure.sh" "$BUILD_DIR" "$SANITIZE"

echo "==> build (-j$JOBS)"
cmake --build "$BUILD_DIR" -j "$JOBS"

echo "==> test"
if ! ctest --test-dir "$BUILD_DIR" --output-on-failure --timeout "$TIMEOUT" -j "$JOBS" \
     --no-tests=error "${CTEST_FILTER[@]}" "${CTEST_EXTRA[@]}"; then
  echo "test.sh: FAILED (build directory: $BUILD_DIR)" >&2
  exit 1
fi
echo "test.sh: all tests passed (build directory: $BUILD_DIR)"

if [[ $FUZZ == 1 ]]; then
  if ! bash "$ROOT/scripts/fuzz.sh" --jobs "$JOBS"; then
    echo "test.sh: the fuzz runs FAILED (build directory: $ROOT/build-fuzz; skip them with --no-fuzz)" >&2
    exit 1
  fi
  echo "test.sh: the fuzz runs passed (build directory: $ROOT/build-fuzz)"
fi
