#!/usr/bin/env python3
"""Kiln (kiln-run) against ONNX Runtime on the same ONNX model and the same inputs.

For each batch size: writes the inputs as .npy files, runs `kiln-run MODEL inputs
--repeat N --json` (Kiln: tiers up during the run) and an ONNX Runtime session on the same
arrays, checks that the outputs' checksums agree, and prints the median latencies and their
ratio, measured in this one run.

    pip install onnxruntime          # a peer for this benchmark, not a dependency of Kiln
    python3 bench/onnxruntime_bench.py --kiln-run build/tools/kiln-run/kiln-run MODEL.onnx
    python3 bench/onnxruntime_bench.py --kiln-run ... --make-mlp    # needs `pip install onnx`

Symbolic dims of the model's inputs take the batch size. Both sides use --threads threads.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time


def make_mlp(path):
    """A 784-512-512-10 MLP with a symbolic batch dim (needs the `onnx` package)."""
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    sizes = [784, 512, 512, 10]
    inits, nodes, prev = [], [], "x"
    for i in range(3):
        w = (rng.standard_normal((sizes[i + 1], sizes[i])) / np.sqrt(sizes[i])).astype(np.float32)
        b = np.zeros(sizes[i + 1], np.float32)
        inits += [numpy_helper.from_array(w, f"w{i}"), numpy_helper.from_array(b, f"b{i}")]
        nodes.append(helper.make_node("Gemm", [prev, f"w{i}", f"b{i}"], [f"g{i}"], transB=1))
        prev = f"g{i}"
        if i < 2:
            nodes.append(helper.make_node("Relu", [prev], [f"r{i}"]))
            prev = f"r{i}"
    nodes.append(helper.make_node("Softmax", [prev], ["y"], axis=-1))
    graph = helper.make_graph(nodes, "mlp",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 784])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 10])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.save(model, path)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model", nargs="?", help="ONNX model (or --make-mlp)")
    ap.add_argument("--kiln-run", default="build/tools/kiln-run/kiln-run")
    ap.add_argument("--make-mlp", action="store_true", help="benchmark a generated MLP (needs `pip install onnx`)")
    ap.add_argument("--batches", default="1,8,32,128")
    ap.add_argument("--repeat", type=int, default=200)
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()

    try:
        import numpy as np
        import onnxruntime as ort
    except ImportError as e:
        print(f"SKIP: {e.name} is missing (pip install onnxruntime numpy)")
        return 77
    if not os.path.exists(args.kiln_run):
        print(f"kiln-run not found at {args.kiln_run} (build Kiln with KILN_WITH_ONNX, or pass --kiln-run)")
        return 2

    tmp = tempfile.mkdtemp(prefix="kiln_ort_")
    model = args.model
    if args.make_mlp:
        model = os.path.join(tmp, "mlp.onnx")
        make_mlp(model)
    if not model:
        ap.error("give a model or --make-mlp")

    so = ort.SessionOptions()
    so.intra_op_num_threads = args.threads
    so.inter_op_num_threads = 1
    sess = ort.InferenceSession(model, so, providers=["CPUExecutionProvider"])
    dtypes = {"tensor(float)": np.float32, "tensor(double)": np.float64, "tensor(int64)": np.int64,
              "tensor(int32)": np.int32, "tensor(bool)": np.bool_, "tensor(uint8)": np.uint8, "tensor(int8)": np.int8}
    env = dict(os.environ, KILN_NUM_THREADS=str(args.threads), OMP_NUM_THREADS=str(args.threads))

    print(f"model {model}; {args.repeat} calls per batch size; {args.threads} thread(s) each; ONNX Runtime {ort.__version__}")
    print(f"{'batch':>6} {'kiln p50 ms':>12} {'ort p50 ms':>11} {'kiln/ort':>9} {'kiln first ms':>14} {'compiles':>9}  outputs")
    rng = np.random.default_rng(1)
    for b in [int(x) for x in args.batches.split(",")]:
        feeds, files = {}, []
        for i, inp in enumerate(sess.get_inputs()):
            shape = [d if isinstance(d, int) else b for d in inp.shape]
            dt = dtypes.get(inp.type, np.float32)
            a = rng.standard_normal(shape).astype(dt) if np.issubdtype(dt, np.floating) else rng.integers(0, 10, shape).astype(dt)
            f = os.path.join(tmp, f"in{i}_{b}.npy")
            np.save(f, a)
            feeds[inp.name] = a
            files.append(f"{inp.name}={f}")
        out = subprocess.run([args.kiln_run, model, *files, "--repeat", str(args.repeat), "--json"],
                             capture_output=True, text=True, env=env)
        if out.returncode != 0:
            print(f"{b:>6} kiln-run failed: {out.stderr.strip()}")
            continue
        lines = out.stdout.splitlines()
        k = json.loads([l for l in lines if l.startswith("{")][-1])
        ksums = [float(l.split("sum=")[1].split()[0]) for l in lines if l.startswith("output ")]

        sess.run(None, feeds)  # warm
        times, res = [], None
        for _ in range(args.repeat):
            t0 = time.perf_counter()
            res = sess.run(None, feeds)
            times.append((time.perf_counter() - t0) * 1e3)
        ort_p50 = float(np.median(times))
        osums = [float(np.asarray(r, dtype=np.float64).sum()) for r in res]
        agree = all(abs(a - o) <= 1e-3 * max(1.0, abs(o)) for a, o in zip(ksums, osums))
        print(f"{b:>6} {k['p50_ms']:>12.4f} {ort_p50:>11.4f} {k['p50_ms'] / ort_p50:>9.2f} {k['first_ms']:>14.3f} "
              f"{k['compiles']:>9}  {'checksums agree' if agree else 'CHECKSUMS DIFFER'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
