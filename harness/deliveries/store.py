"""Reading a delivery store back: checks (one line naming the file), rebuilding texts, cutting a conversation to
some probes, and the size against the texts inline."""

from __future__ import annotations

import gzip
import hashlib
import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.deliveries.templates import (
    ESCAPES,
    FORMAT,
    SHA_CHARS,
    VERSION,
    DeliveryStoreError,
    rebuild,
    render,
)


@dataclass
class StoredConversation:
    """One conversation of a store read back, with rebuilding."""

    record: dict[str, Any]
    templates: list[list[Any]]
    escapes: list[str]
    _memo: dict[int, str] = field(default_factory=dict)
    _units: dict[int, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.dates = {int(s[0]): str(s[1]) for s in self.record["sessions"]}

    @property
    def id(self) -> str:
        return str(self.record["id"])

    def unit_text(self, i: int) -> str:
        got = self._units.get(i)
        if got is None:
            ti, tmpl, esc = self.record["units"][i]
            dia, speaker, text, caption, session, _role = self.record["turns"][ti]
            fields = {"id": dia, "speaker": speaker, "text": text, "caption": caption or "",
                      "date": self.dates.get(int(session), "")}
            got = self._units[i] = render(self.templates[tmpl], fields, self.escapes[esc])[0]
        return got

    def text(self, delivery: Sequence[Any]) -> str:
        r = self.record
        return rebuild(delivery[2], r["lits"], self.unit_text, r["slices"], r["blocks"], self._memo)

    def deliveries(self) -> Iterator[tuple[dict[str, Any], str, list[Any]]]:
        """(probe, row, delivery record) for every delivery, in the order added."""
        for d in self.record["deliveries"]:
            yield self.record["probes"][d[0]], str(d[1]), d


@dataclass
class DeliveryStore:
    """A delivery store read back: its metadata and its conversations by id."""

    path: Path
    meta: dict[str, Any]
    conversations: dict[str, StoredConversation]

    def find(self, cluster: str, probe: str) -> tuple[StoredConversation, dict[str, Any]] | None:
        """The conversation and probe record behind a per-probe table key (``None`` when the store lacks it)."""
        conv = self.conversations.get(cluster)
        if conv is None:
            return None
        for p in conv.record["probes"]:
            if p["key"] == probe:
                return conv, p
        return None

    def text(self, cluster: str, probe: str, row: str) -> str:
        """The exact text ``row`` delivered for the probe (KeyError when the store lacks it)."""
        conv = self.conversations[cluster]
        for p, r, d in conv.deliveries():
            if p["key"] == probe and r == row:
                return conv.text(d)
        raise KeyError((cluster, probe, row))

    def verify(self) -> int:
        """Rebuild every delivery and compare it with its recorded SHA-1 prefix; the count checked
        (:class:`DeliveryStoreError` naming the file and the first delivery that differs)."""
        n = 0
        for conv in self.conversations.values():
            for p, row, d in conv.deliveries():
                if hashlib.sha1(conv.text(d).encode("utf-8")).hexdigest()[:SHA_CHARS] != d[5]:
                    raise DeliveryStoreError(f"{self.path}: damaged: conversation {conv.id} probe {p['key']} row "
                                             f"{row!r} does not rebuild to the text it recorded")
                n += 1
        return n


_CONV_KEYS = {"id": str, "sessions": list, "turns": list, "probes": list, "lits": list, "units": list,
              "slices": list, "blocks": list, "deliveries": list, "stored": dict}


def _check_codes(codes: Any, sizes: tuple[int, int, int, int], where: str) -> None:
    if not isinstance(codes, list) or not all(isinstance(c, int) and not isinstance(c, bool) and c >= 0
                                              and c // 4 < sizes[c % 4] for c in codes):
        raise DeliveryStoreError(f"{where}: a part refers to nothing")


def _check_conversation(rec: Any, n_templates: int, n_escapes: int, where: str) -> None:
    if not isinstance(rec, dict):
        raise DeliveryStoreError(f"{where}: a conversation record is not an object")
    for key, typ in _CONV_KEYS.items():
        if not isinstance(rec.get(key), typ):
            raise DeliveryStoreError(f"{where}: conversation {rec.get('id')!r} has no {key!r} ({typ.__name__})")
    where = f"{where}: conversation {rec['id']}"
    n_turns = len(rec["turns"])
    for t in rec["turns"]:
        if not (isinstance(t, list) and len(t) == 6 and all(isinstance(x, str) for x in t[:3])):
            raise DeliveryStoreError(f"{where}: a turn is not [dia_id, speaker, text, caption, session, role]")
    for u in rec["units"]:
        if not (isinstance(u, list) and len(u) == 3 and 0 <= u[0] < n_turns and 0 <= u[1] < n_templates
                and 0 <= u[2] < n_escapes):
            raise DeliveryStoreError(f"{where}: a unit names no turn, template or escape")
    for s in rec["slices"]:
        if not (isinstance(s, list) and len(s) == 3 and 0 <= s[0] < len(rec["units"]) and 0 <= s[1] <= s[2]):
            raise DeliveryStoreError(f"{where}: a slice names no unit")
    if not all(isinstance(x, str) for x in rec["lits"]):
        raise DeliveryStoreError(f"{where}: a literal is not text")
    sizes = (len(rec["lits"]), len(rec["units"]), len(rec["slices"]), len(rec["blocks"]))
    for i, b in enumerate(rec["blocks"]):
        _check_codes(b, sizes, f"{where} block {i}")
        if any(c % 4 == 3 and c // 4 >= i for c in b):  # blocks refer only to earlier blocks: no cycle
            raise DeliveryStoreError(f"{where}: block {i} refers to a later block")
    for p in rec["probes"]:
        if not (isinstance(p, dict) and isinstance(p.get("key"), str) and isinstance(p.get("question"), str)
                and isinstance(p.get("evidence"), list) and all(isinstance(e, int) and 0 <= e < n_turns
                                                                 for e in p["evidence"])):
            raise DeliveryStoreError(f"{where}: a probe record lacks key, question or evidence")
    for d in rec["deliveries"]:
        if not (isinstance(d, list) and len(d) == 6 and isinstance(d[0], int) and 0 <= d[0] < len(rec["probes"])
                and isinstance(d[1], str) and isinstance(d[3], list) and isinstance(d[5], str)):
            raise DeliveryStoreError(f"{where}: a delivery record is not [probe, row, parts, evidence, ranking, sha]")
        _check_codes(d[2], sizes, f"{where} row {d[1]}")


def read_deliveries(path: Path | str) -> DeliveryStore:
    """Read and check a delivery store; :class:`DeliveryStoreError` (one line naming the file) for a missing,
    unreadable, foreign or damaged one. Texts are rebuilt on demand (:meth:`DeliveryStore.verify` rebuilds all)."""
    path = Path(path)
    if not path.is_file():
        raise DeliveryStoreError(f"{path}: no delivery store there" + (" (a folder)" if path.is_dir() else ""))
    try:
        data = json.loads(gzip.decompress(path.read_bytes()).decode("utf-8"))
    except (OSError, EOFError, UnicodeDecodeError, ValueError) as exc:
        raise DeliveryStoreError(f"{path}: not a readable delivery store ({type(exc).__name__})") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise DeliveryStoreError(f"{path}: not a memsim delivery store (no {FORMAT!r} format)")
    if data.get("version") != VERSION:
        raise DeliveryStoreError(f"{path}: store format version {data.get('version')!r}; this memsim reads version "
                                 f"{VERSION}")
    templates, escapes = data.get("templates"), data.get("escapes")
    if not isinstance(templates, dict) or not isinstance(escapes, list) or not set(escapes) <= set(ESCAPES):
        raise DeliveryStoreError(f"{path}: its templates or escapes are missing")
    convs = data.get("conversations")
    if not isinstance(convs, list):
        raise DeliveryStoreError(f"{path}: no conversations list")
    out: dict[str, StoredConversation] = {}
    tlist = list(templates.values())
    for rec in convs:
        _check_conversation(rec, len(tlist), len(escapes), str(path))
        out[rec["id"]] = StoredConversation(rec, tlist, list(escapes))
    meta = {k: v for k, v in data.items() if k != "conversations"}
    return DeliveryStore(path, meta, out)


def compact(record: Mapping[str, Any], probes: Iterable[int]) -> dict[str, Any]:
    """A conversation record cut to the deliveries of the probe positions ``probes``, holding only the literals,
    units, slices and blocks those deliveries reach (renumbered in their original order, so a block still refers
    only to earlier blocks); turns, sessions and probe records are kept whole."""
    keep = set(probes)
    deliveries = [d for d in record["deliveries"] if d[0] in keep]
    used: list[set[int]] = [set(), set(), set(), set()]
    stack = [c for d in deliveries for c in d[2]]
    while stack:
        code = stack.pop()
        i, kind = divmod(code, 4)
        if i in used[kind]:
            continue
        used[kind].add(i)
        if kind == 3:
            stack.extend(record["blocks"][i])
        elif kind == 2:
            used[1].add(record["slices"][i][0])
    new = [{old: n for n, old in enumerate(sorted(u))} for u in used]

    def remap(codes: Sequence[int]) -> list[int]:
        return [new[c % 4][c // 4] * 4 + c % 4 for c in codes]

    out = dict(record)
    out["lits"] = [record["lits"][i] for i in sorted(used[0])]
    out["units"] = [record["units"][i] for i in sorted(used[1])]
    out["slices"] = [[new[1][s[0]], s[1], s[2]] for s in (record["slices"][i] for i in sorted(used[2]))]
    out["blocks"] = [remap(record["blocks"][i]) for i in sorted(used[3])]
    out["deliveries"] = [[d[0], d[1], remap(d[2]), *d[3:]] for d in deliveries]
    return out


def measure(store: DeliveryStore) -> dict[str, Any]:
    """The store's size against the delivered texts inline: deliveries, the texts' total characters and UTF-8
    bytes, the store's JSON bytes (uncompressed) and file bytes, and the part counts."""
    inline_chars = inline_bytes = 0
    n = 0
    counts = {"lits": 0, "units": 0, "slices": 0, "blocks": 0, "turns": 0}
    for conv in store.conversations.values():
        for _, _, d in conv.deliveries():
            text = conv.text(d)
            inline_chars += len(text)
            inline_bytes += len(text.encode("utf-8"))
            n += 1
        for k in counts:
            counts[k] += len(conv.record[k])
    raw = json.dumps({**store.meta, "conversations": [c.record for c in store.conversations.values()]},
                     ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    return {"deliveries": n, "inline_chars": inline_chars, "inline_bytes": inline_bytes, "json_bytes": len(raw),
            "file_bytes": store.path.stat().st_size, "ratio_inline_to_json": inline_bytes / max(1, len(raw)),
            **counts}
