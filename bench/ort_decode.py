#!/usr/bin/env python3
"""ONNX Runtime's side of the KV-cache decode comparison with examples/03_gpt2_decode.

    python3 bench/ort_decode.py MODEL_DIR [--threads 1] [--steps 64]

MODEL_DIR is what tests/onnx/dynamic/export_dynamic.py writes for gpt2_tiny_past: model.onnx
and decode/step_<n>/ (step 0: the prompt and an empty cache; later steps: the token and the
attention mask). Runs the same greedy decode as the example (each step feeds the cache the
step before returned), checks the logits against PyTorch's, and prints the median ms per token
over steps 8 and later, the number 03_gpt2_decode prints as "median ms per token". Needs
onnxruntime and onnx (for reading the .pb files) in a virtual environment with numpy<2: a
peer for benchmarks, never a dependency of Kiln.
"""
import argparse
import os
import time

import numpy as np
import onnx
import onnx.numpy_helper
import onnxruntime as ort


def read(path):
    t = onnx.TensorProto()
    with open(path, "rb") as f:
        t.ParseFromString(f.read())
    return onnx.numpy_helper.to_array(t)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model_dir")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--steps", type=int, default=64)
    a = ap.parse_args()
    so = ort.SessionOptions()
    so.intra_op_num_threads = a.threads
    so.inter_op_num_threads = 1
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    sess = ort.InferenceSession(os.path.join(a.model_dir, "model.onnx"), so, providers=["CPUExecutionProvider"])
    names = [i.name for i in sess.get_inputs()]
    past, ms, worst = [], [], 0.0
    for s in range(a.steps):
        sd = os.path.join(a.model_dir, "decode", "step_%d" % s)
        if not os.path.isdir(sd):
            break
        feed = [read(os.path.join(sd, "input_0.pb")), read(os.path.join(sd, "input_1.pb"))]
        if s == 0:
            i = 2
            while os.path.exists(os.path.join(sd, "input_%d.pb" % i)):
                past.append(read(os.path.join(sd, "input_%d.pb" % i)))
                i += 1
        feed += past
        t0 = time.perf_counter()
        out = sess.run(None, dict(zip(names, feed)))
        ms.append((time.perf_counter() - t0) * 1e3)
        want = read(os.path.join(sd, "output_0.pb"))
        worst = max(worst, float(np.abs(out[0] - want).max() / max(np.abs(want).max(), 1e-30)))
        past = out[1:]
    tail = sorted(ms[8:] if len(ms) > 8 else ms)
    print("onnxruntime %s, %d thread(s): %d steps, worst logits error %.2e" % (ort.__version__, a.threads, len(ms), worst))
    print("median ms per token (steps 8+): %.3f" % tail[len(tail) // 2])


if __name__ == "__main__":
    main()
