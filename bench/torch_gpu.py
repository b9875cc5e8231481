#!/usr/bin/env python3
"""torch_gpu: bench/gpu_bench.cpp's workloads in PyTorch eager on the same GPU, the peer of
Kiln's GPU tier (PyTorch is a peer for benchmarks only, never a dependency of Kiln).

    usage: python3 bench/torch_gpu.py

Each figure is the median of repeated calls, each timed from the call to
torch.cuda.synchronize() (as Kiln's calls return when their outputs are ready). f32, TF32
off (Kiln's GPU kernels are plain f32 FMA), torch.inference_mode(). Prints one line per
workload in gpu_bench's wording.
"""
import math
import sys
import time

try:
    import torch
    import torch.nn.functional as F
except ImportError as e:
    print(f"torch_gpu: PyTorch is not available: {e}")
    sys.exit(0)


def median_ms(reps, fn):
    t = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        torch.cuda.synchronize()
        t.append((time.perf_counter() - t0) * 1e3)
    t.sort()
    return t[len(t) // 2]


def steady(fn, reps):
    for _ in range(5):
        fn()
    torch.cuda.synchronize()
    return median_ms(reps, fn)


def main():
    if not torch.cuda.is_available():
        print("torch_gpu: no CUDA device")
        return
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    dev = torch.device("cuda:0")
    print(f"torch {torch.__version__} on {torch.cuda.get_device_name(0)}")
    g = torch.Generator(device="cpu").manual_seed(0)

    def rnd(*shape, scale=1.0, shift=0.0):
        return (torch.randn(*shape, generator=g) * scale + shift).to(dev)

    with torch.inference_mode():
        n = 1 << 28
        a = torch.zeros(n, device=dev)
        b = torch.empty(n, device=dev)
        ms = median_ms(10, lambda: b.copy_(a))
        bw = 2.0 * 4 * n / (ms * 1e6)
        print(f"copy bandwidth (device to device, read + write): {bw:.0f} GB/s")

        x16 = rnd(16)
        ms = steady(lambda: x16 * 2.0, 2000)
        print(f"one-kernel call (16 floats, launch + sync): {ms * 1e3:.1f} us")

        n = 1 << 24
        a, b_, c = rnd(n), rnd(n), rnd(n)
        ms = steady(lambda: F.gelu(a * b_ + c, approximate="tanh") * torch.sigmoid(a), 50)
        print(f"chain 16M f32: {ms:.3f} ms, {16.0 * n / (ms * 1e6):.0f} GB/s = {16.0 * n / (ms * 1e6) / bw:.2f} of copy bandwidth")

        m, d = 4096, 1024
        x = rnd(m, d)
        gamma, beta = rnd(d, scale=0.1, shift=1.0), rnd(d, scale=0.1)
        ms = steady(lambda: torch.softmax(F.layer_norm(x, (d,), gamma, beta), -1), 50)
        print(f"softmax(layer_norm) [4096,1024] f32: {ms:.3f} ms, {8.0 * m * d / (ms * 1e6):.0f} GB/s = "
              f"{8.0 * m * d / (ms * 1e6) / bw:.2f} of copy bandwidth")

        d0, d1, d2, d3 = 784, 1024, 1024, 10
        W1, b1 = rnd(d1, d0, scale=1 / math.sqrt(d0)), rnd(d1, scale=0.02)
        W2, b2 = rnd(d2, d1, scale=1 / math.sqrt(d1)), rnd(d2, scale=0.02)
        W3, b3 = rnd(d3, d2, scale=1 / math.sqrt(d2)), rnd(d3, scale=0.02)
        for bsz in (1, 32, 256):
            xb = rnd(bsz, d0)
            fn = lambda: F.linear(F.relu(F.linear(F.relu(F.linear(xb, W1, b1)), W2, b2)), W3, b3)
            ms = steady(fn, 100)
            fl = 2.0 * bsz * (d0 * d1 + d1 * d2 + d2 * d3)
            print(f"mlp batch {bsz}: {ms:.3f} ms ({fl / (ms * 1e6):.0f} GFLOP/s)")

        D, H, Dh, Fh = 256, 4, 64, 1024
        ln1g, ln1b = rnd(D, scale=0.1, shift=1.0), rnd(D, scale=0.1)
        Wqkv, bqkv = rnd(3 * D, D, scale=1 / math.sqrt(D)), rnd(3 * D, scale=0.02)
        Wo, bo = rnd(D, D, scale=1 / math.sqrt(D)), rnd(D, scale=0.02)
        ln2g, ln2b = rnd(D, scale=0.1, shift=1.0), rnd(D, scale=0.1)
        Wf1, bf1 = rnd(Fh, D, scale=1 / math.sqrt(D)), rnd(Fh, scale=0.02)
        Wf2, bf2 = rnd(D, Fh, scale=1 / math.sqrt(Fh)), rnd(D, scale=0.02)

        def block(x):
            B, S, _ = x.shape
            h = F.layer_norm(x, (D,), ln1g, ln1b)
            q, k, v = F.linear(h, Wqkv, bqkv).split(D, -1)
            heads = lambda u: u.reshape(B, S, H, Dh).permute(0, 2, 1, 3)
            q, k, v = heads(q), heads(k), heads(v)
            s = torch.matmul(q, k.transpose(-2, -1)) * (1.0 / math.sqrt(Dh))
            c = torch.matmul(torch.softmax(s, -1), v).permute(0, 2, 1, 3).reshape(B, S, D)
            x1 = x + F.linear(c, Wo, bo)
            mm = F.gelu(F.linear(F.layer_norm(x1, (D,), ln2g, ln2b), Wf1, bf1))
            return x1 + F.linear(mm, Wf2, bf2)

        for s in (16, 128, 512):
            xs = rnd(1, s, D)
            ms = steady(lambda: block(xs), 50)
            fl = 2.0 * s * (D * 3 * D + D * D + 2 * D * Fh) + 4.0 * H * s * s * Dh
            print(f"transformer block seq {s}: {ms:.3f} ms ({fl / (ms * 1e6):.0f} GFLOP/s)")

        for groups in (1, 128):
            n, c, hw = 8, 64 if groups == 1 else 128, 56
            w, bias = rnd(c, c // groups, 3, 3, scale=0.05), rnd(c, scale=0.02)
            xc = rnd(n, c, hw, hw)
            ms = steady(lambda: F.relu(F.conv2d(xc, w, bias, 1, 1, 1, groups)), 50)
            fl = 2.0 * n * c * (c // groups) * 9 * hw * hw
            kind = "dense" if groups == 1 else "depthwise"
            print(f"conv3x3 {kind} [{n},{c},{hw},{hw}]: {ms:.3f} ms ({fl / (ms * 1e6):.0f} GFLOP/s)")


if __name__ == "__main__":
    main()
