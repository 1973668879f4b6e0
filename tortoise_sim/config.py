"""Simulator configuration: ``SimConfig`` with the version presets of spec §1.4, and fault hooks (§5.3)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any, Literal

__all__ = ["SimConfig", "FaultHooks"]


@dataclass(frozen=True)
class SimConfig:
    """Profile options (spec §1.4). Defaults = the analysed version [A] (gaps from [LATER]/[SNAP]).

    Every quirk is reproduced by default; the alternative values are explicit, named options.
    """

    # version switches (§1.4 table)
    ep_exclude_terminal: bool = True
    terminal_decay: bool = False
    outdated_terminal: bool = True
    turn_writer: Literal["analysed", "snapshot"] = "analysed"
    capture_requires_provider: bool = False
    capture_promotes: bool = True
    capture_applies_supersessions: bool = True
    digest_noise_filter: bool = True
    digest_status_filter: bool = False
    spool_permanent: Literal["quarantine", "delete"] = "quarantine"
    emit_confidence_changed: bool = True
    checkpoint_precheck: bool = True
    # other knobs (not version switches)
    min_confidence: float = 0.7
    require_calibration: bool = True
    ep_max_iter: int = 50
    ep_tol: float = 1e-4
    embedder: Literal["minilm", "hashing", "none"] = "minilm"
    vector_index: bool = False
    search_cache: bool = True  # exact per-process search cache (search.py); False = the per-call Kuzu scan
    # approximation, not a version switch: "hnsw" takes the cached vector leg's candidates from a FAISS HNSW index
    # (tortoise_sim.ann: top ``ann_candidates`` by cosine, then the exact cosine rule and 0.3 threshold of
    # search.py on those; cached search only). Default None: the exact leg over every embedded point. Recall:
    # ``memsim bench ann``.
    ann_index: Literal["hnsw"] | None = None
    ann_candidates: int = 256
    ann_m: int = 32  # HNSW graph degree
    ann_ef_search: int = 32  # HNSW search beam (raised to ann_candidates when smaller)
    turn_store: Literal["graph", "record", "both"] = "graph"
    event_log_path: str | None = None
    record_store_path: str | None = None
    spool_dir: str | None = None
    # hardened, not a version switch: "hardened" redacts secrets from every stored and spooled text
    # (tortoise_sim.redaction, backed by detect-secrets). Default: the turn-only redactor of spec 3.3 (TOR-03).
    redactor: Literal["faithful", "hardened"] = "faithful"
    # hardened, not a version switch: "quarantine" moves a spool entry with a corrupt meta to <spool>/quarantine/
    # instead of deleting it with its intact turn log (upstream, spec 10.1 item 9).
    spool_corrupt: Literal["delete", "quarantine"] = "delete"
    # hardened, not a version switch: "keep" keeps a spool entry whose turn log cannot be read at all (a ledger row
    # transcript_unreadable, the flush goes on) instead of reading it as no turns and discarding the whole session
    # as transcript_empty (upstream, spec 10.1 item 17, TOR-52).
    spool_turns_unreadable: Literal["discard", "keep"] = "discard"
    # hardened, not a version switch: "transactional" commits each SDK operation with its feed rows in one Kuzu
    # transaction and re-derives lost journal lines on open (store.py; REL-07). Default: best-effort sinks (§5.1).
    event_durability: Literal["best_effort", "transactional"] = "best_effort"

    @classmethod
    def preset(cls, name: str, **overrides: Any) -> SimConfig:
        """``analysed`` (defaults), ``snapshot`` (every option at its [SNAP] value) or ``later``."""
        if name == "analysed":
            base = cls()
        elif name == "snapshot":
            base = cls(
                ep_exclude_terminal=False,
                terminal_decay=False,
                outdated_terminal=False,
                turn_writer="snapshot",
                capture_requires_provider=True,
                capture_promotes=False,
                capture_applies_supersessions=False,
                digest_noise_filter=False,
                digest_status_filter=False,
                emit_confidence_changed=False,
                checkpoint_precheck=False,
            )
        elif name == "later":
            base = cls(ep_exclude_terminal=True, terminal_decay=True, capture_promotes=True, spool_permanent="delete")
        else:
            raise ValueError(f"unknown preset {name!r} (analysed | snapshot | later)")
        return replace(base, **overrides) if overrides else base

    def with_(self, **changes: Any) -> SimConfig:
        return replace(self, **changes)

    @property
    def guard_terminal(self) -> list[str]:
        """GUARD_TERMINAL (§2.2): statuses that retract/supersede refuse and the CAS excludes."""
        base = ["retracted", "superseded", "archived"]
        return base + ["outdated"] if self.outdated_terminal else base

    def as_dict(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)}

    def event_log(self) -> Path | None:
        return Path(self.event_log_path) if self.event_log_path else None


READ_TERMINAL = ["retracted", "superseded", "outdated", "archived", "deprecated"]


@dataclass
class FaultHooks:
    """Fault injection seams (spec §5.3 [SIM]).

    - ``fail_graph_feed`` / ``fail_journal``: event types whose feed row / journal line fails to write;
    - ``before_cas(id)``: called by ``retract_point`` between the event and the CAS;
    - ``before_flush()``: called by the EP flush (part 2) before it checks the epoch;
    - ``fail_create_point_at``: the n-th ``create_point`` call (1-based) raises ``FaultInjected``;
    - ``step``: a harness ``FaultPlan``-style callable invoked with a dotted step name before durable writes
      (``point.create``, ``event.feed``, ``event.journal``, ``capture.turns``, ``retract.cas``, ``spool.write``).
    """

    fail_graph_feed: set[str] = field(default_factory=set)
    fail_journal: set[str] = field(default_factory=set)
    before_cas: Callable[[str], None] | None = None
    before_flush: Callable[[], None] | None = None
    fail_create_point_at: int | None = None
    step: Callable[[str], None] | None = None
    create_point_calls: int = 0
