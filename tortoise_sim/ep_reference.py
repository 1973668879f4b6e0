"""Expectation propagation over Beta beliefs (spec §9.1-§9.5): the factor-graph model and the reference solver.

Pure numpy/scipy, no database access. Here: the §12 constants, the model (`Claim`, `Factor`, `FactorGraph`,
`EPResult`) and its validation, the per-pair steps every engine shares (Gauss-Jacobi rule, tilted moments, Z floor,
moment matching, the n-ary decomposition `factor_pairs`) and `run_ep_reference`, the original per-factor loop over
scipy `roots_jacobi` that the faster engines are checked against bit for bit (TOR-15, TOR-16). The engines are
chosen through `tortoise_sim.ep.run_ep`; the batched engine lives in `tortoise_sim.ep_batched`, the fused one (the
default) in `tortoise_sim.ep_fused`.

Quirks reproduced on purpose (each verified upstream behaviour per the spec): the cavity starts from the floored
belief, not the raw natural-parameter sum; the Gauss-Jacobi weights are halved but not normalised, so the Z floor
fires by scale; a unidirectional direct edge's stored back message enters its source's cavity although it is never
updated; n-ary star targets get their single pair message scaled by 1/(n-1); a factor deactivated by a lifecycle
change keeps its last message in its surviving inputs (the stale sum, TOR-29).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

import numpy as np
from scipy.special import roots_jacobi

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



def run_ep_reference(fg: FactorGraph, *, damping: float, n_quad: int, max_iter: int, tol: float, warm_start: bool,
                     gamma: float, batch: bool, impl_boost: bool) -> EPResult:
    """The reference engine (`run_ep(engine="reference")`, §9.4, §9.5): one Python loop over factors and pairs per
    iteration, quadrature from scipy `roots_jacobi` (`batch=True` evaluates the pairs of an iteration in one numpy
    batch, equal to `batch=False` bit for bit). Arguments are validated by `run_ep`. TOR-15, TOR-16."""
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

