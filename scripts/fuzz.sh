#!/usr/bin/env bash
# Builds the fuzz build (build-fuzz/: clang and libFuzzer, ASan + UBSan; scripts/configure.sh
# --fuzz; scripts/install_deps.sh first), runs its fuzz targets (tests/fuzz/, README "Fuzzing")
# as the ctests labelled `fuzz`, each for SECONDS, and prints each run's executions.
# scripts/test.sh runs it with the default time; give a longer one for a long run.
#
#   bash scripts/fuzz.sh                        # each target for $KILN_FUZZ_SECONDS, else 20 s
#   bash scripts/fuzz.sh --seconds 1800         # the long mode: 30 minutes each
#   bash scripts/fuzz.sh --seconds 300 fuzz_graphs fuzz_shapes
#
# Options:
#   --seconds S   seconds each target runs (sets KILN_FUZZ_SECONDS for the runs)
#   -j, --jobs N  parallel build jobs and targets run at once (default: 2, or $KILN_JOBS)
#   TARGET...     only these targets (fuzz_shapes, fuzz_graphs, fuzz_ir_parser)
#
# A finding fails its run; its input is in build-fuzz/tests/fuzz/runs/<target>/artifacts/
# (rerun it with `build-fuzz/tests/fuzz/<target> FILE`), the inputs found in
# build-fuzz/tests/fuzz/runs/<target>/corpus/.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD_DIR="$ROOT/build-fuzz"
JOBS="${KILN_JOBS:-2}"
TARGETS=()

usage() { sed -n '2,18p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; }

while [[ $# -gt 0 ]]; do
  case "$1" in
    --seconds) [[ $# -ge 2 ]] || { usage >&2; exit 2; }; export KILN_FUZZ_SECONDS="$2"; shift 2 ;;
    --seconds=*) export KILN_FUZZ_SECONDS="${1#*=}"; shift ;;
    -j|--jobs) [[ $# -ge 2 ]] || { usage >&2; exit 2; }; JOBS="$2"; shift 2 ;;
    -j*) JOBS="${1#-j}"; shift ;;
    --jobs=*) JOBS="${1#*=}"; shift ;;
    -h|--help) usage; exit 0 ;;
    fuzz_*) TARGETS+=("$1"); shift ;;
    *) echo "fuzz.sh: unknown argument '$1'" >&2; usage >&2; exit 2 ;;
  esac
done

FILTER=()
if [[ ${#TARGETS[@]} -gt 0 ]]; then
  FILTER=(-R "^($(IFS='|'; echo "${TARGETS[*]}"))\$")
fi

bash "$ROOT/scripts/install_deps.sh"
bash "$ROOT/scripts/configure.sh" --fuzz "$BUILD_DIR"
echo "==> build $BUILD_DIR (-j$JOBS)"
cmake --build "$BUILD_DIR" -j "$JOBS"

export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0:halt_on_error=1:strict_string_checks=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
echo "==> fuzz (${KILN_FUZZ_SECONDS:-the configured} seconds per target)"
status=0
ctest --test-dir "$BUILD_DIR" -L fuzz --output-on-failure -j "$JOBS" --no-tests=error "${FILTER[@]}" || status=$?

# Each run's final statistics, from ctest's log of the output.
LOG="$BUILD_DIR/Testing/Temporary/LastTest.log"
if [[ -f "$LOG" ]]; then
  awk '/^[0-9]+\/[0-9]+ Test: /{t=$3} /DONE +cov:|stat::number_of_executed_units|stat::average_exec_per_sec|Done [0-9]+ runs in/{print t ": " $0}' "$LOG"
fi
exit $status
