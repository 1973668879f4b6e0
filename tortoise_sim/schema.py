"""Kuzu schema of the Tortoise store (spec §2.4): node and relationship tables, their columns, and the migration
run on open (``CREATE ... IF NOT EXISTS`` + ``ALTER TABLE ... ADD`` for missing columns, singletons seeded).

Only names from these fixed whitelists are ever interpolated into query text (values travel as parameters)."""

from __future__ import annotations

from typing import Any

from .embed import EMBED_DIM

__all__ = ["SCHEMA_VERSION", "POINT_COLUMNS", "NODE_TABLES", "PRIMARY_KEY", "REL_TABLES", "ddl_columns", "migrate"]

SCHEMA_VERSION = "1"

POINT_COLUMNS: dict[str, str] = {
    "id": "STRING", "content": "STRING", "pointKind": "STRING", "is_operator": "BOOLEAN", "op_type": "STRING",
    "direction": "STRING", "label": "STRING", "status": "STRING", "createdAt": "STRING", "updatedAt": "STRING",
    "content_hash": "STRING", "embedding": f"FLOAT[{EMBED_DIM}]", "authoredBy": "STRING", "wing": "STRING",
    "room": "STRING", "topic": "STRING", "tags": "STRING[]", "extractedFrom": "STRING", "session_id": "STRING",
    "is_episodic": "BOOLEAN", "eventId": "STRING", "search_keys": "STRING", "quote": "STRING", "when": "STRING",
    "source_turn_id": "INT64", "tier": "STRING", "reason": "STRING", "speaker": "STRING", "batch_id": "STRING",
    "reviewed": "BOOLEAN", "promotedAt": "STRING", "outdated": "BOOLEAN", "validFrom": "STRING",
    "validTo": "STRING", "expiredAt": "STRING", "confidence": "DOUBLE", "ep_alpha": "DOUBLE", "ep_beta": "DOUBLE",
    "posterior_alpha": "DOUBLE", "posterior_beta": "DOUBLE", "baseline_set": "BOOLEAN",
    "baseline_source": "STRING", "lastDreamedAt": "STRING", "ep_dirty": "BOOLEAN", "ep_dirty_at": "INT64",
    "mitigation_strength": "DOUBLE", "lme_chunk_index": "INT64", "extra_props": "STRING",
}

_NODE_TABLES: dict[str, dict[str, str]] = {
    "Point": POINT_COLUMNS,
    "Session": {"id": "STRING", "created_at": "STRING", "turn_count": "INT64", "is_episodic": "BOOLEAN",
                "capture_redactions": "INT64"},
    "Event": {"id": "STRING", "eventId": "STRING", "eventKind": "STRING", "name": "STRING",
              "eventStatus": "STRING", "subject": "STRING", "object": "STRING", "startedAt": "STRING",
              "endedAt": "STRING", "participants": "STRING[]", "sessionId": "STRING", "is_episodic": "BOOLEAN"},
    "Object": {"name": "STRING", "id": "STRING", "objectKind": "STRING", "status": "STRING", "version": "INT64",
               "supersededBy": "STRING", "supersededAt": "STRING"},
    "Subject": {"name": "STRING", "id": "STRING", "subjectKind": "STRING"},
    "Source": {"url": "STRING", "sourceKind": "STRING", "title": "STRING", "contentHash": "STRING",
               "ingestedAt": "STRING", "is_episodic": "BOOLEAN", "sessionId": "STRING", "capturedAt": "STRING",
               "summary": "STRING", "topics": "STRING[]", "eventId": "STRING"},
    "Tag": {"name": "STRING"},
    "EpMeta": {"key": "STRING", "ep_version": "INT64"},
    "GraphEvent": {"event_id": "STRING", "seq": "INT64", "ts": "STRING", "type": "STRING", "payload": "STRING"},
    "GraphEventMeta": {"key": "STRING", "last_seq": "INT64", "first_seq": "INT64"},
    "Meta": {"key": "STRING", "value": "STRING"},
}
_PRIMARY_KEY = {"Object": "name", "Subject": "name", "Source": "url", "Tag": "name", "EpMeta": "key",
                "GraphEvent": "event_id", "GraphEventMeta": "key", "Meta": "key"}
_MSG_COLS = ("idx INT64, direction STRING, weight DOUBLE, confidence DOUBLE, label STRING, batch_id STRING, "
             "msg_alpha DOUBLE, msg_beta DOUBLE, back_msg_alpha DOUBLE, back_msg_beta DOUBLE")
_REL_TABLES: list[str] = [
    f"IMPL(FROM Point TO Point, FROM Point TO Event, {_MSG_COLS})",
    f"NAND(FROM Point TO Point, FROM Point TO Event, {_MSG_COLS})",
    "hasPart(FROM Point TO Point, FROM Point TO Event, idx INT64)",
    "CONTAINS(FROM Session TO Point)",
    "CORRECTS(FROM Point TO Point)",
    "aboutObject(FROM Point TO Object)",
    "extractedFrom(FROM Point TO Source)",
    "mitigated_by(FROM Point TO Point)",
    "TAGGED(FROM Point TO Tag)",
    "references(FROM Source TO Event)",
    "performs(FROM Subject TO Event)",
    "produces(FROM Event TO Object)",
]

NODE_TABLES = _NODE_TABLES
PRIMARY_KEY = _PRIMARY_KEY
REL_TABLES = _REL_TABLES


def ddl_columns(table: str, cols: dict[str, str]) -> str:
    """The column list of ``CREATE NODE TABLE`` for ``table`` (its primary key marked)."""
    pk = _PRIMARY_KEY.get(table, "id")
    parts = [f"`{c}` {t}" + (" PRIMARY KEY" if c == pk else "") for c, t in cols.items()]
    return ", ".join(parts)


def migrate(store: Any) -> None:
    """Create missing tables, add missing columns (schema migration on open), seed the singletons."""
    for table, cols in _NODE_TABLES.items():
        store.conn.execute(f"CREATE NODE TABLE IF NOT EXISTS {table}({ddl_columns(table, cols)})")
        have = {r["name"] for r in store.query(f"CALL table_info('{table}') RETURN *")}
        for col, typ in cols.items():
            if col not in have:
                store.conn.execute(f"ALTER TABLE {table} ADD `{col}` {typ}")
    for rel in _REL_TABLES:
        store.conn.execute(f"CREATE REL TABLE IF NOT EXISTS {rel}")
    store.conn.execute("MERGE (m:EpMeta {key:'ep'}) ON CREATE SET m.ep_version = 0")
    store.conn.execute("MERGE (m:GraphEventMeta {key:'feed'}) ON CREATE SET m.last_seq = 0, m.first_seq = 0")
    store.conn.execute("MERGE (m:Meta {key:'schema_version'}) SET m.value = $v", {"v": SCHEMA_VERSION})
