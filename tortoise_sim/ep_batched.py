"""The batched EP engine (`run_ep(engine="batched")`): the reference iteration as array operations over all pairs.

Every step of `tortoise_sim.ep_reference.run_ep_reference` in the same floating-point operations and order, on
index arrays: the Gauss-Jacobi rules of all pairs from one batched Golub-Welsch pass (`gauss_jacobi_batch`, with
the eigenvalues from LAPACK `dsterf` like scipy's `roots_jacobi`), cavities, moment matching, IMPL boost, damping,
clipping, n-ary accumulation and belief sums as numpy expressions. The result equals the reference engine's bit
for bit (tests/tortoise_sim/test_ep_batched.py). `tortoise_sim.ep_fused` builds on the helpers here. TOR-15, TOR-16.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
from scipy.special import beta as beta_fn
from scipy.special import betaln, eval_jacobi

from .ep_reference import (
    BETA_FLOOR,
    MSG_CLIP,
    N_QUAD,
    EPResult,
    Factor,
    FactorGraph,
    Pair,
    _result,
    factor_pairs,
    gauss_jacobi_nodes,
    moment_match,
    tilted_moments,
    z_floor,
)


@functools.lru_cache(maxsize=1)
def _dsterf_pointer() -> Callable[..., None] | None:
    """LAPACK `dsterf` as a ctypes function, from scipy's Cython LAPACK table (cheaper per call than the f2py
    wrapper); None where that table is not reachable (then `scipy.linalg.lapack.dsterf` is used)."""
    try:
        import ctypes

        from scipy.linalg import cython_lapack

        cap = cython_lapack.__pyx_capi__["dsterf"]  # type: ignore[attr-defined]
        get_name = ctypes.pythonapi.PyCapsule_GetName
        get_name.restype, get_name.argtypes = ctypes.c_char_p, [ctypes.py_object]
        get_ptr = ctypes.pythonapi.PyCapsule_GetPointer
        get_ptr.restype, get_ptr.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]
        ptr = get_ptr(cap, get_name(cap))
        pint = ctypes.POINTER(ctypes.c_int)
        return ctypes.CFUNCTYPE(None, pint, ctypes.c_void_p, ctypes.c_void_p, pint)(ptr)
    except Exception:  # pragma: no cover - depends on the scipy build
        return None


def tridiagonal_eigvals(diag: np.ndarray, off: np.ndarray) -> np.ndarray:
    """Ascending eigenvalues of M symmetric tridiagonal n x n matrices (diag (M, n), off (M, n-1)) with LAPACK
    `dsterf`, one call per matrix: the routine scipy's `eigvals_banded` reaches through `dsbevd`, so the values
    equal the ones `roots_jacobi` starts from bit for bit (a batched `numpy.linalg.eigvalsh` differs by ulps)."""
    d = np.array(diag, dtype=np.float64, order="C", copy=True)
    e = np.array(off, dtype=np.float64, order="C", copy=True)
    m, n = d.shape
    fn = _dsterf_pointer()
    if fn is None:
        from scipy.linalg import lapack

        for i in range(m):
            d[i] = lapack.dsterf(d[i], e[i])[0]
        return d
    import ctypes

    nn, info = ctypes.c_int(n), ctypes.c_int(0)
    pn, pinfo = ctypes.byref(nn), ctypes.byref(info)
    bd, be = d.ctypes.data, e.ctypes.data
    sd, se = 8 * n, 8 * (n - 1)
    for i in range(m):
        fn(pn, bd + i * sd, be + i * se, pinfo)
        if info.value != 0:  # not converged: let the f2py wrapper redo this row as scipy would
            from scipy.linalg import lapack

            d[i] = lapack.dsterf(np.array(diag[i], dtype=float), np.array(off[i], dtype=float))[0]
            info.value = 0
    return d


def _jacobi_mass(ab: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Total mass of the Jacobi weight per row, in roots_jacobi's operations: `2.0 ** x` is Python's (libm) pow
    because numpy's vectorised power may differ from it by an ulp; the rest are ufuncs (same loop for scalars)."""
    small_rows = ab <= 1000
    with np.errstate(all="ignore"):
        pw = np.array([2.0 ** (v + 1) if v <= 1000 else 0.0 for v in ab.tolist()], dtype=float)
        small = pw * beta_fn(a + 1, b + 1)
        big = np.exp((ab + 1) * np.log(2.0) + betaln(a + 1, b + 1))
    return np.where(small_rows, small, big)


def gauss_jacobi_batch(alpha: np.ndarray, beta: np.ndarray, n: int = N_QUAD,
                       cache: dict[tuple[float, float], tuple[np.ndarray, np.ndarray]] | None = None
                       ) -> tuple[np.ndarray, np.ndarray]:
    """`gauss_jacobi_nodes` for P Beta parameter pairs at once: arrays (P, n) of nodes on [0, 1] and halved weights.

    The same construction as scipy's `roots_jacobi` (Golub-Welsch eigenvalues of the Jacobi matrix, one Newton
    step on P_n, weights from P_{n-1} and P_n', rescaled to the Beta-function mass) in the same floating-point
    operations, with the recurrence coefficients, Newton step and weights as array expressions and the eigenvalues
    from `tridiagonal_eigvals`. Pairs with alpha == beta (scipy's Legendre/Gegenbauer branches) take the cached
    scalar path. The result equals `gauss_jacobi_nodes` bit for bit (tests/tortoise_sim/test_ep_batched.py).
    `cache` (a dict kept by the caller) skips pairs already solved, like the scalar path's lru_cache.
    """
    alpha = np.asarray(alpha, dtype=float)
    beta = np.asarray(beta, dtype=float)
    p = alpha.shape[0]
    xs = np.empty((p, n))
    ws = np.empty((p, n))
    todo = np.ones(p, dtype=bool)
    keys: list[tuple[float, float]] = []
    if cache is not None:
        keys = list(zip(alpha.tolist(), beta.tolist(), strict=True))
        for i, key in enumerate(keys):
            hit = cache.get(key)
            if hit is not None:
                xs[i], ws[i] = hit
                todo[i] = False
    ja, jb = beta - 1.0, alpha - 1.0  # roots_jacobi(n, beta - 1, alpha - 1) as in gauss_jacobi_nodes
    sym = (ja == jb) & todo
    for i in np.flatnonzero(sym):
        xs[i], ws[i] = gauss_jacobi_nodes(float(alpha[i]), float(beta[i]), n)
    gen = np.flatnonzero(~(ja == jb) & todo)
    if gen.size:
        a = ja[gen][:, None]
        b = jb[gen][:, None]
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
            x = tridiagonal_eigvals(an, bn)
            nn = np.array(n, dtype=np.int64)
            nm1 = np.array(n - 1, dtype=np.int64)
            y = eval_jacobi(nn, a, b, x)
            dy = 0.5 * (n + a + b + 1) * eval_jacobi(nm1, a + 1, b + 1, x)
            x = x - y / dy
            fm = eval_jacobi(nm1, a, b, x)
            log_fm = np.log(np.abs(fm))
            log_dy = np.log(np.abs(dy))
            fm = fm / np.exp((log_fm.max(axis=1, keepdims=True) + log_fm.min(axis=1, keepdims=True)) / 2.0)
            dy = dy / np.exp((log_dy.max(axis=1, keepdims=True) + log_dy.min(axis=1, keepdims=True)) / 2.0)
            w = 1.0 / (fm * dy)
            w = w * (mu0[:, None] / w.sum(axis=1, keepdims=True))
            xs[gen] = (x + 1.0) / 2.0
            ws[gen] = w / 2.0
    if cache is not None:
        for i in np.flatnonzero(todo):
            cache[keys[i]] = (xs[i].copy(), ws[i].copy())
    return xs, ws


def _batched_state(fg: FactorGraph, factors: list[Factor], cidx: Mapping[str, int],
                   slot_keys: list[tuple[str, str]], claim_ids: list[str]) -> tuple[Any, ...]:
    """The arrays the batched and fused engines start from: factor inputs (padded) for censoring with their
    last-seen buffers, the affected (non-boundary) claims with their prior + stale base, the incoming slots of
    affected claims in slot (= reference incoming) order, and the floored initial beliefs."""
    max_n = max((len(f.inputs) for f in factors), default=0)
    f_in = np.zeros((len(factors), max_n), dtype=np.int64)
    f_in_mask = np.zeros((len(factors), max_n), dtype=bool)
    for fi, f in enumerate(factors):
        f_in[fi, :len(f.inputs)] = [cidx[c] for c in f.inputs]
        f_in_mask[fi, :len(f.inputs)] = True
    last_seen = np.zeros((len(factors), max_n, 2))
    seen = np.zeros(len(factors), dtype=bool)
    affected = sorted(c for c, cl in fg.claims.items() if not cl.boundary)
    aidx = np.array([cidx[c] for c in affected], dtype=np.int64)
    a_pos = {c: i for i, c in enumerate(affected)}
    base = np.zeros((len(affected), 2))
    for i, c in enumerate(affected):
        cl = fg.claims[c]
        pr = (cl.prior[0] - 1.0, cl.prior[1] - 1.0) if cl.prior else (0.0, 0.0)
        st = tuple(fg.stale.get(c, (0.0, 0.0)))
        base[i] = (pr[0] + st[0], pr[1] + st[1])
    inc_slots = np.array([i for i, (_, c) in enumerate(slot_keys) if c in a_pos], dtype=np.int64)
    inc_claim = np.array([a_pos[slot_keys[i][1]] for i in inc_slots], dtype=np.int64)
    q = np.array([(max(float(cl.init[0]), BETA_FLOOR), max(float(cl.init[1]), BETA_FLOOR))
                  for cl in fg.claims.values()], dtype=float).reshape(len(claim_ids), 2)
    return f_in, f_in_mask, last_seen, seen, affected, aidx, base, inc_slots, inc_claim, q


def run_ep_batched(fg: FactorGraph, *, damping: float, n_quad: int, max_iter: int, tol: float, warm_start: bool,
                    gamma: float, impl_boost: bool) -> EPResult:
    """The reference iteration (see `run_ep`) on index arrays: every step is element-wise in the same operation
    order, sums run in the reference's order (`np.add.at` is sequential) and the quadrature rules equal the scalar
    ones bit for bit (`gauss_jacobi_batch`), so the result equals the reference engine's exactly."""
    factors = sorted(fg.factors, key=lambda f: f.key)
    claim_ids = list(fg.claims)
    cidx = {c: i for i, c in enumerate(claim_ids)}
    slot_of: dict[tuple[str, str], int] = {}
    slot_keys: list[tuple[str, str]] = []
    m0: list[Pair] = []
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
    # pairs, in the reference's job order (factor order, then factor_pairs order)
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
    pf = np.array(p_fac, dtype=np.int64)
    ps, pt = np.array(p_s, dtype=np.int64), np.array(p_t, dtype=np.int64)
    psslot, ptslot = np.array(p_sslot, dtype=np.int64), np.array(p_tslot, dtype=np.int64)
    psconst = np.array(p_sconst, dtype=float).reshape(len(p_fac), 2)
    f_nand = np.array([f.kind == "NAND" for f in factors], dtype=bool)
    f_impl = np.array([f.kind == "IMPL" for f in factors], dtype=bool)
    f_weight = np.array([float(f.weight) for f in factors], dtype=float)
    f_bidir = np.array([f.direction == "bidirectional" for f in factors], dtype=bool)
    f_nary = np.array([len(f.inputs) > 2 for f in factors], dtype=bool)
    f_scale = np.array([(2.0 / (len(f.inputs) * (len(f.inputs) - 1)) if (f.kind == "NAND" and
                         f.direction == "bidirectional") else 1.0 / (len(f.inputs) - 1)) for f in factors])
    # slot -> factor; n-ary slots that receive a contribution (unidirectional star sources do not)
    slot_fac = np.empty(n_slots, dtype=np.int64)
    fkey_idx = {f.key: fi for fi, f in enumerate(factors)}
    for i, (key, _) in enumerate(slot_keys):
        slot_fac[i] = fkey_idx[key]
    receives = np.zeros(n_slots, dtype=bool)
    receives[ptslot] = True
    bid_pairs = f_bidir[pf]
    receives[psslot[bid_pairs & (psslot >= 0)]] = True
    f_in, f_in_mask, last_seen, seen, affected, aidx, base, inc_slots, inc_claim, q = _batched_state(
        fg, factors, cidx, slot_keys, claim_ids)
    warm_skipped = 0
    delta = 0.0
    one_minus = 1.0 - damping
    rules: dict[tuple[float, float], tuple[np.ndarray, np.ndarray]] = {}

    for k in range(1, max_iter + 1):
        if warm_start and len(factors):
            now = q[f_in]  # (F, max_n, 2)
            with np.errstate(divide="ignore", invalid="ignore"):
                rel = np.abs(now - last_seen) / np.maximum(last_seen, 1e-6)
            close = np.all((rel <= gamma).all(axis=2) | ~f_in_mask, axis=1)
            skip = seen & close
            warm_skipped += int(skip.sum())
            upd = ~skip
            last_seen[upd] = now[upd]
            seen |= upd
        else:
            upd = np.ones(len(factors), dtype=bool)
        new_msgs = msgs.copy()
        if upd.any() and len(pf):
            jsel = np.flatnonzero(upd[pf])
            jf = pf[jsel]
            m_s = np.where((psslot[jsel] >= 0)[:, None], msgs[np.maximum(psslot[jsel], 0)], psconst[jsel])
            m_t = msgs[ptslot[jsel]]
            q_s, q_t = q[ps[jsel]], q[pt[jsel]]
            cav_s = q_s - 1.0 - m_s
            cav_t = q_t - 1.0 - m_t
            til_s = np.maximum(cav_s + 1.0, BETA_FLOOR)
            til_t = np.maximum(cav_t + 1.0, BETA_FLOOR)
            x1, w1 = gauss_jacobi_batch(til_s[:, 0], til_s[:, 1], n_quad, rules)
            x2, w2 = gauss_jacobi_batch(til_t[:, 0], til_t[:, 1], n_quad, rules)
            mu_s, nu_s, mu_t, nu_t, z = tilted_moments(x1, w1, x2, w2, f_nand[jf], f_weight[jf])
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
            # binary factors: target always, source when bidirectional; clip after damping
            bsel = ~nary
            tsl = ptslot[jsel][bsel]
            new_msgs[tsl] = np.clip(damping * r_t[bsel] + one_minus * msgs[tsl], -MSG_CLIP, MSG_CLIP)
            bs2 = bsel & bid
            ssl = psslot[jsel][bs2]
            new_msgs[ssl] = np.clip(damping * r_s[bs2] + one_minus * msgs[ssl], -MSG_CLIP, MSG_CLIP)
            if nary.any():
                # contributions in the reference order: per pair, target then (bidirectional) source
                nsel = np.flatnonzero(nary)
                c_slot = np.empty(2 * nsel.size, dtype=np.int64)
                c_val = np.empty((2 * nsel.size, 2))
                c_slot[0::2] = ptslot[jsel][nsel]
                c_slot[1::2] = np.where(bid[nsel], psslot[jsel][nsel], -1)
                c_val[0::2] = np.clip(r_t[nsel], -MSG_CLIP, MSG_CLIP)
                c_val[1::2] = np.clip(r_s[nsel], -MSG_CLIP, MSG_CLIP)
                keep = c_slot >= 0
                acc = np.zeros((n_slots, 2))
                np.add.at(acc, c_slot[keep], c_val[keep])
                nslots = np.flatnonzero(f_nary[slot_fac] & upd[slot_fac])
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


def _batched_result(k: int, converged: bool, q: np.ndarray, msgs: np.ndarray, slot_keys: list[tuple[str, str]],
                    claim_ids: list[str], fg: FactorGraph, affected: list[str], warm_skipped: int,
                    delta: float) -> EPResult:
    qd = {c: (float(q[i, 0]), float(q[i, 1])) for i, c in enumerate(claim_ids)}
    ml = msgs.tolist()
    return _result(k, converged, qd, {key: (m[0], m[1]) for key, m in zip(slot_keys, ml, strict=True)}, fg,
                   affected, warm_skipped, delta)

