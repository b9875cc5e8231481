#!/usr/bin/python3
"""torch_workloads: the workloads of bench/jit_workloads.cpp in PyTorch (CPU, eager), the
peer of scripts/bench.sh. PyTorch is a peer for benchmarks only, never a dependency of Kiln.

    usage: /usr/bin/python3 bench/torch_workloads.py [--threads N] [--quick] [--only SUBSTRING]

Run it with Debian's interpreter (/usr/bin/python3): Debian's python3-torch is installed
for it, not for a pyenv python that may come first on PATH. Install with
`apt-get install -y python3-torch libopenblas0-pthread` (without libopenblas0-pthread,
matmul falls back to the reference BLAS and is ~20x slower).

Same method as Kiln's side (bench/bench_util.h): a few warm-up calls, then repetitions of
`iters` calls each (batched so that a repetition lasts >= 2 ms), as many as fit in the
workload's budget within [min_reps, max_reps]; the median and the 10th/90th percentiles of
the time per call. torch.inference_mode(), torch.set_num_threads(N) (N from --threads, else
KILN_NUM_THREADS, else every core), and OMP/OPENBLAS/MKL_NUM_THREADS set to N before torch
loads unless already set. Prints `RESULT name=... impl=torch ms=...` lines; the
math is the same as Kiln's graphs (GELU tanh form in the chain, erf form in the block).
Weights come from torch's generator, so values differ from Kiln's; shapes and ops do not.
"""
import argparse
import math
import os
import sys
import time


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--only", default="")
    args = ap.parse_args()
    if args.threads is None:
        args.threads = int(os.environ.get("KILN_NUM_THREADS", "0") or 0)
    if args.threads <= 0:
        args.threads = os.cpu_count() or 1
    return args


# Parsed before torch loads: OpenBLAS (and OpenMP, MKL) size their own thread pools when they
# load, from these variables, not from torch.set_num_threads, so that --threads 1 is one
# thread for the BLAS too (scripts/bench.sh exports them; a direct run did not: the MLP at
# batch 256 then ran on both cores of a 2-core host, 5.5 ms instead of 10.7).
ARGS = parse_args() if __name__ == "__main__" else None
if ARGS is not None:
    for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ.setdefault(_var, str(ARGS.threads))

try:
    import torch
    import torch.nn.functional as F
except ImportError as e:  # scripts/bench.sh checks first; this is for direct use
    print(f"torch_workloads: PyTorch is not available for {sys.executable}: {e}", file=sys.stderr)
    sys.exit(3)


def percentile(sorted_samples, q):
    pos = q * (len(sorted_samples) - 1)
    lo = int(math.floor(pos))
    hi = min(lo + 1, len(sorted_samples) - 1)
    return sorted_samples[lo] + (sorted_samples[hi] - sorted_samples[lo]) * (pos - lo)


def time_calls(body, budget_ms, min_reps, max_reps, min_rep_ms=2.0):
    iters = 1
    while True:
        t0 = time.perf_counter()
        for _ in range(iters):
            body()
        elapsed = (time.perf_counter() - t0) * 1e3
        if elapsed >= min_rep_ms / 2 or iters >= 1 << 30:
            break
        iters *= 2
    per_call = elapsed / iters
    iters = max(1, math.ceil(min_rep_ms / max(per_call, 1e-9)))
    reps = int(budget_ms / max(per_call * iters, 1e-9))
    reps = min(max(reps, min_reps), max_reps)
    samples = []
    for _ in range(reps):
        t0 = time.perf_counter()
        for _ in range(iters):
            body()
        samples.append((time.perf_counter() - t0) * 1e3 / iters)
    samples.sort()
    return {"ms": percentile(samples, 0.5), "p10": percentile(samples, 0.1), "p90": percentile(samples, 0.9),
            "reps": reps, "iters": iters}


def fmt(v):
    return f"{v:.5g}" if isinstance(v, float) else str(v)


def result(name, fields):
    print("RESULT name=%s impl=torch %s" % (name, " ".join(f"{k}={fmt(v)}" for k, v in fields.items())), flush=True)


def blas_library():
    """The BLAS shared object this process has mapped after a matmul (Debian's PyTorch uses
    whichever libblas.so.3 the alternatives system selects)."""
    torch.matmul(torch.ones(64, 64), torch.ones(64, 64))
    try:
        with open("/proc/self/maps") as f:
            libs = {line.split()[-1] for line in f
                    if "/" in line and "blas" in line.lower() and "lapack" not in line.lower()}
    except OSError:
        return "unknown"
    return ",".join(sorted(os.path.realpath(p) for p in libs)) or "none mapped"


def weight(shape, scale, shift=0.0):
    return torch.randn(*shape) * scale + shift


class Bench:
    def __init__(self, args, threads):
        self.quick = args.quick
        self.only = args.only
        self.threads = threads
        self.warm = 3

    def selected(self, name):
        return not self.only or self.only in name

    def run(self, name, fn, budget_ms, extra, min_reps=5, max_reps=30):
        if not self.selected(name):
            return
        for _ in range(self.warm):
            fn()
        t = time_calls(fn, budget_ms / 5 if self.quick else budget_ms, 3 if self.quick else min_reps, max_reps)
        t.update(extra)
        t["threads"] = self.threads
        result(name, t)


def main():
    args = ARGS
    threads = args.threads
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    b = Bench(args, threads)
    print(f"# torch_workloads: PyTorch {torch.__version__}, {torch.get_num_threads()} thread(s), BLAS {blas_library()}",
          flush=True)

    with torch.inference_mode():
        # Per-call cost on one add on f32[4] (Python + dispatcher), out= and allocating.
        if b.selected("dispatch"):
            x4 = torch.randn(4)
            o4 = torch.empty(4)
            for name, fn in (("dispatch_run", lambda: torch.add(x4, x4, out=o4)), ("dispatch_call", lambda: x4 + x4)):
                for _ in range(100):
                    fn()
                t = time_calls(fn, 120 if b.quick else 600, 9, 15, min_rep_ms=20.0)
                result(name, {"ns": t["ms"] * 1e6, "p10_ns": t["p10"] * 1e6, "p90_ns": t["p90"] * 1e6,
                              "reps": t["reps"], "iters": t["iters"], "threads": threads})

        n = 1 << 24
        if b.selected("chain_16M"):
            a, bb, c = torch.randn(n), torch.randn(n), torch.randn(n)
            b.run("chain_16M", lambda: F.gelu(a * bb + c, approximate="tanh") * torch.sigmoid(a), 3000,
                  {"bytes": 16 * n})
            del a, bb, c

        if b.selected("softmax_ln_4096x1024"):
            m, d = 4096, 1024
            x = torch.randn(m, d)
            g, be = weight([d], 0.1, 1.0), weight([d], 0.1)
            b.run("softmax_ln_4096x1024", lambda: torch.softmax(F.layer_norm(x, (d,), g, be, 1e-5), -1), 2000,
                  {"bytes": 8 * m * d})

        d0, d1, d2, d3 = 784, 1024, 1024, 10
        W1, b1 = weight([d1, d0], 1 / math.sqrt(d0)), weight([d1], 0.02)
        W2, b2 = weight([d2, d1], 1 / math.sqrt(d1)), weight([d2], 0.02)
        W3, b3 = weight([d3, d2], 1 / math.sqrt(d2)), weight([d3], 0.02)

        def mlp(x):
            h = torch.relu(F.linear(x, W1, b1))
            h = torch.relu(F.linear(h, W2, b2))
            return F.linear(h, W3, b3)

        for batch in (1, 8, 64, 256):
            x = torch.randn(batch, d0)
            b.run(f"mlp_b{batch}", lambda: mlp(x), 2500 if batch >= 64 else 1500,
                  {"flops": 2 * batch * (d0 * d1 + d1 * d2 + d2 * d3)})

        D, H, Fh = 256, 4, 1024
        Dh = D // H
        s_in, s_hid = 1 / math.sqrt(D), 1 / math.sqrt(Fh)
        ln1_g, ln1_b = weight([D], 0.1, 1.0), weight([D], 0.1)
        Wqkv, bqkv = weight([3 * D, D], s_in), weight([3 * D], 0.02)
        Wo, bo = weight([D, D], s_in), weight([D], 0.02)
        ln2_g, ln2_b = weight([D], 0.1, 1.0), weight([D], 0.1)
        Wf1, bf1 = weight([Fh, D], s_in), weight([Fh], 0.02)
        Wf2, bf2 = weight([D, Fh], s_hid), weight([D], 0.02)

        def block(x):
            B, S, _ = x.shape
            h = F.layer_norm(x, (D,), ln1_g, ln1_b, 1e-5)
            q, k, v = F.linear(h, Wqkv, bqkv).split(D, dim=-1)
            heads = lambda t: t.reshape(B, S, H, Dh).permute(0, 2, 1, 3)
            q, k, v = heads(q), heads(k), heads(v)
            scores = torch.matmul(q, k.transpose(-2, -1)) * (1.0 / math.sqrt(Dh))
            c = torch.matmul(torch.softmax(scores, -1), v).permute(0, 2, 1, 3).reshape(B, S, D)
            x1 = x + F.linear(c, Wo, bo)
            m = F.gelu(F.linear(F.layer_norm(x1, (D,), ln2_g, ln2_b, 1e-5), Wf1, bf1))
            return x1 + F.linear(m, Wf2, bf2)

        for S in (32, 128, 512):
            x = torch.randn(1, S, D)
            flops = 2 * S * (D * 3 * D + D * D + 2 * D * Fh) + 4 * H * S * S * Dh
            b.run(f"xformer_s{S}", lambda: block(x), 3000 if S >= 512 else 1500, {"flops": flops})

        Wc, bc = weight([64, 64, 3, 3], 1 / math.sqrt(64 * 9)), weight([64], 0.02)
        for n in (1, 8):
            x = torch.randn(n, 64, 56, 56)
            b.run(f"conv3x3_b{n}", lambda: torch.relu(F.conv2d(x, Wc, bc, padding=1)), 2000,
                  {"flops": 2 * n * 64 * 56 * 56 * 64 * 9})
    return 0


if __name__ == "__main__":
    sys.exit(main())
