#!/usr/bin/env python3
"""report: the table of ratios of scripts/bench.sh, from the RESULT lines of one run.

    usage: python3 bench/report.py RESULTS_FILE [--threads N]

Reads `RESULT name=... impl=... key=value ...` lines (other lines are ignored) written by
bench/bandwidth (impl=machine), bench/hand_loops (impl=hand), bench/jit_workloads
(impl=kiln with the JIT on, impl=kiln_interp with KILN_JIT=0) and bench/torch_workloads.py
(impl=torch), and prints a Markdown table. Standard library only.
"""
import argparse
import math
import sys

WORKLOADS = [
    # name, label, goal kind, goal text (issue 3, "Done means", single-thread figures)
    ("chain_16M", "chain gelu_tanh(a*b+c)*sigmoid(a), 16M f32", "chain", "Kiln÷floor ≤ 1.5, Kiln÷hand ≤ 1.0"),
    ("softmax_ln_4096x1024", "softmax(layer_norm(x)), [4096,1024]", "floor2", "Kiln÷floor ≤ 2"),
    ("mlp_b1", "MLP 784-1024-1024-10, batch 1", "torch0.8", "torch÷Kiln ≥ 0.8"),
    ("mlp_b8", "MLP, batch 8", "torch0.8", "torch÷Kiln ≥ 0.8"),
    ("mlp_b64", "MLP, batch 64", "torch0.8", "torch÷Kiln ≥ 0.8"),
    ("mlp_b256", "MLP, batch 256", "torch0.8", "torch÷Kiln ≥ 0.8"),
    ("xformer_s32", "transformer block d=256, seq 32", "torch1", "torch÷Kiln ≥ 1.0"),
    ("xformer_s128", "transformer block, seq 128", "torch1", "torch÷Kiln ≥ 1.0"),
    ("xformer_s512", "transformer block, seq 512", "torch1", "torch÷Kiln ≥ 1.0"),
    ("conv3x3_b1", "conv3x3 64->64, 56x56 + bias + relu, batch 1", "none", "— (measured, no goal)"),
    ("conv3x3_b8", "conv3x3, batch 8", "none", "— (measured, no goal)"),
]


def parse(path):
    results = {}
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            if not line.startswith("RESULT "):
                continue
            fields = dict(kv.split("=", 1) for kv in line.split()[1:] if "=" in kv)
            key = (fields.get("name"), fields.get("impl"), fields.get("threads"))
            results[key] = fields
    return results


def num(fields, key):
    if fields is None:
        return None
    try:
        v = float(fields.get(key, "nan"))
    except ValueError:
        return None
    return v if math.isfinite(v) else None


def fmt_ms(v):
    if v is None:
        return "—"
    return f"{v:.3g}" if v < 100 else f"{v:.0f}"


def fmt_wall(ms):
    ms = float(ms)
    return f"{ms / 1000:.3g} s" if ms >= 1000 else f"{ms:.3g} ms"


def fmt_ratio(v):
    if v is None:
        return "—"
    return f"{v:.2f}" if v < 10 else f"{v:.3g}" if v < 1000 else f"{v:.0f}"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("results")
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    r = parse(args.results)
    t = str(args.threads)
    get = lambda name, impl, threads=t: r.get((name, impl, threads))

    triad = num(get("bw_triad", "machine"), "gbs")
    torch_ran = any(k[1] == "torch" for k in r)

    out = []
    out.append(f"Threads: {t} on every side (KILN_NUM_THREADS, OMP/OPENBLAS/MKL_NUM_THREADS, torch.set_num_threads, "
               "the std::threads of the hand loops and of the bandwidth test).")
    out.append("")
    out.append("Kiln ms: median time per call [p10–p90]. tier: the highest tier any timed call ran on "
               "(timed calls on tiers 0/1/2). Ratios divide medians: interp÷Kiln (KILN_JIT=0 time / Kiln time) and "
               "torch÷Kiln (PyTorch time / Kiln time) are Kiln's speed-ups, > 1 means Kiln is faster; Kiln÷hand "
               "(Kiln / the hand-written -O3 -march=native loop) and Kiln÷floor (Kiln / the bandwidth floor) are "
               "slow-downs, <= 1 means Kiln matches or beats it.")
    out.append("")
    out.append(f"Floor = bytes that must move / measured triad bandwidth ({triad:.1f} GB/s with {t} thread(s))." if triad
               else "Floor: no bandwidth measurement for this thread count.")
    if t != "1":
        out.append("The goals are issue 3's single-thread targets; with more threads they are only indicative.")
    out.append("")
    out.append("| workload | Kiln ms [p10–p90] | tier | interp÷Kiln | Kiln÷hand | Kiln÷floor (floor ms) | torch÷Kiln "
               "| rate | first tier-2 call | goal (issue 3) | met |")
    out.append("|---|---|---|---|---|---|---|---|---|---|---|")
    for name, label, kind, goal in WORKLOADS:
        k = get(name, "kiln")
        ki = get(name, "kiln_interp")
        h = get(name, "hand")
        to = get(name, "torch")
        km = num(k, "ms")
        if k is None and ki is None:
            continue
        ms_txt = f"{fmt_ms(km)} [{fmt_ms(num(k, 'p10'))}–{fmt_ms(num(k, 'p90'))}]" if km else "—"
        tier = k.get("tier", "—") if k else "—"
        calls = k.get("calls") if k else None
        tier_txt = f"{tier} ({calls})" if calls else tier
        interp = num(ki, "ms")
        hand = num(h, "ms")
        tms = num(to, "ms")
        bytes_ = num(k or ki, "bytes")
        flops = num(k or ki, "flops")
        floor = bytes_ / (triad * 1e6) if (bytes_ and triad) else None
        r_interp = interp / km if (interp and km) else None
        r_hand = km / hand if (hand and km) else None
        r_floor = km / floor if (floor and km) else None
        r_torch = tms / km if (tms and km) else None
        if km and bytes_:
            rate = f"{bytes_ / (km * 1e6):.1f} GB/s"
        elif km and flops:
            rate = f"{flops / (km * 1e6):.1f} GFLOP/s"
        else:
            rate = "—"
        t2 = "n/a"
        if k and k.get("t2_call", "n/a") != "n/a":
            t2 = f"call {k['t2_call']}, {fmt_wall(k['t2_ms'])}"
        met = "—"
        if kind == "chain" and r_floor and r_hand:
            met = "yes" if (r_floor <= 1.5 and r_hand <= 1.0) else "no"
        elif kind == "floor2" and r_floor:
            met = "yes" if r_floor <= 2.0 else "no"
        elif kind.startswith("torch") and r_torch:
            met = "yes" if r_torch >= float(kind[5:]) else "no"
        floor_txt = f"{fmt_ratio(r_floor)} ({floor:.3g})" if floor else "—"
        out.append(f"| {label} | {ms_txt} | {tier_txt} | {fmt_ratio(r_interp)} | {fmt_ratio(r_hand)} | {floor_txt} "
                   f"| {fmt_ratio(r_torch)} | {rate} | {t2} | {goal} | {met} |")
    if not torch_ran:
        out.append("")
        out.append("PyTorch did not run (see the reason printed above): torch÷Kiln is empty.")

    out.append("")
    out.append("JIT costs:")
    out.append("")
    for form, what in (("dispatch_run", "f.run(in, out)"), ("dispatch_call", "f({x}), allocating")):
        k, ki, to = get(form, "kiln"), get(form, "kiln_interp"), get(form, "torch")
        kn, kin, tn = num(k, "ns"), num(ki, "ns"), num(to, "ns")
        torch_what = "torch.add(x, x, out=o)" if form == "dispatch_run" else "x + x"
        parts = [f"Kiln {kn:.0f} ns (tier {k.get('tier')})" if kn else "Kiln —",
                 f"interpreter {kin:.0f} ns" if kin else "interpreter —",
                 f"PyTorch {torch_what} {tn:.0f} ns" if tn else "PyTorch —"]
        goal = " (goal: dispatch + guard < 1000 ns)" if form == "dispatch_run" else ""
        out.append(f"- per-call overhead, one add on f32[4], {what}: " + ", ".join(parts) + goal)
    c = get("jit_compile", "kiln")
    if c:
        compiles = int(num(c, "compiles") or 0)
        if compiles:
            med = num(c, "t2_group_median_ms")
            if med:
                met = "met" if med < 20 else "NOT met"
                out.append(f"- LLVM (tier-2) compile latency per group: median {med:.2f} ms, largest "
                           f"{num(c, 't2_group_max_ms'):.1f} ms over {c.get('t2_groups')} groups (each group's mean over "
                           f"its tier-2 compiles; goal: median < 20 ms, {met})")
            out.append(f"- compile latency: {compiles} compiles (tiers 1 and 2), {num(c, 'compile_ms'):.1f} ms in all, "
                       f"mean {num(c, 'mean_ms'):.2f} ms per compile; failures {c.get('failures')}, "
                       f"specializations {c.get('specializations')}, guard failures {c.get('guard_failures')}, "
                       f"deopts {c.get('deopts')}")
        else:
            out.append("- compile latency: n/a (0 compiles: no JIT tier ran in this build)")
        per_fn = []
        for fn, last in (("chain", "chain_16M"), ("softmax_ln", "softmax_ln_4096x1024"), ("mlp", "mlp_b256"),
                         ("transformer", "xformer_s512"), ("conv3x3", "conv3x3_b8")):
            k = get(last, "kiln")
            n_c = num(k, "compiles")
            if n_c:
                per_fn.append(f"{fn} {int(n_c)} compiles / {num(k, 'compile_ms'):.1f} ms")
        if per_fn:
            out.append("- compiles per function (all its shapes): " + "; ".join(per_fn))
        out.append(f"- calls by tier over the whole Kiln run: t0 {c.get('calls_t0')}, t1 {c.get('calls_t1')}, "
                   f"t2 {c.get('calls_t2')}")
    t2s = [(n, get(n, "kiln")) for n, *_ in WORKLOADS]
    t2s = [(n, k) for n, k in t2s if k]
    if t2s:
        reached = [f"{n} call {k['t2_call']} / {fmt_wall(k['t2_ms'])}" for n, k in t2s if k.get("t2_call", "n/a") != "n/a"]
        out.append("- first call to first tier-2 call (from the first call of that shape, wall time incl. the calls): "
                   + ("; ".join(reached) if reached else "n/a (no call reached tier 2)"))
    bw = []
    for th in sorted({k[2] for k in r if k[1] == "machine"}, key=lambda s: int(s)):
        cp, tr = num(get("bw_copy", "machine", th), "gbs"), num(get("bw_triad", "machine", th), "gbs")
        bw.append(f"{th} thread(s): copy {cp:.1f} GB/s, triad {tr:.1f} GB/s")
    if bw:
        out.append("- memory bandwidth (STREAM-like, best of runs): " + "; ".join(bw))
    bad = [f"{k[0]} ({k[1]})" for k, v in r.items() if v.get("ok") == "0"]
    if bad:
        out.append("")
        out.append("RESULT CHECK FAILED for: " + ", ".join(bad))
    print("\n".join(out))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
