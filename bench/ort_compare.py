#!/usr/bin/env python3
"""Kiln and ONNX Runtime side by side on real ONNX models, same inputs, one run, one table.

For every model x batch x threads x ISA: exports the model (once, into --models-dir), makes
random inputs (fixed seed), runs ONNX Runtime (CPU provider, ORT_ENABLE_ALL,
intra_op_num_threads=T, inter_op_num_threads=1) and `kiln-run` (KILN_NUM_THREADS=T,
KILN_CPU_ISA=isa) on the same arrays, checks Kiln's outputs against ONNX Runtime's
(max|kiln - ort| / max|ort| <= 1e-3 per output, matched by output name, else by order) and
prints one row with:

  ort/kiln p50, p90   ms per call: ORT after 3 warm-up calls, over the row's timed calls;
                      Kiln's steady state: after 10 first calls, kiln-run --steady calls the
                      model until its tier-up policy stops compiling (each call followed by
                      waiting for the compiles it queued; 10 calls in a row without one),
                      then times as many calls. Timed calls: --repeat, or more for fast
                      models, so that they take about --min-seconds (by ORT's first p50; at
                      most 5000), or fewer for slow ones (about 20 s of them at most)
  speedup             ort p50 / kiln p50 (> 1: Kiln is faster)
  first ms            Kiln: the first call; ORT: session creation + first call
  compiled after      the call after which every compilable group had compiled code (tier 1
                      or 2), and the sum of the call latencies until then ("never": not
                      within the first 10 calls)
  settled ms          from Kiln's first call until it settled (calls and compile waits)
  compiles, comp ms   Kiln's compiles (failed ones in parentheses) and their time
  t2 med, t2 cpu ms   the median over groups of a group's tier-2 compile: wall time, and the CPU
                      time of the thread that compiled it (wall time also counts the cores it
                      shared with the calls, at 2 threads on a 2-vCPU host most of all)
  err                 the worst relative error over the outputs, or why the row failed

ONNX Runtime runs one session per (model, batch, threads), its figures shared by the ISA rows.
With --rounds N (default 3) every (model, batch, threads) is measured N times in a row, and
within a round ONNX Runtime's timed calls come before and after each ISA's kiln-run (a new
process each time): ORT, kiln-run auto, ORT, kiln-run avx2, ORT. A kiln-run's ORT figures are
the means of the two blocks around it. Where those two p50s differ by more than 15% the host
changed speed while Kiln ran (on 2-vCPU cloud hosts both runtimes fall into periods of calls
~1.5x slower, with 2 threads most of all), and the kiln-run is measured again, at most twice
(reported on stderr; the JSON row counts them under "remeasured"). A row gives the medians
over the rounds: of each p50 and p90, of the first-call, settle and compile figures, and, as
its speedup, of the rounds' own ratios (the JSON row keeps every round's ratio under
"round_speedups" and ORT's p50s around it under "round_ort_brackets"). "compiled after" and
"compiles" are the first round's; err is the worst round's.

Models: resnet18, mobilenet_v2, efficientnet_b0, squeezenet1_1 (torchvision, weights=None,
seed 0, opset 17, dynamic batch); bert_base (transformers BertModel(BertConfig()), inputs
input_ids and attention_mask, sequence 128; one static file per batch size); mlp
(784-1024-1024-10: Gemm, Relu, Gemm, Relu, Gemm with a symbolic batch); and the small exports
with symbolic (batch, sequence) in tests/onnx/dynamic/models (bert_tiny, gpt2_tiny, ...),
run at sequence 32. Token ids are drawn from [0, 30522) for bert_base and [0, 100) for the
small models; attention masks are all ones, token type ids zeros.

Requirements (benchmark peers, never dependencies of Kiln): Debian's python3-torch and
python3-torchvision, and in a venv with the system site packages: onnxruntime, onnx,
transformers==4.30.*, numpy<2.

    apt-get install -y python3-torch python3-torchvision
    python3 -m venv --system-site-packages ~/venv-peers
    ~/venv-peers/bin/pip install onnxruntime onnx 'transformers==4.30.*' 'numpy<2'
    ~/venv-peers/bin/python bench/ort_compare.py --quick                # smoke run
    ~/venv-peers/bin/python bench/ort_compare.py --isa auto,avx2 --rounds 3 --markdown --json rows.json
    ~/venv-peers/bin/python bench/ort_compare.py --models mlp,bert_tiny --batches 1 --threads 1,2

--peer-isa avx2 runs ONNX Runtime with AVX-512 hidden from it, for KILN_CPU_ISA=avx2 rows on an
AVX-512 host (ONNX Runtime picks its kernels from CPUID and has no setting to cap them): the
script runs itself again with build/bench/libkiln_cpuid_cap.so preloaded (bench/cpuid_cap.cpp:
CPUID faulting, Linux's arch_prctl ARCH_SET_CPUID, with the AVX-512 bits cleared), and
kiln-run without it. Where the host lacks CPUID faulting it stops with exit status 2.

    ~/venv-peers/bin/python bench/ort_compare.py --isa avx2 --peer-isa avx2 --markdown

Exits 77 when a peer is missing, 2 when kiln-run is not found, 1 when any row failed or its
outputs differ, else 0.
"""
import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TINY_DIR = os.path.join(REPO, "tests", "onnx", "dynamic", "models")
TORCHVISION = ["resnet18", "mobilenet_v2", "efficientnet_b0", "squeezenet1_1"]
DEFAULT_MODELS = TORCHVISION + ["bert_base", "mlp", "bert_tiny", "gpt2_tiny"]
SEQ = 32  # sequence length of the small dynamic models
TOL = 1e-3
WARM_CALLS = 10  # Kiln's first calls, before it settles
STEADY_SECONDS = 20.0  # at most about this long for a run's steady calls (bert-base at batch 8)
MAX_CALLS = 5000  # at most this many timed calls per run (--min-seconds of a fast model)
DRIFT = 1.15  # ONNX Runtime's p50s around a kiln-run further apart than this: the host changed speed
DRIFT_RETRIES = 2  # kiln-runs measured again at most this many times per round for that


def first_line(text):
    lines = str(text).strip().splitlines()
    return lines[0] if lines else ""


def export_torchvision(name, path):
    import torch
    import torchvision
    torch.manual_seed(0)
    model = getattr(torchvision.models, name)(weights=None).eval()
    torch.onnx.export(model, torch.randn(1, 3, 224, 224), path, opset_version=17,
                      input_names=["input"], output_names=["output"],
                      dynamic_axes={"input": {0: "batch"}, "output": {0: "batch"}})


def export_bert_base(path, batch):
    import torch
    from transformers import BertConfig, BertModel
    torch.manual_seed(0)
    model = BertModel(BertConfig(return_dict=False)).eval()
    ids = torch.zeros(batch, 128, dtype=torch.int64)
    torch.onnx.export(model, (ids, torch.ones_like(ids)), path, opset_version=17,
                      input_names=["input_ids", "attention_mask"],
                      output_names=["last_hidden_state", "pooler_output"])


def export_mlp(path):
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    rng = np.random.default_rng(0)
    sizes = [784, 1024, 1024, 10]
    inits, nodes, prev = [], [], "x"
    for i in range(3):
        w = (rng.standard_normal((sizes[i + 1], sizes[i])) / np.sqrt(sizes[i])).astype(np.float32)
        b = (0.1 * rng.standard_normal(sizes[i + 1])).astype(np.float32)
        inits += [numpy_helper.from_array(w, f"w{i}"), numpy_helper.from_array(b, f"b{i}")]
        out = "y" if i == 2 else f"g{i}"
        nodes.append(helper.make_node("Gemm", [prev, f"w{i}", f"b{i}"], [out], transB=1))
        prev = out
        if i < 2:
            nodes.append(helper.make_node("Relu", [prev], [f"r{i}"]))
            prev = f"r{i}"
    graph = helper.make_graph(nodes, "mlp",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 784])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 10])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, path)


def model_file(name, batch, models_dir):
    """The model's ONNX file for this batch size, exported into models_dir when not there yet."""
    if name in TORCHVISION:
        path, export = os.path.join(models_dir, f"{name}.onnx"), lambda p: export_torchvision(name, p)
    elif name == "bert_base":
        path, export = os.path.join(models_dir, f"bert_base_b{batch}.onnx"), lambda p: export_bert_base(p, batch)
    elif name == "mlp":
        path, export = os.path.join(models_dir, "mlp_784_1024_1024_10.onnx"), export_mlp
    else:
        path = os.path.join(TINY_DIR, name, "model.onnx")
        if not os.path.exists(path):
            raise RuntimeError(f"unknown model '{name}': not one of {', '.join(DEFAULT_MODELS)}, nor in {TINY_DIR}")
        return path
    if not os.path.exists(path):
        print(f"exporting {name} -> {path}", file=sys.stderr)
        export(path + ".part.onnx")
        os.replace(path + ".part.onnx", path)
    return path


def make_inputs(np, inputs, batch, vocab, seed):
    """Random arrays for ORT's input descriptions: symbolic dims are the batch (first) or SEQ."""
    rng = np.random.default_rng(seed)
    feeds = {}
    for inp in inputs:
        shape = [d if isinstance(d, int) else (batch if i == 0 else SEQ) for i, d in enumerate(inp.shape)]
        if inp.type == "tensor(int64)":
            if "mask" in inp.name:
                feeds[inp.name] = np.ones(shape, np.int64)
            elif "token_type" in inp.name:
                feeds[inp.name] = np.zeros(shape, np.int64)
            else:
                feeds[inp.name] = rng.integers(0, vocab, shape, dtype=np.int64)
        else:
            feeds[inp.name] = rng.standard_normal(shape).astype(np.float32)
    return feeds


def run_ort(np, ort, path, threads, repeat, make_feeds, feeds):
    """ORT's figures, outputs by name, the feeds and the session; feeds None: made by
    make_feeds from the session's inputs."""
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    t0 = time.perf_counter()
    sess = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
    create_ms = (time.perf_counter() - t0) * 1e3
    if feeds is None:
        feeds = make_feeds(sess.get_inputs())
    t0 = time.perf_counter()
    outs = sess.run(None, feeds)
    first_ms = create_ms + (time.perf_counter() - t0) * 1e3
    for _ in range(3):
        sess.run(None, feeds)
    stats = dict(time_ort(np, sess, feeds, repeat), ort_first=first_ms)
    return stats, dict(zip([o.name for o in sess.get_outputs()], outs)), feeds, sess


def time_ort(np, sess, feeds, repeat):
    """p50 and p90 of `repeat` timed calls of a warm session."""
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        sess.run(None, feeds)
        times.append((time.perf_counter() - t0) * 1e3)
    p50, p90 = np.percentile(times, [50, 90])
    return {"ort_p50": float(p50), "ort_p90": float(p90)}


CPUID_CAP_VARS = ("KILN_CPUID_CAP", "KILN_CPUID_CAP_QUIET")


def without_cap(env, lib=None):
    """Takes --peer-isa's library (`lib`, else any libkiln_cpuid_cap) out of env's LD_PRELOAD
    and its variables out of env, keeping whatever else was preloaded."""
    keep = [p for p in env.get("LD_PRELOAD", "").split(":")
            if p and (p != lib if lib else not os.path.basename(p).startswith("libkiln_cpuid_cap"))]
    if keep:
        env["LD_PRELOAD"] = ":".join(keep)
    else:
        env.pop("LD_PRELOAD", None)
    for v in CPUID_CAP_VARS:
        env.pop(v, None)
    return env


def run_kiln(np, kiln_run, path, files, threads, isa, steady, out_dir):
    """kiln-run's --json figures and its outputs (names in order, arrays): WARM_CALLS first
    calls, then (--steady) calls until the tier-up policy stops compiling, then `steady`
    timed calls."""
    env = dict(os.environ, KILN_NUM_THREADS=str(threads), KILN_CPU_ISA=isa)
    without_cap(env)  # --peer-isa's library is ONNX Runtime's alone
    cmd = [kiln_run, path, *files, "--repeat", str(WARM_CALLS), "--steady", str(steady), "--json",
           "--save-outputs", out_dir]
    p = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if p.returncode != 0:
        raise RuntimeError(f"kiln-run failed: {first_line(p.stderr or p.stdout) or f'exit status {p.returncode}'}")
    stats = json.loads([l for l in p.stdout.splitlines() if l.startswith("{")][-1])
    names = [m.group(1) for m in re.finditer(r"^output '(.*)': \S+ sum=", p.stdout, re.M)]
    return stats, names, [np.load(os.path.join(out_dir, n + ".npy")) for n in names]


def worst_error(np, ort_outs, kiln_names, kiln_outs):
    """max over outputs of max|k - o| / max|o|; an output missing or of another shape is inf."""
    worst = 0.0
    for i, (name, o) in enumerate(ort_outs.items()):
        j = kiln_names.index(name) if name in kiln_names else i
        if j >= len(kiln_outs) or kiln_outs[j].shape != o.shape:
            return float("inf")
        o = o.astype(np.float64)
        d = np.abs(kiln_outs[j].astype(np.float64) - o).max(initial=0.0)
        worst = max(worst, float(d / max(np.abs(o).max(initial=0.0), 1e-30)))  # NaN stays NaN
    return worst


COLUMNS = [  # header, key, format
    ("model", "model", "{}"), ("batch", "batch", "{}"), ("thr", "threads", "{}"), ("isa", "isa", "{}"),
    ("ort p50", "ort_p50", "{:.3f}"), ("ort p90", "ort_p90", "{:.3f}"),
    ("kiln p50", "kiln_p50", "{:.3f}"), ("kiln p90", "kiln_p90", "{:.3f}"), ("speedup", "speedup", "{:.2f}x"),
    ("kiln first ms", "kiln_first", "{:.1f}"), ("ort first ms", "ort_first", "{:.1f}"),
    ("compiled after", "compiled_after", "{}"), ("settled ms", "settled_ms", "{:.0f}"), ("compiles", "compiles", "{}"),
    ("comp ms", "compile_ms", "{:.1f}"), ("t2 med ms", "t2_median", "{:.1f}"), ("t2 cpu ms", "t2_cpu_median", "{:.1f}"),
    ("err", "err", "{}"),
]


def print_table(rows, markdown):
    cells = [[h for h, _, _ in COLUMNS]]
    for r in rows:
        cells.append([fmt.format(r[k]) if r.get(k) is not None else "-" for _, k, fmt in COLUMNS])
    if markdown:
        print("| " + " | ".join(cells[0]) + " |")
        print("|" + "---|" * len(COLUMNS))
        for c in cells[1:]:
            print("| " + " | ".join(c) + " |")
        return
    widths = [max(len(c[i]) for c in cells) for i in range(len(COLUMNS) - 1)]
    for c in cells:
        print("  ".join(x.ljust(w) if i == 0 else x.rjust(w) for i, (x, w) in enumerate(zip(c, widths))) + "  " + c[-1])


def kiln_row(row, rounds):
    """A row's Kiln figures from its rounds: [(ort_stats, kiln_json, err)] (see the docstring)."""
    med = lambda xs: float(statistics.median(xs))  # noqa: E731
    ratios = [o["ort_p50"] / k["steady_p50_ms"] for o, k, _ in rounds]
    k = rounds[0][1]
    call = k["all_compiled_call"]
    failed = f" ({k['compile_failures']} failed)" if k["compile_failures"] else ""
    err = max(e for _, _, e in rounds)
    return dict(row, ort_p50=med([o["ort_p50"] for o, _, _ in rounds]), ort_p90=med([o["ort_p90"] for o, _, _ in rounds]),
                kiln=k, kiln_p50=med([r["steady_p50_ms"] for _, r, _ in rounds]),
                kiln_p90=med([r["steady_p90_ms"] for _, r, _ in rounds]), speedup=med(ratios),
                round_speedups=ratios, round_ort_brackets=[o["ort_bracket"] for o, _, _ in rounds],
                remeasured=sum(o["attempts"] - 1 for o, _, _ in rounds), kiln_first=med([r["first_ms"] for _, r, _ in rounds]),
                compiled_after=f"#{call} {k['all_compiled_ms']:.1f}ms" if call else "never",
                settled_ms=med([r["settled_ms"] for _, r, _ in rounds]), compiles=f"{k['compiles']}{failed}",
                compile_ms=med([r["compile_ms"] for _, r, _ in rounds]),
                t2_median=med([r["t2_compile_median_ms"] for _, r, _ in rounds]),
                t2_cpu_median=med([r["t2_compile_cpu_median_ms"] for _, r, _ in rounds]), err_value=err,
                err=f"{err:.1e}" + ("" if err <= TOL else " MISMATCH"))


def run_all(args, np, ort, batches, threads, isas, repeat, tmp):
    """One row per model x batch x threads x ISA (one for a model or batch whose export or ORT failed)."""
    rows = []
    for model in args.models.split(","):
        for b in batches:
            feeds, files = None, []
            for t in threads:
                base = {"model": model, "batch": b, "threads": t}
                print(f"{model} batch {b}, {t} thread(s)", file=sys.stderr)
                try:
                    path = model_file(model, b, args.models_dir)
                    vocab = 30522 if model == "bert_base" else 100
                    make = lambda inputs: make_inputs(np, inputs, b, vocab, seed=b)  # noqa: E731
                    ort_stats, ort_outs, feeds, sess = run_ort(np, ort, path, t, repeat, make, feeds)
                except Exception as e:  # an export or ONNX Runtime failure: one row, go on
                    rows.append(dict(base, err=f"failed: {first_line(e) or type(e).__name__}"))
                    break
                if not files:
                    for name, a in feeds.items():
                        f = os.path.join(tmp, f"{model}_b{b}_{len(files)}.npy")
                        np.save(f, a)
                        files.append(f"{name}={f}")
                p50 = max(ort_stats["ort_p50"], 1e-3)
                steady = max(5, min(max(repeat, min(MAX_CALLS, int(args.min_seconds * 1e3 / p50))),
                                    int(STEADY_SECONDS * 1e3 / p50)))
                per_isa = {isa: [] for isa in isas}  # [(ort stats, kiln json, err)] per round
                failed = {}
                before = ort_stats if steady == repeat else dict(ort_stats, **time_ort(np, sess, feeds, steady))
                for _ in range(args.rounds):
                    for isa in isas:
                        if isa in failed:
                            continue
                        # ONNX Runtime's timed calls right before and right after the kiln-run;
                        # where their p50s differ by more than DRIFT the host changed speed in
                        # between (module docstring): the kiln-run is measured again.
                        for attempt in range(1 + DRIFT_RETRIES):
                            out_dir = tempfile.mkdtemp(dir=tmp)
                            try:
                                k, names, kiln_outs = run_kiln(np, args.kiln_run, path, files, t, isa, steady, out_dir)
                            except Exception as e:  # kiln-run failed, or its output is not what is expected
                                failed[isa] = first_line(e) or type(e).__name__
                                break
                            finally:
                                shutil.rmtree(out_dir, ignore_errors=True)
                            after = time_ort(np, sess, feeds, steady)
                            drift = max(before["ort_p50"], after["ort_p50"]) / max(min(before["ort_p50"], after["ort_p50"]), 1e-9)
                            bracket = dict(ort_stats, ort_p50=(before["ort_p50"] + after["ort_p50"]) / 2,
                                           ort_p90=(before["ort_p90"] + after["ort_p90"]) / 2,
                                           ort_bracket=[before["ort_p50"], after["ort_p50"]], attempts=attempt + 1)
                            before = after
                            if drift <= DRIFT:
                                break
                            print(f"  {isa}: ONNX Runtime p50 {bracket['ort_bracket'][0]:.3f} -> {after['ort_p50']:.3f} ms "
                                  "around kiln-run: the host changed speed" +
                                  ("; measuring again" if attempt < DRIFT_RETRIES else "; kept"), file=sys.stderr)
                        if isa not in failed:
                            per_isa[isa].append((bracket, k, worst_error(np, ort_outs, names, kiln_outs)))
                for isa in isas:
                    row = dict(base, isa=isa, ort_first=ort_stats["ort_first"])
                    if isa in failed:
                        rows.append(dict(row, ort_p50=ort_stats["ort_p50"], ort_p90=ort_stats["ort_p90"], err=failed[isa]))
                    else:
                        rows.append(kiln_row(row, per_isa[isa]))
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default=",".join(DEFAULT_MODELS), help="comma list (default: %(default)s)")
    ap.add_argument("--batches", default="1,8")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--isa", default="auto,avx2", help="KILN_CPU_ISA values, one Kiln row each")
    ap.add_argument("--repeat", type=int, default=40, help="timed calls per run (default 40)")
    ap.add_argument("--rounds", type=int, default=3, help="measurements per row, medians reported (default 3)")
    ap.add_argument("--min-seconds", type=float, default=1.0,
                    help="timed calls per run: more than --repeat where they take less than this (default 1.0)")
    ap.add_argument("--kiln-run", default="build/tools/kiln-run/kiln-run")
    ap.add_argument("--models-dir", default=os.path.join(tempfile.gettempdir(), "kiln_ort_models"),
                    help="cache of exported models (default: %(default)s)")
    ap.add_argument("--quick", action="store_true", help="smoke run: repeat 5, batch 1, 1 thread, the first ISA")
    ap.add_argument("--markdown", action="store_true", help="print the table as markdown")
    ap.add_argument("--json", metavar="FILE", help="write all rows as JSON")
    ap.add_argument("--peer-isa", choices=["auto", "avx2"], default="auto",
                    help="avx2: hide AVX-512 from ONNX Runtime (see above; default %(default)s)")
    ap.add_argument("--cpuid-cap", default="build/bench/libkiln_cpuid_cap.so",
                    help="the library --peer-isa avx2 preloads (default %(default)s)")
    args = ap.parse_args()
    if args.peer_isa == "avx2":
        # First pass: run this script again with the library preloaded (its constructor sets
        # KILN_CPUID_CAP in that process). Second pass: the library says whether it took.
        lib = os.path.abspath(args.cpuid_cap)
        if lib not in os.environ.get("LD_PRELOAD", "").split(":"):
            if not os.path.isfile(lib):
                print(f"--peer-isa avx2: '{args.cpuid_cap}' not found (build the kiln_cpuid_cap target)", file=sys.stderr)
                return 2
            env = without_cap(dict(os.environ))
            env["LD_PRELOAD"] = ":".join([lib] + ([env["LD_PRELOAD"]] if "LD_PRELOAD" in env else []))
            env["KILN_CPUID_CAP_QUIET"] = "1"
            os.execve(sys.executable, [sys.executable, *sys.argv], env)
        if os.environ.get("KILN_CPUID_CAP") != "avx2":
            print("--peer-isa avx2: this host has no CPUID faulting; ONNX Runtime cannot be capped", file=sys.stderr)
            return 2

    try:
        import numpy as np
        import onnx  # noqa: F401  (the MLP's export)
        import onnxruntime as ort
        import torch  # noqa: F401  (the exports)
    except ImportError as e:
        print(f"SKIP: {e.name} is missing (see the requirements in {sys.argv[0]} --help)")
        return 77
    if not os.path.isfile(args.kiln_run):
        print(f"kiln-run not found at '{args.kiln_run}' (build Kiln with ONNX support, or pass --kiln-run)")
        return 2
    ints = lambda s: [int(x) for x in s.split(",")]  # noqa: E731
    batches, threads, isas, repeat = ints(args.batches), ints(args.threads), args.isa.split(","), args.repeat
    if args.quick:
        batches, threads, isas, repeat = batches[:1], threads[:1], isas[:1], 5
        args.rounds, args.min_seconds = 1, 0.0
    if args.rounds < 1:
        print("--rounds must be at least 1")
        return 2
    os.makedirs(args.models_dir, exist_ok=True)
    peer = "; ONNX Runtime sees an AVX2 CPU (AVX-512 hidden)" if args.peer_isa == "avx2" else ""
    print(f"ONNX Runtime {ort.__version__}{peer}; at least {repeat} timed calls per run (about {args.min_seconds:g} s of them for "
          f"fast models), {args.rounds} round(s) per row (medians); "
          "times in ms", file=sys.stderr)
    tmp = tempfile.mkdtemp(prefix="kiln_ort_")
    try:
        rows = run_all(args, np, ort, batches, threads, isas, repeat, tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print_table(rows, args.markdown)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    return 0 if all(r.get("err_value", float("inf")) <= TOL for r in rows) else 1

if __name__ == "__main__":
    sys.exit(main())
