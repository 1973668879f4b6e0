"""The resident service's memory: glibc malloc arenas capped before the service serves (per-connection threads
otherwise each keep an arena of freed search temporaries resident)."""

from __future__ import annotations

import shutil
import sys
import tempfile
from pathlib import Path

import pytest

from tortoise_sim import service as service_mod
from tortoise_sim.hook_client import PROTOCOL_VERSION


@pytest.fixture
def short_dir():
    d = tempfile.mkdtemp(prefix="msm", dir="/tmp")  # AF_UNIX paths are limited to ~107 bytes
    yield Path(d)
    shutil.rmtree(d, ignore_errors=True)


def _started(short_dir: Path, monkeypatch, **kw) -> tuple[list[int], dict]:
    calls: list[int] = []
    monkeypatch.setattr(service_mod, "limit_malloc_arenas", lambda n: calls.append(n) or True)
    svc = service_mod.TortoiseService(short_dir / "db.kuzu", str(short_dir / "s.sock"), embedder="hashing", **kw)
    svc.start(warm=False)
    try:
        status = svc.handle({"v": PROTOCOL_VERSION, "op": "status"})["result"]
    finally:
        svc.close()
    return calls, status


def test_service_caps_malloc_arenas_before_it_opens_the_store(short_dir, monkeypatch):
    calls, status = _started(short_dir, monkeypatch)
    assert calls == [service_mod.MALLOC_ARENAS] == [2] and status["malloc_arenas"] == 2
    calls, status = _started(short_dir, monkeypatch, malloc_arenas=None)  # the C library's default
    assert calls == [] and status["malloc_arenas"] is None
    with pytest.raises(ValueError, match="malloc_arenas"):
        service_mod.TortoiseService(short_dir / "db.kuzu", embedder="hashing", malloc_arenas=0)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's mallopt")
def test_limit_malloc_arenas_is_accepted_by_glibc():
    import platform

    if platform.libc_ver()[0] != "glibc":
        pytest.skip("not glibc")
    assert service_mod.limit_malloc_arenas(service_mod.MALLOC_ARENAS) is True


def test_service_finds_the_distinct_rows_when_it_refreshes_its_caches(short_dir, monkeypatch):
    """The long-lived service deduplicates its search cache in the refresh (before any hook); a one-shot reader's
    fresh cache does not (its first searches answer without the ``np.unique`` over every row)."""
    from tortoise_sim import search as search_mod
    from tortoise_sim.admission import bulk_create_points

    monkeypatch.setattr(search_mod, "_DEDUP_MIN_ROWS", 8)
    svc = service_mod.TortoiseService(short_dir / "db.kuzu", str(short_dir / "s.sock"), embedder="hashing")
    svc.start(warm=False)
    try:
        store = svc.sim.store
        bulk_create_points(store, [{"kind": "decision", "content": "decision: use " + ("kafka", "redis", "vault")[i % 3], "status": "live"}
                                   for i in range(30)])
        svc.warm()
        c = store._search_cache
        assert c.searches == 0 and c.uniq is not None and c.uniq.u == 3 and c.n == 30
        store._search_cache = None
        search_mod.search_points(store, "which tool do we use?", 5)
        assert store._search_cache.uniq is None
    finally:
        svc.close()
