#!/usr/bin/env bash
# Runs Kiln's benchmarks beside their peers and prints one table of ratios from that run
# (bench/README.md explains every number).
#
#   bash scripts/bench.sh                 # 1 thread on every side
#   bash scripts/bench.sh --threads 2     # 2 threads on every side
#
# Options:
#   --threads N       threads for Kiln, the hand loops, the bandwidth test and PyTorch (default 1)
#   --quick           fewer repetitions (a smoke run; the figures are noisier)
#   --build-dir DIR   build directory (default: build/, configured by scripts/configure.sh)
#   -j, --jobs N      parallel build jobs (default: 2, or $KILN_JOBS)
#   --no-torch        do not run PyTorch
#   --no-build        run the programs already built in the build directory (no install,
#                     configure or build step; e.g. a directory configured by hand)
#   --traffic         also build and run bench/jit_traffic (dynamic-shape traffic, after the other
#                     programs; ~2 min with --quick, ~15 min without); its output goes to
#                     DIR/bench-results/traffic-tN.txt, not into the table
#
# Steps: scripts/install_deps.sh; configure and build the bench targets (jit_workloads,
# hand_loops, bandwidth); then, with KILN_NUM_THREADS, OMP_NUM_THREADS, OPENBLAS_NUM_THREADS
# and MKL_NUM_THREADS all set to N: bandwidth, hand_loops, jit_workloads (KILN_JIT=1),
# jit_workloads again with KILN_JIT=0 (the interpreter figure), and bench/torch_workloads.py
# under /usr/bin/python3 (skipped, with the reason, when PyTorch is not installed for it).
# The other KILN_* variables (tier thresholds, ...) are passed through from the environment.
# The RESULT lines go to DIR/bench-results/results-tN.txt and the table to table-tN.md.
# Exits non-zero when a build fails or a program's result differs from its reference.
set -uo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
THREADS=1
QUICK=()
BUILD_DIR="$ROOT/build"
JOBS="${KILN_JOBS:-2}"
RUN_TORCH=1
BUILD=1
TRAFFIC=0

usage() { sed -n '2,27p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; }

while [[ $# -gt 0 ]]; do
  case "$1" in
    --threads) [[ $# -ge 2 ]] || { usage >&2; exit 2; }; THREADS="$2"; shift 2 ;;
    --threads=*) THREADS="${1#*=}"; shift ;;
    --quick) QUICK=(--quick); shift ;;
    --build-dir) [[ $# -ge 2 ]] || { usage >&2; exit 2; }; BUILD_DIR="$(cd "$ROOT" && realpath -m "$2")"; shift 2 ;;
    --build-dir=*) BUILD_DIR="$(cd "$ROOT" && realpath -m "${1#*=}")"; shift ;;
    -j|--jobs) [[ $# -ge 2 ]] || { usage >&2; exit 2; }; JOBS="$2"; shift 2 ;;
    -j*) JOBS="${1#-j}"; shift ;;
    --jobs=*) JOBS="${1#*=}"; shift ;;
    --no-torch) RUN_TORCH=0; shift ;;
    --no-build) BUILD=0; shift ;;
    --traffic) TRAFFIC=1; shift ;;
    -h|--help) usage; exit 0 ;;
    *) echo "bench.sh: unknown argument '$1'" >&2; usage >&2; exit 2 ;;
  esac
done
if ! [[ "$THREADS" =~ ^[1-9][0-9]*$ ]]; then
  echo "bench.sh: --threads takes a positive integer, not '$THREADS'" >&2
  exit 2
fi

if [[ $BUILD -eq 1 ]]; then
  bash "$ROOT/scripts/install_deps.sh" || exit 1

  # ---- build ----
  bash "$ROOT/scripts/configure.sh" "$BUILD_DIR" >/dev/null || { echo "bench.sh: configuring $BUILD_DIR failed" >&2; exit 1; }
  echo "==> build the bench targets (-j$JOBS)"
  TARGETS=(jit_workloads hand_loops bandwidth)
  [[ $TRAFFIC -eq 1 ]] && TARGETS+=(jit_traffic)
  cmake --build "$BUILD_DIR" -j "$JOBS" --target "${TARGETS[@]}" ||
    { echo "bench.sh: the build failed" >&2; exit 1; }
fi
BIN="$BUILD_DIR/bench"
PROGS=(bandwidth hand_loops jit_workloads)
[[ $TRAFFIC -eq 1 ]] && PROGS+=(jit_traffic)
for prog in "${PROGS[@]}"; do
  [[ -x "$BIN/$prog" ]] || { echo "bench.sh: $BIN/$prog is not built" >&2; exit 1; }
done

# ---- run ----
export KILN_NUM_THREADS="$THREADS" OMP_NUM_THREADS="$THREADS" OPENBLAS_NUM_THREADS="$THREADS" MKL_NUM_THREADS="$THREADS"
OUT_DIR="$BUILD_DIR/bench-results"
mkdir -p "$OUT_DIR"
RESULTS="$OUT_DIR/results-t$THREADS.txt"
TABLE="$OUT_DIR/table-t$THREADS.md"
: >"$RESULTS"
FAILED=()
START=$SECONDS

step() {  # step LABEL COMMAND...: runs it, its output to the terminal and the results file
  local label="$1"; shift
  echo "==> $label"
  echo "# ==> $label" >>"$RESULTS"
  "$@" 2>&1 | tee -a "$RESULTS"
  local rc=${PIPESTATUS[0]}
  if [[ $rc -ne 0 ]]; then
    FAILED+=("$label (exit $rc)")
  fi
}

echo "==> threads: $THREADS on every side; machine: $(getconf _NPROCESSORS_ONLN) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')"
echo "    load average before the run: $(cut -d' ' -f1-3 /proc/loadavg)"
step "bandwidth" "$BIN/bandwidth" "${QUICK[@]}"
step "hand_loops" "$BIN/hand_loops" "${QUICK[@]}"
step "jit_workloads (KILN_JIT=1)" env KILN_JIT=1 "$BIN/jit_workloads" "${QUICK[@]}"
step "jit_workloads (KILN_JIT=0, the interpreter)" env KILN_JIT=0 "$BIN/jit_workloads" "${QUICK[@]}"

TORCH_PY=/usr/bin/python3
if [[ $RUN_TORCH -eq 0 ]]; then
  echo "==> PyTorch skipped: --no-torch"
elif [[ ! -x "$TORCH_PY" ]]; then
  echo "==> PyTorch skipped: $TORCH_PY not found (install python3-torch libopenblas0-pthread)"
elif ! reason=$("$TORCH_PY" -c 'import torch' 2>&1); then
  echo "==> PyTorch skipped: 'import torch' fails under $TORCH_PY ($(echo "$reason" | tail -1));" \
       "install it with: apt-get install -y python3-torch libopenblas0-pthread"
else
  if [[ "$(dpkg-query -W -f='${Status}' libopenblas0-pthread 2>/dev/null)" != "install ok installed" ]]; then
    echo "==> warning: libopenblas0-pthread is not installed: PyTorch's matmul uses the reference BLAS (~20x slower)"
  fi
  step "torch_workloads.py" "$TORCH_PY" "$ROOT/bench/torch_workloads.py" --threads "$THREADS" "${QUICK[@]}"
fi
if [[ $TRAFFIC -eq 1 ]]; then
  TRAFFIC_OUT="$OUT_DIR/traffic-t$THREADS.txt"
  echo "==> jit_traffic (dynamic-shape traffic; output kept in $TRAFFIC_OUT)"
  env KILN_JIT=1 "$BIN/jit_traffic" "${QUICK[@]}" 2>&1 | tee "$TRAFFIC_OUT"
  rc=${PIPESTATUS[0]}
  [[ $rc -eq 0 ]] || FAILED+=("jit_traffic (exit $rc)")
fi
echo "    load average after the run: $(cut -d' ' -f1-3 /proc/loadavg); run took $((SECONDS - START)) s"

# ---- table ----
REPORT_PY=""
for p in /usr/bin/python3 python3; do
  if command -v "$p" >/dev/null 2>&1; then REPORT_PY="$p"; break; fi
done
echo
echo "==> results of this run (measured in one run; RESULT lines in $RESULTS)"
if [[ -n "$REPORT_PY" ]]; then
  "$REPORT_PY" "$ROOT/bench/report.py" "$RESULTS" --threads "$THREADS" | tee "$TABLE"
  [[ ${PIPESTATUS[0]} -eq 0 ]] || FAILED+=("a result check (see the table)")
else
  echo "bench.sh: no python3 to build the table; the RESULT lines:"
  grep '^RESULT' "$RESULTS"
fi

if [[ ${#FAILED[@]} -ne 0 ]]; then
  echo
  echo "bench.sh: failed: ${FAILED[*]}" >&2
  exit 1
fi
