"""Expectation propagation over Beta beliefs (spec §9.1-§9.6): pure numpy/scipy, no database access.

Two layers live here:

* the numerical engine (`Claim`, `Factor`, `FactorGraph`, `run_ep`): cavities from the floored previous beliefs,
  8x8 Gauss-Jacobi tilted moments, moment matching, the IMPL boost, damping and clipping, n-ary star/clique
  factors, convergence on the relative alpha/beta change, warm-start censoring (TOR-15, TOR-16);
* the graph rules over an in-memory snapshot of the store (`GraphSnapshot`): liveness and priors (§9.1), factor
  extraction and weights (§9.2), messages and stale sums (§9.3), the affected set (§9.6 `ep.run`) and dream's
  operator selector (§9.6). `tortoise_sim.dream` reads the snapshot from Kuzu and flushes the result back.

Quirks reproduced on purpose (each verified upstream behaviour per the spec): the cavity starts from the floored
belief, not the raw natural-parameter sum; the Gauss-Jacobi weights are halved but not normalised, so the Z floor
fires by scale; a unidirectional direct edge's stored back message enters its source's cavity although it is never
updated; n-ary star targets get their single pair message scaled by 1/(n-1); a factor deactivated by a lifecycle
change keeps its last message in its surviving inputs (the stale sum, TOR-29).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from scipy.special import beta as beta_fn
from scipy.special import betaln, eval_jacobi, roots_jacobi

# §12 EP constants
DAMPING = 0.5
N_QUAD = 8
MAX_ITER = 50
TOL = 1e-4
BETA_FLOOR = 0.01
MSG_CLIP = 1000.0
VAR_FLOOR = 1e-12
DEGENERACY = 0.999
Z_FLOOR = 1e-30
GAMMA = 1e-3
NAND_BASE_WEIGHT = 8.0
OP_ON_OP_FACTOR = 2.0
OP_WEIGHT_CLAMP = (0.1, 10.0)
CLOSURE_MIN_CLAIMS = 500
CLOSURE_SHARE = 0.5
CLOSURE_MAX_PER_HOP = 200
OP_CAP = 200

FACTOR_KINDS = ("IMPL", "NAND")
DIRECTIONS = ("bidirectional", "unidirectional")
ENGINES = ("fused", "batched", "reference")
READ_TERMINAL = frozenset({"retracted", "superseded", "outdated", "archived", "deprecated"})

Pair = tuple[float, float]


# ---------------------------------------------------------------------------------------------------------------
# Numerical engine
# ---------------------------------------------------------------------------------------------------------------


@dataclass
class Claim:
    """One EP variable (§9.1). `prior` is the Beta evidence (None = uniform), `init` is q0."""

    id: str
    prior: Pair | None
    init: Pair
    boundary: bool = False


@dataclass
class Factor:
    """One IMPL/NAND factor (§9.2). `inputs[0]` is the source (edge idx 0)."""

    key: str
    kind: str
    weight: float
    direction: str
    inputs: list[str]

    @property
    def direct(self) -> bool:
        return self.key.startswith("direct:")


@dataclass
class FactorGraph:
    """In-memory factor graph (§9). `msgs[(factor key, claim id)]` is the natural-parameter increment the factor
    sends to the claim; `stale[c]` sums the stored messages of inactive factors (§9.3).

    `back_cavity` [SIM field] holds the stored `back_msg_*` of unidirectional direct edges keyed like `msgs`: such a
    message enters the source's cavity (§9.4 step 1) but neither its posterior nor any update.
    """

    claims: dict[str, Claim]
    factors: list[Factor]
    msgs: dict[tuple[str, str], Pair] = field(default_factory=dict)
    stale: dict[str, Pair] = field(default_factory=dict)
    back_cavity: dict[tuple[str, str], Pair] = field(default_factory=dict)


@dataclass
class EPResult:
    iterations: int
    converged: bool
    beliefs: dict[str, Pair]  # affected (non-boundary) claims only
    msgs: dict[tuple[str, str], Pair]
    warm_skipped: int = 0
    delta: float = 0.0
    boundary_beliefs: dict[str, Pair] = field(default_factory=dict)

    def mean(self, claim_id: str) -> float:
        a, b = self.beliefs[claim_id]
        return a / (a + b)


def back_map(eta1: float, eta2: float) -> Pair:
    """Natural parameters -> floored Beta parameters (§9.1)."""
    return (max(eta1 + 1.0, BETA_FLOOR), max(eta2 + 1.0, BETA_FLOOR))


def _finite_pair(value: object, what: str) -> Pair:
    try:
        a, b = value  # type: ignore[misc]
        a, b = float(a), float(b)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{what}: expected a pair of numbers, got {value!r}") from exc
    if not (math.isfinite(a) and math.isfinite(b)):
        raise ValueError(f"{what}: non-finite value {value!r}")
    return (a, b)


def validate_graph(fg: FactorGraph) -> None:
    """Raise ValueError on malformed input (non-finite evidence or messages, self-loops, unknown ids/kinds)."""
    for cid, c in fg.claims.items():
        if cid != c.id:
            raise ValueError(f"claim key {cid!r} != claim id {c.id!r}")
        if c.prior is not None:
            _finite_pair(c.prior, f"prior of {cid}")
        a, b = _finite_pair(c.init, f"init of {cid}")
    seen: set[str] = set()
    for f in fg.factors:
        if f.key in seen:
            raise ValueError(f"duplicate factor key {f.key!r}")
        seen.add(f.key)
        if f.kind not in FACTOR_KINDS:
            raise ValueError(f"factor {f.key}: kind {f.kind!r} not in {FACTOR_KINDS}")
        if f.direction not in DIRECTIONS:
            raise ValueError(f"factor {f.key}: direction {f.direction!r} not in {DIRECTIONS}")
        if not math.isfinite(float(f.weight)):
            raise ValueError(f"factor {f.key}: non-finite weight {f.weight!r}")
        if len(f.inputs) < 2:
            raise ValueError(f"factor {f.key}: needs >= 2 inputs, has {len(f.inputs)}")
        if len(set(f.inputs)) != len(f.inputs):
            raise ValueError(f"factor {f.key}: repeated input (self-edge) in {f.inputs}")
        for c in f.inputs:
            if c not in fg.claims:
                raise ValueError(f"factor {f.key}: input {c!r} is not a claim of the graph")
    for what, table in (("message", fg.msgs), ("back message", fg.back_cavity)):
        for k, v in table.items():
            _finite_pair(v, f"{what} {k}")
    for cid, v in fg.stale.items():
        _finite_pair(v, f"stale sum of {cid}")


@functools.lru_cache(maxsize=65536)
def gauss_jacobi_nodes(alpha: float, beta: float, n: int = N_QUAD) -> tuple[np.ndarray, np.ndarray]:
    """Nodes on [0, 1] and halved (not normalised) Gauss-Jacobi weights for Beta(alpha, beta) (§9.4 step 3)."""
    u, wu = roots_jacobi(n, beta - 1.0, alpha - 1.0)
    x = (u + 1.0) / 2.0
    w = wu / 2.0
    x.setflags(write=False)
    w.setflags(write=False)
    return x, w


def tilted_moments(
    xs: np.ndarray, ws: np.ndarray, xt: np.ndarray, wt: np.ndarray, nand: np.ndarray, weight: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Batched 8x8 product rule over P pairs: arrays (P, n) for nodes/weights, (P,) for kind and weight.

    Every operation is element-wise or a reduction over the last axis of a (P, n*n) C-contiguous array, so a
    pair's result does not depend on the batch it sits in (checked by tests/tortoise_sim/test_ep.py).
    """
    p, n = xs.shape
    diff = xs[:, :, None] - xt[:, None, :]
    prod = xs[:, :, None] * xt[:, None, :]
    w3 = weight[:, None, None]
    psi = np.where(nand[:, None, None], np.exp(-w3 * prod), np.exp(-w3 * (diff * diff)))
    wgt = ws[:, :, None] * wt[:, None, :] * psi
    z = np.ascontiguousarray(wgt).reshape(p, n * n).sum(axis=1)
    xs3 = np.broadcast_to(xs[:, :, None], (p, n, n))
    xt3 = np.broadcast_to(xt[:, None, :], (p, n, n))
    with np.errstate(divide="ignore", invalid="ignore"):
        mu_s = np.ascontiguousarray(wgt * xs3).reshape(p, n * n).sum(axis=1) / z
        nu_s = np.ascontiguousarray(wgt * (xs3 * xs3)).reshape(p, n * n).sum(axis=1) / z
        mu_t = np.ascontiguousarray(wgt * xt3).reshape(p, n * n).sum(axis=1) / z
        nu_t = np.ascontiguousarray(wgt * (xt3 * xt3)).reshape(p, n * n).sum(axis=1) / z
    return mu_s, nu_s, mu_t, nu_t, z


def z_floor(z: np.ndarray, sides: Iterable[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]]) -> None:
    """§9.4 step 3, in place: where Z is below ``Z_FLOOR`` (or not finite: overflowing weights take the same
    fallback [SIM guard]) each side's tilted moments (mu, nu) fall back to the moments of its cavity Beta(a, b)."""
    floor = ~(z >= Z_FLOOR) | ~np.isfinite(z)
    for mu, nu, a, b in sides:
        cav_mu = a / (a + b)
        cav_nu = cav_mu * (a + 1.0) / (a + b + 1.0)
        mu[:] = np.where(floor, cav_mu, mu)
        nu[:] = np.where(floor, cav_nu, nu)


def moment_match(mu: np.ndarray, nu: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """§9.4 step 4, element-wise."""
    v = np.maximum(nu - mu * mu, VAR_FLOOR)
    base = mu * (1.0 - mu)
    degenerate = v >= DEGENERACY * base
    with np.errstate(divide="ignore", invalid="ignore"):
        s = base / v - 1.0
    bad = degenerate | ~(s > 0.0)
    a = np.where(bad, 1.0, np.maximum(s * mu, BETA_FLOOR))
    b = np.where(bad, 1.0, np.maximum(s * (1.0 - mu), BETA_FLOOR))
    return a, b


@dataclass
class _PairJob:
    factor: int
    s: str
    t: str
    cav_s: Pair  # unclamped cavity natural parameters
    cav_t: Pair
    til_s: Pair  # floored cavity Beta parameters
    til_t: Pair


def _cavity(q: Pair, m_old: Pair) -> tuple[Pair, Pair]:
    eta = (q[0] - 1.0 - m_old[0], q[1] - 1.0 - m_old[1])
    return eta, back_map(eta[0], eta[1])


def _solve_pairs(jobs: list[_PairJob], factors: list[Factor], n_quad: int, batch: bool,
                 impl_boost: bool = True) -> list[tuple[Pair, Pair]]:
    """Steps 2-6 for every pair job: raw messages (r_s, r_t), IMPL boost applied."""
    if not jobs:
        return []
    if not batch:
        out: list[tuple[Pair, Pair]] = []
        for job in jobs:
            out.extend(_solve_pairs([job], factors, n_quad, True, impl_boost))
        return out
    xs, ws, xt, wt = [], [], [], []
    for job in jobs:
        x1, w1 = gauss_jacobi_nodes(job.til_s[0], job.til_s[1], n_quad)
        x2, w2 = gauss_jacobi_nodes(job.til_t[0], job.til_t[1], n_quad)
        xs.append(x1)
        ws.append(w1)
        xt.append(x2)
        wt.append(w2)
    nand = np.array([factors[j.factor].kind == "NAND" for j in jobs])
    weight = np.array([float(factors[j.factor].weight) for j in jobs])
    mu_s, nu_s, mu_t, nu_t, z = tilted_moments(np.array(xs), np.array(ws), np.array(xt), np.array(wt), nand, weight)
    til = np.array([[j.til_s[0], j.til_s[1], j.til_t[0], j.til_t[1]] for j in jobs])
    z_floor(z, ((mu_s, nu_s, til[:, 0], til[:, 1]), (mu_t, nu_t, til[:, 2], til[:, 3])))
    a_s, b_s = moment_match(mu_s, nu_s)
    a_t, b_t = moment_match(mu_t, nu_t)
    out = []
    for i, job in enumerate(jobs):
        r_s = (float(a_s[i]) - 1.0 - job.cav_s[0], float(b_s[i]) - 1.0 - job.cav_s[1])
        r_t = (float(a_t[i]) - 1.0 - job.cav_t[0], float(b_t[i]) - 1.0 - job.cav_t[1])
        if impl_boost and factors[job.factor].kind == "IMPL":
            g_s = 1.0 + 2.0 / max(job.til_s[0] + job.til_s[1] - 1.0, 1.0)
            g_t = 1.0 + 2.0 / max(job.til_t[0] + job.til_t[1] - 1.0, 1.0)
            r_s = (r_s[0] * g_s, r_s[1] * g_s)
            r_t = (r_t[0] * g_t, r_t[1] * g_t)
        out.append((r_s, r_t))
    return out


def _clip(v: float) -> float:
    return min(max(v, -MSG_CLIP), MSG_CLIP)


def factor_pairs(f: Factor) -> list[tuple[str, str]]:
    """Pairs (source, target) a factor is decomposed into (§9.2): binary as is; n-ary IMPL and unidirectional NAND
    as a star on inputs[0]; bidirectional NAND as the clique in input order."""
    n = len(f.inputs)
    if n == 2:
        return [(f.inputs[0], f.inputs[1])]
    if f.kind == "NAND" and f.direction == "bidirectional":
        return [(f.inputs[i], f.inputs[j]) for i in range(n) for j in range(i + 1, n)]
    return [(f.inputs[0], f.inputs[j]) for j in range(1, n)]


def run_ep(
    fg: FactorGraph,
    *,
    damping: float = DAMPING,
    n_quad: int = N_QUAD,
    max_iter: int = MAX_ITER,
    tol: float = TOL,
    warm_start: bool = False,
    gamma: float = GAMMA,
    batch: bool = True,
    impl_boost: bool = True,
    engine: str = "fused",
) -> EPResult:
    """Run EP to convergence or `max_iter` (§9.4, §9.5). TOR-15, TOR-16.

    `engine="fused"` (default, `tortoise_sim.ep_fused`) is the batched engine with one deduplicated quadrature pass
    per iteration, a per-slot rule memo and the Jacobi polynomial recurrences as array expressions: the same
    result bit for bit, in less time (tests/tortoise_sim/test_ep_fused.py).
    `engine="batched"` (the previous default) runs each iteration as array operations over all pairs: the
    Gauss-Jacobi rules of every pair come from one batched Golub-Welsch pass (`gauss_jacobi_batch`); cavities, moment matching, IMPL
    boost, damping, clipping, n-ary accumulation and the belief sums are numpy expressions in the same operation
    order as the reference. `engine="reference"` is the original per-factor loop over scipy `roots_jacobi` (kept to
    measure against and to check the batched engine: beliefs, messages, iteration and censoring counts are equal,
    bit for bit on every graph of the EP tests and on random graphs, see tests/tortoise_sim/test_ep_batched.py).
    `batch=False` (per-pair quadrature) implies the reference engine.

    Jacobi schedule: every factor reads q(k-1) and its own messages of iteration k-1. `batch=True` evaluates the
    quadrature of all pairs of an iteration in one numpy batch; results equal `batch=False` bit for bit.
    `warm_start=True` enables censoring only (stored messages are always used as the starting point).
    `impl_boost=False` is a named non-faithful option (plain EP without the §9.4 step 6 IMPL message boost), used
    by the exact-marginal cross-check to separate approximation error from the reference's deliberate boost.
    """
    if max_iter < 1:
        raise ValueError(f"max_iter must be >= 1, got {max_iter}")
    if not (0.0 < damping <= 1.0):
        raise ValueError(f"damping must be in (0, 1], got {damping}")
    if n_quad < 1:
        raise ValueError(f"n_quad must be >= 1, got {n_quad}")
    if engine not in ENGINES:
        raise ValueError(f"engine must be one of {ENGINES}, got {engine!r}")
    validate_graph(fg)
    if engine == "fused" and batch:
        from .ep_fused import run_ep_fused

        return run_ep_fused(fg, damping=damping, n_quad=n_quad, max_iter=max_iter, tol=tol,
                            warm_start=warm_start, gamma=gamma, impl_boost=impl_boost)
    if engine == "batched" and batch:
        return _run_ep_batched(fg, damping=damping, n_quad=n_quad, max_iter=max_iter, tol=tol,
                               warm_start=warm_start, gamma=gamma, impl_boost=impl_boost)
    factors = sorted(fg.factors, key=lambda f: f.key)
    msgs: dict[tuple[str, str], Pair] = {}
    for f in factors:
        for c in f.inputs:
            if f.direct and f.direction == "unidirectional" and c == f.inputs[0]:
                continue  # the source of a unidirectional direct edge receives nothing (back_msg unread)
            msgs[(f.key, c)] = tuple(fg.msgs.get((f.key, c), (0.0, 0.0)))  # type: ignore[assignment]
    incoming: dict[str, list[tuple[str, str]]] = {c: [] for c in fg.claims}
    for key in msgs:
        incoming[key[1]].append(key)
    affected = sorted(c for c, cl in fg.claims.items() if not cl.boundary)
    prior = {c: ((fg.claims[c].prior[0] - 1.0, fg.claims[c].prior[1] - 1.0) if fg.claims[c].prior else (0.0, 0.0))
             for c in affected}
    stale = {c: tuple(fg.stale.get(c, (0.0, 0.0))) for c in affected}
    # q0 = the stored pair itself (floored), not a round trip through natural parameters (which is inexact)
    q: dict[str, Pair] = {c: (max(float(cl.init[0]), BETA_FLOOR), max(float(cl.init[1]), BETA_FLOOR))
                          for c, cl in fg.claims.items()}
    last_seen: dict[str, tuple[Pair, ...]] = {}
    warm_skipped = 0
    delta = 0.0

    for k in range(1, max_iter + 1):
        jobs: list[_PairJob] = []
        updating: list[int] = []
        for fi, f in enumerate(factors):
            now = tuple(q[c] for c in f.inputs)
            if warm_start and f.key in last_seen:
                before = last_seen[f.key]
                if all(abs(a - a0) / max(a0, 1e-6) <= gamma and abs(b - b0) / max(b0, 1e-6) <= gamma
                       for (a, b), (a0, b0) in zip(now, before, strict=True)):
                    warm_skipped += 1
                    continue
            last_seen[f.key] = now
            updating.append(fi)
            for s, t in factor_pairs(f):
                m_s = _old_msg(fg, msgs, f, s)
                m_t = msgs[(f.key, t)]
                cav_s, til_s = _cavity(q[s], m_s)
                cav_t, til_t = _cavity(q[t], m_t)
                jobs.append(_PairJob(fi, s, t, cav_s, cav_t, til_s, til_t))
        raw = _solve_pairs(jobs, factors, n_quad, batch, impl_boost)
        new_msgs = dict(msgs)
        by_factor: dict[int, list[tuple[_PairJob, Pair, Pair]]] = {}
        for job, (r_s, r_t) in zip(jobs, raw, strict=True):
            by_factor.setdefault(job.factor, []).append((job, r_s, r_t))
        for fi in updating:
            f = factors[fi]
            bidir = f.direction == "bidirectional"
            if len(f.inputs) == 2:
                job, r_s, r_t = by_factor[fi][0]
                targets = [(job.t, r_t)] + ([(job.s, r_s)] if bidir else [])
                for c, r in targets:
                    old = msgs[(f.key, c)]
                    new_msgs[(f.key, c)] = (_clip(damping * r[0] + (1.0 - damping) * old[0]),
                                            _clip(damping * r[1] + (1.0 - damping) * old[1]))
                continue
            acc: dict[str, list[float]] = {}
            for job, r_s, r_t in by_factor[fi]:
                recv = [(job.t, r_t)] + ([(job.s, r_s)] if bidir else [])
                for c, r in recv:
                    slot = acc.setdefault(c, [0.0, 0.0])
                    slot[0] += _clip(r[0])
                    slot[1] += _clip(r[1])
            n = len(f.inputs)
            clique = f.kind == "NAND" and bidir
            scale = 2.0 / (n * (n - 1)) if clique else 1.0 / (n - 1)
            for c in f.inputs:
                old = msgs[(f.key, c)]
                if c not in acc:
                    # a unidirectional star's source receives nothing: a stored non-zero message is reset to 0
                    if old != (0.0, 0.0):
                        new_msgs[(f.key, c)] = (0.0, 0.0)
                    continue
                r0, r1 = _clip(acc[c][0] * scale), _clip(acc[c][1] * scale)
                new_msgs[(f.key, c)] = (damping * r0 + (1.0 - damping) * old[0],
                                        damping * r1 + (1.0 - damping) * old[1])
        msgs = new_msgs
        delta = 0.0
        new_q = dict(q)
        for c in affected:
            e1, e2 = prior[c][0] + stale[c][0], prior[c][1] + stale[c][1]
            for key in incoming[c]:
                m = msgs[key]
                e1 += m[0]
                e2 += m[1]
            a, b = back_map(e1, e2)
            a0, b0 = q[c]
            delta = max(delta, abs(a - a0) / max(a0, 1e-6), abs(b - b0) / max(b0, 1e-6))
            new_q[c] = (a, b)
        q = new_q
        if delta < tol:
            return _result(k, True, q, msgs, fg, affected, warm_skipped, delta)
    return _result(max_iter, False, q, msgs, fg, affected, warm_skipped, delta)


# ---------------------------------------------------------------------------------------------------------------
# Batched engine (engine="batched")
# ---------------------------------------------------------------------------------------------------------------


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


def _run_ep_batched(fg: FactorGraph, *, damping: float, n_quad: int, max_iter: int, tol: float, warm_start: bool,
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


def _old_msg(fg: FactorGraph, msgs: Mapping[tuple[str, str], Pair], f: Factor, c: str) -> Pair:
    if (f.key, c) in msgs:
        return msgs[(f.key, c)]
    return tuple(fg.back_cavity.get((f.key, c), (0.0, 0.0)))  # type: ignore[return-value]


def _result(k: int, converged: bool, q: dict[str, Pair], msgs: dict[tuple[str, str], Pair], fg: FactorGraph,
            affected: list[str], warm_skipped: int, delta: float) -> EPResult:
    return EPResult(
        iterations=k,
        converged=converged,
        beliefs={c: q[c] for c in affected},
        msgs=msgs,
        warm_skipped=warm_skipped,
        delta=delta,
        boundary_beliefs={c: q[c] for c, cl in fg.claims.items() if cl.boundary},
    )


# ---------------------------------------------------------------------------------------------------------------
# Graph rules over an in-memory snapshot of the store (§9.1, §9.2, §9.3, §9.6)
# ---------------------------------------------------------------------------------------------------------------


@dataclass
class PointRow:
    """The EP-relevant columns of one Point (§2.4)."""

    id: str
    is_operator: bool | None = False
    op_type: str | None = None
    direction: str | None = None
    status: str | None = None
    outdated: bool | None = None
    point_kind: str | None = None
    baseline_set: bool | None = None
    ep_alpha: float | None = None
    ep_beta: float | None = None
    posterior_alpha: float | None = None
    posterior_beta: float | None = None

    @property
    def is_op(self) -> bool:
        """§2.1 predicate *operator*: `is_operator=true OR op_type IS NOT NULL`."""
        return bool(self.is_operator) or self.op_type is not None


@dataclass
class EdgeRow:
    """One IMPL/NAND edge. Operator edges carry `idx`; direct edges have a plain-claim source and `idx` NULL."""

    type: str
    src: str
    tgt: str
    idx: int | None = None
    direction: str | None = None
    weight: float | None = None
    msg: Pair | None = None
    back_msg: Pair | None = None
    tgt_is_event: bool = False


@dataclass
class LoadedGraph:
    """A factor graph plus what the flush needs: `affected` (𝒞), `edge_msgs` = per edge (type, src, tgt) the
    column group and message key written back, `warnings`, `truncated` (closure guard hit)."""

    fg: FactorGraph
    affected: set[str]
    edge_msgs: list[tuple[str, str, str, str, tuple[str, str]]]
    warnings: list[str]
    truncated: bool = False


def _pair_or_zero(v: Pair | None) -> Pair:
    if v is None:
        return (0.0, 0.0)
    a, b = v
    return (0.0 if a is None else float(a), 0.0 if b is None else float(b))


class GraphSnapshot:
    """Read-only view of the Points and IMPL/NAND edges the EP rules need.

    `exclude_terminal` is the profile option `ep_exclude_terminal` (§1.4): default True [LATER] makes
    READ_TERMINAL and `outdated=true` claims non-variables; False [SNAP] excludes only drafts (TOR-29).
    """

    def __init__(self, points: Iterable[PointRow], edges: Iterable[EdgeRow], *, exclude_terminal: bool = True):
        self.points: dict[str, PointRow] = {p.id: p for p in points}
        self.edges: list[EdgeRow] = [e for e in edges if e.type in FACTOR_KINDS]
        self.exclude_terminal = exclude_terminal
        self.out: dict[str, list[EdgeRow]] = {}
        self.inc: dict[str, list[EdgeRow]] = {}
        for e in self.edges:
            self.out.setdefault(e.src, []).append(e)
            if not e.tgt_is_event:
                self.inc.setdefault(e.tgt, []).append(e)

    # -- §9.1 liveness ----------------------------------------------------------------------------------------
    def _terminal(self, p: PointRow) -> bool:
        return self.exclude_terminal and ((p.status in READ_TERMINAL) or p.outdated is True)

    def is_live_claim(self, pid: str) -> bool:
        p = self.points.get(pid)
        return p is not None and not p.is_op and p.status != "draft" and not self._terminal(p)

    def is_active_op(self, pid: str) -> bool:
        p = self.points.get(pid)
        return p is not None and p.is_op and p.status != "draft" and not self._terminal(p)

    def is_variable(self, pid: str) -> bool:
        """Live plain claim, or an active operator (a variable when it is an input of another operator)."""
        return self.is_live_claim(pid) or self.is_active_op(pid)

    def is_direct(self, e: EdgeRow) -> bool:
        src = self.points.get(e.src)
        return src is not None and not src.is_op and e.idx is None and not e.tgt_is_event

    def live_claim_count(self) -> int:
        return sum(1 for pid in self.points if self.is_live_claim(pid))

    def is_evidence(self, pid: str) -> bool:
        p = self.points[pid]
        return (bool(p.baseline_set) and p.ep_alpha is not None and p.ep_beta is not None
                and p.status != "retracted" and self.is_variable(pid))

    # -- §9.6 affected set ----------------------------------------------------------------------------------------
    def _op_endpoints(self, op: str) -> set[str]:
        """Every endpoint of an active operator's IMPL/NAND edges, both directions (mitigation points included)."""
        ends = {e.tgt for e in self.out.get(op, []) if not e.tgt_is_event}
        ends |= {e.src for e in self.inc.get(op, [])}
        return {x for x in ends if x != op and self.is_variable(x)}

    def neighbours(self, c: str, _ends: dict[str, set[str]] | None = None) -> set[str]:
        """One hop from c (§9.6). `_ends` memoises operator endpoints within one affected-set walk."""
        nb: set[str] = set()
        for e in self.inc.get(c, []):
            if self.is_active_op(e.src):
                if _ends is None:
                    nb |= self._op_endpoints(e.src)
                else:
                    ends = _ends.get(e.src)
                    if ends is None:
                        ends = _ends[e.src] = self._op_endpoints(e.src)
                    nb |= ends
            elif self.is_direct(e) and self.is_live_claim(e.src):
                nb.add(e.src)
        for e in self.out.get(c, []):
            if e.tgt_is_event:
                continue
            if self.is_direct(e) and self.is_live_claim(e.tgt):
                nb.add(e.tgt)
        if self.is_active_op(c):
            nb |= self._op_endpoints(c)
        nb.discard(c)
        return nb

    def affected_set(self, seeds: Iterable[str], max_hops: int | None = 2) -> tuple[set[str], bool]:
        """𝒞 for `ep.run(seed_ids, max_hops)` (§9.6); returns (𝒞, truncated). Non-live seeds run nothing."""
        if max_hops is not None and max_hops < 0:
            raise ValueError(f"max_hops must be >= 0 or None, got {max_hops}")
        frontier: set[str] = set()
        for s in seeds:
            if self.is_active_op(s):
                frontier |= {e.tgt for e in self.out.get(s, [])
                             if not e.tgt_is_event and e.tgt != s and self.is_variable(e.tgt)}
            elif self.is_live_claim(s):
                frontier.add(s)
        affected = set(frontier)
        truncated = False
        total = self.live_claim_count() if max_hops is None else 0
        guarded = max_hops is None and total >= CLOSURE_MIN_CLAIMS
        hop = 0
        while frontier and (max_hops is None or hop < max_hops):
            if guarded and len(affected) >= CLOSURE_SHARE * total:
                truncated = True
                break
            new: set[str] = set()
            ends: dict[str, set[str]] = {}  # the snapshot does not change during one walk
            for c in sorted(frontier):
                new |= self.neighbours(c, ends)
            new -= affected
            if guarded and len(new) > CLOSURE_MAX_PER_HOP:
                truncated = True
                break
            affected |= new
            frontier = new
            hop += 1
        return affected, truncated

    # -- §9.6 dream operator selector -----------------------------------------------------------------------------
    def _live_plain_inputs(self, op: str) -> list[str]:
        return sorted({e.tgt for e in self.out.get(op, []) if not e.tgt_is_event and self.is_live_claim(e.tgt)})

    def select_operators(self, anchors: Iterable[str], max_hops: int | None = 2, op_cap: int = OP_CAP,
                         exclude_ops: set[str] | None = None) -> tuple[list[str], list[EdgeRow]]:
        """Breadth-first operator selection from anchors (§9.6). Returns (operator ids sorted and truncated to
        `op_cap`, selected direct edges). An operator participates only with >= 2 live plain inputs."""
        exclude_ops = exclude_ops or set()
        memo: dict[str, list[str]] = {}

        def live_inputs(op: str) -> list[str]:  # `_live_plain_inputs`, once per operator within this call
            got = memo.get(op)
            if got is None:
                got = memo[op] = self._live_plain_inputs(op)
            return got

        ops: set[str] = set()
        direct: dict[tuple[str, str, str], EdgeRow] = {}
        seen: set[str] = set()
        frontier: list[str] = []
        for a in anchors:
            if a in seen:
                continue
            seen.add(a)
            if self.points.get(a) is not None and self.points[a].is_op:
                if self.is_active_op(a) and a not in exclude_ops and len(live_inputs(a)) >= 2:
                    ops.add(a)
                    for x in live_inputs(a):
                        if x not in seen:
                            seen.add(x)
                            frontier.append(x)
            else:
                frontier.append(a)
        hop = 0
        while frontier and (max_hops is None or hop < max_hops):
            nxt: list[str] = []
            for c in frontier:
                for e in self.inc.get(c, []):
                    reach: list[str] = []
                    if self.points.get(e.src) is not None and self.points[e.src].is_op:
                        op = e.src
                        if op in exclude_ops or not self.is_active_op(op):
                            continue
                        ins = live_inputs(op)
                        if len(ins) < 2:
                            continue
                        ops.add(op)
                        reach = ins
                    elif self.is_direct(e) and self.is_live_claim(e.src) and self.is_live_claim(c) and e.src != c:
                        if e.type == "NAND" or e.direction != "unidirectional":
                            direct[(e.type, e.src, e.tgt)] = e
                            reach = [e.src]
                    for x in reach:
                        if x not in seen:
                            seen.add(x)
                            nxt.append(x)
                for e in self.out.get(c, []):
                    if self.is_direct(e) and self.is_live_claim(e.tgt) and self.is_live_claim(c) and e.tgt != c:
                        direct[(e.type, e.src, e.tgt)] = e
                        if e.tgt not in seen:
                            seen.add(e.tgt)
                            nxt.append(e.tgt)
            frontier = nxt
            hop += 1
        selected = sorted(ops)[: max(op_cap, 0)]
        return selected, [direct[k] for k in sorted(direct)]

    # -- §9.2 factor extraction, §9.3 messages, §9.1 priors --------------------------------------------------------
    def operator_weight(self, op: str) -> float:
        p = self.points[op]
        w = 1.0
        if p.op_type == "NAND":
            w *= NAND_BASE_WEIGHT
        if any(not e.tgt_is_event and e.tgt in self.points and self.points[e.tgt].is_op for e in self.out.get(op, [])):
            w *= OP_ON_OP_FACTOR
        return min(max(w, OP_WEIGHT_CLAMP[0]), OP_WEIGHT_CLAMP[1])

    def load(self, seeds: Iterable[str], max_hops: int | None = 2) -> LoadedGraph:
        """Build the factor graph of `ep.run(seeds, max_hops)`: 𝒞, factors, boundary claims, messages, stale sums."""
        affected, truncated = self.affected_set(seeds, max_hops)
        return self.load_affected(affected, truncated=truncated)

    def load_affected(self, affected: set[str], *, truncated: bool = False) -> LoadedGraph:
        memo: dict[tuple[str, str], bool] = {}  # the predicates below, once per id within this call

        def cached(name: str, pred: Callable[[str], bool]) -> Callable[[str], bool]:
            def check(pid: str) -> bool:
                got = memo.get((name, pid))
                if got is None:
                    got = memo[(name, pid)] = pred(pid)
                return got
            return check

        is_variable = cached("var", self.is_variable)
        is_live_claim = cached("live", self.is_live_claim)
        is_active_op = cached("op", self.is_active_op)
        warnings: list[str] = []
        factors: list[Factor] = []
        msgs: dict[tuple[str, str], Pair] = {}
        back_cavity: dict[tuple[str, str], Pair] = {}
        edge_msgs: list[tuple[str, str, str, str, tuple[str, str]]] = []
        ops = sorted({e.src for c in affected for e in self.inc.get(c, []) if is_active_op(e.src)})
        for op in ops:
            p = self.points[op]
            if p.op_type not in FACTOR_KINDS:
                continue
            edges = sorted((e for e in self.out.get(op, []) if not e.tgt_is_event),
                           key=lambda e: (e.idx if e.idx is not None else 0, e.tgt))
            if not edges:
                continue
            head = edges[0].tgt
            kept: list[EdgeRow] = []
            for e in edges:
                if e.tgt != op and is_variable(e.tgt) and all(k.tgt != e.tgt for k in kept):
                    kept.append(e)
            direction = p.direction
            if direction is None:
                warnings.append(f"operator_direction_null:{op}")
                direction = "bidirectional"
            elif direction not in DIRECTIONS:
                warnings.append(f"operator_direction_unknown:{op}:{direction}")
                direction = "bidirectional"
            if len(kept) < 2:
                warnings.append(f"operator_skipped_inputs:{op}")
                continue
            if direction != "bidirectional" and kept[0].tgt != head:
                warnings.append(f"operator_skipped_source:{op}")
                continue
            f = Factor(op, p.op_type, self.operator_weight(op), direction, [e.tgt for e in kept])
            factors.append(f)
            for e in kept:
                msgs[(op, e.tgt)] = _pair_or_zero(e.msg)
                edge_msgs.append((e.type, op, e.tgt, "msg", (op, e.tgt)))
        seen_direct: set[tuple[str, str, str]] = set()
        for c in sorted(affected):
            for e in self.inc.get(c, []) + self.out.get(c, []):
                key3 = (e.type, e.src, e.tgt)
                if key3 in seen_direct or not self.is_direct(e):
                    continue
                seen_direct.add(key3)
                if e.src == e.tgt:
                    warnings.append(f"self_edge_skipped:{e.type}:{e.src}")
                    continue
                if not (is_live_claim(e.src) and is_live_claim(e.tgt)):
                    continue
                key = f"direct:{e.type}:{e.src}:{e.tgt}"
                direction = e.direction if e.direction in DIRECTIONS else "bidirectional"
                weight = float(e.weight) if e.weight is not None else (NAND_BASE_WEIGHT if e.type == "NAND" else 1.0)
                factors.append(Factor(key, e.type, weight, direction, [e.src, e.tgt]))
                msgs[(key, e.tgt)] = _pair_or_zero(e.msg)
                edge_msgs.append((e.type, e.src, e.tgt, "msg", (key, e.tgt)))
                if direction == "bidirectional":
                    msgs[(key, e.src)] = _pair_or_zero(e.back_msg)
                    edge_msgs.append((e.type, e.src, e.tgt, "back_msg", (key, e.src)))
                else:
                    back_cavity[(key, e.src)] = _pair_or_zero(e.back_msg)
        active_keys = {k for k in msgs}
        claims: dict[str, Claim] = {}
        for c in sorted(affected):
            p = self.points[c]
            prior = (float(p.ep_alpha), float(p.ep_beta)) if self.is_evidence(c) else None  # type: ignore[arg-type]
            init = ((float(p.ep_alpha), float(p.ep_beta)) if p.ep_alpha is not None and p.ep_beta is not None
                    else (1.0, 1.0))
            claims[c] = Claim(c, prior, init)
        for f in factors:
            for c in f.inputs:
                if c in claims:
                    continue
                p = self.points[c]
                if p.posterior_alpha is not None and p.posterior_beta is not None:
                    init = (float(p.posterior_alpha), float(p.posterior_beta))
                elif p.ep_alpha is not None and p.ep_beta is not None:
                    init = (float(p.ep_alpha), float(p.ep_beta))
                else:
                    init = (1.0, 1.0)
                claims[c] = Claim(c, None, init, boundary=True)
        stale: dict[str, Pair] = {}
        for c in sorted(affected):
            s1 = s2 = 0.0
            for e in self.inc.get(c, []):
                if self.is_direct(e):
                    key = (f"direct:{e.type}:{e.src}:{e.tgt}", c)
                else:
                    key = (e.src, c)
                if key not in active_keys:
                    m = _pair_or_zero(e.msg)
                    s1 += m[0]
                    s2 += m[1]
            for e in self.out.get(c, []):
                if (self.is_direct(e) and e.direction != "unidirectional"
                        and (f"direct:{e.type}:{e.src}:{e.tgt}", c) not in active_keys):
                    m = _pair_or_zero(e.back_msg)
                    s1 += m[0]
                    s2 += m[1]
            if s1 or s2:
                stale[c] = (s1, s2)
        fg = FactorGraph(claims, factors, msgs, stale, back_cavity)
        return LoadedGraph(fg, set(affected), edge_msgs, warnings, truncated)
