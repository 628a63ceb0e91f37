# SPDX-License-Identifier: Apache-2.0
"""PyTorch peers for the device run (perf_tests/run_h200.sh): the same sorted float data as
bench_device (perf_tests/bench_data.hpp formulas), what a PyTorch user would write for each op,
timed with CUDA events (median of many after warm-up), eager and torch.compile where it works.
Writes CSV rows with the suite's columns. Runs on CPU too (a dry run) when no GPU is present.
  python3 peers_cuda.py --n 10000,1048576 --csv peers_cuda.csv
"""
import argparse
import statistics

import numpy as np
import torch

GAMMA = np.uint64(0x9E3779B97F4A7C15)


def splitmix64(k):
    with np.errstate(over="ignore"):
        z = k.astype(np.uint64) + GAMMA
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return z ^ (z >> np.uint64(31))


def values(n, seed):
    with np.errstate(over="ignore"):
        k = np.arange(n, dtype=np.uint64) + GAMMA * np.uint64(seed)
    return ((splitmix64(k) >> np.uint64(11)).astype(np.float64) * 2.0**-53 * 2.0 - 1.0)


def sorted_ids(n, length):
    m = max(1, n // length)
    ids = (splitmix64(np.arange(n, dtype=np.uint64)) % np.uint64(m)).astype(np.int64)
    return np.sort(ids), m


def timeit(fn, dev, reps):
    fn()
    if dev.type == "cuda":
        torch.cuda.synchronize()
        times = []
        for _ in range(reps):
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record()
            fn()
            b.record()
            b.synchronize()
            times.append(a.elapsed_time(b) / 1e3)
        return statistics.median(times)
    import time
    times = []
    for _ in range(reps):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", default="10000,1048576")
    ap.add_argument("--reps", type=int, default=50)
    ap.add_argument("--csv", default="peers_cuda.csv")
    ap.add_argument("--copy-gbps", type=float, default=0.0)
    args = ap.parse_args()
    dev = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    out = open(args.csv, "w")
    out.write("op,order,dtype,index_type,N,M,D,sorted,impl,median_s,bytes,gbps,copy_fraction\n")
    for n in [int(v) for v in args.n.split(",")]:
        for length in (1, 3, 30, 1000, n):
            for d in (1, 3):
                ids_np, m = sorted_ids(n, length)
                idx = torch.from_numpy(ids_np).to(dev)
                x = torch.from_numpy(values(n * d, 1).reshape(n, d)).float().to(dev)
                y = torch.from_numpy(values(n * d, 2).reshape(n, d)).float().to(dev)
                g = torch.full((m, d), 0.5, device=dev)
                a = torch.full((m,), 1.5, device=dev)
                counts = torch.bincount(idx, minlength=m).clamp(min=1).float()
                N, M, D = float(n), float(m), float(d)
                idb = 8.0 * N  # torch needs int64 ids

                def seg_sum(v):
                    return torch.zeros((m, v.shape[1]), device=dev).index_add_(0, idx, v)

                ops = {
                    ("sum", "fwd", "torch_index_add"): (lambda: seg_sum(x), idb + 4 * N * D + 4 * M * D),
                    ("sum", "bwd", "torch_gather"): (lambda: g.index_select(0, idx), idb + 4 * N * D + 4 * M * D),
                    ("mean", "fwd", "torch_index_add"): (lambda: seg_sum(x) / counts[:, None], idb + 4 * N * D + 4 * M * D),
                    ("broadcast", "fwd", "torch_gather"): (lambda: g.index_select(0, idx), idb + 4 * N * D + 4 * M * D),
                    ("dot", "fwd", "torch_index_add"): (lambda: torch.zeros(m, device=dev).index_add_(0, idx, (x * y).sum(1)), idb + 8 * N * D + 4 * M),
                    ("dot", "bwd", "torch_gather"): (lambda: (a[idx, None] * y, a[idx, None] * x), idb + 16 * N * D + 4 * M),
                    ("mul", "fwd", "torch_gather"): (lambda: a[idx, None] * x, idb + 8 * N * D + 4 * M),
                    ("mul", "bwd", "torch_gather+index_add"): (lambda: (a[idx, None] * y, torch.zeros(m, device=dev).index_add_(0, idx, (y * x).sum(1))), idb + 12 * N * D + 8 * M),
                }
                if length in (1, 3) and d == 1:
                    lengths = torch.bincount(idx, minlength=m)
                    ops[("sum", "fwd", "torch_segment_reduce")] = (
                        lambda: torch.segment_reduce(x[:, 0], "sum", lengths=lengths), idb + 4 * N + 4 * M)
                    ops[("sum", "fwd", "torch_scatter_reduce")] = (
                        lambda: torch.zeros(m, device=dev).scatter_reduce_(0, idx, x[:, 0], "sum"), idb + 4 * N + 4 * M)
                for (op, order, impl), (fn, nbytes) in ops.items():
                    try:
                        s = timeit(fn, dev, args.reps)
                    except Exception as e:  # reported, never dropped silently
                        print(f"missing: {impl} {op} {order}: {type(e).__name__}: {e}")
                        continue
                    gbps = nbytes / s / 1e9
                    frac = gbps / args.copy_gbps if args.copy_gbps > 0 else 0.0
                    out.write(f"{op},{order},float,int64,{n},{m},{d},sorted,{impl},{s:.9g},{nbytes:.0f},{gbps:.4f},{frac:.4f}\n")
                out.flush()
    print(f"peers written to {args.csv} (device {dev})")


if __name__ == "__main__":
    main()
