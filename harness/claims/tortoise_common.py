"""Shared set-up for the Tortoise claims (spec tortoise §13), split by spec section into ``tortoise_*.py``.

Each demonstration builds a fresh on-disk Kuzu store under ``ctx.tmp_path``, drives ``tortoise_sim`` through its
public API (``Tortoise`` facade, hooks, spool, expansion) and compares what a user could inspect (rows, feed
events, journal lines, blocks, hook stdout, spool files) with what the claim predicts. This module registers no
claims; it holds the store factory and the small helpers the section modules share.
"""

from __future__ import annotations

from typing import Any

from harness.claims import ClaimContext
from tortoise_sim import (
    FaultHooks,
    LifecycleError,
    SimConfig,
    StepClock,
    Tortoise,
    VolunteerValidationError,
)
from tortoise_sim.sdk import DEFAULT_EXTRACTOR

D = "tortoise"


def new_sim(ctx: ClaimContext, name: str = "t", *, extractor: Any = DEFAULT_EXTRACTOR, encoder: Any = None,
         faults: FaultHooks | None = None, preset: str = "analysed", **cfg: Any) -> Tortoise:
    cfg.setdefault("embedder", "hashing")
    cfg.setdefault("event_log_path", str(ctx.tmp_path / f"{name}.journal.jsonl"))
    return Tortoise(ctx.tmp_path / f"{name}.kuzu", config=SimConfig.preset(preset, **cfg), clock=StepClock(),
                    seed=ctx.seed, extractor=extractor, encoder=encoder, faults=faults)


def t0_point(sim: Tortoise, kind: str, content: str, **kw: Any) -> str:
    """"T0 point" of §13: gold credibility, then promoted to live."""
    pid = sim.create_point(kind, content, credibility="gold", **kw)["id"]
    sim.update_point(pid, status="live")
    return pid


def ask(text: str) -> list[dict[str, str]]:
    return [{"role": "user", "content": text}]


def raising_extractor(turns: list[dict]) -> dict:
    raise RuntimeError("extractor outage")


def error_code(fn: Any) -> str | None:
    try:
        fn()
    except (LifecycleError, VolunteerValidationError) as exc:
        return exc.code
    except Exception as exc:  # noqa: BLE001 - the type name is the observation
        return type(exc).__name__
    return None


def query_rows(sim: Tortoise, cypher: str, **params: Any) -> list[dict[str, Any]]:
    return sim.store.query(cypher, params)


def without_embedding(row: dict[str, Any] | None) -> dict[str, Any] | None:
    return None if row is None else {k: v for k, v in row.items() if k != "embedding"}


def supported_and_contested(sim: Tortoise, target: tuple[str, str], supporter: tuple[str, str],
                            rival: tuple[str, str]) -> tuple[str, str, str, str]:
    """Three T0 points ``(kind, content)``: ``target``, a ``supporter`` feeding it through an IMPL operator and a
    ``rival`` joined to it by a direct NAND edge. Returns ``(target_id, supporter_id, rival_id, operator_id)``."""
    t, s, r = (t0_point(sim, kind, content) for kind, content in (target, supporter, rival))
    op = sim.create_operator("IMPL", s, [t])
    sim.create_direct_edge(r, t, "NAND")
    return t, s, r, op
