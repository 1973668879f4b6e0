"""Out-of-scope reference surfaces (spec §1.2, integration issues, item 5; claim TOR-48): each raises ``NotModelled``."""

from __future__ import annotations

from typing import Any, NoReturn

from .errors import NotModelled

__all__ = ["UNMODELLED", "install_pack", "ingest_source", "index_directory", "approve_dedup", "merge_points",
           "replay_journal", "hosted_capture", "review_queue", "backup", "rebuild"]


def _raise(name: str) -> NoReturn:
    raise NotModelled(f"{name} is outside the simulator's scope (spec §1.2; the report leaves it unresolved)")


def install_pack(*_: Any, **__: Any) -> NoReturn:
    _raise("install_pack")


def ingest_source(*_: Any, **__: Any) -> NoReturn:
    _raise("ingest_source")


def index_directory(*_: Any, **__: Any) -> NoReturn:
    _raise("index_directory")


def approve_dedup(*_: Any, **__: Any) -> NoReturn:
    _raise("approve_dedup")


def merge_points(*_: Any, **__: Any) -> NoReturn:
    _raise("merge_points")


def replay_journal(*_: Any, **__: Any) -> NoReturn:
    _raise("replay_journal")


def hosted_capture(*_: Any, **__: Any) -> NoReturn:
    _raise("hosted_capture (HTTP API)")


def review_queue(*_: Any, **__: Any) -> NoReturn:
    _raise("review_queue")


def backup(*_: Any, **__: Any) -> NoReturn:
    _raise("backup")


def rebuild(*_: Any, **__: Any) -> NoReturn:
    _raise("rebuild")


UNMODELLED = ("install_pack", "ingest_source", "index_directory", "approve_dedup", "merge_points",
              "replay_journal", "hosted_capture", "review_queue", "backup", "rebuild")
