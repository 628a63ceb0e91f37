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
import functools
import os
import subprocess
import sys
import tempfile
import time

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
    """x_i = ((splitmix64(i + gamma*seed) >> 11) * 2^-53) * 2 - 1 in float64, rounded to dtype.
    A fresh copy of a cached stream: the cases of one N and D draw the same streams again and again
    (0.56 s to compute 3e6 values, a few ms to copy them)."""
    return _values(count, seed, np.dtype(dtype)).copy()


@functools.lru_cache(maxsize=24)
def _values(count, seed, dtype):
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


@functools.lru_cache(maxsize=2)
def _ids_and_counts(n, m, skew, sorted_):
    """make_ids and the per-segment counts, kept for the next cases on the same ids (the cases come
    grouped by ids, ~40 op-orders each in the quick run: 7 of its 145 s went to making them again)."""
    ids = make_ids(n, m, skew, sorted_)
    return ids, np.bincount(ids, minlength=m)


class Case:
    def __init__(self, key, bytes_):
        (self.op, self.order, self.dtype_name, self.itype, n, m, d, self.label) = key
        self.n, self.m, self.d = int(n), int(m), int(d)
        self.bytes = float(bytes_)
        self.dtype = np.float32 if self.dtype_name == "float" else np.float64
        self.sorted = not self.label.endswith("unsorted")
        self.skew = self.label.startswith("skew")
        ids, cnt = _ids_and_counts(self.n, self.m, self.skew, self.sorted)
        self.ids = ids.astype(np.int32 if self.itype == "int32" else np.int64)  # a copy
        self.cnt = cnt.copy()

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


def seg_arg(ids, m, v, largest):
    """Per segment, the index of the largest (smallest) v: the lowest index on ties, -1 for an empty segment.
    (The per-segment extremum, then the lowest index attaining it: 0.03 s at N = 1e6, where a lexsort of
    (index, value, id) took 0.5 s.)"""
    w = v if largest else -v
    best = np.full(m, -np.inf)
    np.maximum.at(best, ids, w)
    at = np.nonzero(w == best[ids])[0]
    arg = np.full(m, len(ids), np.int64)
    np.minimum.at(arg, ids[at], at)
    arg[arg == len(ids)] = -1
    return arg


# The newer ops' operands, upstream gradients and cotangents by name, as the C++ suite draws them:
# (per element "e" or per segment "s", seed, width; None = D).
STREAMS = {
    "inner_products": {"x": ("e", 1, None), "y": ("e", 2, None), "gxy": ("s", 3, 1), "gxx": ("s", 6, 1),
                       "gyy": ("s", 7, 1), "u": ("e", 4, None), "v": ("e", 5, None)},
    "axpby": {"a": ("s", 2, 1), "x": ("e", 1, None), "b": ("s", 6, 1), "y": ("e", 7, None), "g": ("e", 3, None),
              "ux": ("e", 4, None), "uy": ("e", 8, None), "wa": ("s", 5, 1), "wb": ("s", 9, 1)},
    "axpy": {"a": ("s", 2, 1), "x": ("e", 1, None), "y": ("e", 7, None), "g": ("e", 3, None), "uy": ("e", 8, None),
             "ux": ("e", 4, None), "w": ("s", 5, 1)},
    "add": {"x": ("e", 1, None), "b": ("s", 2, None), "g": ("e", 3, None), "u": ("e", 4, None), "w": ("s", 5, None)},
    "component_sum": {"x": ("e", 1, None), "g": ("s", 3, 1), "u": ("e", 4, None)},
    "max": {"x": ("e", 1, None), "g": ("s", 3, None), "u": ("e", 4, None)},
    "min": {"x": ("e", 1, None), "g": ("s", 3, None), "u": ("e", 4, None)},
    "max_norm": {"x": ("e", 1, None), "g": ("s", 3, 1), "u": ("e", 4, None)},
    "count": {},
    "segments": {},
}
# The reference inputs of each newer op-order (what the C++ suite passes; max/min/max_norm also carry
# x, which the autodiff peers differentiate the forward from, and the argmax, computed below).
INPUTS = {
    ("inner_products", "fwd"): "x y", ("inner_products", "bwd"): "x y gxy gxx gyy",
    ("inner_products", "dbl"): "x y gxy gxx gyy u v",
    ("axpby", "fwd"): "a x b y", ("axpby", "bwd"): "a x b y g", ("axpby", "dbl"): "a x b y g ux uy wa wb",
    ("axpy", "fwd"): "a x y", ("axpy", "bwd"): "a x y g", ("axpy", "dbl"): "a x y g uy ux w",
    ("add", "fwd"): "x b", ("add", "bwd"): "g", ("add", "dbl"): "u w",
    ("component_sum", "fwd"): "x", ("component_sum", "bwd"): "g", ("component_sum", "dbl"): "u",
    ("count", "fwd"): "", ("segments", "build"): "",
    ("max", "fwd"): "x", ("max", "bwd"): "x g", ("max", "dbl"): "x u",
    ("min", "fwd"): "x", ("min", "bwd"): "x g", ("min", "dbl"): "x u",
    ("max_norm", "fwd"): "x", ("max_norm", "bwd"): "x g", ("max_norm", "dbl"): "x g u",
}


def stream(c, name):
    kind, seed, w = STREAMS[c.op][name]
    return (c.elem if kind == "e" else c.segv)(seed, c.d if w is None else w)


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
    if op in STREAMS:
        ins = {k: stream(c, k) for k in INPUTS[(op, order)].split()}
        return ins, newer_reference(c, ins)
    raise KeyError(op)


def newer_reference(c, ins):
    """[(value, magnitude)] of the newer ops (adds the argmax of max/min/max_norm to ins)."""
    op, order, ids, m = c.op, c.order, c.ids, c.m
    f = lambda a: np.asarray(a, dtype=np.float64)
    F = {k: f(v) for k, v in ins.items()}
    at = lambda k: F[k][ids]  # a per-segment input at each element

    def red(t):  # per-segment sum of the row sums of the terms t (N, D), with its magnitude
        return segsum(ids, m, t.sum(1)), segsum(ids, m, np.abs(t).sum(1))

    def ew(*terms):  # element-wise sum of terms, with its magnitude
        return sum(terms), sum(np.abs(t) for t in terms)

    if op == "count":
        cnt = c.cnt.astype(np.float64)[:, None]
        return [(cnt, cnt)]
    if op == "segments":  # the descriptor's counts and offsets (CSR row pointers)
        cnt = c.cnt.astype(np.float64)
        off = np.concatenate([[0.0], np.cumsum(cnt)])
        return [(cnt, cnt), (off, off)]
    if op == "inner_products":
        x, y = F["x"], F["y"]
        if order == "fwd":
            return [red(x * y), red(x * x), red(y * y)]
        gxy, gxx, gyy = at("gxy"), at("gxx"), at("gyy")
        if order == "bwd":
            return [ew(gxy * y, 2 * gxx * x), ew(gxy * x, 2 * gyy * y)]
        u, v = F["u"], F["v"]
        gg = segsum(ids, m, (u * y + v * x).sum(1)), segsum(ids, m, (np.abs(u * y) + np.abs(v * x)).sum(1))
        return [gg, tuple(2 * r for r in red(u * x)), tuple(2 * r for r in red(v * y)),
                ew(gxy * v, 2 * gxx * u), ew(gxy * u, 2 * gyy * v)]
    if op in ("axpby", "axpy"):
        a, x, y = at("a"), F["x"], F["y"]
        b = at("b") if op == "axpby" else None
        if order == "fwd":
            return [ew(a * x, b * y) if op == "axpby" else ew(y, a * x)]
        g = F["g"]
        if order == "bwd":
            if op == "axpby":
                return [ew(a * g), ew(b * g), red(x * g), red(y * g)]
            return [ew(g), ew(a * g), red(x * g)]
        if op == "axpby":
            ux, uy, wa, wb = F["ux"], F["uy"], at("wa"), at("wb")
            return [ew(a * ux, b * uy, wa * x, wb * y), ew(wa * g), ew(wb * g), red(ux * g), red(uy * g)]
        uy, ux, w = F["uy"], F["ux"], at("w")
        return [ew(uy, a * ux, w * x), ew(w * g), red(ux * g)]
    if op == "add":
        if order == "fwd":
            return [ew(F["x"], at("b"))]
        if order == "bwd":
            return [ew(F["g"]), (segsum(ids, m, F["g"]), segsum(ids, m, np.abs(F["g"])))]
        return [ew(F["u"], at("w"))]
    if op == "component_sum":
        if order == "fwd":
            return [red(F["x"])]
        if order == "bwd":
            return [ew(np.repeat(at("g"), c.d, 1))]
        return [red(F["u"])]
    x = F["x"]
    if op in ("max", "min"):
        # arg (M, D): per component, the element that attains the extremum.
        arg = np.stack([seg_arg(ids, m, x[:, d], op == "max") for d in range(c.d)], 1)
        ok, cols = arg >= 0, np.arange(c.d)[None, :]
        if order == "fwd":
            val = np.where(ok, x[np.maximum(arg, 0), cols], -np.inf if op == "max" else np.inf)
            return [(val, np.abs(val))]
        ins["arg"] = arg
        if order == "bwd":
            gx = np.zeros_like(x)
            for d in range(c.d):
                gx[arg[ok[:, d], d], d] = F["g"][ok[:, d], d]
            return [ew(gx)]
        return [ew(np.where(ok, F["u"][np.maximum(arg, 0), cols], 0.0))]
    if op == "max_norm":
        nrm = np.sqrt((x * x).sum(1))
        am = seg_arg(ids, m, nrm, True)
        ok = am >= 0
        i = np.maximum(am, 0)
        if order == "fwd":
            val = np.where(ok, nrm[i], 0.0)[:, None]
            return [(val, val)]
        ins["argmax"] = am
        g = F["g"][:, 0]
        xh = x[i] / nrm[i][:, None]
        if order == "bwd":
            gx = np.zeros_like(x)
            gx[am[ok]] = (g[:, None] * xh)[ok]
            return [ew(gx)]
        ui = F["u"][i]
        p, pm = (xh * ui).sum(1), np.abs(xh * ui).sum(1)
        q = (g / nrm[i])[:, None]
        xp, xm = np.zeros_like(x), np.zeros_like(x)
        xp[am[ok]] = (q * (ui - xh * p[:, None]))[ok]
        xm[am[ok]] = (np.abs(q) * (np.abs(ui) + np.abs(xh) * pm[:, None]))[ok]
        return [(np.where(ok, p, 0.0)[:, None], np.where(ok, pm, 0.0)[:, None]), (xp, xm)]
    raise KeyError(op)


def check(outs, refs, tol):
    """The largest relative error |got - value| / magnitude over the outputs; inf where a result is NaN."""
    worst = 0.0
    if len(outs) != len(refs):
        return float("inf")
    for got, (val, mag) in zip(outs, refs):
        got, val, mag = (np.asarray(a).reshape(-1) for a in (got, val, mag))
        if got.size != val.size:
            return float("inf")
        # in chunks that stay in the cache (10 s of the quick run's Python phase went to checks
        # over whole arrays); NaN or inf there (a wrong result, or the +-inf of a max/min of no
        # element, which passes where it is equal) is decided by the element-wise rule
        step = 1 << 15
        for a in range(0, got.size, step):
            g, v, w = got[a:a + step].astype(np.float64), val[a:a + step], mag[a:a + step]
            with np.errstate(invalid="ignore"):
                err = g - v
                np.abs(err, out=err)
                np.divide(err, w + 1e-300, out=err)
                e = float(np.max(err))
                if not np.isfinite(e):
                    e = float(np.max(np.where(g == v, 0.0, err)))
            if not np.isfinite(e):  # a NaN result, or an inf where the value is not
                return float("inf")
            worst = max(worst, e)
    return worst


class Timer:
    """Batches of ~20 us of one call, each call synced, sampled on request (sample) until a median
    (median). warmed: the caller has just made a call (the checked one), which is the warm-up. A
    call that fills a batch by itself is the first sample (torch's slowest backwards take 0.3-0.6 s
    a call at N = 1e6: two calls fewer per measurement cut a quarter of the Python phase)."""

    def __init__(self, call, sync, warmed=False):
        self.call, self.sync = call, sync
        if not warmed:
            sync(call())
        t0 = time.perf_counter()
        sync(call())
        one = time.perf_counter() - t0
        self.batch = int(min(max(20e-6 / max(one, 1e-9), 1), 1000))
        self.samples, self.total = ([one], one) if self.batch == 1 else ([], 0.0)

    def batch_seconds(self):
        """Seconds of one batch of synced calls."""
        a = time.perf_counter()
        for _ in range(self.batch):
            self.sync(self.call())
        return time.perf_counter() - a

    def sample(self, runs, seconds, warm=0.0):
        """Untimed batches for `warm` seconds (at least one where warm > 0), then timed batches
        until there are at least `runs` samples and `seconds` timed seconds."""
        t = 0.0
        while t < warm:
            t += self.batch_seconds()
        while len(self.samples) < runs or self.total < seconds:
            dt = self.batch_seconds()
            self.samples.append(dt / self.batch)
            self.total += dt

    def median(self):
        s = sorted(self.samples)
        return s[len(s) // 2]


def time_median(call, sync, min_time, min_runs, warmed=False):
    """Median seconds per call: at least min_runs batches and min_time seconds (Timer)."""
    t = Timer(call, sync, warmed)
    t.sample(min_runs, min_time)
    return t.median()


# Rounds of time_interleaved (bench_harness.hpp's kRounds).
ROUNDS = 5
# Seconds of rest before each turn of time_interleaved. OpenMP runtimes keep their idle threads
# spinning for a while after a parallel region (GNU's, which torch and SegOps use here: 3.2 ms of
# a worker's CPU time after each region, measured with 2 threads and 50 ms gaps; 0.18 ms with
# GOMP_SPINCOUNT=10000), and in turns of ~10 ms that spinning would take a core from the start of
# the next implementation's turn, in another process or in this one.
SETTLE = 0.005
# Seconds of untimed calls (at least one) that start each turn of time_interleaved. Turns of
# ~10 ms start slow on this VM, whatever ran before them: dot bwd, sorted, N = 1e6, rows of 3
# floats (53 MB), SegOps 1.09 ms sampled alone, 1.47-2.04 ms in turns with the Python peers (with
# 5 or 50 ms of rest before each; with 40-200 ms idle gaps and no peers between its turns 1.16
# ms), 1.06 ms in turns ten times longer (torch's 5.8 ms there 3.0); with 10 ms of untimed calls
# first 1.12-1.21 ms, with 20 ms 1.04-1.06 ms (jax_vjp 5.1-5.5 ms without, 2.0-2.4 with).
TURN_WARM = 0.02


def time_interleaved(timers, min_time, min_runs):
    """Samples the timers in ROUNDS rounds that take each in turn, as the C++ suite's
    time_medians_interleaved does: round r brings each up to (r + 1) / ROUNDS of min_runs samples
    and of min_time seconds, so that all of them sample the same stretches of the VM's drifting
    speed. A timer that fails (SegOps' process) does nothing in the rounds after it."""
    for r in range(ROUNDS):
        for t in timers:
            time.sleep(SETTLE)
            t.sample(-(-min_runs * (r + 1) // ROUNDS), min_time * (r + 1) / ROUNDS, TURN_WARM)


class SegopsServer:
    """SegOps on one case in a process of its own (`bench_segops --case KEY --serve`: same data as
    the C++ suite, checked and timed the same way), sampled on request like a Timer, so that it
    takes its turns in time_interleaved with the Python peers. None of its output but the protocol's
    lines goes to stdout; its row comes back in its CSV when its input closes (finish)."""

    def __init__(self, cmd, env, tmp):
        self.csv = os.path.join(tmp, "case.csv")
        self.err = os.path.join(tmp, "stderr.txt")
        with open(self.err, "w") as err:  # a file: a full pipe would block the process
            self.proc = subprocess.Popen(cmd + ["--csv", self.csv, "--notes", os.path.join(tmp, "notes.txt"),
                                                "--serve"], env=env, stdin=subprocess.PIPE,
                                         stdout=subprocess.PIPE, stderr=err, text=True)
        self.alive = self._expect("ready")

    def _expect(self, word):
        for line in self.proc.stdout:
            if line.strip() == "segops-serve " + word:
                return True
        return False  # the process ended (a failure, said by finish)

    def sample(self, runs, seconds, warm=0.0):
        if self.alive:
            try:
                self.proc.stdin.write(f"sample {runs} {seconds!r} {warm!r}\n")
                self.proc.stdin.flush()
                self.alive = self._expect("ok")
            except OSError:
                self.alive = False

    def finish(self):
        """(median seconds or None, why not)."""
        try:
            self.proc.stdin.close()
        except OSError:
            pass
        self.proc.stdout.read()
        rc = self.proc.wait()
        with open(self.err) as f:
            err = f.read()
        rows = []
        if os.path.exists(self.csv):
            with open(self.csv) as f:
                rows = list(csv.DictReader(f))
        row = next((x for x in rows if x["impl"] == "segops"), None)
        if rc != 0 or row is None or not self.alive:
            return None, f"exit {rc} {err.strip()[-200:]}"
        return float(row["median_s"]), ""


# ----------------------------------------------------------------------------- the peers
# Each peer: name -> setup(case, inputs) returning (call, to_numpy) or None when it has no such op.
# Forward ops are written as a user of that library would; backward and double backward through
# the library's autodiff (torch.autograd.grad, jax.vjp) of the forward expression.

# Differentiable inputs of each op's first backward, in the order of the reference outputs, and the
# cotangents the double backward receives (one per first-backward output).
BWD_WRT = {"sum": ["x"], "mean": ["x"], "broadcast": ["v"], "dot": ["x", "y"], "mul": ["x", "a"],
           "rms_norm": ["x"], "matvec": ["x", "A"], "inner_products": ["x", "y"], "axpby": ["x", "y", "a", "b"],
           "axpy": ["y", "x", "a"], "add": ["x", "b"], "component_sum": ["x"], "max": ["x"], "min": ["x"],
           "max_norm": ["x"]}
DBL_COT = {"sum": ["u"], "mean": ["u"], "broadcast": ["u"], "dot": ["u", "v"], "mul": ["u", "w"],
           "rms_norm": ["u"], "matvec": ["u", "W"], "inner_products": ["u", "v"], "axpby": ["ux", "uy", "wa", "wb"],
           "axpy": ["uy", "ux", "w"], "add": ["u", "w"], "component_sum": ["u"], "max": ["u"], "min": ["u"],
           "max_norm": ["u"]}
# Outputs of the double backward in reference order: adjoint of the upstream gradient(s) (FWD_COT) first,
# then of the inputs. max/min: the adjoint of x is zero (the first backward is piecewise linear in x).
DBL_OUT = {"sum": ["g"], "mean": ["g"], "broadcast": ["g"], "dot": ["g", "x", "y"], "mul": ["g", "x", "a"],
           "rms_norm": ["g", "x"], "matvec": ["g", "x", "A"], "inner_products": ["gxy", "gxx", "gyy", "x", "y"],
           "axpby": ["g", "x", "y", "a", "b"], "axpy": ["g", "x", "a"], "add": ["g"], "component_sum": ["g"],
           "max": ["g"], "min": ["g"], "max_norm": ["g", "x"]}
# Upstream gradients of the forward outputs, one per output (inner_products has three: xy, xx, yy).
FWD_COT = {"inner_products": ["gxy", "gxx", "gyy"]}


def fwd_cots(op):
    return FWD_COT.get(op, ["g"])


def fwd_inputs(op):
    return {"sum": ["x"], "mean": ["x"], "broadcast": ["v"], "dot": ["x", "y"], "mul": ["a", "x"],
            "rms_norm": ["x"], "matvec": ["A", "x"], "inner_products": ["x", "y"], "axpby": ["a", "x", "b", "y"],
            "axpy": ["a", "x", "y"], "add": ["x", "b"], "component_sum": ["x"], "max": ["x"], "min": ["x"],
            "max_norm": ["x"], "count": [], "segments": []}[op]


def as_tuple(r):
    return r if isinstance(r, tuple) else (r,)


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
        m, dt = c.m, torch.float32 if c.dtype == np.float32 else torch.float64
        cntf = torch.from_numpy(np.maximum(c.cnt, 1).astype(c.dtype))
        lengths = torch.from_numpy(c.cnt.astype(np.int64))
        op, order = c.op, c.order
        res = {}
        if op == "segments":  # counts and offsets, as a PyTorch user builds CSR row pointers
            zero = torch.zeros(1, dtype=torch.int64)

            def build():
                cnt = torch.bincount(idx, minlength=m)
                return cnt, torch.cat([zero, torch.cumsum(cnt, 0)])
            return {"torch_bincount_cumsum": build}

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
            if op == "inner_products":  # the three row products in one index_add
                p = torch.stack([(a["x"] * a["y"]).sum(1), (a["x"] * a["x"]).sum(1), (a["y"] * a["y"]).sum(1)], 1)
                r = segsum(p)
                return r[:, 0:1], r[:, 1:2], r[:, 2:3]
            if op == "axpby":
                return a["a"].index_select(0, idx) * a["x"] + a["b"].index_select(0, idx) * a["y"]
            if op == "axpy":  # out of place here: y is differentiated (the timed forward is in place, below)
                return torch.addcmul(a["y"], a["a"].index_select(0, idx), a["x"])
            if op == "add":
                return a["x"] + a["b"].index_select(0, idx)
            if op == "component_sum":
                return segsum(a["x"].sum(1))[:, None]
            if op in ("max", "min"):  # onto -inf (+inf): an empty segment keeps it
                init = float("-inf") if op == "max" else float("inf")
                return torch.full((m, c.d), init, dtype=dt).scatter_reduce_(
                    0, idx[:, None].expand(c.n, c.d), a["x"], "amax" if op == "max" else "amin", include_self=False)
            if op == "max_norm":  # onto 0, the value of an empty segment
                return torch.zeros(m, dtype=dt).scatter_reduce_(
                    0, idx, torch.linalg.vector_norm(a["x"], dim=1), "amax", include_self=False)[:, None]
            if op == "count":
                return torch.bincount(idx, minlength=m)
            raise KeyError(op)

        if order == "fwd":
            name = {"broadcast": "torch_index_select", "mul": "torch_index_select", "matvec": "torch_index_select",
                    "axpby": "torch_index_select", "axpy": "torch_index_select", "add": "torch_index_select",
                    "max": "torch_scatter_reduce", "min": "torch_scatter_reduce",
                    "max_norm": "torch_scatter_reduce", "count": "torch_bincount"}.get(op, "torch_index_add")
            if op == "axpy":
                # In place, as a user updates y: on a copy of y made here, right before the driver's one checked
                # call, which thus returns y + a x; the timed calls that follow keep accumulating into the copy
                # (the same work).
                yw = t["y"].clone()
                res[name] = lambda: (yw.addcmul_(t["a"].index_select(0, idx), t["x"]),)
                return res
            res[name] = lambda: as_tuple(forward(op, t))
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
        out = as_tuple(forward(op, fw))
        wrt = [fw[k] for k in BWD_WRT[op]]
        gs = [g.reshape(o.shape) for g, o in zip(self._gs(c, ins), out)]
        if order == "bwd":
            res["torch_autograd"] = lambda: torch.autograd.grad(out, wrt, gs, retain_graph=True)
            return res
        gs = [g.clone().requires_grad_(True) for g in gs]
        first = torch.autograd.grad(out, wrt, gs, create_graph=True)
        cd = dbl_inputs(c, ins)  # the linear ops' cotangent is named u, their input x or v
        cot = [torch.from_numpy(np.ascontiguousarray(cd[k])).reshape(f.shape) for k, f in zip(DBL_COT[op], first)]
        gmap = dict(zip(fwd_cots(op), gs))
        targets = [gmap[k] if k in gmap else fw[k] for k in DBL_OUT[op]]
        res["torch_autograd"] = lambda: torch.autograd.grad(first, targets, cot, retain_graph=True,
                                                            allow_unused=True)
        return res

    def _fwd_tensors(self, c, ins):
        return {k: self.torch.from_numpy(np.ascontiguousarray(v)) for k, v in fwd_arrays(c, ins).items()}

    def _gs(self, c, ins):
        return [self.torch.from_numpy(np.ascontiguousarray(g)) for g in upstream(c, ins)]

    def sync(self, r):
        return r

    def to_numpy(self, r):
        return [x.detach().numpy() for x in r if x is not None]


def fwd_arrays(c, ins):
    """The forward operands of the case's op (rebuilt with the suite's streams when the case is a
    backward of a linear op, whose reference inputs are named differently or left out)."""
    op = c.op
    if op in ("sum", "mean"):
        return {"x": ins["x"] if "x" in ins else c.elem(1, c.d)}
    if op == "broadcast":
        return {"v": ins["v"] if "v" in ins else c.segv(2, c.d)}
    if op in STREAMS:
        return {k: ins[k] if k in ins else stream(c, k) for k in fwd_inputs(op)}
    return {k: ins[k] for k in fwd_inputs(op)}


def upstream(c, ins):
    """The upstream gradients of the case, one per forward output (FWD_COT), each of its output's shape."""
    op = c.op
    if op in ("sum", "mean"):
        return [ins["v"] if c.order == "bwd" else c.segv(3, c.d)]
    if op == "broadcast":
        return [ins["x"] if c.order == "bwd" else c.elem(3, c.d)]
    if op in STREAMS:  # add/component_sum/max/min's double backwards take no g (their result does not depend on it)
        return [ins[k] if k in ins else stream(c, k) for k in fwd_cots(op)]
    return [ins["g"]]


def dbl_inputs(c, ins):
    """Cotangents of the first backward's outputs for the linear ops (stream 4, as in C++)."""
    if c.op in ("sum", "mean"):
        return {"u": ins["x"]}
    if c.op == "broadcast":
        return {"u": ins["v"]}
    return {k: ins[k] for k in DBL_COT[c.op]}


class JaxPeer:
    name = "jax"

    def __init__(self, threads, cache):
        import jax
        jax.config.update("jax_enable_x64", True)
        jax.config.update("jax_platforms", "cpu")
        # XLA's compilations kept on disk for the next run (one per jitted function and case, ~0.08
        # s each: 9.3 s of a 145 s phase; read back, 6.8 -> 0.4 s on 43 cases; tracing and lowering
        # still run). The first run fills it.
        jax.config.update("jax_compilation_cache_dir", os.path.join(cache, "jax-cache"))
        jax.config.update("jax_persistent_cache_min_compile_time_secs", 0)
        jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
        import jax.numpy as jnp
        self.jax, self.jnp = jax, jnp
        self.version = jax.__version__

    def impls(self, c, ins):
        jax, jnp = self.jax, self.jnp
        m, op, order, srt = c.m, c.op, c.order, c.sorted
        cntf = jnp.asarray(np.maximum(c.cnt, 1).astype(c.dtype))

        # The ids are an argument of every jitted function ("_ids" among the operands), as a user
        # passes them: captured in the closure they were a compile-time constant, and XLA folded
        # count's whole result at compile time (its timed call then did no work).
        def forward(op, a):
            idx = a["_ids"]

            def segsum(v):
                return jax.ops.segment_sum(v, idx, num_segments=m, indices_are_sorted=srt)

            if op == "sum":
                return segsum(a["x"])
            if op == "mean":
                return segsum(a["x"]) / cntf[:, None]
            if op == "broadcast":
                return a["v"][idx]
            if op == "dot":
                return segsum((a["x"] * a["y"]).sum(1))[:, None]
            if op == "mul":
                return a["a"][idx] * a["x"]
            if op == "rms_norm":  # the double-where keeps gradients finite for empty segments
                ms = segsum((a["x"] * a["x"]).sum(1)) / cntf
                pos = ms > 0
                return jnp.where(pos, jnp.sqrt(jnp.where(pos, ms, 1.0)), 0.0)[:, None]
            if op == "matvec":
                return jnp.einsum("nrc,nc->nr", a["A"][idx], a["x"])
            if op == "inner_products":  # the three row products in one segment_sum
                r = segsum(jnp.stack([(a["x"] * a["y"]).sum(1), (a["x"] * a["x"]).sum(1), (a["y"] * a["y"]).sum(1)], 1))
                return r[:, 0:1], r[:, 1:2], r[:, 2:3]
            if op == "axpby":
                return a["a"][idx] * a["x"] + a["b"][idx] * a["y"]
            if op == "axpy":  # JAX arrays are immutable: y + a x out of place
                return a["y"] + a["a"][idx] * a["x"]
            if op == "add":
                return a["x"] + a["b"][idx]
            if op == "component_sum":
                return segsum(a["x"].sum(1))[:, None]
            if op == "max":  # an empty segment gets -inf (+inf for min), the identity
                return jax.ops.segment_max(a["x"], idx, num_segments=m, indices_are_sorted=srt)
            if op == "min":
                return jax.ops.segment_min(a["x"], idx, num_segments=m, indices_are_sorted=srt)
            if op == "max_norm":  # norms are >= 0: the maximum with 0 turns an empty segment's -inf into 0
                r = jax.ops.segment_max(jnp.linalg.norm(a["x"], axis=1), idx, num_segments=m, indices_are_sorted=srt)
                return jnp.maximum(r, 0.0)[:, None]
            if op == "count":
                return segsum(jnp.ones(c.n, dtype=jnp.int32))
            raise KeyError(op)

        fa = {k: jnp.asarray(v) for k, v in fwd_arrays(c, ins).items()}
        fa["_ids"] = jnp.asarray(c.ids)
        names = list(fa)
        if op == "segments":  # counts and offsets from the ids (passed in, as to every jitted call)
            def build(ids):
                cnt = jnp.bincount(ids, length=m)
                return cnt, jnp.concatenate([jnp.zeros(1, cnt.dtype), jnp.cumsum(cnt)])
            fb = jax.jit(build)
            return {"jax_bincount_cumsum": lambda: fb(fa["_ids"])}
        if order == "fwd":
            name = {"broadcast": "jax_index", "mul": "jax_index", "matvec": "jax_index", "axpby": "jax_index",
                    "axpy": "jax_index", "add": "jax_index", "max": "jax_segment_max", "min": "jax_segment_min",
                    "max_norm": "jax_segment_max"}.get(op, "jax_segment_sum")
            f = jax.jit(lambda *a: as_tuple(forward(op, dict(zip(names, a)))))
            return {name: lambda: f(*[fa[k] for k in names])}
        wrt, ups = BWD_WRT[op], fwd_cots(op)

        def bwd(gs, *a):  # one cotangent per forward output
            d = dict(zip(names, a))
            def fun(*w):
                return as_tuple(forward(op, {**d, **dict(zip(wrt, w))}))
            _, vjp = jax.vjp(fun, *[d[k] for k in wrt])
            return vjp(tuple(gs))

        gs = tuple(jnp.asarray(g) for g in upstream(c, ins))
        if order == "bwd":
            f = jax.jit(lambda gs, *a: tuple(bwd(gs, *a)))
            return {"jax_vjp": lambda: f(gs, *[fa[k] for k in names])}
        cot = dbl_inputs(c, ins)
        cots = [jnp.asarray(cot[k]) for k in DBL_COT[op]]
        tgt = DBL_OUT[op]  # upstream gradients (ups) and forward operands

        def dbl(gs, cots, *a):
            base = {**dict(zip(names, a)), **dict(zip(ups, gs))}
            def fun(*t):
                dd = {**base, **dict(zip(tgt, t))}
                return tuple(bwd([dd[k] for k in ups], *[dd[k] for k in names]))
            first, vjp = jax.vjp(fun, *[base[k] for k in tgt])
            return vjp(tuple(cc.reshape(ff.shape) for cc, ff in zip(cots, first)))

        f = jax.jit(lambda gs, cots, *a: tuple(dbl(gs, cots, *a)))
        return {"jax_vjp": lambda: f(gs, cots, *[fa[k] for k in names])}

    def sync(self, r):
        for x in r:
            x.block_until_ready()
        return r

    def to_numpy(self, r):
        return [np.asarray(x) for x in r]


class AlchemiPeer:
    """nvalchemiops segment ops on Warp's CPU device. Its reductions require sorted int32 ids;
    element types are scalars (D = 1) or vec3 (D = 3); rms_norm, matvec, component_sum and max_norm are
    vec3 only, max and min scalars only (and forward only: the package has no backward for them)."""
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
        if op == "segments":  # no descriptor build in the package (its ops take the ids as they are)
            return {}
        # (Of the older ops only mul's double backward is wired here; count does not depend on D.)
        if c.itype != "int32" or (D not in (1, 3) and op != "count") or \
                order == "dbl" and op in ("sum", "mean", "broadcast", "dot", "rms_norm", "matvec"):
            return {}
        if op in ("rms_norm", "matvec", "component_sum", "max_norm") and D != 3:
            return {}  # vec3 overloads only (a component sum of scalars is segmented_sum, timed as sum)
        if op in ("max", "min") and (D != 1 or order != "fwd"):
            return {}  # scalar overloads only (no per-component vec3 max), and no backward in the package
        # Reductions (RLE kernels) need sorted ids. max_norm's backwards run their (untimed) forward
        # precompute on unsorted ids too, as rms_norm's backward does; the timed kernels are element-wise.
        reduces = {("sum", "fwd"), ("mean", "fwd"), ("broadcast", "bwd"), ("dot", "fwd"), ("mul", "bwd"),
                   ("mul", "dbl"), ("rms_norm", "fwd"), ("matvec", "bwd"), ("inner_products", "fwd"),
                   ("inner_products", "dbl"), ("axpby", "bwd"), ("axpby", "dbl"), ("axpy", "bwd"), ("axpy", "dbl"),
                   ("add", "bwd"), ("component_sum", "fwd"), ("component_sum", "dbl"), ("count", "fwd"),
                   ("max", "fwd"), ("min", "fwd"), ("max_norm", "fwd")}
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
        if op == "inner_products":
            x, y = E(ins["x"]), E(ins["y"])
            if order == "fwd":
                oxy, oxx, oyy = out_s(m), out_s(m), out_s(m)
                return {name: lambda: (so.segmented_inner_products(x, y, idx, oxy, oxx, oyy), oxy, oxx, oyy)[1:]}
            gxy, gxx, gyy, gx, gy = S(ins["gxy"]), S(ins["gxx"]), S(ins["gyy"]), out_e(c.n), out_e(c.n)
            if order == "bwd":
                return {name: lambda: (sob.segmented_inner_products_backward(x, y, idx, gxy, gxx, gyy, gx, gy),
                                       gx, gy)[1:]}
            u, v, ggxy, ggxx, ggyy = E(ins["u"]), E(ins["v"]), out_s(m), out_s(m), out_s(m)
            return {name: lambda: (sob.segmented_inner_products_double_backward(
                u, v, x, y, gxy, gxx, gyy, idx, m, gx, gy, ggxy, ggxx, ggyy), ggxy, ggxx, ggyy, gx, gy)[1:]}
        if op in ("axpby", "axpy"):
            a, x, y = S(ins["a"]), E(ins["x"]), E(ins["y"])
            two = op == "axpby"
            b = S(ins["b"]) if two else None
            if order == "fwd":
                if two:
                    o = out_e(c.n)
                    return {name: lambda: (so.segmented_axpby(o, a, x, b, y, idx), o)[1:]}
                # segmented_axpy updates y in place: on a copy of y made here, right before the driver's one
                # checked call, which thus returns y + a x; the timed calls keep accumulating into it (same work).
                yw = E(ins["y"])
                return {name: lambda: (so.segmented_axpy(yw, x, a, idx), yw)[1:]}
            g, gx, ga = E(ins["g"]), out_e(c.n), out_s(m)
            if order == "bwd":
                if two:
                    gy, gb = out_e(c.n), out_s(m)
                    return {name: lambda: (sob.segmented_axpby_backward(g, a, x, b, y, idx, m, gx, gy, ga, gb),
                                           gx, gy, ga, gb)[1:]}
                gy = out_e(c.n)
                return {name: lambda: (sob.segmented_axpy_backward(g, x, a, idx, m, gy, gx, ga), gy, gx, ga)[1:]}
            gg, xq, aq = out_e(c.n), out_e(c.n), out_s(m)
            ux, uy = E(ins["ux"]), E(ins["uy"])
            if two:
                wa, wb, yq, bq = S(ins["wa"]), S(ins["wb"]), out_e(c.n), out_s(m)
                return {name: lambda: (sob.segmented_axpby_double_backward(
                    ux, uy, wa, wb, g, a, x, b, y, idx, gg, xq, yq, aq, bq), gg, xq, yq, aq, bq)[1:]}
            w = S(ins["w"])
            return {name: lambda: (sob.segmented_axpy_double_backward(uy, ux, w, g, x, a, idx, gg, xq, aq),
                                   gg, xq, aq)[1:]}
        if op == "add":
            if order == "fwd":
                x, b, o = E(ins["x"]), E(ins["b"]), out_e(c.n)
                return {name: lambda: (so.segmented_add(x, b, idx, o), o)[1:]}
            if order == "bwd":
                g, gx, gb = E(ins["g"]), out_e(c.n), out_e(m)
                return {name: lambda: (sob.segmented_add_backward(g, idx, m, gx, gb), gx, gb)[1:]}
            u, w, gg = E(ins["u"]), E(ins["w"]), out_e(c.n)
            return {name: lambda: (sob.segmented_add_double_backward(u, w, idx, gg), gg)[1:]}
        if op == "component_sum":
            if order == "fwd":
                x, o = E(ins["x"]), out_s(m)
                return {name: lambda: (so.segmented_component_sum(x, idx, o), o)[1:]}
            if order == "bwd":
                g, gx = S(ins["g"]), out_e(c.n)
                return {name: lambda: (sob.segmented_component_sum_backward(g, idx, gx), gx)[1:]}
            u, gg = E(ins["u"]), out_s(m)
            return {name: lambda: (sob.segmented_component_sum_double_backward(u, idx, m, gg), gg)[1:]}
        if op == "count":
            o = wp.empty(m, dtype=wp.int32, device=dev)
            return {name: lambda: (so.segmented_count(idx, o), o)[1:]}
        if op in ("max", "min"):
            # The caller sets out to -inf (+inf) before each call (an empty segment keeps it): part of the call.
            x, o, init = E(ins["x"]), out_s(m), -np.inf if op == "max" else np.inf
            red = so.segmented_max if op == "max" else so.segmented_min
            return {name: lambda: (o.fill_(init), red(x, idx, o), o)[2:]}
        if op == "max_norm":
            x, o = E(ins["x"]), out_s(m)
            if order == "fwd":
                return {name: lambda: (so.segmented_max_norm(x, idx, o), o)[1:]}
            # Saved state, untimed: the max norms and the argmax. On exact ties of the norms it keeps the highest
            # index, the reference the lowest; the suite's data have no such ties (N = 1e5, 1e6; L = 3, 1000; skew).
            am = wp.empty(m, dtype=wp.int32, device=dev)
            sob.segmented_max_norm_forward_precompute(x, idx, o, am)
            g, gx = S(ins["g"]), out_e(c.n)
            if order == "bwd":
                return {name: lambda: (sob.segmented_max_norm_backward(g, x, am, idx, gx), gx)[1:]}
            u, gg = E(ins["u"]), out_s(m)
            return {name: lambda: (sob.segmented_max_norm_double_backward(u, g, x, am, idx, gx, gg), gg, gx)[1:]}
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
    ap.add_argument("--segops-bin", default=None,
                    help="bench_segops: SegOps is timed again, in turns with each case's peers (row segops_adjacent)")
    ap.add_argument("--cache", default=os.environ.get("SEGOPS_CACHE", os.path.expanduser("~/.cache/segops")))
    args = ap.parse_args()

    notes = open(args.notes, "w")
    print("peers.py: loading the peers", file=sys.stderr, flush=True)

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
    factories = [("torch", lambda: TorchPeer(args.threads)), ("jax", lambda: JaxPeer(args.threads, args.cache)),
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

    # The C++ suite ran minutes earlier, under whatever memory bandwidth the machine gave then (on
    # a shared VM its copy moved from 24 to 40 GB/s between the two phases of one run). So SegOps
    # is timed once more on each case, in a process of its own that takes turns with that case's
    # Python peers (time_interleaved), and the summary compares the Python peers with that row.
    def segops_server(k, tmp):
        if not args.segops_bin:
            return None
        env = dict(os.environ, OMP_PROC_BIND="spread", OMP_PLACES="threads", OMP_NUM_THREADS=str(args.threads))
        cmd = [args.segops_bin, "--case", ",".join(k), "--quiet", "--min-time", str(args.min_time),
               "--min-runs", str(args.min_runs), f"--kokkos-num-threads={args.threads}"]
        return SegopsServer(cmd, env, tmp)

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
        with tempfile.TemporaryDirectory() as tmp:
            server = segops_server(k, tmp) if peers else None
            timers = []  # (impl name, Timer) of the checked peers
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
                    timers.append((name, Timer(call, p.sync, warmed=True)))
            time_interleaved(([server] if server else []) + [t for _, t in timers], args.min_time, args.min_runs)
            medians = [(name, t.median()) for name, t in timers]
            if server:
                t, why = server.finish()
                if t is None:
                    note(f"failed: segops_adjacent [{' '.join(k)}]: {why}")
                else:
                    medians.insert(0, ("segops_adjacent", t))
            for name, t in medians:
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
