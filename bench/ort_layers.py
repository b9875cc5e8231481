#!/usr/bin/env python3
"""Per-layer convolution times of Kiln beside ONNX Runtime's node profile, for one CNN.

Runs ONNX Runtime (CPU provider, ORT_ENABLE_ALL, --threads intra-op threads, default 1,
profiling on) on a model for --calls calls and takes each Conv node's median kernel time (plus that of an activation node
right after it, such as the QuickGelu node ORT makes of a SiLU); then runs `kiln-run --steady
--groups` --runs times (KILN_NUM_THREADS=--threads, KILN_CPU_ISA=--isa) and takes each conv
group's best time per call over the runs (its mean over the steady calls, sampled every few calls). Both list their convolutions in execution order, one per
ONNX Conv (ORT fuses Clip/Relu/Add into its Conv nodes, Kiln into its conv groups), so the
i-th of each are paired (in a model of parallel branches the two orders may differ:
squeezenet's fire modules run expand3x3 first in ONNX Runtime and expand1x1 first in Kiln,
so there the pairs are swapped; chains such as mobilenet_v2, efficientnet_b0 and resnet18
pair one to one). Prints per pair: ORT's node, its time, Kiln's group, its time, and
ORT / Kiln (> 1: Kiln is faster); then the sums. ORT's profiled node times add up to more
than its unprofiled call time, so the ratios locate the gaps rather than measure the model.

    ~/venv-peers/bin/python bench/ort_layers.py MODEL.onnx [--isa avx2] [--shape 1,3,224,224]

Models: as exported by bench/ort_compare.py (its --models-dir), or any ONNX CNN with one
image input. Requirements: onnxruntime and numpy in the benchmark venv (see ort_compare.py).
"""
import argparse
import collections
import json
import os
import subprocess
import sys
import tempfile


ACTIVATIONS = {"QuickGelu", "Sigmoid", "Relu", "Clip", "HardSigmoid", "HardSwish", "LeakyRelu", "Tanh"}


def ort_convs(path, shape, calls, threads):
    import numpy as np
    import onnxruntime as ort
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    so.enable_profiling = True
    so.profile_file_prefix = os.path.join(tempfile.mkdtemp(), "ort")
    sess = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
    x = np.random.default_rng(0).random(shape, dtype=np.float32)
    feed = {sess.get_inputs()[0].name: x}
    for _ in range(calls):
        sess.run(None, feed)
    with open(sess.end_profiling()) as f:
        events = json.load(f)
    nodes = collections.OrderedDict()
    for e in events:
        if e.get("cat") == "Node" and e["name"].endswith("_kernel_time"):
            nodes.setdefault(e["name"][: -len("_kernel_time")], [e["args"].get("op_name"), []])[1].append(e["dur"])
    # An activation node right after a Conv (ORT runs efficientnet's SiLU as a QuickGelu node
    # of its own) counts with that Conv, as Kiln runs it in the conv's group.
    convs = []
    prev = None
    for name, (op, d) in nodes.items():
        t = sorted(d)[len(d) // 2]
        if op == "Conv":
            convs.append([name, t])
        elif op in ACTIVATIONS and prev == "Conv":
            convs[-1][1] += t
        prev = op
    return [tuple(c) for c in convs]


def kiln_convs(kiln_run, path, shape, isa, runs, threads):
    env = dict(os.environ, KILN_NUM_THREADS=str(threads), KILN_CPU_ISA=isa)
    best = {}
    for _ in range(runs):
        out = subprocess.run([kiln_run, path, ",".join(map(str, shape)), "--repeat", "2", "--steady", "160", "--groups"],
                             env=env, capture_output=True, text=True, check=True).stdout
        for line in out.splitlines():
            f = line.split()
            if line.startswith("g") and len(f) >= 5 and f[1] == "conv":
                g = int(f[0].split(".")[0][1:])
                best[g] = min(best.get(g, float("inf")), float(f[4]))
    return [(g, best[g]) for g in sorted(best)]


def main():
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("model")
    p.add_argument("--isa", default="auto", help="KILN_CPU_ISA for Kiln (auto, avx2, avx512)")
    p.add_argument("--shape", default="1,3,224,224", help="the image input's shape")
    p.add_argument("--calls", type=int, default=40, help="profiled ONNX Runtime calls")
    p.add_argument("--runs", type=int, default=3, help="kiln-run runs (best time per group)")
    p.add_argument("--threads", type=int, default=1, help="threads of both (intra-op / KILN_NUM_THREADS)")
    p.add_argument("--kiln-run", default=os.path.join(root, "build", "tools", "kiln-run", "kiln-run"))
    a = p.parse_args()
    shape = [int(s) for s in a.shape.split(",")]
    o = ort_convs(a.model, shape, a.calls, a.threads)
    k = kiln_convs(a.kiln_run, a.model, shape, a.isa, a.runs, a.threads)
    if len(o) != len(k):
        print(f"ONNX Runtime ran {len(o)} Conv nodes and Kiln {len(k)} conv groups: the pairs below may not match",
              file=sys.stderr)
    print(f"{'#':>3} {'ONNX Runtime node':42} {'us':>7}  {'Kiln group':>10} {'us':>7}  ort/kiln")
    so = sk = 0.0
    for i, ((name, ot), (g, kt)) in enumerate(zip(o, k)):
        so += ot
        sk += kt
        print(f"{i:3d} {name[-42:]:42} {ot:7.0f}  {'g' + str(g):>10} {kt:7.0f}  {ot / kt:8.2f}")
    print(f"sum: ONNX Runtime {so:.0f} us, Kiln {sk:.0f} us, ort/kiln {so / max(sk, 1e-9):.2f}")


if __name__ == "__main__":
    main()
