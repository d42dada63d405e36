"""Numba kernels of the `mx.fast` primitives (prims/fast.py), imported on first use.

Every kernel takes an index range `[start, stop)` first (rows, or (batch, head) pairs), is
compiled `nogil=True` and cached on disk, so `prims.fast` can hand it to braze's thread pool
(`threads.POOL`), which cuts the range into chunks. Each kernel is built once per float
dtype (a build costs seconds with an empty cache): the call sites pass flags and modes as
ints, arrays C-contiguous and writable, and masks as one flat float array (prims/fast.py's
`_c`, `_sdpa_mask`), so no argument type or layout specialises a kernel further.
Arrays are float32 (float16/bfloat16 inputs are widened before the call) or float64; `mode`
says which half type a value stands for, and `rnd(v, mode)` rounds a float32 to it (round to
nearest even, exactly as NumPy/ml_dtypes convert), so the kernels round where the composite
graphs of ops/fast.py round and match them bit for bit in half precision. A float32 sum or
product of two half values rounded to half is the correctly rounded half result (24 >= 2p + 2
bits), so half arithmetic is float32 arithmetic followed by `rnd`.

Reductions over a row run with reassociation allowed (`fastmath={"reassoc"}`: the compiler
may split the sum into vector lanes, as the row kernels of the cpu backend do by hand).
"""
from __future__ import annotations

import math

import numpy as np
from llvmlite import ir
from numba import types
from numba.extending import intrinsic, overload

from ..jit import njit

_OPTS = dict(error_model="numpy", nogil=True, boundscheck=False, fastmath={"reassoc"})


def _jit(py_func, **opts):
    """njit, cached on disk and loaded lean (`_src/jit.py`). The helpers too: LLVM inlines
    them into the kernels' loops, where inlining them in Numba's IR (`inline="always"`) made
    every kernel's build slower (rope's 1.2 s -> 0.3 s)."""
    return njit(py_func, **dict(_OPTS, **opts))


@intrinsic
def _f32_bits(typingctx, x):
    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], ir.IntType(32))
    return types.int32(types.float32), codegen


@intrinsic
def _bits_f32(typingctx, i):
    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], ir.FloatType())
    return types.float32(types.int32), codegen


@_jit
def rnd(v, mode):
    """v (float32) rounded to float16 (mode 1) or bfloat16 (mode 2); mode 0: v itself."""
    if mode == 0:
        return v
    f = np.float32(v)
    x = np.int64(_f32_bits(f)) & 0xFFFFFFFF
    ax = x & 0x7FFFFFFF
    if ax > 0x7F800000:  # NaN stays NaN
        return v
    if mode == 2:
        r = ((x + 0x7FFF + ((x >> 16) & 1)) >> 16) << 16
        return _bits_f32(np.int32(np.uint32(r)))
    sign = x & 0x80000000
    if ax >= 0x477FF000:  # beyond the largest float16 once rounded: inf
        return _bits_f32(np.int32(np.uint32(sign | 0x7F800000)))
    if ax < 0x38800000:  # float16 subnormals: the nearest multiple of 2**-24 (integer
        e = ax >> 23     # rounding: reassociation must not see an `(a + c) - c`)
        m = (ax & 0x7FFFFF) | 0x800000
        sh = 126 - e
        q = 0
        if e > 0 and sh < 40:
            q = (m + (1 << (sh - 1)) - 1 + ((m >> sh) & 1)) >> sh
        a = np.float32(q) * np.float32(5.960464477539063e-08)  # q * 2**-24, exact
        return _bits_f32(np.int32(np.uint32((np.int64(_f32_bits(a)) & 0x7FFFFFFF) | sign)))
    r = (ax + 0xFFF + ((ax >> 13) & 1)) & 0x7FFFE000
    return _bits_f32(np.int32(np.uint32(r | sign)))


# -- rms_norm / layer_norm --------------------------------------------------------------------
@_jit
def rms_fwd(start, stop, x, w, out, eps, has_w, mode):
    """out[r] = rnd(rnd(x[r] * rsqrt(mean(x[r]^2) + eps)) * w) for rows [start, stop)."""
    d = x.shape[1]
    z = x.dtype.type(0)
    for r in range(start, stop):
        s = z
        for j in range(d):
            s += x[r, j] * x[r, j]
        inv = 1 / math.sqrt(s * (1 / x.dtype.type(d)) + eps)
        if has_w:
            for j in range(d):
                out[r, j] = rnd(rnd(x[r, j] * inv, mode) * w[j], mode)
        else:
            for j in range(d):
                out[r, j] = rnd(x[r, j] * inv, mode)


@_jit
def _mean_rstd(x, r, eps):
    """Mean and 1 / sqrt(variance + eps) of row r of x (the variance of the centred row)."""
    d = x.shape[1]
    z = x.dtype.type(0)
    inv_d = 1 / x.dtype.type(d)
    s = z
    for j in range(d):
        s += x[r, j]
    mu = s * inv_d
    v = z
    for j in range(d):
        c = x[r, j] - mu
        v += c * c
    return mu, 1 / math.sqrt(v * inv_d + eps)


@_jit
def ln_fwd(start, stop, x, w, b, out, eps, mode):
    """out[r] = rnd(rnd(rnd((x - mean) * rsqrt(var + eps)) * w) + b) for rows [start, stop)
    (w ones and b zeros when absent: the same roundings, and a loop without branches)."""
    d = x.shape[1]
    for r in range(start, stop):
        mu, inv = _mean_rstd(x, r, eps)
        for j in range(d):
            out[r, j] = rnd(rnd(rnd((x[r, j] - mu) * inv, mode) * w[j], mode) + b[j], mode)


@_jit
def rms_bwd(start, stop, x, w, g, dx, dwp, eps, has_w, block):
    """Blocks [start, stop) of `block` rows: dx = r * gw - x * r^3 * mean(gw * x) with
    gw = g * w, r = rsqrt(mean(x^2) + eps); dwp[blk] = sum over the block of g * x * r."""
    n, d = x.shape
    z = x.dtype.type(0)
    inv_d = 1 / x.dtype.type(d)
    for blk in range(start, stop):
        for j in range(d):
            dwp[blk, j] = z
        for r in range(blk * block, min(n, (blk + 1) * block)):
            s = z
            t = z
            for j in range(d):
                s += x[r, j] * x[r, j]
                gw = g[r, j] * w[j] if has_w else g[r, j]
                t += gw * x[r, j]
            inv = 1 / math.sqrt(s * inv_d + eps)
            c = inv * inv * inv * t * inv_d
            for j in range(d):
                gw = g[r, j] * w[j] if has_w else g[r, j]
                dx[r, j] = inv * gw - x[r, j] * c
                dwp[blk, j] += g[r, j] * x[r, j] * inv


@_jit
def ln_bwd(start, stop, x, w, g, dx, dwp, dbp, eps, has_w, block):
    """Blocks of `block` rows: with xh = (x - mean) * rstd, gw = g * w,
    dx = rstd * (gw - mean(gw) - xh * mean(gw * xh)); dwp[blk] += g * xh; dbp[blk] += g."""
    n, d = x.shape
    z = x.dtype.type(0)
    inv_d = 1 / x.dtype.type(d)
    for blk in range(start, stop):
        for j in range(d):
            dwp[blk, j] = z
            dbp[blk, j] = z
        for r in range(blk * block, min(n, (blk + 1) * block)):
            mu, rstd = _mean_rstd(x, r, eps)
            sg = z
            sgx = z
            for j in range(d):
                gw = g[r, j] * w[j] if has_w else g[r, j]
                sg += gw
                sgx += gw * (x[r, j] - mu)
            mg = sg * inv_d
            mgx = sgx * rstd * inv_d
            for j in range(d):
                xh = (x[r, j] - mu) * rstd
                gw = g[r, j] * w[j] if has_w else g[r, j]
                dx[r, j] = rstd * (gw - mg - xh * mgx)
                dwp[blk, j] += g[r, j] * xh
                dbp[blk, j] += g[r, j]


# -- rope --------------------------------------------------------------------------------------
@_jit
def rope(start, stop, x, cos, sin, out, dims, traditional, mode):
    """Rows (b, h) of x (B, H, T, D) in [start, stop): each pair (x1, x2) of the first `dims`
    features rotated by the angle whose cos/sin (rounded to x's dtype) are cos[b', t, i]
    (b' = b, or 0 for one shared table); the remaining features copied."""
    nh, nt, d = x.shape[1], x.shape[2], x.shape[3]
    half = dims // 2
    shared = cos.shape[0] == 1
    for bh in range(start, stop):
        b = bh // nh
        h = bh - b * nh
        cb = 0 if shared else b
        for t in range(nt):
            for i in range(half):
                if traditional:
                    i1 = 2 * i
                    i2 = i1 + 1
                else:
                    i1 = i
                    i2 = i + half
                c = cos[cb, t, i]
                s = sin[cb, t, i]
                x1 = x[b, h, t, i1]
                x2 = x[b, h, t, i2]
                out[b, h, t, i1] = rnd(rnd(x1 * c, mode) - rnd(x2 * s, mode), mode)
                out[b, h, t, i2] = rnd(rnd(x1 * s, mode) + rnd(x2 * c, mode), mode)
            for j in range(dims, d):
                out[b, h, t, j] = x[b, h, t, j]


# -- scaled_dot_product_attention --------------------------------------------------------------
@_jit
def _exp32(x):
    """exp of a float32 without a libm call, so a loop of them vectorizes: x = k ln2 + r with
    |r| <= ln2 / 2 (two-part ln2), exp(r) by its degree-7 Taylor polynomial (error below
    1e-8 relative), times 2**(k - 1) built from bits, times 2; 0 below -87 (no subnormal
    results: softmax weights that small do not matter), inf above 88.72."""
    f = np.float32
    xc = min(max(x, f(-87.0)), f(88.72))
    k = np.floor(xc * f(1.4426950408889634) + f(0.5))  # a float: no int64 round trip
    r = xc - k * f(0.693145751953125) - k * f(1.428606765330187e-06)
    p = f(1.0) + r * (f(1.0) + r * (f(0.5) + r * (f(1 / 6) + r * (f(1 / 24) + r * (
        f(1 / 120) + r * (f(1 / 720) + r * f(1 / 5040)))))))
    y = p * _bits_f32(np.int32((np.int32(k) + 126) << 23)) * f(2.0)
    y = f(0.0) if x < f(-87.0) else y
    y = f(np.inf) if x > f(88.72) else y
    return x if x != x else y


def fexp(x):
    """exp: `_exp32` for float32, libm's for float64 (typed by Numba at compile time; LLVM
    inlines it into the loops, and inlining it in Numba's IR instead warns)."""
    return math.exp(x)


@overload(fexp)
def _fexp(x):
    if x == types.float32:
        return lambda x: _exp32(x)
    return lambda x: math.exp(x)


@_jit
def _row_max(s, rr, n):
    """max of s[rr, :n], NaN if any is NaN (-inf for n == 0); four independent lanes."""
    m0 = m1 = m2 = m3 = s.dtype.type(-np.inf)
    bad = False
    n4 = n - n % 4
    for j in range(0, n4, 4):
        a0 = s[rr, j]
        a1 = s[rr, j + 1]
        a2 = s[rr, j + 2]
        a3 = s[rr, j + 3]
        m0 = a0 if a0 > m0 else m0
        m1 = a1 if a1 > m1 else m1
        m2 = a2 if a2 > m2 else m2
        m3 = a3 if a3 > m3 else m3
        bad |= (a0 != a0) | (a1 != a1) | (a2 != a2) | (a3 != a3)
    for j in range(n4, n):
        a0 = s[rr, j]
        m0 = a0 if a0 > m0 else m0
        bad |= a0 != a0
    m = max(max(m0, m1), max(m2, m3))
    return s.dtype.type(np.nan) if bad else m


def _jit_sdpa(py_func):
    return _jit(py_func, fastmath={"reassoc", "nsz", "contract"})


def _inline_sdpa(py_func):
    """Inlined in Numba's IR: `_probs` compiled on its own gave the attention kernels code
    that differed in the last bit between a fresh build and one loaded from the cache."""
    return _jit(py_func, fastmath={"reassoc", "nsz", "contract"}, inline="always")


@_inline_sdpa
def _probs(q, k, mask, mstride, sinks, tq, tk, rep, causal, mask_kind, has_sinks, fmin, mode,
           b, kh, r0, nr, qbase, kbase, s, lims, pm, ps):
    """The attention probabilities of the `nr` query rows r0.. of kv head `kh` of batch `b`
    (q rows qbase.., k rows kbase..): row rr sees keys j < lims[rr] (the causal limit, lower-
    right aligned: row i sees keys j <= i + Tk - Tq), whose probabilities go to s[rr, j];
    pm[rr] is the probability of each key past the limit, ps[rr] the sink's. Per row: the
    scores (rounded like the graph's matmul), the mask (flat, row (b, h, i) at `mstride` .
    (b, h, i): a bool mask, as 0 / 1, keeps or puts `fmin`, additive adds), the sink logit,
    the softmax in float32 (exp(s - max) / sum, each probability rounded). Returns the number
    of keys with a nonzero probability in some row (a prefix)."""
    dk = q.shape[1]
    z = q.dtype.type(0)
    jmax = 0
    for rr in range(nr):
        lim = tk
        if causal:
            lim = min(tk, max(0, (r0 + rr) % tq + tk - tq + 1))
        lims[rr] = lim
        jmax = max(jmax, lim)
    for j in range(jmax):
        for rr in range(nr):
            if j < lims[rr]:
                dot = z
                for d in range(dk):
                    dot += q[qbase + rr, d] * k[kbase + j, d]
                s[rr, j] = dot
    jend = jmax
    for rr in range(nr):
        r = r0 + rr
        h = kh * rep + r // tq
        lim = lims[rr]
        if mode != 0:
            for j in range(lim):
                s[rr, j] = rnd(s[rr, j], mode)
        m0 = b * mstride[0] + h * mstride[1] + (r % tq) * mstride[2]
        if mask_kind == 1:
            for j in range(lim):
                if mask[m0 + j] == 0:
                    s[rr, j] = fmin
        elif mask_kind == 2:
            for j in range(lim):
                s[rr, j] = rnd(s[rr, j] + mask[m0 + j], mode)
        m = _row_max(s, rr, lim)
        if lim < tk and fmin > m:
            m = fmin
        if has_sinks and sinks[h] > m:
            m = sinks[h]
        den = z
        for j in range(lim):
            e = fexp(s[rr, j] - m)
            s[rr, j] = e
            den += e
        em = z
        if lim < tk:
            em = fexp(fmin - m)
            den += em * (tk - lim)
        es = fexp(sinks[h] - m) if has_sinks else z
        den += es
        if mode == 0:
            for j in range(lim):
                s[rr, j] = s[rr, j] / den
        else:
            for j in range(lim):
                s[rr, j] = rnd(s[rr, j] / den, mode)
        pm[rr] = rnd(em / den, mode)
        ps[rr] = rnd(es / den, mode)
        if pm[rr] != 0:
            jend = tk
    return jend


@_jit_sdpa
def sdpa(start, stop, q, k, v, mask, mstride, sinks, tq, tk, nkv, rep, causal, mask_kind,
         has_sinks, fmin, mode, rb, kstride, vstride, out):
    """Attention for tasks [start, stop) over rows of 2-D views: q and out (B * Nq * Tq, D);
    k and v hold (batch, kv head) pair p's Tk rows from row p * kstride (p * vstride), so a
    KV cache's first Tk positions are read where they lie. A task is a block of at most `rb`
    query rows of one (batch, kv head); those rows are contiguous (the kv head's `rep` query
    heads one after another, query head h = kv_head * rep + r // Tq, row i = r % Tq), so each
    key and value row is loaded once for the whole block and K/V are never repeated. q is
    pre-scaled. Per block: the probabilities (`_probs`), then p @ v."""
    dv = v.shape[1]
    nrows = rep * tq
    nblk = (nrows + rb - 1) // rb
    z = q.dtype.type(0)
    s = np.empty((rb, tk), q.dtype)
    acc = np.empty((rb, dv), q.dtype)
    pm = np.empty(rb, q.dtype)
    ps = np.empty(rb, q.dtype)
    lims = np.empty(rb, np.int64)
    for task in range(start, stop):
        blk = task % nblk
        bk = task // nblk  # b * nkv + kv head
        b = bk // nkv
        r0 = blk * rb
        nr = min(nrows, r0 + rb) - r0
        qbase = bk * nrows + r0  # = (b * nq + kh * rep) * tq + r0
        kbase = bk * kstride
        vbase = bk * vstride
        jend = _probs(q, k, mask, mstride, sinks, tq, tk, rep, causal, mask_kind, has_sinks,
                      fmin, mode, b, bk - b * nkv, r0, nr, qbase, kbase, s, lims, pm, ps)
        for rr in range(nr):
            for d in range(dv):
                acc[rr, d] = z
        for j in range(jend):
            for rr in range(nr):
                p = s[rr, j] if j < lims[rr] else pm[rr]
                if p != 0:
                    for d in range(dv):
                        acc[rr, d] += p * v[vbase + j, d]
        for rr in range(nr):
            for d in range(dv):
                out[qbase + rr, d] = rnd(acc[rr, d], mode)


@_jit_sdpa
def _score_grads(v, g, mask, mstride, tq, rep, mask_kind, b, kh, r0, nr, qbase, kbase, s,
                 lims, ps, dp, dsk):
    """The score gradients of a block of rows (the arguments as `_probs`, whose probabilities
    s holds): dp = g @ v^T, then dS = P * (dP - D) with D = sum(P * dP) (the softmax's vjp)
    into dp, 0 where a bool mask puts `fmin` (no gradient flows through the masked value);
    the sink logit's gradient -P_sink * D is added to dsk[h - kh * rep]."""
    dv = v.shape[1]
    z = v.dtype.type(0)
    jmax = 0
    for rr in range(nr):
        jmax = max(jmax, lims[rr])
    for j in range(jmax):
        for rr in range(nr):
            if j < lims[rr]:
                dot = z
                for d in range(dv):
                    dot += g[qbase + rr, d] * v[kbase + j, d]
                dp[rr, j] = dot
    for rr in range(nr):
        lim = lims[rr]
        dd = z
        for j in range(lim):
            dd += s[rr, j] * dp[rr, j]
        hr = (r0 + rr) // tq
        dsk[hr] -= ps[rr] * dd
        for j in range(lim):
            dp[rr, j] = s[rr, j] * (dp[rr, j] - dd)
        if mask_kind == 1:
            m0 = b * mstride[0] + (kh * rep + hr) * mstride[1] + (r0 + rr) % tq * mstride[2]
            for j in range(lim):
                if mask[m0 + j] == 0:
                    dp[rr, j] = z


@_jit_sdpa
def sdpa_bwd(start, stop, q, k, v, mask, mstride, sinks, tq, tk, nkv, rep, causal, mask_kind,
             has_sinks, fmin, mode, rb, g, scale, dq, dk, dv, dsk):
    """The attention backward for tasks [start, stop), one per (batch, kv head) (the forward's
    arguments, g the output's cotangent as q's rows): its rep * Tq query rows in blocks of
    `rb`, each block's probabilities recomputed (`_probs`), then dq = scale * dS @ k and, over
    all the blocks, dk += dS^T @ q (q pre-scaled), dv += P^T @ g into the task's own key rows
    (no other task writes them), and dsk[task, r] the gradient of query head kh * rep + r's
    sink logit from this batch element."""
    nd, ndv = q.shape[1], v.shape[1]
    nrows = rep * tq
    z = q.dtype.type(0)
    s = np.empty((rb, tk), q.dtype)
    dp = np.empty((rb, tk), q.dtype)
    acc = np.empty((rb, nd), q.dtype)
    pm = np.empty(rb, q.dtype)
    ps = np.empty(rb, q.dtype)
    lims = np.empty(rb, np.int64)
    for bk in range(start, stop):
        b = bk // nkv
        kh = bk - b * nkv
        kbase = bk * tk
        dk[kbase:kbase + tk] = z
        dv[kbase:kbase + tk] = z
        dsk[bk] = z
        for r0 in range(0, nrows, rb):
            nr = min(nrows, r0 + rb) - r0
            qbase = bk * nrows + r0
            jend = _probs(q, k, mask, mstride, sinks, tq, tk, rep, causal, mask_kind,
                          has_sinks, fmin, mode, b, kh, r0, nr, qbase, kbase, s, lims, pm, ps)
            _score_grads(v, g, mask, mstride, tq, rep, mask_kind, b, kh, r0, nr, qbase, kbase,
                         s, lims, ps, dp, dsk[bk])
            acc[:nr] = z
            for j in range(jend):
                for rr in range(nr):
                    p = pm[rr]
                    if j < lims[rr]:
                        p = s[rr, j]
                        ds = dp[rr, j]
                        if ds != 0:
                            for d in range(nd):
                                acc[rr, d] += ds * k[kbase + j, d]
                                dk[kbase + j, d] += ds * q[qbase + rr, d]
                    if p != 0:
                        for d in range(ndv):
                            dv[kbase + j, d] += p * g[qbase + rr, d]
            for rr in range(nr):
                for d in range(nd):
                    dq[qbase + rr, d] = acc[rr, d] * scale
