"""Expectation propagation over Beta beliefs (spec §9): the entry point `run_ep` and the graph rules over a store
snapshot. Pure numpy/scipy, no database access.

Where each part lives:

* `tortoise_sim.ep_reference`: the §12 constants, the factor-graph model (`Claim`, `Factor`, `FactorGraph`,
  `EPResult`), the per-pair steps (cavities from the floored previous beliefs, 8x8 Gauss-Jacobi tilted moments,
  moment matching, the IMPL boost, damping and clipping, n-ary star/clique factors, convergence on the relative
  alpha/beta change, warm-start censoring) and the reference solver (TOR-15, TOR-16);
* `tortoise_sim.ep_batched`: the same iteration as array operations (`engine="batched"`);
* `tortoise_sim.ep_fused`: the batched iteration with deduplicated, memoised rules (`engine="fused"`, the default);
* here: `run_ep`, which validates and picks the engine, and the graph rules over an in-memory snapshot of the store
  (`GraphSnapshot`): liveness and priors (§9.1), factor extraction and weights (§9.2), messages and stale sums
  (§9.3), the affected set (§9.6 `ep.run`) and dream's operator selector (§9.6). `tortoise_sim.dream` reads the
  snapshot from Kuzu and flushes the result back.

Every public name of the three engine modules is importable from here as before the split.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from .ep_batched import (
    _batched_result,
    _batched_state,
    _dsterf_pointer,
    _jacobi_mass,
    gauss_jacobi_batch,
    run_ep_batched,
    tridiagonal_eigvals,
)
from .ep_fused import run_ep_fused
from .ep_reference import (
    BETA_FLOOR,
    CLOSURE_MAX_PER_HOP,
    CLOSURE_MIN_CLAIMS,
    CLOSURE_SHARE,
    DAMPING,
    DEGENERACY,
    DIRECTIONS,
    ENGINES,
    FACTOR_KINDS,
    GAMMA,
    MAX_ITER,
    MSG_CLIP,
    N_QUAD,
    NAND_BASE_WEIGHT,
    OP_CAP,
    OP_ON_OP_FACTOR,
    OP_WEIGHT_CLAMP,
    READ_TERMINAL,
    TOL,
    VAR_FLOOR,
    Z_FLOOR,
    Claim,
    EPResult,
    Factor,
    FactorGraph,
    Pair,
    _cavity,
    _clip,
    _old_msg,
    _PairJob,
    _result,
    _solve_pairs,
    back_map,
    factor_pairs,
    gauss_jacobi_nodes,
    moment_match,
    run_ep_reference,
    tilted_moments,
    validate_graph,
    z_floor,
)

__all__ = [
    "BETA_FLOOR", "CLOSURE_MAX_PER_HOP", "CLOSURE_MIN_CLAIMS", "CLOSURE_SHARE", "DAMPING", "DEGENERACY",
    "DIRECTIONS", "ENGINES", "FACTOR_KINDS", "GAMMA", "MAX_ITER", "MSG_CLIP", "N_QUAD", "NAND_BASE_WEIGHT", "OP_CAP",
    "OP_ON_OP_FACTOR", "OP_WEIGHT_CLAMP", "READ_TERMINAL", "TOL", "VAR_FLOOR", "Z_FLOOR", "Claim", "EPResult",
    "EdgeRow", "Factor", "FactorGraph", "GraphSnapshot", "LoadedGraph", "Pair", "PointRow", "back_map",
    "factor_pairs", "gauss_jacobi_batch", "gauss_jacobi_nodes", "moment_match", "run_ep", "run_ep_batched",
    "run_ep_fused", "run_ep_reference", "tilted_moments", "tridiagonal_eigvals", "validate_graph", "z_floor",
    "_PairJob", "_batched_result", "_batched_state", "_cavity", "_clip", "_dsterf_pointer", "_jacobi_mass",
    "_old_msg", "_result", "_solve_pairs",
]


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
    Gauss-Jacobi rules of every pair come from one batched Golub-Welsch pass (`gauss_jacobi_batch`); cavities,
    moment matching, IMPL boost, damping, clipping, n-ary accumulation and the belief sums are numpy expressions in
    the same operation order as the reference. `engine="reference"` is the original per-factor loop over scipy `roots_jacobi` (kept to
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
        return run_ep_fused(fg, damping=damping, n_quad=n_quad, max_iter=max_iter, tol=tol,
                            warm_start=warm_start, gamma=gamma, impl_boost=impl_boost)
    if engine == "batched" and batch:
        return run_ep_batched(fg, damping=damping, n_quad=n_quad, max_iter=max_iter, tol=tol,
                              warm_start=warm_start, gamma=gamma, impl_boost=impl_boost)
    return run_ep_reference(fg, damping=damping, n_quad=n_quad, max_iter=max_iter, tol=tol, warm_start=warm_start,
                            gamma=gamma, batch=batch, impl_boost=impl_boost)


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
