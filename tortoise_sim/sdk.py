"""``Tortoise``: the SDK facade binding one ``TortoiseStore`` to every mechanism module.

    t = Tortoise(config=SimConfig(embedder="hashing"), clock=StepClock(), seed=0)
    t.capture_session([{"role": "user", "content": "decision: use Kuzu"}], session_id="s1")
    t.volunteer_context([{"role": "user", "content": "What did we decide about Kuzu?"}])

Part 2 (``ep.py``/``dream.py``) works on ``t.store``.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

from . import admission, capture, digest, expansion, hooks, lifecycle, unmodelled, volunteer
from .config import FaultHooks, SimConfig
from .extraction import ScriptedExtractor
from .records import RecordStore
from .search import search_points
from .spool import Spool
from .store import TortoiseStore
from .why import assemble_why_blocks, ep_view

__all__ = ["Tortoise", "DEFAULT_EXTRACTOR"]

DEFAULT_EXTRACTOR: Any = object()


class Tortoise:
    def __init__(
        self,
        path: str | Path | None = None,
        *,
        config: SimConfig | None = None,
        encoder: Any = None,
        clock: Callable[[], datetime] | None = None,
        seed: int | None = 0,
        faults: FaultHooks | None = None,
        extractor: Any = DEFAULT_EXTRACTOR,
        record_store: RecordStore | None = None,
        store: TortoiseStore | None = None,
    ) -> None:
        self.store = store or TortoiseStore(path, config=config, encoder=encoder, clock=clock, seed=seed,
                                            faults=faults)
        self.cfg = self.store.cfg
        self.extractor = ScriptedExtractor() if extractor is DEFAULT_EXTRACTOR else extractor
        self.record_store = record_store or RecordStore(self.cfg.record_store_path)

    def close(self) -> None:
        self.store.close()

    # admission
    def create_point(self, kind: str, content: str, **kw: Any) -> dict[str, Any]:
        with self.store.operation():
            return admission.create_point(self.store, kind, content, **kw)

    def create_point_tool(self, kind: str, content: str, **kw: Any) -> dict[str, Any]:
        with self.store.operation():
            return admission.create_point_tool(self.store, kind, content, **kw)

    def update_point(self, point_id: str, **props: Any) -> dict[str, Any]:
        with self.store.operation():
            return admission.update_point(self.store, point_id, **props)

    def promote_point(self, point_id: str) -> bool:
        with self.store.operation():
            return admission.promote_point(self.store, point_id)

    def set_point_baseline(self, point_id: str, alpha: float, beta: float, source: str = "explicit") -> None:
        admission.set_point_baseline(self.store, point_id, alpha, beta, source)

    def create_operator(self, op_type: str, source_id: str, target_ids: list[str], **kw: Any) -> str:
        with self.store.operation():
            return admission.create_operator(self.store, op_type, source_id, target_ids, **kw)

    def create_direct_edge(self, src: str, tgt: str, type: str, **kw: Any) -> dict[str, Any]:  # noqa: A002
        with self.store.operation():
            return admission.create_direct_edge(self.store, src, tgt, type, **kw)

    def mitigate_operator(self, op_id: str, reason: str, strength: float) -> str:
        return admission.mitigate_operator(self.store, op_id, reason, strength)

    def diary_write(self, agent_name: str, entry: str, topic: str | None = None, wing: str | None = None) -> dict:
        with self.store.operation():
            return admission.diary_write(self.store, agent_name, entry, topic, wing)

    def diary_read(self, agent_name: str, last_n: int = 10, wing: str | None = None) -> list[dict[str, Any]]:
        return admission.diary_read(self.store, agent_name, last_n, wing)

    def checkpoint(self, items: Any, agent_name: str = "checkpoint", threshold: float = 0.95, **kw: Any) -> dict:
        with self.store.operation():
            return admission.checkpoint(self.store, items, agent_name, threshold, **kw)

    # capture
    def capture_session(self, conversation: Any, session_id: str | None = None, max_turns: int = 500,
                        capture_key: str | None = None) -> dict:
        """``capture_key`` (hardened, sent by ``Spool(send_capture_key=True)``): a capture whose key was already
        filed is a no-op (``duplicate_capture``); a new one records a ``CaptureFiled`` feed event in the same
        operation. Exactly-once needs ``event_durability="transactional"`` too (the record then commits with
        the capture)."""
        with self.store.operation():
            if capture_key is not None and self.store.capture_filed(capture_key):
                return {"session_id": session_id, "ok": True, "duplicate_capture": capture_key, "points": []}
            res = capture.capture_session(self.store, conversation, session_id, max_turns, extractor=self.extractor,
                                          record_store=self.record_store)
            if capture_key is not None and res.get("ok"):
                self.store.emit_event("CaptureFiled", {"session_id": res.get("session_id"),
                                                       "capture_key": capture_key})
            return res

    def commit_payload(self, payload: dict[str, Any]) -> dict[str, Any]:
        with self.store.operation():
            return capture.commit_payload(self.store, payload)

    # lifecycle
    def retract_point(self, point_id: str, valid_to: str | None = None, dry_run: bool = False) -> dict[str, Any]:
        with self.store.operation():
            return lifecycle.retract_point(self.store, point_id, valid_to, dry_run)

    def supersede_point(self, old_id: str, new_id: str, valid_from: str | None = None) -> dict[str, Any]:
        with self.store.operation():
            return lifecycle.supersede_point(self.store, old_id, new_id, valid_from)

    def invalidate_point(self, point_id: str, corrected_by: str) -> dict[str, Any]:
        with self.store.operation():
            return lifecycle.invalidate_point(self.store, point_id, corrected_by)

    def delete_point(self, point_id: str) -> dict[str, Any]:
        with self.store.operation():
            return lifecycle.delete_point(self.store, point_id)

    # reads
    def get_point(self, point_id: str) -> dict[str, Any] | None:
        return self.store.get_point(point_id)

    def search_points(self, query: str, limit: int = 10, **kw: Any) -> tuple[list[dict[str, Any]], Any]:
        return search_points(self.store, query, limit, **kw)

    def dream(self, **kw: Any) -> Any:
        """``dream.dream(store, **kw)``; one transaction in the transactional event mode (REL-07)."""
        from .dream import dream

        with self.store.operation():
            return dream(self.store, **kw)

    def get_confidence(self, point_id: str) -> dict[str, Any]:
        """``store.confidence_hook`` when set, else ``dream.get_confidence`` (dirty-first local EP pass, §9.8)."""
        if self.store.confidence_hook is not None:
            return self.store.confidence_hook(self.store, point_id)
        from .dream import get_confidence

        return get_confidence(self.store, point_id)

    def why(self, ids: list[str]) -> dict[str, dict[str, Any]]:
        return assemble_why_blocks(self.store, ids)

    ep_view = staticmethod(ep_view)

    # volunteering, hooks, digest
    def volunteer_context(self, window: Any, **kw: Any) -> dict[str, Any]:
        return volunteer.volunteer_context(self.store, window, **kw)

    def decide(self, window: Any, **kw: Any) -> dict[str, Any]:
        return volunteer.decide(self.store, window, **kw)

    def session_context(self) -> dict[str, Any]:
        return digest.session_context(self.store)

    def context(self) -> str:
        return digest.render_digest(digest.session_context(self.store))

    def hook_volunteer_turn(self, stdin: bytes | str, harness: str = "codex") -> tuple[str, int]:
        return hooks.hook_volunteer_turn(stdin, harness, store=self.store)

    def hook_session_start(self) -> tuple[str, int]:
        return hooks.hook_session_start(self.store)

    def hook_session_end(self, turns: list[dict[str, Any]], session_id: str) -> tuple[str, int]:
        return hooks.hook_session_end(self.capture_session, turns, session_id)

    # spool and expansion
    def spool(self, root: str | Path | None = None) -> Spool:
        root = root or self.cfg.spool_dir
        if root is None:
            raise ValueError("no spool_dir configured")
        return Spool(root, clock=self.store.clock, permanent=self.cfg.spool_permanent,
                     fault_hook=self.store.faults.step, corrupt=self.cfg.spool_corrupt,
                     turns_unreadable=self.cfg.spool_turns_unreadable)

    def expand_pool(self, pool: list[dict[str, Any]], enabled: bool = False, is_temporal: bool = False,
                    **kw: Any) -> tuple[list[dict[str, Any]], dict[str, Any]]:
        return expansion.expand_pool(self.store, pool, enabled, is_temporal, **kw)

    # out of scope (TOR-48)
    install_pack = staticmethod(unmodelled.install_pack)
    ingest_source = staticmethod(unmodelled.ingest_source)
    index_directory = staticmethod(unmodelled.index_directory)
    approve_dedup = staticmethod(unmodelled.approve_dedup)
    merge_points = staticmethod(unmodelled.merge_points)
    replay_journal = staticmethod(unmodelled.replay_journal)
