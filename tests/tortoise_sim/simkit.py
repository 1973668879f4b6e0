"""Shared helpers for the tortoise_sim part-1 tests."""

from __future__ import annotations

from tortoise_sim import SimConfig, StepClock, Tortoise


def make_sim(**cfg):
    extractor = cfg.pop("extractor", None)
    kw = {}
    if extractor is not None:
        kw["extractor"] = extractor if extractor != "none" else None
    cfg.setdefault("embedder", "hashing")
    return Tortoise(config=SimConfig(**cfg), clock=StepClock(), seed=0, **kw)


def t0(sim, kind, content, **kw):
    pid = sim.create_point(kind, content, credibility="gold", **kw)["id"]
    sim.update_point(pid, status="live")
    return pid


def ask(text):
    return [{"role": "user", "content": text}]
