#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Python peers of the SegOps benchmark: PyTorch (CPU), JAX (CPU, jitted) and NVIDIA ALCHEMI
Toolkit-Ops (nvalchemiops, on NVIDIA Warp's CPU device), on the same data as bench_segops.

It reads the C++ CSV to learn the cases (and the copy bandwidth), rebuilds the exact same arrays
with numpy (splitmix64, see make_ids/values and perf_tests/bench_data.hpp), verifies every peer
against a float64 numpy reference, times the verified ones and writes rows with the same columns.
A peer that cannot be imported or fails is written to the notes file as "missing: ..." or
"failed: ...", never silently dropped.
"""
from __future__ import annotations

import argparse
import csv
import os
import sys
import time
import traceback

import numpy as np

# ----------------------------------------------------------------------------- data (same as C++)

GAMMA = 0x9E3779B97F4A7C15
MASK = (1 << 64) - 1


def splitmix64(k: np.ndarray) -> np.ndarray:
    """Standard splitmix64 of each uint64 k: z = k + gamma, two xor-shift-multiply rounds."""
    with np.errstate(over="ignore"):
        z = k + np.uint64(GAMMA)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return z ^ (z >> np.uint64(31))


def values(count: int, seed: int, dtype) -> np.ndarray:
    """x_i = ((splitmix64(i + gamma*seed) >> 11) * 2^-53) * 2 - 1 in float64, rounded to dtype."""
    with np.errstate(over="ignore"):
        k = np.arange(count, dtype=np.uint64) + np.uint64((GAMMA * seed) & MASK)
    h = splitmix64(k)
    return ((h >> np.uint64(11)).astype(np.float64) * 2.0**-53 * 2.0 - 1.0).astype(dtype)


def make_ids(n: int, m: int, skew: bool, sorted_: bool) -> np.ndarray:
    """Uniform: id_i = splitmix64(i) % M. Skew (M = max(4, N/3)): with h = splitmix64(i), if
    h % 8 < 4 then id_i = [0, M/4, M/2, 3M/4][(h >> 3) % 4], else id_i = (h >> 5) % M.
    Sorted: the same multiset in ascending order."""
    h = splitmix64(np.arange(n, dtype=np.uint64))
    um = np.uint64(m)
    if skew:
        giant = np.array([0, m // 4, m // 2, 3 * m // 4], dtype=np.uint64)
        ids = np.where(h % np.uint64(8) < np.uint64(4), giant[(h >> np.uint64(3)) % np.uint64(4)],
                       (h >> np.uint64(5)) % um)
    else:
        ids = h % um
    ids = ids.astype(np.int64)
    return np.sort(ids) if sorted_ else ids


# ----------------------------------------------------------------------------- one case


class Case:
    def __init__(self, key, bytes_):
        (self.op, self.order, self.dtype_name, self.itype, n, m, d, self.label) = key
        self.n, self.m, self.d = int(n), int(m), int(d)
        self.bytes = float(bytes_)
        self.dtype = np.float32 if self.dtype_name == "float" else np.float64
        self.sorted = not self.label.endswith("unsorted")
        self.skew = self.label.startswith("skew")
        ids = make_ids(self.n, self.m, self.skew, self.sorted)
        self.ids = ids.astype(np.int32 if self.itype == "int32" else np.int64)
        self.cnt = np.bincount(ids, minlength=self.m)

    def elem(self, seed, w):
        return values(self.n * w, seed, self.dtype).reshape(self.n, w)

    def segv(self, seed, w):
        return values(self.m * w, seed, self.dtype).reshape(self.m, w)

    def key(self):
        return (self.op, self.order, self.dtype_name, self.itype, str(self.n), str(self.m), str(self.d),
                self.label)


def segsum(ids, m, v):
    """float64 per-segment sums of the rows of v (N, w) -> (M, w)."""
    v = np.asarray(v, dtype=np.float64).reshape(len(ids), -1)
    return np.stack([np.bincount(ids, weights=v[:, k], minlength=m) for k in range(v.shape[1])], 1)


def inputs_and_reference(c: Case):
    """Inputs (named numpy arrays, as the C++ suite builds them) and [(value, magnitude)] per output.
    A result passes when |got - value| <= tol * magnitude (the magnitude is the sum of |terms|)."""
    op, order, D, ids, m = c.op, c.order, c.d, c.ids, c.m
    cnt = c.cnt.astype(np.float64)
    inv = np.where(c.cnt > 0, 1.0 / np.maximum(cnt, 1), 0.0)
    f = lambda a: np.asarray(a, dtype=np.float64)
    if op in ("sum", "mean", "broadcast"):
        reduce = (op != "broadcast") == (order != "bwd")
        if reduce:
            seed = {"fwd": 1, "bwd": 3, "dbl": 4}[order]
            x = c.elem(seed, D)
            val, mag = segsum(ids, m, x), segsum(ids, m, np.abs(f(x)))
            if op == "mean":
                val, mag = val * inv[:, None], mag * inv[:, None]
            return {"x": x}, [(val, mag)]
        seed = {"fwd": 2, "bwd": 3, "dbl": 4}[order]
        v = c.segv(seed, D)
        val = f(v)[ids] / (cnt[ids][:, None] if op == "mean" else 1.0)
        return {"v": v}, [(val, np.abs(val))]
    if op == "dot":
        x, y = c.elem(1, D), c.elem(2, D)
        if order == "fwd":
            t = f(x) * f(y)
            return {"x": x, "y": y}, [(segsum(ids, m, t.sum(1)), segsum(ids, m, np.abs(t).sum(1)))]
        g = c.segv(3, 1)
        gs = f(g)[ids]
        if order == "bwd":
            return {"x": x, "y": y, "g": g}, [(gs * f(y), np.abs(gs * f(y))), (gs * f(x), np.abs(gs * f(x)))]
        u, v = c.elem(4, D), c.elem(5, D)
        a, b = f(u) * f(y), f(v) * f(x)
        return {"x": x, "y": y, "g": g, "u": u, "v": v}, [
            (segsum(ids, m, (a + b).sum(1)), segsum(ids, m, (np.abs(a) + np.abs(b)).sum(1))),
            (gs * f(v), np.abs(gs * f(v))), (gs * f(u), np.abs(gs * f(u)))]
    if op == "mul":
        a, x = c.segv(2, 1), c.elem(1, D)
        as_ = f(a)[ids]
        if order == "fwd":
            return {"a": a, "x": x}, [(as_ * f(x), np.abs(as_ * f(x)))]
        g = c.elem(3, D)
        if order == "bwd":
            t = f(g) * f(x)
            return {"a": a, "x": x, "g": g}, [(as_ * f(g), np.abs(as_ * f(g))),
                                              (segsum(ids, m, t.sum(1)), segsum(ids, m, np.abs(t).sum(1)))]
        u, w = c.elem(4, D), c.segv(5, 1)
        ws = f(w)[ids]
        t = f(u) * f(g)
        return {"a": a, "x": x, "g": g, "u": u, "w": w}, [
            (as_ * f(u) + ws * f(x), np.abs(as_ * f(u)) + np.abs(ws * f(x))), (ws * f(g), np.abs(ws * f(g))),
            (segsum(ids, m, t.sum(1)), segsum(ids, m, np.abs(t).sum(1)))]
    if op == "rms_norm":
        x = c.elem(1, D)
        sq = segsum(ids, m, (f(x) ** 2).sum(1))[:, 0]
        o = np.sqrt(sq * inv)
        if order == "fwd":
            return {"x": x}, [(o[:, None], o[:, None])]
        ot = o.astype(c.dtype)
        nrm = np.where(ot != 0, 1.0 / (cnt * f(ot) + (ot == 0)), 0.0)
        g = c.segv(3, 1)
        gs = f(g)[:, 0]
        if order == "bwd":
            val = (gs * nrm)[ids][:, None] * f(x)
            return {"x": x, "out": ot[:, None], "g": g}, [(val, np.abs(val))]
        u = c.elem(4, D)
        ux = segsum(ids, m, (f(u) * f(x)).sum(1))[:, 0]
        uxa = segsum(ids, m, np.abs(f(u) * f(x)).sum(1))[:, 0]
        gn = gs * nrm
        gn3c = gn * nrm * nrm * cnt
        xq = gn[ids][:, None] * f(u) - (gn3c * ux)[ids][:, None] * f(x)
        xm = np.abs(gn[ids][:, None] * f(u)) + np.abs(gn3c[ids][:, None] * f(x)) * uxa[ids][:, None]
        return {"x": x, "out": ot[:, None], "g": g, "u": u}, [((nrm * ux)[:, None], (nrm * uxa)[:, None]),
                                                              (xq, xm)]
    if op == "matvec":
        A, x = c.segv(2, D * D).reshape(m, D, D), c.elem(1, D)
        As = f(A)[ids]
        if order == "fwd":
            t = As * f(x)[:, None, :]
            return {"A": A, "x": x}, [(t.sum(2), np.abs(t).sum(2))]
        g = c.elem(3, D)
        if order == "bwd":
            t = As * f(g)[:, :, None]
            outer = f(g)[:, :, None] * f(x)[:, None, :]
            return {"A": A, "x": x, "g": g}, [(t.sum(1), np.abs(t).sum(1)),
                                              (segsum(ids, m, outer.reshape(c.n, -1)), segsum(ids, m, np.abs(outer).reshape(c.n, -1)))]
        u, W = c.elem(4, D), c.segv(5, D * D).reshape(m, D, D)
        Ws = f(W)[ids]
        t1, t2 = As * f(u)[:, None, :], Ws * f(x)[:, None, :]
        t3 = Ws * f(g)[:, :, None]
        outer = f(g)[:, :, None] * f(u)[:, None, :]
        return {"A": A, "x": x, "g": g, "u": u, "W": W}, [
            ((t1 + t2).sum(2), (np.abs(t1) + np.abs(t2)).sum(2)), (t3.sum(1), np.abs(t3).sum(1)),
            (segsum(ids, m, outer.reshape(c.n, -1)), segsum(ids, m, np.abs(outer).reshape(c.n, -1)))]
    raise KeyError(op)


def check(outs, refs, tol):
    worst = 0.0
    if len(outs) != len(refs):
        return float("inf")
    for got, (val, mag) in zip(outs, refs):
        got = np.asarray(got, dtype=np.float64).reshape(val.shape)
        err = np.abs(got - val) / (mag + 1e-300)
        e = float(np.max(err)) if err.size else 0.0
        if not np.isfinite(e) or np.isnan(got).any():
            return float("inf")
        worst = max(worst, e)
    return worst


def time_median(call, sync, min_time, min_runs):
    sync(call())
    t0 = time.perf_counter()
    sync(call())
    one = time.perf_counter() - t0
    batch = int(min(max(20e-6 / max(one, 1e-9), 1), 1000))
    samples, total = [], 0.0
    while len(samples) < min_runs or total < min_time:
        a = time.perf_counter()
        for _ in range(batch):
            sync(call())
        dt = time.perf_counter() - a
        samples.append(dt / batch)
        total += dt
    samples.sort()
    return samples[len(samples) // 2]


# ----------------------------------------------------------------------------- the peers
# Each peer: name -> setup(case, inputs) returning (call, to_numpy) or None when it has no such op.
# Forward ops are written as a user of that library would; backward and double backward through
# the library's autodiff (torch.autograd.grad, jax.vjp) of the forward expression.

# Differentiable inputs of each op's first backward, in the order of the reference outputs, and the
# cotangents the double backward receives (one per first-backward output).
BWD_WRT = {"sum": ["x"], "mean": ["x"], "broadcast": ["v"], "dot": ["x", "y"], "mul": ["x", "a"],
           "rms_norm": ["x"], "matvec": ["x", "A"]}
DBL_COT = {"sum": ["u"], "mean": ["u"], "broadcast": ["u"], "dot": ["u", "v"], "mul": ["u", "w"],
           "rms_norm": ["u"], "matvec": ["u", "W"]}
# Outputs of the double backward in reference order: adjoint of g first, then of the inputs.
DBL_OUT = {"sum": ["g"], "mean": ["g"], "broadcast": ["g"], "dot": ["g", "x", "y"], "mul": ["g", "x", "a"],
           "rms_norm": ["g", "x"], "matvec": ["g", "x", "A"]}


def fwd_inputs(op):
    return {"sum": ["x"], "mean": ["x"], "broadcast": ["v"], "dot": ["x", "y"], "mul": ["a", "x"],
            "rms_norm": ["x"], "matvec": ["A", "x"]}[op]


class TorchPeer:
    name = "torch"

    def __init__(self, threads):
        import torch
        torch.set_num_threads(threads)
        self.torch = torch
        self.version = torch.__version__

    def impls(self, c, ins):
        torch = self.torch
        t = {k: torch.from_numpy(np.ascontiguousarray(v)) for k, v in ins.items()}
        idx = torch.from_numpy(c.ids.astype(np.int64))  # index_add_/index_select take int64 (int32 on newer torch)
        m, dt = c.m, t[next(iter(t))].dtype
        cntf = torch.from_numpy(np.maximum(c.cnt, 1).astype(c.dtype))
        lengths = torch.from_numpy(c.cnt.astype(np.int64))
        op, order = c.op, c.order
        res = {}

        def segsum(v):  # differentiable (out-of-place index_add)
            return torch.zeros((m,) + tuple(v.shape[1:]), dtype=dt).index_add(0, idx, v)

        def forward(op, a):
            if op == "sum":
                return segsum(a["x"])
            if op == "mean":
                return segsum(a["x"]) / cntf[:, None]
            if op == "broadcast":
                return a["v"].index_select(0, idx)
            if op == "dot":
                return segsum((a["x"] * a["y"]).sum(1))[:, None]
            if op == "mul":
                return a["a"].index_select(0, idx) * a["x"]
            if op == "rms_norm":  # the double-where keeps gradients finite for empty segments
                ms = segsum((a["x"] * a["x"]).sum(1)) / cntf
                pos = ms > 0
                return torch.where(pos, torch.where(pos, ms, torch.ones_like(ms)).sqrt(),
                                   torch.zeros_like(ms))[:, None]
            if op == "matvec":
                return torch.bmm(a["A"].index_select(0, idx), a["x"].unsqueeze(2)).squeeze(2)
            raise KeyError(op)

        if order == "fwd":
            res["torch_index_add" if op not in ("broadcast", "mul", "matvec") else "torch_index_select"] = \
                lambda: (forward(op, t),)
            if op in ("sum", "mean"):
                idxd = idx[:, None].expand(c.n, c.d)
                red = "sum" if op == "sum" else "mean"
                res["torch_scatter_reduce"] = lambda: (torch.zeros(m, c.d, dtype=dt).scatter_reduce_(
                    0, idxd, t["x"], red, include_self=False),)
                if c.sorted:
                    res["torch_segment_reduce"] = lambda: (torch.segment_reduce(
                        t["x"], red, lengths=lengths, unsafe=True, initial=0),)
            return res
        # Backward and double backward: autograd on the forward expression, graph built once.
        fw = {k: v.clone().requires_grad_(k in BWD_WRT[op]) for k, v in self._fwd_tensors(c, ins).items()}
        out = forward(op, fw)
        wrt = [fw[k] for k in BWD_WRT[op]]
        g = self._g(c, ins)
        if order == "bwd":
            res["torch_autograd"] = lambda: torch.autograd.grad(out, wrt, g, retain_graph=True)
            return res
        g = g.clone().requires_grad_(True)
        first = torch.autograd.grad(out, wrt, g, create_graph=True)
        cot = [torch.from_numpy(np.ascontiguousarray(ins[k])).reshape(f.shape) for k, f in zip(DBL_COT[op], first)]
        targets = [g] + [fw[k] for k in DBL_OUT[op][1:]]
        res["torch_autograd"] = lambda: torch.autograd.grad(first, targets, cot, retain_graph=True,
                                                            allow_unused=True)
        return res

    def _fwd_tensors(self, c, ins):
        return {k: self.torch.from_numpy(np.ascontiguousarray(v)) for k, v in fwd_arrays(c, ins).items()}

    def _g(self, c, ins):
        return self.torch.from_numpy(np.ascontiguousarray(upstream(c, ins)))

    def sync(self, r):
        return r

    def to_numpy(self, r):
        return [x.detach().numpy() for x in r if x is not None]


def fwd_arrays(c, ins):
    """The forward operands of the case's op (rebuilt with the suite's streams when the case is a
    backward of a linear op, whose reference inputs are named differently)."""
    op = c.op
    if op in ("sum", "mean"):
        return {"x": ins["x"] if "x" in ins else c.elem(1, c.d)}
    if op == "broadcast":
        return {"v": ins["v"] if "v" in ins else c.segv(2, c.d)}
    return {k: ins[k] for k in fwd_inputs(op)}


def upstream(c, ins):
    """The upstream gradient g of the case (shape of the forward output)."""
    op = c.op
    if op in ("sum", "mean"):
        return ins["v"] if c.order == "bwd" else c.segv(3, c.d)
    if op == "broadcast":
        return ins["x"] if c.order == "bwd" else c.elem(3, c.d)
    return ins["g"]


def dbl_inputs(c, ins):
    """Cotangents of the first backward's outputs for the linear ops (stream 4, as in C++)."""
    if c.op in ("sum", "mean"):
        return {"u": ins["x"]}
    if c.op == "broadcast":
        return {"u": ins["v"]}
    return {k: ins[k] for k in DBL_COT[c.op]}


class JaxPeer:
    name = "jax"

    def __init__(self, threads):
        import jax
        jax.config.update("jax_enable_x64", True)
        jax.config.update("jax_platforms", "cpu")
        import jax.numpy as jnp
        self.jax, self.jnp = jax, jnp
        self.version = jax.__version__

    def impls(self, c, ins):
        jax, jnp = self.jax, self.jnp
        idx = jnp.asarray(c.ids)
        m, op, order, srt = c.m, c.op, c.order, c.sorted
        cntf = jnp.asarray(np.maximum(c.cnt, 1).astype(c.dtype))

        def segsum(v):
            return jax.ops.segment_sum(v, idx, num_segments=m, indices_are_sorted=srt)

        def forward(op, a):
            if op == "sum":
                return segsum(a["x"])
            if op == "mean":
                return segsum(a["x"]) / cntf[:, None]
            if op == "broadcast":
                return jnp.take(a["v"], idx, axis=0)
            if op == "dot":
                return segsum((a["x"] * a["y"]).sum(1))[:, None]
            if op == "mul":
                return jnp.take(a["a"], idx, axis=0) * a["x"]
            if op == "rms_norm":  # the double-where keeps gradients finite for empty segments
                ms = segsum((a["x"] * a["x"]).sum(1)) / cntf
                pos = ms > 0
                return jnp.where(pos, jnp.sqrt(jnp.where(pos, ms, 1.0)), 0.0)[:, None]
            if op == "matvec":
                return jnp.einsum("nrc,nc->nr", jnp.take(a["A"], idx, axis=0), a["x"])
            raise KeyError(op)

        fa = {k: jnp.asarray(v) for k, v in fwd_arrays(c, ins).items()}
        names = list(fa)
        wrt = BWD_WRT[op]
        name = "jax_segment_sum" if op not in ("broadcast", "mul", "matvec") else "jax_take"
        if order == "fwd":
            f = jax.jit(lambda *a: (forward(op, dict(zip(names, a))),))
            return {name: lambda: f(*[fa[k] for k in names])}

        def bwd(g, *a):
            d = dict(zip(names, a))
            def fun(*w):
                return forward(op, {**d, **dict(zip(wrt, w))})
            _, vjp = jax.vjp(fun, *[d[k] for k in wrt])
            return vjp(g)

        g = jnp.asarray(upstream(c, ins))
        if order == "bwd":
            f = jax.jit(lambda g, *a: tuple(bwd(g, *a)))
            return {"jax_vjp": lambda: f(g, *[fa[k] for k in names])}
        cot = dbl_inputs(c, ins)
        cots = [jnp.asarray(cot[k]) for k in DBL_COT[op]]
        tgt = DBL_OUT[op][1:]

        def dbl(g, cots, *a):
            d = dict(zip(names, a))
            def fun(g_, *t):
                dd = {**d, **dict(zip(tgt, t))}
                return tuple(bwd(g_, *[dd[k] for k in names]))
            _, vjp = jax.vjp(fun, g, *[d[k] for k in tgt])
            first = fun(g, *[d[k] for k in tgt])
            return vjp(tuple(cc.reshape(ff.shape) for cc, ff in zip(cots, first)))

        f = jax.jit(lambda g, cots, *a: tuple(dbl(g, cots, *a)))
        return {"jax_vjp": lambda: f(g, cots, *[fa[k] for k in names])}

    def sync(self, r):
        for x in r:
            x.block_until_ready()
        return r

    def to_numpy(self, r):
        return [np.asarray(x) for x in r]


class AlchemiPeer:
    """nvalchemiops segment ops on Warp's CPU device. Its reductions require sorted int32 ids;
    element types are scalars (D = 1) or vec3 (D = 3); rms_norm and matvec are vec3 only."""
    name = "nvalchemiops"

    def __init__(self, threads, cache):
        import warp as wp
        wp.config.kernel_cache_dir = os.path.join(cache, "warp-kernels")
        wp.config.quiet = True
        import nvalchemiops
        from nvalchemiops import segment_ops as so
        from nvalchemiops import segment_ops_backward as sob
        self.wp, self.so, self.sob = wp, so, sob
        self.version = f"{nvalchemiops.__version__} (warp {wp.__version__})"

    def impls(self, c, ins):
        wp, so, sob = self.wp, self.so, self.sob
        op, order, D, m = c.op, c.order, c.d, c.m
        if c.itype != "int32" or D not in (1, 3) or order == "dbl" and op != "mul":
            return {}
        if op in ("rms_norm", "matvec") and D != 3:
            return {}
        reduces = {("sum", "fwd"), ("mean", "fwd"), ("broadcast", "bwd"), ("dot", "fwd"), ("mul", "bwd"),
                   ("mul", "dbl"), ("rms_norm", "fwd"), ("matvec", "bwd")}
        if (op, order) in reduces and not c.sorted:
            return {}
        f32 = c.dtype == np.float32
        sc = wp.float32 if f32 else wp.float64
        vec = (wp.vec3f if f32 else wp.vec3d) if D == 3 else sc
        mat = wp.mat33f if f32 else wp.mat33d
        dev = "cpu"
        idx = wp.array(c.ids, dtype=wp.int32, device=dev)
        cnt = wp.array(c.cnt.astype(np.int32), dtype=wp.int32, device=dev)

        def E(a):  # element (N, D) or per-segment (M, D) rows
            a = np.ascontiguousarray(a)
            return wp.array(a.reshape(a.shape[0], 3) if D == 3 else a.reshape(-1), dtype=vec, device=dev)

        def S(a):  # per-segment scalars
            return wp.array(np.ascontiguousarray(a).reshape(-1), dtype=sc, device=dev)

        def out_e(n):
            return wp.empty(n, dtype=vec, device=dev)

        def out_s(n):
            return wp.empty(n, dtype=sc, device=dev)

        name = "alchemi_" + op
        if op in ("sum", "mean", "broadcast"):
            red = (op != "broadcast") == (order != "bwd")
            if order == "dbl":
                return {}
            if red:
                x = E(ins["x"])
                o = out_e(m)
                if op == "sum":
                    return {name: lambda: (so.segmented_sum(x, idx, o), o)[1:]}
                if op == "mean":
                    sums, cs = out_e(m), wp.empty(m, dtype=wp.int32, device=dev)
                    return {name: lambda: (so.segmented_mean(x, idx, sums, cs, o), o)[1:]}
                return {name: lambda: (sob.segmented_broadcast_backward(x, idx, m, o), o)[1:]}
            v = E(ins["v"])
            o = out_e(c.n)
            if op == "sum":
                return {name: lambda: (sob.segmented_sum_backward(v, idx, o), o)[1:]}
            if op == "mean":
                return {name: lambda: (sob.segmented_mean_backward(v, cnt, idx, o), o)[1:]}
            return {name: lambda: (so.segmented_broadcast(v, idx, o), o)[1:]}
        if op == "dot":
            x, y = E(ins["x"]), E(ins["y"])
            if order == "fwd":
                o = out_s(m)
                return {name: lambda: (so.segmented_dot(x, y, idx, o), o)[1:]}
            if order == "bwd":
                g, gx, gy = S(ins["g"]), out_e(c.n), out_e(c.n)
                return {name: lambda: (sob.segmented_dot_backward(g, x, y, idx, gx, gy), gx, gy)[1:]}
            return {}
        if op == "mul":
            a, x = S(ins["a"]), E(ins["x"])
            if order == "fwd":
                o = out_e(c.n)
                return {name: lambda: (so.segmented_mul(x, a, idx, o), o)[1:]}
            g = E(ins["g"])
            if order == "bwd":
                gx, ga = out_e(c.n), out_s(m)
                return {name: lambda: (sob.segmented_mul_backward(g, x, a, idx, m, gx, ga), gx, ga)[1:]}
            u, w = E(ins["u"]), S(ins["w"])
            gg, xq, aq = out_e(c.n), out_e(c.n), out_s(m)
            return {name: lambda: (sob.segmented_mul_double_backward(u, w, g, x, a, idx, gg, xq, aq), gg, xq, aq)[1:]}
        if op == "rms_norm":
            x = E(ins["x"])
            sq, cs, o = out_s(m), wp.empty(m, dtype=wp.int32, device=dev), out_s(m)
            if order == "fwd":
                return {name: lambda: (so.segmented_rms_norm(x, idx, sq, cs, o), o)[1:]}
            if order == "bwd":
                inv = out_s(m)
                sob.segmented_rms_norm_forward_precompute(x, idx, sq, cs, o, inv)  # saved state, untimed
                g, gx = S(ins["g"]), out_e(c.n)
                return {name: lambda: (sob.segmented_rms_norm_backward(g, x, inv, idx, gx), gx)[1:]}
            return {}
        if op == "matvec":
            # nvalchemiops computes M_s^T v: pass A_s^T to get A_s x.
            At = wp.array(np.ascontiguousarray(np.transpose(ins["A"], (0, 2, 1))), dtype=mat, device=dev)
            x = E(ins["x"])
            if order == "fwd":
                o = out_e(c.n)
                return {name: lambda: (so.segmented_matvec(x, At, idx, o), o)[1:]}
            if order == "bwd":
                g, gx, gAt = E(ins["g"]), out_e(c.n), wp.empty(m, dtype=mat, device=dev)
                # grad of A^T is (grad of A)^T: transposed back in to_numpy (untimed).
                return {name: lambda: (sob.segmented_matvec_backward(g, x, At, idx, gx, gAt), gx, ("T", gAt))[1:]}
        return {}

    def sync(self, r):
        return r

    def to_numpy(self, r):
        out = []
        for a in r:
            if isinstance(a, tuple) and a[0] == "T":
                out.append(np.transpose(a[1].numpy(), (0, 2, 1)))
            else:
                out.append(a.numpy())
        return out


# ----------------------------------------------------------------------------- driver


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--cpp-csv", required=True, help="bench_segops output (cases and copy bandwidth)")
    ap.add_argument("--csv", required=True, help="rows written here (same columns)")
    ap.add_argument("--notes", required=True)
    ap.add_argument("--min-time", type=float, default=0.2)
    ap.add_argument("--min-runs", type=int, default=5)
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--full", action="store_true", help="run every case of the C++ CSV")
    ap.add_argument("--cache", default=os.environ.get("SEGOPS_CACHE", os.path.expanduser("~/.cache/segops")))
    args = ap.parse_args()

    notes = open(args.notes, "w")

    def note(line):
        print("  " + line, file=sys.stderr, flush=True)
        notes.write(line + "\n")
        notes.flush()

    rows = list(csv.DictReader(open(args.cpp_csv)))
    copy_gbps = max([float(r["gbps"]) for r in rows if r["op"] == "copy"] or [0.0])
    cols = ["op", "order", "dtype", "index_type", "N", "M", "D", "sorted"]
    cases, with_peers = {}, set()
    for r in rows:
        if r["op"] == "copy" or int(r["N"]) < 100000:
            continue
        k = tuple(r[c] for c in cols)
        cases.setdefault(k, r["bytes"])
        if r["impl"] == "serial":
            with_peers.add(k)
    # Quick: D = 3, L = 3 at N = 1e5 and 1e6 (the 5-minute budget); the 2^25 cases are there for the
    # copy-bandwidth targets (a single torch 1.13 index_add_ call takes seconds there).
    def quick(k):
        n, m, d = int(k[4]), int(k[5]), int(k[6])
        return d == 3 and n <= 1000000 and m == n // 3
    sel = [k for k in cases if k in with_peers and (args.full or quick(k))]

    peers = []
    factories = [("torch", lambda: TorchPeer(args.threads)), ("jax", lambda: JaxPeer(args.threads)),
                 ("nvalchemiops", lambda: AlchemiPeer(args.threads, args.cache))]
    for pname, make in factories:
        try:
            p = make()
        except Exception as e:  # noqa: BLE001 -- any import failure makes the peer missing
            note(f"missing: {pname} ({type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''})")
            continue
        peers.append(p)
        note(f"peer: {p.name} {p.version}")
    # The peers run after the C++ suite, and this machine's memory bandwidth can change within
    # seconds: a copy like the C++ one (2^25 floats, read + write), timed at the start and the end
    # of this phase, says what state the peers ran under.
    torch = next((p.torch for p in peers if isinstance(p, TorchPeer)), None)

    def copy_now():
        n = 1 << 25
        if torch is not None:  # a threaded copy (torch.set_num_threads above)
            a, b = torch.ones(n), torch.empty(n)
            call, how = (lambda: b.copy_(a)), "torch copy_"
        else:
            a, b = np.ones(n, np.float32), np.empty(n, np.float32)
            call, how = (lambda: np.copyto(b, a)), "numpy copyto, 1 thread"
        t = time_median(call, lambda r: r, 0.2, 11)
        return 2 * 4 * n / t / 1e9, how

    start_copy, how = copy_now()
    out = open(args.csv, "w", newline="")
    w = csv.writer(out)
    w.writerow(cols + ["impl", "median_s", "bytes", "gbps", "copy_fraction"])
    said = set()
    for n_case, k in enumerate(sel):
        c = Case(k, cases[k])
        print(f"[py {n_case + 1}/{len(sel)}] {' '.join(k)}", file=sys.stderr, flush=True)
        try:
            ins, refs = inputs_and_reference(c)
        except Exception as e:  # noqa: BLE001
            note(f"failed: reference for {' '.join(k)}: {e}")
            continue
        tol = 2e-3 if c.dtype == np.float32 else 1e-9
        for p in peers:
            try:
                impls = p.impls(c, ins)
            except Exception as e:  # noqa: BLE001
                note(f"failed: {p.name} setup [{' '.join(k)}]: {type(e).__name__}: {e}")
                continue
            for name, call in impls.items():
                try:
                    err = check(p.to_numpy(p.sync(call())), refs, tol)
                except Exception as e:  # noqa: BLE001
                    tag = (name, c.op, c.order, type(e).__name__)
                    if tag not in said:
                        said.add(tag)
                        note(f"failed: {name} [{' '.join(k)}]: {type(e).__name__}: {str(e).splitlines()[0][:200]}")
                    continue
                if not err <= tol:
                    note(f"wrong: {name} [{' '.join(k)}] max relative error {err:.3g} > {tol}; not timed")
                    continue
                t = time_median(call, p.sync, args.min_time, args.min_runs)
                gbps = c.bytes / t / 1e9
                w.writerow(list(k) + [name, f"{t:.6e}", f"{c.bytes:.0f}", f"{gbps:.4f}",
                                      f"{gbps / copy_gbps if copy_gbps else 0:.4f}"])
                out.flush()
    out.close()
    end_copy, _ = copy_now()
    note(f"copy: Python peers' phase ({how}, 2^25 floats): {start_copy:.2f} GB/s at its start, "
         f"{end_copy:.2f} GB/s at its end")
    notes.close()


if __name__ == "__main__":
    main()
