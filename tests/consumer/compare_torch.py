#!/usr/bin/env python3
"""Compares the outputs the Kiln consumer wrote (consumer.cpp) with PyTorch.

Usage: compare_torch.py OUTPUT_DIR

Loads every weight, input and output listed in OUTPUT_DIR/manifest.txt (raw little-endian
f32 files), rebuilds the three models with torch.nn.functional, runs them on the same
inputs, and checks that the max abs difference is <= 1e-4 for every model and shape.

Exit codes: 0 all match, 1 a mismatch or missing data, 77 PyTorch is not installed (ctest
reports the test as skipped; SKIP_RETURN_CODE 77). Run it with the system interpreter
(/usr/bin/python3): Debian's python3-torch is not visible to a pyenv or venv python.
"""
import math
import os
import re
import sys

TOLERANCE = 1e-4
MODELS = ("mlp", "transformer", "cnn")

try:
    import numpy as np
    import torch
    import torch.nn.functional as F
except ImportError as e:  # python3-torch brings python3-numpy with it
    print(f"SKIP: PyTorch not installed (apt-get install python3-torch) [{e}]")
    sys.exit(77)

def load(out_dir):
    tensors = {}
    with open(os.path.join(out_dir, "manifest.txt"), encoding="utf-8") as f:
        for lineno, line in enumerate(f, 1):
            parts = line.split()
            if not parts:
                continue
            name, rank = parts[0], int(parts[1])
            shape = tuple(int(d) for d in parts[2:])
            if len(shape) != rank:
                raise ValueError(f"manifest line {lineno}: rank {rank} but {len(shape)} dims")
            data = np.fromfile(os.path.join(out_dir, name + ".f32"), dtype="<f4")
            if data.size != math.prod(shape):
                raise ValueError(f"{name}.f32: {data.size} values, shape {shape} needs {math.prod(shape)}")
            tensors[name] = torch.from_numpy(data.reshape(shape).astype(np.float32))
    return tensors


def mlp(p, x):
    h = F.relu(x @ p["W1"] + p["b1"])
    return F.softmax(h @ p["W2"] + p["b2"], dim=-1)


def transformer(p, x, heads=4):
    b, s, d = x.shape
    dh = d // heads

    def split_heads(t):  # [B,S,D] -> [B,H,S,Dh]
        return t.reshape(b, s, heads, dh).permute(0, 2, 1, 3)

    h = F.layer_norm(x, (d,), p["ln1_g"], p["ln1_b"], eps=1e-5)
    q = split_heads(F.linear(h, p["Wq"], p["bq"]))
    k = split_heads(F.linear(h, p["Wk"], p["bk"]))
    v = split_heads(F.linear(h, p["Wv"], p["bv"]))
    scores = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(dh))
    attn = F.softmax(scores, dim=-1) @ v
    merged = attn.permute(0, 2, 1, 3).reshape(b, s, d)
    x1 = x + F.linear(merged, p["Wo"], p["bo"])
    h2 = F.layer_norm(x1, (d,), p["ln2_g"], p["ln2_b"], eps=1e-5)
    m = F.linear(F.gelu(F.linear(h2, p["W1"], p["b1"])), p["W2"], p["b2"])  # erf GELU
    return x1 + m


def cnn(p, x):
    h = F.conv2d(x, p["c1_w"], p["c1_b"], stride=1, padding=1)
    h = F.relu(F.batch_norm(h, p["bn_mean"], p["bn_var"], p["bn_g"], p["bn_b"], training=False, eps=1e-5))
    h = F.max_pool2d(h, kernel_size=2, stride=2)
    h = F.relu(F.conv2d(h, p["c2_w"], p["c2_b"], stride=2, padding=1))
    h = torch.flatten(F.adaptive_avg_pool2d(h, 1), 1)
    return F.linear(h, p["fc_w"], p["fc_b"])


def main():
    if len(sys.argv) != 2:
        print(__doc__)
        return 2
    torch.set_num_threads(1)
    tensors = load(sys.argv[1])
    fns = {"mlp": mlp, "transformer": transformer, "cnn": cnn}
    case_re = re.compile(r"^([a-z]+)\.([A-Za-z0-9_]+)\.in$")
    ok = True
    print(f"PyTorch {torch.__version__}, tolerance {TOLERANCE:g} (max abs diff)")
    for model in MODELS:
        params = {name.split(".", 1)[1]: t for name, t in tensors.items()
                  if name.startswith(model + ".") and name.count(".") == 1}
        cases = sorted((m.group(2) for m in map(case_re.match, tensors) if m and m.group(1) == model),
                       key=lambda tag: [int(n) for n in re.findall(r"\d+", tag)])
        if not cases:
            print(f"{model}: FAIL: no cases in the manifest")
            ok = False
            continue
        worst = 0.0
        for tag in cases:
            x = tensors[f"{model}.{tag}.in"]
            got = tensors.get(f"{model}.{tag}.out")
            if got is None:
                print(f"{model} {tag}: FAIL: no output")
                ok = False
                continue
            with torch.no_grad():
                want = fns[model](params, x)
            if tuple(want.shape) != tuple(got.shape):
                print(f"{model} {tag}: FAIL: shape {tuple(got.shape)}, PyTorch gives {tuple(want.shape)}")
                ok = False
                continue
            diff = (want - got).abs().max().item() if want.numel() else 0.0
            if not math.isfinite(diff):
                diff = math.inf
            worst = max(worst, diff)
            status = "ok" if diff <= TOLERANCE else "FAIL"
            ok = ok and diff <= TOLERANCE
            print(f"{model:12s} {tag:8s} in {str(tuple(x.shape)):18s} out {str(tuple(got.shape)):16s} "
                  f"max abs diff {diff:.3e}  {status}")
        print(f"{model}: max abs diff over {len(cases)} shapes: {worst:.3e}")
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
