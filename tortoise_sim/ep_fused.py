"""The fused EP engine (`run_ep(engine="fused")`, the default): the batched engine's iteration with cheaper rules.

Same iteration, same floating-point operations, same result bit for bit as `engine="batched"` (and so as the
reference engine); what changes is how much work one iteration does:

* **one quadrature pass per iteration**: the source and target cavities of every pair go through one
  Gauss-Jacobi batch, deduplicated on the exact bit pattern of (alpha, beta), instead of two batches with a Python
  dict lookup and two array copies per row;
* **a per-slot rule memo**: a pair side whose cavity parameters are bit-identical to its previous solve (a settled
  part of the graph, or a factor whose inputs did not move) reuses that rule without recomputing it;
* **Jacobi polynomials as array recurrences**: `jacobi_eval` evaluates P_n^(a, b)(x) with the three-term recurrence
  of scipy's `eval_jacobi` (integer degree), operation for operation, with the factors that depend only on the
  row formed once per row and step (`jacobi_coefficients`, shared by P_n and P_{n-1}) instead of once per node;
  `binom(n + a, n)` is scipy's own ufunc;
* **tilted moments in cache-sized blocks**: each pair's potential argument is formed for its own kind only and
  exponentiated once (the batched engine forms and exponentiates both and selects), over blocks of pairs whose
  temporaries stay in cache;
* the eigenvalues still come from LAPACK `dsterf`, one call per rule (`tridiagonal_eigvals`), which is what makes
  them equal the ones `roots_jacobi` starts from; that call is most of what an iteration costs. The nodes are
  those eigenvalues after one Newton step whose result, and the weights, depend on every bit of them, so no other
  eigen-solver will do; nearly every rule of a run has its own (alpha, beta), so no cache saves calls; and
  stacking many rules into one `dsterf` call (`benchmarks.ep_engine.stacked_dsterf`) gives the same bits but
  saves only the per-call overhead, not the iterations inside the routine that make up its cost (measured side by
  side in `memsim bench ep-engine`).

The equality with the batched engine is checked bit for bit (`np.array_equal` on beliefs and messages, equal
iteration and censoring counts) on random graphs and on the `benchmarks.ep_scaling` graphs
(tests/tortoise_sim/test_ep_fused.py).
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor

import numpy as np
from scipy.special import binom, eval_jacobi

from .ep_batched import _batched_result, _batched_state, _jacobi_mass, tridiagonal_eigvals
from .ep_reference import (
    BETA_FLOOR,
    MSG_CLIP,
    EPResult,
    FactorGraph,
    factor_pairs,
    gauss_jacobi_nodes,
    moment_match,
    z_floor,
)

# Threads for the LAPACK eigenvalue calls: 1 = the calling thread only (default). 2 overlaps the calls of two
# threads where a core is free; on the shared 2-core benchmark machine it measured no faster, so it is an option.
EIG_THREADS = 1
EIG_THREAD_MIN_ROWS = 256  # fewer rules than this are solved in the calling thread
_pool: tuple[int, int, ThreadPoolExecutor] | None = None  # (pid, workers, pool): a forked child makes its own


def eigenvalues(diag: np.ndarray, off: np.ndarray, threads: int | None = None) -> np.ndarray:
    """`tridiagonal_eigvals` with the rows split over `threads` threads (default `EIG_THREADS`). ctypes releases
    the GIL inside each LAPACK call, so on a machine with a free core the calls of two threads overlap; every row
    is still its own `dsterf` call, so the values do not depend on the split."""
    global _pool
    threads = EIG_THREADS if threads is None else threads
    m = diag.shape[0]
    if threads <= 1 or m < EIG_THREAD_MIN_ROWS:
        return tridiagonal_eigvals(diag, off)
    if _pool is None or _pool[0] != os.getpid() or _pool[1] < threads - 1:
        _pool = (os.getpid(), threads - 1, ThreadPoolExecutor(max_workers=threads - 1, thread_name_prefix="ep-eig"))
    pool = _pool[2]
    bounds = np.linspace(0, m, threads + 1).astype(int)
    futures = [pool.submit(tridiagonal_eigvals, diag[lo:hi], off[lo:hi])
               for lo, hi in zip(bounds[1:-1], bounds[2:], strict=True)]
    first = tridiagonal_eigvals(diag[:bounds[1]], off[:bounds[1]])
    return np.concatenate([first] + [f.result() for f in futures])


def jacobi_coefficients(n: int, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The per-row factors of `jacobi_eval`'s recurrence steps k = 1 .. n-1 for rows (M, 1) of parameters: an array
    (3, n-1, M, 1) of (c_p, c_d, den), each formed in the scalar code's order of operations (so bit for bit the
    values it forms per step). Degree n-1 with the same parameters uses the first n-2 steps of the same array."""
    k = np.arange(1, max(n, 1), dtype=float)[:, None, None]  # (n-1, 1, 1)
    t = 2 * k + a + b
    c_p = (t * (t + 1)) * (t + 2)
    c_d = ((2 * k) * (k + b)) * (t + 2)
    den = ((2 * (k + a + 1)) * (k + a + b + 1)) * t
    return np.stack([c_p, c_d, den])


def jacobi_eval(n: int, a: np.ndarray, b: np.ndarray, x: np.ndarray, coeffs: np.ndarray | None = None) -> np.ndarray:
    """`scipy.special.eval_jacobi(n, a, b, x)` for an integer degree n, rows (M, 1) of parameters and (M, k) points.

    The recurrence is the one scipy evaluates for an integer degree, in the same order of operations; the parts of
    each step that depend only on (k, a, b) are formed per row (`jacobi_coefficients`, passed in as `coeffs` when
    the caller reuses them), which is exact because the scalar code forms them left to right before the first
    x-dependent factor. The x-dependent part runs in place (IEEE products and sums are commutative, so `d * c_d`
    is `c_d * d` bit for bit). Degrees below 2 go to scipy directly.
    """
    if n < 2:
        return eval_jacobi(np.array(n, dtype=np.int64), a, b, x)
    if coeffs is None:
        coeffs = jacobi_coefficients(n, a, b)
    c_p, c_d, den = coeffs[0], coeffs[1], coeffs[2]
    xm1 = x - 1
    d = (a + b + 2) * xm1 / (2 * (a + 1))
    p = d + 1
    tmp = np.empty_like(d)
    for kk in range(n - 1):
        np.multiply(c_p[kk], xm1, out=tmp)
        tmp *= p
        d *= c_d[kk]
        tmp += d
        tmp /= den[kk]
        d, tmp = tmp, d
        p += d
    return binom(n + a, float(n)) * p


def _rules_general(alpha: np.ndarray, beta: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Nodes and halved weights for rows with alpha != beta: `gauss_jacobi_batch`'s general branch with
    `jacobi_eval` in place of the `eval_jacobi` ufunc (the recurrence factors of (a, b) formed once for P_n and
    P_{n-1})."""
    a = (beta - 1.0)[:, None]
    b = (alpha - 1.0)[:, None]
    with np.errstate(all="ignore"):
        ab = a[:, 0] + b[:, 0]
        mu0 = _jacobi_mass(ab, a[:, 0], b[:, 0])
        k = np.arange(n, dtype="d")[None, :]
        an = np.where(k == 0, (b - a) / (2 + a + b),
                      (b * b - a * a) / ((2.0 * k + a + b) * (2.0 * k + a + b + 2)))
        an = np.where((ab == 0.0)[:, None] & (k != 0), 0.0, an)
        kb = k[:, 1:]
        bn = (2.0 / (2.0 * kb + a + b) * np.sqrt((kb + a) * (kb + b) / (2 * kb + a + b + 1))
              * np.where(kb == 1, 1.0, np.sqrt(kb * (kb + a + b) / (2.0 * kb + a + b - 1))))
        x = eigenvalues(an, bn)
        coef = jacobi_coefficients(n, a, b) if n >= 2 else None
        y = jacobi_eval(n, a, b, x, coef)
        dy = 0.5 * (n + a + b + 1) * jacobi_eval(n - 1, a + 1, b + 1, x)
        x = x - y / dy
        fm = jacobi_eval(n - 1, a, b, x, None if coef is None else coef[:, : n - 2])
        log_fm = np.log(np.abs(fm))
        log_dy = np.log(np.abs(dy))
        fm = fm / np.exp((log_fm.max(axis=1, keepdims=True) + log_fm.min(axis=1, keepdims=True)) / 2.0)
        dy = dy / np.exp((log_dy.max(axis=1, keepdims=True) + log_dy.min(axis=1, keepdims=True)) / 2.0)
        w = 1.0 / (fm * dy)
        w = w * (mu0[:, None] / w.sum(axis=1, keepdims=True))
    return (x + 1.0) / 2.0, w / 2.0


def gauss_jacobi_rules(alpha: np.ndarray, beta: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """`gauss_jacobi_batch(alpha, beta, n)` (same values bit for bit), solving each distinct (alpha, beta) bit
    pattern once."""
    alpha = np.ascontiguousarray(alpha, dtype=float)
    beta = np.ascontiguousarray(beta, dtype=float)
    m = alpha.shape[0]
    xs = np.empty((m, n))
    ws = np.empty((m, n))
    if m == 0:
        return xs, ws
    ua, ub = alpha.view(np.uint64), beta.view(np.uint64)
    order = np.lexsort((ub, ua))
    sa, sb = ua[order], ub[order]
    first = np.ones(m, dtype=bool)
    first[1:] = (sa[1:] != sa[:-1]) | (sb[1:] != sb[:-1])
    group = np.cumsum(first) - 1
    uniq = order[first]  # one representative row per distinct key
    inverse = np.empty(m, dtype=np.int64)
    inverse[order] = group
    ua_, ub_ = alpha[uniq], beta[uniq]
    ux = np.empty((uniq.size, n))
    uw = np.empty((uniq.size, n))
    sym = (beta - 1.0)[uniq] == (alpha - 1.0)[uniq]  # roots_jacobi's Gegenbauer/Legendre branch: scalar path
    for i in np.flatnonzero(sym):
        ux[i], uw[i] = gauss_jacobi_nodes(float(ua_[i]), float(ub_[i]), n)
    gen = np.flatnonzero(~sym)
    if gen.size:
        ux[gen], uw[gen] = _rules_general(ua_[gen], ub_[gen], n)
    xs[:] = ux[inverse]
    ws[:] = uw[inverse]
    return xs, ws


TILT_CHUNK = 512  # pairs per block: the (block, n, n) temporaries stay in cache


def tilted_moments_fused(xs: np.ndarray, ws: np.ndarray, xt: np.ndarray, wt: np.ndarray, nand: np.ndarray,
                         weight: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """`ep.tilted_moments`, value for value: in blocks of `TILT_CHUNK` pairs, each pair's potential argument built
    for its own kind only (NAND -w x y, IMPL -w (x - y)^2) and exponentiated once, squares of the nodes formed
    before broadcasting. Every element goes through the same operations as there, and every sum is over the same
    contiguous 64 products of one pair, so the results are equal bit for bit."""
    p, n = xs.shape
    mu_s, nu_s, mu_t, nu_t, z = (np.empty(p) for _ in range(5))
    for s in range(0, p, TILT_CHUNK):
        e = min(p, s + TILT_CHUNK)
        q = e - s
        a, aw, b, bw, kind = xs[s:e], ws[s:e], xt[s:e], wt[s:e], nand[s:e]
        w3 = weight[s:e, None, None]
        arg = np.empty((q, n, n))
        ni = np.flatnonzero(kind)
        ii = np.flatnonzero(~kind)
        if ni.size:
            arg[ni] = -w3[ni] * (a[ni][:, :, None] * b[ni][:, None, :])
        if ii.size:
            d = a[ii][:, :, None] - b[ii][:, None, :]
            arg[ii] = -w3[ii] * (d * d)
        wgt = aw[:, :, None] * bw[:, None, :] * np.exp(arg)
        zz = wgt.reshape(q, n * n).sum(axis=1)
        z[s:e] = zz
        with np.errstate(divide="ignore", invalid="ignore"):
            mu_s[s:e] = (wgt * a[:, :, None]).reshape(q, n * n).sum(axis=1) / zz
            nu_s[s:e] = (wgt * (a * a)[:, :, None]).reshape(q, n * n).sum(axis=1) / zz
            mu_t[s:e] = (wgt * b[:, None, :]).reshape(q, n * n).sum(axis=1) / zz
            nu_t[s:e] = (wgt * (b * b)[:, None, :]).reshape(q, n * n).sum(axis=1) / zz
    return mu_s, nu_s, mu_t, nu_t, z


class _RuleMemo:
    """Per pair-side slot: the (alpha, beta) bit pattern last solved there and its rule."""

    def __init__(self, slots: int, n: int) -> None:
        self.key = np.full((slots, 2), np.uint64(0xFFFFFFFFFFFFFFFF), dtype=np.uint64)  # a NaN pattern: no hit
        self.x = np.zeros((slots, n))
        self.w = np.zeros((slots, n))
        self.valid = np.zeros(slots, dtype=bool)

    def rules(self, slots: np.ndarray, alpha: np.ndarray, beta: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
        key = np.stack([np.ascontiguousarray(alpha).view(np.uint64), np.ascontiguousarray(beta).view(np.uint64)],
                       axis=1)
        hit = self.valid[slots] & (self.key[slots] == key).all(axis=1)
        miss = np.flatnonzero(~hit)
        if miss.size:
            mx, mw = gauss_jacobi_rules(alpha[miss], beta[miss], n)
            ms = slots[miss]
            self.key[ms] = key[miss]
            self.x[ms] = mx
            self.w[ms] = mw
            self.valid[ms] = True
        return self.x[slots], self.w[slots]


def run_ep_fused(fg: FactorGraph, *, damping: float, n_quad: int, max_iter: int, tol: float, warm_start: bool,
                 gamma: float, impl_boost: bool) -> EPResult:
    """The batched engine's iteration (`ep_batched.run_ep_batched`) with the rule and moment steps above."""
    factors = sorted(fg.factors, key=lambda f: f.key)
    claim_ids = list(fg.claims)
    cidx = {c: i for i, c in enumerate(claim_ids)}
    slot_of: dict[tuple[str, str], int] = {}
    slot_keys: list[tuple[str, str]] = []
    m0: list[tuple[float, float]] = []
    for f in factors:
        for c in f.inputs:
            if f.direct and f.direction == "unidirectional" and c == f.inputs[0]:
                continue
            slot_of[(f.key, c)] = len(slot_keys)
            slot_keys.append((f.key, c))
            v = fg.msgs.get((f.key, c), (0.0, 0.0))
            m0.append((float(v[0]), float(v[1])))
    n_slots = len(slot_keys)
    msgs = np.array(m0, dtype=float).reshape(n_slots, 2)
    p_fac, p_s, p_t, p_sslot, p_tslot, p_sconst = [], [], [], [], [], []
    for fi, f in enumerate(factors):
        for s, t in factor_pairs(f):
            p_fac.append(fi)
            p_s.append(cidx[s])
            p_t.append(cidx[t])
            p_tslot.append(slot_of[(f.key, t)])
            if (f.key, s) in slot_of:
                p_sslot.append(slot_of[(f.key, s)])
                p_sconst.append((0.0, 0.0))
            else:
                p_sslot.append(-1)
                v = fg.back_cavity.get((f.key, s), (0.0, 0.0))
                p_sconst.append((float(v[0]), float(v[1])))
    n_pairs = len(p_fac)
    pf = np.array(p_fac, dtype=np.int64)
    ps, pt = np.array(p_s, dtype=np.int64), np.array(p_t, dtype=np.int64)
    psslot, ptslot = np.array(p_sslot, dtype=np.int64), np.array(p_tslot, dtype=np.int64)
    psconst = np.array(p_sconst, dtype=float).reshape(n_pairs, 2)
    has_sslot = psslot >= 0
    psslot0 = np.maximum(psslot, 0)
    f_nand = np.array([f.kind == "NAND" for f in factors], dtype=bool)
    f_impl = np.array([f.kind == "IMPL" for f in factors], dtype=bool)
    f_weight = np.array([float(f.weight) for f in factors], dtype=float)
    f_bidir = np.array([f.direction == "bidirectional" for f in factors], dtype=bool)
    f_nary = np.array([len(f.inputs) > 2 for f in factors], dtype=bool)
    f_scale = np.array([(2.0 / (len(f.inputs) * (len(f.inputs) - 1)) if (f.kind == "NAND" and
                         f.direction == "bidirectional") else 1.0 / (len(f.inputs) - 1)) for f in factors])
    slot_fac = np.empty(n_slots, dtype=np.int64)
    fkey_idx = {f.key: fi for fi, f in enumerate(factors)}
    for i, (key, _) in enumerate(slot_keys):
        slot_fac[i] = fkey_idx[key]
    receives = np.zeros(n_slots, dtype=bool)
    receives[ptslot] = True
    receives[psslot[f_bidir[pf] & has_sslot]] = True
    slot_nary = f_nary[slot_fac]
    f_in, f_in_mask, last_seen, seen, affected, aidx, base, inc_slots, inc_claim, q = _batched_state(
        fg, factors, cidx, slot_keys, claim_ids)
    warm_skipped = 0
    delta = 0.0
    one_minus = 1.0 - damping
    memo = _RuleMemo(2 * n_pairs, n_quad)
    all_pairs = np.arange(n_pairs, dtype=np.int64)

    for k in range(1, max_iter + 1):
        if warm_start and len(factors):
            now = q[f_in]
            with np.errstate(divide="ignore", invalid="ignore"):
                rel = np.abs(now - last_seen) / np.maximum(last_seen, 1e-6)
            close = np.all((rel <= gamma).all(axis=2) | ~f_in_mask, axis=1)
            skip = seen & close
            warm_skipped += int(skip.sum())
            upd = ~skip
            last_seen[upd] = now[upd]
            seen |= upd
            jsel = np.flatnonzero(upd[pf])
        else:
            upd = np.ones(len(factors), dtype=bool)
            jsel = all_pairs
        new_msgs = msgs.copy()
        if jsel.size:
            jf = pf[jsel]
            m_s = np.where(has_sslot[jsel][:, None], msgs[psslot0[jsel]], psconst[jsel])
            tsl_all = ptslot[jsel]
            m_t = msgs[tsl_all]
            cav_s = q[ps[jsel]] - 1.0 - m_s
            cav_t = q[pt[jsel]] - 1.0 - m_t
            til_s = np.maximum(cav_s + 1.0, BETA_FLOOR)
            til_t = np.maximum(cav_t + 1.0, BETA_FLOOR)
            j = jsel.size
            til = np.concatenate([til_s, til_t])
            xw, ww = memo.rules(np.concatenate([jsel, jsel + n_pairs]), til[:, 0].copy(), til[:, 1].copy(), n_quad)
            x1, x2, w1, w2 = xw[:j], xw[j:], ww[:j], ww[j:]
            mu_s, nu_s, mu_t, nu_t, z = tilted_moments_fused(x1, w1, x2, w2, f_nand[jf], f_weight[jf])
            z_floor(z, ((mu_s, nu_s, til_s[:, 0], til_s[:, 1]), (mu_t, nu_t, til_t[:, 0], til_t[:, 1])))
            a_s, b_s = moment_match(mu_s, nu_s)
            a_t2, b_t2 = moment_match(mu_t, nu_t)
            r_s = np.stack([a_s - 1.0 - cav_s[:, 0], b_s - 1.0 - cav_s[:, 1]], axis=1)
            r_t = np.stack([a_t2 - 1.0 - cav_t[:, 0], b_t2 - 1.0 - cav_t[:, 1]], axis=1)
            if impl_boost:
                boost = f_impl[jf]
                g_s = 1.0 + 2.0 / np.maximum(til_s[:, 0] + til_s[:, 1] - 1.0, 1.0)
                g_t = 1.0 + 2.0 / np.maximum(til_t[:, 0] + til_t[:, 1] - 1.0, 1.0)
                r_s = np.where(boost[:, None], r_s * g_s[:, None], r_s)
                r_t = np.where(boost[:, None], r_t * g_t[:, None], r_t)
            nary = f_nary[jf]
            bid = f_bidir[jf]
            bsel = ~nary
            tsl = tsl_all[bsel]
            new_msgs[tsl] = np.clip(damping * r_t[bsel] + one_minus * msgs[tsl], -MSG_CLIP, MSG_CLIP)
            bs2 = bsel & bid
            ssl = psslot[jsel][bs2]
            new_msgs[ssl] = np.clip(damping * r_s[bs2] + one_minus * msgs[ssl], -MSG_CLIP, MSG_CLIP)
            if nary.any():
                nsel = np.flatnonzero(nary)
                c_slot = np.empty(2 * nsel.size, dtype=np.int64)
                c_val = np.empty((2 * nsel.size, 2))
                c_slot[0::2] = tsl_all[nsel]
                c_slot[1::2] = np.where(bid[nsel], psslot[jsel][nsel], -1)
                c_val[0::2] = np.clip(r_t[nsel], -MSG_CLIP, MSG_CLIP)
                c_val[1::2] = np.clip(r_s[nsel], -MSG_CLIP, MSG_CLIP)
                keep = c_slot >= 0
                acc = np.zeros((n_slots, 2))
                np.add.at(acc, c_slot[keep], c_val[keep])
                nslots = np.flatnonzero(slot_nary & upd[slot_fac])
                rec = nslots[receives[nslots]]
                r = np.clip(acc[rec] * f_scale[slot_fac[rec]][:, None], -MSG_CLIP, MSG_CLIP)
                new_msgs[rec] = damping * r + one_minus * msgs[rec]
                src = nslots[~receives[nslots]]
                nz = (msgs[src] != 0.0).any(axis=1)
                new_msgs[src[nz]] = 0.0
        msgs = new_msgs
        e = base.copy()
        if inc_slots.size:
            np.add.at(e, inc_claim, msgs[inc_slots])
        new_q = np.maximum(e + 1.0, BETA_FLOOR)
        old_q = q[aidx]
        if len(affected):
            ra = np.abs(new_q - old_q) / np.maximum(old_q, 1e-6)
            delta = max(0.0, float(ra.max()))
        else:
            delta = 0.0
        q = q.copy()
        q[aidx] = new_q
        if delta < tol:
            return _batched_result(k, True, q, msgs, slot_keys, claim_ids, fg, affected, warm_skipped, delta)
    return _batched_result(max_iter, False, q, msgs, slot_keys, claim_ids, fg, affected, warm_skipped, delta)
