#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Summary table and plots of a SegOps benchmark run (results/bench.csv + notes).

Prints, per op and order: SegOps' GB/s and fraction of the copy bandwidth at the largest N that has
Python peers (D = 3, L = 3, float, int32), the best C++ and Python peers and the speed-ups; then
the count of every case at N >= 1e5 where SegOps beats every peer (and the losses the table does not
show), the copy-bandwidth targets at N = 2^25, deterministic vs default, the host overhead, and
every missing/wrong/failed line. Writes one PNG per op family (GB/s against N, one line per impl).
"""
from __future__ import annotations

import argparse
import csv
import multiprocessing
import os
from collections import defaultdict

PY_PREFIX = ("torch_", "jax_", "alchemi_")
ORDERS = ("fwd", "bwd", "dbl", "build")  # build: the descriptor (op "segments")


def load(path):
    rows = []
    for r in csv.DictReader(open(path)):
        for k in ("N", "M", "D"):
            r[k] = int(r[k])
        for k in ("median_s", "bytes", "gbps", "copy_fraction"):
            r[k] = float(r[k])
        rows.append(r)
    return rows


def is_segops(impl):
    return impl.startswith("segops")


def py_side(seg, rows):
    """The SegOps row to compare a case's Python peers with: the one peers.py timed in turns with
    them (segops_adjacent), else the C++ suite's."""
    return next((r for r in rows if r["impl"] == "segops_adjacent"), seg)


def fmt(x, nd=2):
    return "-" if x is None else f"{x:.{nd}f}"


def plot_family(job):
    """One op family's PNG: GB/s against N, one line per implementation, a panel per order and id order."""
    import matplotlib.pyplot as plt

    fam, fr, d, orders, copy_ref, path = job
    fig, axes = plt.subplots(len(orders), 2, figsize=(12, 3.6 * len(orders)), squeeze=False)
    for i, o in enumerate(orders):
        for j, srt in enumerate(("sorted", "unsorted")):
            ax = axes[i][j]
            lines_ = defaultdict(list)
            for r in fr:
                if r["order"] == o and r["sorted"] == srt:
                    lines_[r["impl"]].append((r["N"], r["gbps"]))
            for impl, pts in sorted(lines_.items()):
                pts.sort()
                if impl == "copy_same_bytes":
                    ax.plot([p[0] for p in pts], [p[1] for p in pts], "-.", color="gray", linewidth=1,
                            label="copy of the same bytes")
                    continue
                style = "-o" if is_segops(impl) else ("--s" if impl.startswith(PY_PREFIX) else ":^")
                ax.plot([p[0] for p in pts], [p[1] for p in pts], style, label=impl,
                        linewidth=2.5 if is_segops(impl) else 1.2)
            if copy_ref:
                ax.axhline(copy_ref, color="gray", linestyle="-.", linewidth=1, label="copy, 2^25 floats")
            ax.set_xscale("log")
            ax.minorticks_off()  # the log axis's minor ticks took 40% of the drawing time
            ax.set_xlabel("N")
            ax.set_ylabel("GB/s (minimal bytes)")
            ax.set_title(f"{fam} {o}, {srt} ids, float, D={d}, L=3")
            ax.grid(True, alpha=0.3)
            ax.legend(fontsize=7, ncol=2)
    h = 3.6 * len(orders)  # fixed margins in inches: tight_layout draws each figure once more
    fig.subplots_adjust(left=0.06, right=0.99, bottom=0.5 / h, top=1 - 0.35 / h, wspace=0.18,
                        hspace=0.75 / 2.75)
    fig.savefig(path, dpi=90)
    plt.close(fig)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--csv", required=True)
    ap.add_argument("--notes", nargs="*", default=[])
    ap.add_argument("--plots", default=None, help="folder for <family>.png")
    args = ap.parse_args()
    rows = load(args.csv)
    # copy rows: one pair (stream_copy, deep_copy) per measurement, first at the start of the run,
    # then before each sorted N = 2^25 case; a row's copy_fraction is against the latest before it,
    # or for SegOps there against the copy timed alternately with the row's own runs
    copy = defaultdict(list)
    for r in rows:
        if r["op"] == "copy":
            copy[r["impl"]].append(r["gbps"])
    refs = [max(pair) for pair in zip(*copy.values())]
    copy_ref = refs[0] if refs else 0.0
    # copy_same_bytes: a copy moving a case's minimal bytes at the case's size (N <= 1e6), the
    # least any implementation pays there; not a peer
    key = ("op", "order", "dtype", "index_type", "N", "M", "D", "sorted")

    def case(r):  # the case a row measures, whatever implementation
        return tuple(r[k] for k in key)

    same_rows = [r for r in rows if r["impl"] == "copy_same_bytes"]
    same = {case(r): r["gbps"] for r in same_rows}
    data = [r for r in rows if r["op"] != "copy" and r["impl"] != "copy_same_bytes"]
    segops_row = {}  # each case's (first) row of the default SegOps call
    for r in data:
        if r["impl"] == "segops":
            segops_row.setdefault(case(r), r)

    # ---- main table
    ops = []
    for r in data:
        if (r["op"], r["order"]) not in ops and r["N"] >= 100000:
            ops.append((r["op"], r["order"]))
    ops.sort(key=lambda o: ([x["op"] for x in data].index(o[0]), ORDERS.index(o[1])))
    print()
    print("Copy bandwidth (same run): " + ", ".join(f"{k} {v[0]:.2f} GB/s" for k, v in copy.items())
          + f"; reference {copy_ref:.2f} GB/s")
    if len(refs) > 1:
        print("  measured again before each sorted N = 2^25 case (whose SegOps copy% uses the copy timed alternately with the op): "
              + ", ".join(f"{v:.2f}" for v in refs[1:]) + " GB/s")
    print()
    print("Per op at the largest N with Python peers (float, int32, D=3, L=3); GB/s from the op's minimal bytes;")
    print("'x' = how many times faster SegOps is than the best peer (<1: slower), against the Python peers")
    print("with SegOps timed again in turns with them (segops_adjacent) where it was; 'cp same' = a copy of the")
    print("same bytes at the same size (the op's ceiling in this cache); 'SegOps@py' = SegOps' GB/s timed in")
    print("turns with the case's Python peers")
    opw = max([10] + [len(o) + 1 for o, _ in ops])  # inner_products, component_sum
    ow = max([4] + [len(o) + 1 for _, o in ops])  # "build" (the descriptor)
    hdr = (f"{'op':<{opw}}{'ord':<{ow}}{'ids':<9}{'N':>8} {'SegOps':>7} {'copy%':>6} {'cp same':>7}  {'best C++ peer':<26}"
           f"{'SegOps@py':>9}  {'best Python peer':<31}{'x best':>7}{'x py':>6}")
    print(hdr)
    print("-" * len(hdr))
    below = []
    shown = set()  # cases in the table (their losses are listed with it)
    for op, order in ops:
        for srt in ("sorted", "unsorted"):
            cand = [r for r in data if r["op"] == op and r["order"] == order and r["sorted"] == srt
                    and r["dtype"] == "float" and r["index_type"] == "int32" and r["M"] == r["N"] // 3]
            d3 = [r for r in cand if r["D"] == 3] or cand
            if not d3:
                continue
            with_py = [r["N"] for r in d3 if r["impl"].startswith(PY_PREFIX)]
            n = max(with_py) if with_py else max(r["N"] for r in d3 if r["N"] <= 1000000)
            at = [r for r in d3 if r["N"] == n]
            seg = next((r for r in at if r["impl"] == "segops"), None)
            cpp = max((r for r in at if not is_segops(r["impl"]) and not r["impl"].startswith(PY_PREFIX)),
                      key=lambda r: r["gbps"], default=None)
            py = max((r for r in at if r["impl"].startswith(PY_PREFIX)), key=lambda r: r["gbps"], default=None)
            sg = seg["gbps"] if seg else None
            if seg:
                shown.add(case(seg))
            cs = same.get(case(seg)) if seg else None
            xc = sg / cpp["gbps"] if seg and cpp else None
            adj = py_side(seg, at) if seg else None
            sa = adj["gbps"] if adj is not None and adj is not seg else None
            xp = adj["gbps"] / py["gbps"] if seg and py else None
            xb = min((x for x in (xc, xp) if x is not None), default=None)
            best, mine = (cpp, sg) if xb is not None and xb == xc else (py, adj["gbps"] if adj else None)
            c1 = f"{cpp['impl']} {cpp['gbps']:.2f}" if cpp else "-"
            c2 = f"{py['impl']} {py['gbps']:.2f}" if py else "-"
            print(f"{op:<{opw}}{order:<{ow}}{srt:<9}{n:>8} {fmt(sg):>7} {fmt(seg['copy_fraction'] * 100 if seg else None, 0):>6}"
                  f" {fmt(cs):>7}  {c1:<26}{fmt(sa):>9}  {c2:<31}{fmt(xb):>7}{fmt(xp):>6}")
            if seg is None:
                below.append(f"{op} {order} {srt} N={n}: no SegOps result (missing or wrong, see notes)")
            elif xb is not None and xb < 1:
                below.append(f"{op} {order} {srt} N={n}: SegOps {mine:.2f} GB/s slower than {best['impl']} {best['gbps']:.2f} GB/s")
            elif xp is not None and xp < 2:
                bound = (f"; 2x needs {2 * py['gbps']:.2f} GB/s, {2 * py['gbps'] / cs * 100:.0f}% of a copy of the same bytes"
                         if cs else "")
                below.append(f"{op} {order} {srt} N={n}: SegOps only {xp:.2f}x the best Python peer ({py['impl']}){bound}")

    # ---- every case at N >= 1e5 that has a peer (the table shows one N, D and L per op; the
    # target covers them all): count them, and list the losses the table does not show
    cases = defaultdict(list)
    for r in data:
        if r["N"] >= 100000:
            cases[case(r)].append(r)
    compared = won = py_compared = py_won = 0
    for k, rs in sorted(cases.items()):
        seg = next((r for r in rs if r["impl"] == "segops"), None)
        peers = [r for r in rs if not is_segops(r["impl"])]
        if not seg or not peers:
            continue
        compared += 1
        seg_py = py_side(seg, rs)  # SegOps timed in the Python peers' phase
        py_peers = [p for p in peers if p["impl"].startswith(PY_PREFIX)]
        if py_peers:  # the target's 2x
            py_compared += 1
            py_won += min(p["median_s"] for p in py_peers) >= 2 * seg_py["median_s"]
        def mine(p):  # each peer against the SegOps row timed in its phase
            return seg_py if p["impl"].startswith(PY_PREFIX) else seg
        bp = min(peers, key=lambda p: p["median_s"] / mine(p)["median_s"])
        sr = mine(bp)
        if bp["median_s"] >= sr["median_s"]:
            won += 1
        elif k not in shown:
            length = round(seg["N"] / max(seg["M"], 1))
            below.append(f"{seg['op']} {seg['order']} {seg['sorted']} {seg['dtype']} {seg['index_type']} N={seg['N']} L={length}"
                         f" D={seg['D']}: SegOps {sr['median_s'] * 1e3:.3f} ms slower than {bp['impl']}"
                         f" {bp['median_s'] * 1e3:.3f} ms ({sr['median_s'] / bp['median_s']:.2f}x the time)")
    if compared:
        print()
        print(f"Every case at N >= 1e5 with a peer (all N, D, L, types): SegOps faster than every peer in {won} of {compared}")
        if py_compared:
            print(f"  and at least 2x faster than the best Python peer in {py_won} of {py_compared}")

    # ---- copy-bandwidth targets at the largest N
    big = max((r["N"] for r in data), default=0)
    tgt = [r for r in data if r["N"] == big and r["sorted"] == "sorted" and r["impl"] == "segops"]
    tgt.sort(key=lambda r: (r["N"] // max(r["M"], 1), r["D"]))  # by L, then D
    if tgt:
        print()
        print(f"Copy-bandwidth targets, sorted float, N={big} (fwd >= 70%, bwd >= 60% of copy):")
        for r in tgt:
            goal = 0.7 if r["order"] == "fwd" else 0.6
            peers = [p for p in data if p["N"] == big and p["op"] == r["op"] and p["order"] == r["order"]
                     and p["D"] == r["D"] and p["M"] == r["M"] and p["sorted"] == "sorted"
                     and not is_segops(p["impl"])]
            bp = max(peers, key=lambda p: p["gbps"], default=None)
            ok = "ok" if r["copy_fraction"] >= goal else "BELOW"
            length = round(r["N"] / max(r["M"], 1))
            paired = r["gbps"] / r["copy_fraction"] if r["copy_fraction"] > 0 else 0.0
            print(f"  {r['op']:<10}{r['order']:<4} L={length:<5} D={r['D']}  {r['gbps']:6.2f} GB/s  {r['copy_fraction'] * 100:5.1f}% of copy {paired:5.2f}"
                  f"  [{ok}]" + (f"  best peer {bp['impl']} {bp['gbps']:.2f} GB/s" if bp else ""))
            if ok != "ok":
                below.append(f"{r['op']} {r['order']} sorted N={big} L={length} D={r['D']}: {r['copy_fraction'] * 100:.0f}% of copy (< {goal * 100:.0f}%)")

    # ---- deterministic vs default
    det = [r for r in data if r["impl"] == "segops_det"]
    if det:
        print()
        print("Deterministic option vs default, unsorted ids (target at N = 2^25: at most 2x the time; smaller N"
              " held to the same bound):")
        for r in det:
            base = segops_row.get(case(r))
            if base:
                ratio = r["median_s"] / base["median_s"]
                print(f"  {r['op']:<{opw}}{r['order']:<{ow}} N={r['N']} D={r['D']}  default {base['median_s'] * 1e3:8.3f} ms"
                      f"  deterministic {r['median_s'] * 1e3:8.3f} ms  ratio {ratio:.2f}" + ("" if ratio <= 2 else "  [ABOVE 2x]"))
                if ratio > 2:
                    below.append(f"{r['op']} {r['order']} N={r['N']} D={r['D']}: deterministic {ratio:.2f}x the default")

    # ---- with an arg: max, min and max_norm forwards as a training step calls them (the backward
    # orders take the arg); no peer returns one, so no target, but the cost is shown
    with_arg = [r for r in data if r["impl"] == "segops_arg" and r["D"] == 3 and r["M"] == r["N"] // 3
                and r["N"] >= 1000000]
    if with_arg:
        print()
        print("With an arg (the forward a training step calls; no peer returns one), float, D=3, L=3:")
        for r in with_arg:
            base = segops_row.get(case(r))
            if base:
                print(f"  {r['op']:<{opw}}{r['order']:<{ow}}{r['sorted']:<9} N={r['N']}  without {base['median_s'] * 1e3:8.3f} ms"
                      f"  with arg {r['median_s'] * 1e3:8.3f} ms  ratio {r['median_s'] / base['median_s']:.2f}")

    # ---- notes
    lines = []
    for p in args.notes:
        if os.path.exists(p):
            lines += [l.rstrip() for l in open(p) if l.strip()]
    print()
    for l in lines:
        if l.startswith(("build:", "peer:", "overhead:", "copy:")):
            print(l)
    issues = [l for l in lines if l.startswith(("missing:", "wrong:", "failed:", "skipped:"))]
    if issues:
        print()
        print("Missing / wrong / failed (never timed):")
        for l in issues:
            print("  " + l)
    if below:
        print()
        print("Where SegOps misses a target or a peer wins:")
        for l in below:
            print("  " + l)

    # ---- plots
    if args.plots:
        # the rows of each family's plot (chosen before matplotlib is needed, so that the test of
        # this script without it still runs this part)
        series = {}
        for fam in dict.fromkeys(r["op"] for r in data):
            fr = [r for r in data + same_rows if r["op"] == fam and r["dtype"] == "float" and r["index_type"] == "int32"
                  and r["M"] == r["N"] // 3 and r["N"] >= 100000]
            d = 3 if any(r["D"] == 3 for r in fr) else 1
            fr = [r for r in fr if r["D"] == d]
            orders = [o for o in ORDERS if any(r["order"] == o for r in fr)]
            if orders:
                series[fam] = (fr, d, orders)
        try:
            import matplotlib
            matplotlib.use("Agg")
            import matplotlib.pyplot  # noqa: F401 -- imported once, before the workers fork
        except Exception as e:  # noqa: BLE001
            print(f"missing: plots (matplotlib: {e})")
            return
        os.makedirs(args.plots, exist_ok=True)
        jobs = [(fam, fr, d, orders, copy_ref, os.path.join(args.plots, f"{fam}.png"))
                for fam, (fr, d, orders) in series.items()]
        # one process per core: drawing is most of this script's time (15 s for 17 families on one
        # core of the 2-vCPU VM)
        workers = min(len(jobs), os.cpu_count() or 1)
        if workers > 1:
            with multiprocessing.get_context("fork").Pool(workers) as pool:
                pool.map(plot_family, jobs)
        else:
            for job in jobs:
                plot_family(job)
        print(f"\nplots: {args.plots}/<family>.png")


if __name__ == "__main__":
    main()
