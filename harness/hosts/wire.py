"""Observation at the wire: which memory items a hook printed reached a real host's model request, where, and how
much of the request they are.

The pieces, in the order a scenario run uses them:

- :func:`memory_items` turns what one hook printed (its stdout, as recorded by ``hooktee.sh``) into memory items.
  The output shapes decoded are the ones spec tortoise.md section 7.1 defines and the hosts read (spec hosts.md):
  the Claude Code / Codex JSON ``{"hookSpecificOutput": {"additionalContext": TEXT}}``, Cline's
  ``{"contextModification": {"context": TEXT}}`` (and the plain string form ``{"contextModification": TEXT}``
  Cline was seen to deliver), and plain text. A JSON object with none of these fields carries no context (a host
  reads it as control fields only), so it yields no item. The text is then classified: a Tortoise pointer block
  (it holds the block header of ``tortoise_sim.volunteer.BLOCK_HEADER``; its point ids are read from its
  ``point/<id>`` lines), a Tortoise digest (it starts with ``tortoise_sim.digest.DIGEST_TITLE``, or is the one-line
  no-memory notice; its memory lines are the ``- ...`` bullet lines under its headings), or any other hook text (a
  user's own memory hook).
- :func:`request_blocks` reads the text blocks out of one recorded request (``harness.hosts.server`` format) for
  each API: Anthropic Messages (``system`` as a string or blocks, ``messages[i].content`` as a string or blocks,
  ``role: "system"`` inside ``messages`` as Claude Code sends it), OpenAI Responses (``instructions``, ``input``
  items: messages of any role with ``input_text`` / ``output_text`` parts, ``function_call`` and
  ``function_call_output`` items), Chat Completions (``messages``, ``tool_calls``) and Gemini
  (``systemInstruction`` and ``contents`` parts). Tool definitions become blocks of part ``"tools"``.
- :func:`deliveries` finds each item in the system and message blocks (never in tool definitions): every
  occurrence, with the message index, role, block index, the host's framing prefix before the item on its line
  (e.g. Claude Code's ``UserPromptSubmit hook additional context: ``) and its offset in the block, whether it arrived byte for byte, and its
  bytes and cl100k tokens. Matching, in order:

  1. exact: the item's text, or the text with its surrounding whitespace trimmed (a hook's output ends in a
     newline a host may strip; ``Delivery.trimmed`` says which), appears unchanged;
  2. not exact, with the transformation named in ``Delivery.encoding``: ``"html-escaped"`` (Gemini CLI puts the
     block inside ``<hook_context>`` HTML-escaped), ``"json-escaped"`` (the text as a JSON string body),
     ``"whitespace-changed"`` (the same words with different whitespace);
  3. for a digest only, when the whole digest is not found in a block: each of its memory lines found on its own
     (``Delivery.whole`` is False and ``lines_found`` lists them), so a host that re-frames the digest still shows
     which lines reached the model.

- :func:`request_size` is the size of a request's text as the model gets it: the system and message blocks'
  UTF-8 bytes and cl100k tokens (summed block by block), and the tool definitions apart (each tool as compact
  JSON).
- :func:`prompt_latencies` gives, for a ``SessionRun``, the time from each prompt's submission (prompt 0: the host
  process start) to its first conversation request.
- :func:`store_turns` / :func:`compare_turns` put the turns a Tortoise store holds for a session beside the host's
  own conversation (``tortoise_sim.transcripts.read_transcript``), and say whether memory fed back into memory.
- :func:`hook_records` reads what ``hooktee.sh`` recorded for every hook run.

cl100k tokens are tiktoken's ``cl100k_base`` loaded from the copy bundled inside litellm
(``fractal_sim.context_meter``'s ``cl100k-bundled`` counter; special-token text is counted as plain text).
"""

from __future__ import annotations

import html
import json
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from tortoise_sim.digest import CLOSING_HINT, DIGEST_TITLE, HEADINGS, NO_MEMORY_LINE
from tortoise_sim.volunteer import BLOCK_HEADER

__all__ = [
    "MemoryItem", "Block", "Delivery", "memory_items", "request_blocks", "deliveries", "request_size",
    "observe_request", "is_conversation", "prompt_latencies", "store_turns", "compare_turns", "hook_records",
    "items_from_records", "count_tokens", "CONVERSATION_APIS",
]

CONVERSATION_APIS = frozenset({"anthropic.messages", "openai.responses", "openai.chat", "gemini.generate"})
_POINT_ID = re.compile(r"point/([A-Za-z0-9_\-]+)")
_DIGEST_FIXED = frozenset({DIGEST_TITLE, CLOSING_HINT, NO_MEMORY_LINE, *HEADINGS.values()})


@lru_cache(maxsize=1)
def _counter() -> Callable[[str], int]:
    from fractal_sim.context_meter import get_counter

    return get_counter("cl100k-bundled")


def count_tokens(text: str) -> int:
    """cl100k_base tokens of ``text`` (litellm's bundled copy; special-token text counted as plain text)."""
    return _counter()(text) if text else 0


# ------------------------------------------------------------------------------------------------ memory items
@dataclass
class MemoryItem:
    """One piece of memory a hook printed: ``kind`` is ``"pointer_block"``, ``"digest"`` or ``"hook_text"``;
    ``text`` the context text the host was given (JSON shapes decoded); ``point_ids`` the ids of a pointer block's
    ``point/<id>`` lines; ``event`` the hook event; ``lines`` a digest's memory lines (its bullets)."""

    kind: str
    text: str
    point_ids: list[str] = field(default_factory=list)
    event: str = ""
    lines: list[str] = field(default_factory=list)


def _context_text(hook_stdout: str) -> str | None:
    """The context text in a hook's stdout: a decoded JSON shape, or the text itself; None when none."""
    stripped = hook_stdout.strip()
    if not stripped:
        return None
    if stripped[0] in "{[":
        try:
            obj = json.loads(stripped)
        except ValueError:
            return hook_stdout
        if not isinstance(obj, dict):
            return hook_stdout
        hso = obj.get("hookSpecificOutput")
        if isinstance(hso, dict) and isinstance(hso.get("additionalContext"), str):
            return hso["additionalContext"] or None
        cm = obj.get("contextModification")
        if isinstance(cm, dict) and isinstance(cm.get("context"), str):
            return cm["context"] or None
        if isinstance(cm, str):
            return cm or None
        if isinstance(obj.get("additionalContext"), str):
            return obj["additionalContext"] or None
        return None
    return hook_stdout


def classify(text: str, event: str = "") -> MemoryItem:
    """A memory item for one context text: pointer block, digest or other hook text."""
    if BLOCK_HEADER[0] in text or BLOCK_HEADER[1] in text.splitlines():
        ids = list(dict.fromkeys(_POINT_ID.findall(text)))
        return MemoryItem("pointer_block", text, ids, event)
    first = text.lstrip().splitlines()[0] if text.strip() else ""
    if first == DIGEST_TITLE or text.strip() == NO_MEMORY_LINE:
        lines = [ln for ln in text.splitlines() if ln.startswith("- ") and ln not in _DIGEST_FIXED]
        return MemoryItem("digest", text, [], event, lines)
    return MemoryItem("hook_text", text, [], event)


def memory_items(event: str, hook_stdout: str) -> list[MemoryItem]:
    """The memory items in what one hook printed for ``event`` (empty when it printed no context)."""
    text = _context_text(hook_stdout)
    if text is None or not text.strip():
        return []
    return [classify(text, event)]


# ------------------------------------------------------------------------------------------------ request blocks
@dataclass
class Block:
    """One text block of a request: ``index`` the message (or input item / content) index, None for top-level
    system text and tool definitions; ``role``; ``block_index`` the block within that message; ``part`` is
    ``"system"`` (top-level system / instructions), ``"message"`` or ``"tools"``; ``type`` the block's own type
    (``text``, ``tool_use``, ``tool_result``, ``function_call``, ``function_call_output``, ``tool``...)."""

    index: int | None
    role: str
    block_index: int
    text: str
    part: str
    type: str = "text"


def _api(req: dict[str, Any]) -> str:
    api = req.get("api")
    if isinstance(api, str) and api not in ("", "other"):
        return api
    body = req.get("body") if isinstance(req.get("body"), dict) else {}
    if "contents" in body:
        return "gemini.generate"
    if "input" in body or "instructions" in body:
        return "openai.responses"
    if "system" in body:
        return "anthropic.messages"
    return "openai.chat" if "messages" in body else str(api or "other")


def _jsontext(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _tool_blocks(tools: Any) -> list[Block]:
    if not isinstance(tools, list):
        return []
    return [Block(None, "tools", k, _jsontext(t), "tools", "tool") for k, t in enumerate(tools)]


def _anthropic_content(i: int | None, role: str, content: Any, part: str) -> list[Block]:
    if isinstance(content, str):
        return [Block(i, role, 0, content, part)]
    out: list[Block] = []
    if not isinstance(content, list):
        return out
    for j, b in enumerate(content):
        if isinstance(b, str):
            out.append(Block(i, role, j, b, part))
        elif not isinstance(b, dict):
            continue
        elif b.get("type") == "tool_use":
            out.append(Block(i, role, j, _jsontext(b.get("input", {})), part, "tool_use"))
        elif b.get("type") == "tool_result":
            inner = b.get("content")
            if isinstance(inner, list):
                inner = "\n".join(x.get("text", "") for x in inner if isinstance(x, dict))
            out.append(Block(i, role, j, inner if isinstance(inner, str) else "", part, "tool_result"))
        elif isinstance(b.get("text"), str):
            out.append(Block(i, role, j, b["text"], part, str(b.get("type", "text"))))
    return out


def _anthropic(body: dict[str, Any]) -> list[Block]:
    out = _anthropic_content(None, "system", body.get("system"), "system")
    for i, m in enumerate(body.get("messages") or []):
        if isinstance(m, dict):
            out += _anthropic_content(i, str(m.get("role", "")), m.get("content"), "message")
    return out + _tool_blocks(body.get("tools"))


_PART_TEXT = ("input_text", "output_text", "text", "summary_text", "refusal")


def _responses(body: dict[str, Any]) -> list[Block]:
    out: list[Block] = []
    if isinstance(body.get("instructions"), str):
        out.append(Block(None, "system", 0, body["instructions"], "system"))
    items = body.get("input")
    if isinstance(items, str):
        items = [{"type": "message", "role": "user", "content": items}]
    for i, it in enumerate(items or []):
        if not isinstance(it, dict):
            continue
        kind = it.get("type", "message")
        if kind == "message":
            role, content = str(it.get("role", "")), it.get("content")
            if isinstance(content, str):
                out.append(Block(i, role, 0, content, "message"))
                continue
            for j, p in enumerate(content or []):
                if isinstance(p, dict) and p.get("type") in _PART_TEXT and isinstance(p.get("text"), str):
                    out.append(Block(i, role, j, p["text"], "message", str(p["type"])))
        elif kind == "function_call":
            text = f"{it.get('name', '')}({_jsontext(it.get('arguments', ''))})"
            out.append(Block(i, "assistant", 0, text, "message", "function_call"))
        elif kind == "function_call_output":
            out.append(Block(i, "tool", 0, _jsontext(it.get("output", "")), "message", "function_call_output"))
    return out + _tool_blocks(body.get("tools"))


def _chat(body: dict[str, Any]) -> list[Block]:
    out: list[Block] = []
    for i, m in enumerate(body.get("messages") or []):
        if not isinstance(m, dict):
            continue
        role, content = str(m.get("role", "")), m.get("content")
        if isinstance(content, str):
            out.append(Block(i, role, 0, content, "message"))
        elif isinstance(content, list):
            for j, p in enumerate(content):
                if isinstance(p, dict) and isinstance(p.get("text"), str):
                    out.append(Block(i, role, j, p["text"], "message", str(p.get("type", "text"))))
        for k, call in enumerate(m.get("tool_calls") or []):
            fn = call.get("function", {}) if isinstance(call, dict) else {}
            text = f"{fn.get('name', '')}({_jsontext(fn.get('arguments', ''))})"
            out.append(Block(i, role, 1000 + k, text, "message", "tool_call"))
    return out + _tool_blocks(body.get("tools") or body.get("functions"))


def _gemini_parts(i: int | None, role: str, parts: Any, part: str) -> list[Block]:
    out: list[Block] = []
    for j, p in enumerate(parts or []):
        if not isinstance(p, dict):
            continue
        if isinstance(p.get("text"), str):
            out.append(Block(i, role, j, p["text"], part))
        elif "functionCall" in p:
            out.append(Block(i, role, j, _jsontext(p["functionCall"]), part, "functionCall"))
        elif "functionResponse" in p:
            out.append(Block(i, role, j, _jsontext(p["functionResponse"]), part, "functionResponse"))
    return out


def _gemini(body: dict[str, Any]) -> list[Block]:
    si = body.get("systemInstruction") or body.get("system_instruction")
    out = _gemini_parts(None, "system", si.get("parts") if isinstance(si, dict) else None, "system")
    for i, c in enumerate(body.get("contents") or []):
        if isinstance(c, dict):
            out += _gemini_parts(i, str(c.get("role", "user")), c.get("parts"), "message")
    tools: list[Any] = []
    for t in body.get("tools") or []:
        decl = t.get("functionDeclarations") if isinstance(t, dict) else None
        tools += decl if isinstance(decl, list) else [t]
    return out + _tool_blocks(tools)


_READERS: dict[str, Callable[[dict[str, Any]], list[Block]]] = {
    "anthropic.messages": _anthropic, "anthropic.count_tokens": _anthropic, "openai.responses": _responses,
    "openai.chat": _chat, "gemini.generate": _gemini,
}


def request_blocks(req: dict[str, Any]) -> list[Block]:
    """The text blocks of one recorded request (system, message and tool-definition parts)."""
    body = req.get("body")
    if not isinstance(body, dict):
        return []
    reader = _READERS.get(_api(req))
    return reader(body) if reader else []


# ------------------------------------------------------------------------------------------------ deliveries
@dataclass
class Delivery:
    """One occurrence of a memory item in a request block. ``prefix`` is the text before the item on the line
    where it starts (the host's framing, e.g. ``UserPromptSubmit hook additional context: ``; a host may put
    several hook outputs and its own context in one block, so the whole text before the item is not the framing);
    ``offset`` the item's character offset in the block; ``exact`` True when it arrived byte for byte (``trimmed``: only after trimming the item's
    surrounding whitespace), else ``encoding`` names what the host did to it; ``text`` is the span of the block
    that carries it, ``bytes`` / ``tokens`` its UTF-8 bytes and cl100k tokens; ``whole`` False when only some
    lines of a digest were found (``lines_found``); ``point_ids`` the item's point ids seen in the span."""

    item: MemoryItem
    message_index: int | None
    role: str
    block_index: int
    part: str
    prefix: str
    exact: bool
    encoding: str | None
    text: str
    bytes: int
    tokens: int
    trimmed: bool = False
    whole: bool = True
    lines_found: list[str] = field(default_factory=list)
    point_ids: list[str] = field(default_factory=list)
    offset: int = 0

    def to_json(self, *, with_text: bool = False) -> dict[str, Any]:
        d = asdict(self)
        d["item"] = {"kind": self.item.kind, "event": self.item.event, "point_ids": self.item.point_ids,
                     "bytes": len(self.item.text.encode("utf-8"))}
        if not with_text:
            d.pop("text")
        return d


def _spans(needle: str, hay: str) -> list[int]:
    out, start = [], 0
    while needle:
        k = hay.find(needle, start)
        if k < 0:
            break
        out.append(k)
        start = k + len(needle)
    return out


def _variants(text: str) -> list[tuple[str, bool, str | None]]:
    """(needle, trimmed, encoding) to try, exact first."""
    core = text.strip()
    out: list[tuple[str, bool, str | None]] = [(text, False, None)]
    if core != text:
        out.append((core, True, None))
    for enc, needle in (("html-escaped", html.escape(core, quote=False)), ("html-escaped", html.escape(core)),
                        ("json-escaped", json.dumps(core, ensure_ascii=False)[1:-1]),
                        ("json-escaped", json.dumps(core)[1:-1])):
        if needle != core and all(needle != v[0] for v in out):
            out.append((needle, True, enc))
    return out


def _whitespace_pattern(text: str) -> re.Pattern[str] | None:
    words = text.split()
    if len(words) < 2:
        return None
    return re.compile(r"\s+".join(re.escape(w) for w in words))


def _found(item: MemoryItem, b: Block, start: int, span: str, trimmed: bool, encoding: str | None,
           *, whole: bool = True, lines: Sequence[str] = ()) -> Delivery:
    ids = [p for p in item.point_ids if f"point/{p}" in span]
    line_start = b.text.rfind("\n", 0, start) + 1
    return Delivery(item, b.index, b.role, b.block_index, b.part, b.text[line_start:start], encoding is None,
                    encoding, span, len(span.encode("utf-8")), count_tokens(span), trimmed, whole, list(lines), ids,
                    start)


def _in_block(item: MemoryItem, b: Block) -> list[Delivery]:
    for needle, trimmed, enc in _variants(item.text):
        ks = _spans(needle, b.text)
        if ks:
            return [_found(item, b, k, needle, trimmed, enc, lines=item.lines) for k in ks]
    pat = _whitespace_pattern(item.text)
    if pat is not None:
        ms = list(pat.finditer(b.text))
        if ms:
            return [_found(item, b, m.start(), m.group(0), True, "whitespace-changed", lines=item.lines)
                    for m in ms]
    if item.kind == "digest" and item.lines:
        hits = [(b.text.find(ln), ln) for ln in item.lines]
        hits = sorted((k, ln) for k, ln in hits if k >= 0)
        if hits:
            start = hits[0][0]
            end = max(k + len(ln) for k, ln in hits)
            return [_found(item, b, start, b.text[start:end], True, None, whole=False,
                           lines=[ln for _, ln in hits])]
    return []


def deliveries(req: dict[str, Any], items: Iterable[MemoryItem]) -> list[Delivery]:
    """Every occurrence of each item in the request's system and message blocks (tool definitions excluded), in
    item order, then block order. Items with the same kind and text (the same pointer block printed on every
    prompt of a session) are looked for once, so each occurrence in the request is reported once, under the first
    such item."""
    blocks = [b for b in request_blocks(req) if b.part != "tools"]
    out: list[Delivery] = []
    seen: set[tuple[str, str]] = set()
    for item in items:
        if not item.text.strip() or (item.kind, item.text) in seen:
            continue
        seen.add((item.kind, item.text))
        for b in blocks:
            out += _in_block(item, b)
    return out


def request_size(req: dict[str, Any]) -> dict[str, int]:
    """``{"bytes", "tokens", "tool_bytes", "tool_tokens", "blocks", "tools"}``: UTF-8 bytes and cl100k tokens of the
    system and message blocks (summed per block), and of the tool definitions apart (compact JSON per tool)."""
    text = [b.text for b in request_blocks(req) if b.part != "tools"]
    tools = [b.text for b in request_blocks(req) if b.part == "tools"]
    return {"bytes": sum(len(t.encode("utf-8")) for t in text), "tokens": sum(count_tokens(t) for t in text),
            "tool_bytes": sum(len(t.encode("utf-8")) for t in tools), "tool_tokens": sum(count_tokens(t) for t in tools),
            "blocks": len(text), "tools": len(tools)}


def observe_request(req: dict[str, Any], items: Iterable[MemoryItem]) -> dict[str, Any]:
    """One request's wire observation as JSON: seq, api, size, deliveries and memory's share of the text tokens.
    ``memory_bytes`` / ``memory_tokens`` count each delivered span once."""
    ds = deliveries(req, items)
    size = request_size(req)
    mem_b = sum(d.bytes for d in ds)
    mem_t = sum(d.tokens for d in ds)
    return {"seq": req.get("seq"), "t": req.get("t"), "api": _api(req), "conversation": is_conversation(req),
            "size": size, "deliveries": [d.to_json() for d in ds], "memory_bytes": mem_b, "memory_tokens": mem_t,
            "memory_token_share": (mem_t / size["tokens"]) if size["tokens"] else None}


# ------------------------------------------------------------------------------------------------ latency
def is_conversation(req: dict[str, Any]) -> bool:
    """A conversation request, as the model server counts them: a Messages / Responses / Chat / Gemini generate
    call; an Anthropic Messages call without ``tools`` is a side query (Claude Code's title or topic request)."""
    api = req.get("api")
    if api not in CONVERSATION_APIS:
        return False
    body = req.get("body")
    return not (api == "anthropic.messages" and not (isinstance(body, dict) and body.get("tools")))


def prompt_latencies(run: Any, *, conversation: Callable[[dict[str, Any]], bool] = is_conversation
                     ) -> list[dict[str, Any]]:
    """Per prompt of a ``SessionRun`` (``prompt_times``, ``requests``): the first conversation request received at
    or after the prompt's submission and before the next prompt's, and the seconds between (None when no request
    came for that prompt)."""
    times = list(run.prompt_times)
    reqs = sorted((r for r in run.requests if conversation(r)), key=lambda r: r["t"])
    out = []
    for i, t0 in enumerate(times):
        t1 = times[i + 1] if i + 1 < len(times) else float("inf")
        first = next((r for r in reqs if t0 <= r["t"] < t1), None)
        out.append({"prompt": i, "submitted": t0, "seq": None if first is None else first.get("seq"),
                    "latency_s": None if first is None else first["t"] - t0})
    return out


# ------------------------------------------------------------------------------------------------ store vs transcript
def store_turns(db: str | Path, session_id: str) -> list[dict[str, str]]:
    """The turns a Tortoise store holds for ``session_id`` (its ``Session -CONTAINS-> Point`` turn points
    ``<sid>_t<i>``, in turn order), as ``{"role", "content"}`` with the ``[role] `` prefix capture adds removed.
    Opens the store read-only, so no writer (service, writing command) may hold it."""
    from tortoise_sim.store import TortoiseStore

    store = TortoiseStore(Path(db), read_only=True)
    try:
        rows = store.query("MATCH (s:Session {id:$s})-[:CONTAINS]->(p:Point) WHERE p.pointKind = 'event' "
                           "RETURN p.id AS id, p.speaker AS role, p.content AS content", {"s": session_id})
    finally:
        store.close()
    return turns_from_rows(rows, session_id)


def turns_from_rows(rows: Iterable[dict[str, Any]], session_id: str) -> list[dict[str, str]]:
    """Turn points (``id``, ``role``, ``content``) of one session in turn order, ``[role] `` prefix removed."""
    pat = re.compile(rf"^{re.escape(session_id)}_t(\d+)$")
    keyed = []
    for r in rows:
        m = pat.match(str(r.get("id", "")))
        if not m:
            continue
        role, content = str(r.get("role") or ""), str(r.get("content") or "")
        lead = f"[{role}] "
        keyed.append((int(m.group(1)), {"role": role, "content": content[len(lead):] if content.startswith(lead)
                                         else content}))
    return [t for _, t in sorted(keyed, key=lambda x: x[0])]


def _is_memory(text: str) -> bool:
    return BLOCK_HEADER[0] in text or BLOCK_HEADER[1] in text or DIGEST_TITLE in text


def compare_turns(stored: Sequence[dict[str, str]], conversation: Sequence[dict[str, str]], *,
                  max_chars: int = 5000) -> dict[str, Any]:
    """The store's turns against the host's conversation (both ``{"role", "content"}``, the conversation cut to
    capture's ``max_chars`` per turn): ``equal`` (same turns in the same order), counts, the turns missing from
    the store and the extra ones, and ``memory_fed_back``: stored turns that carry a pointer block or a digest."""
    conv = [{"role": str(t.get("role")), "content": str(t.get("content") or "")[:max_chars]} for t in conversation]
    st = [{"role": str(t.get("role")), "content": str(t.get("content") or "")} for t in stored]
    key = [(t["role"], t["content"]) for t in conv]
    skey = [(t["role"], t["content"]) for t in st]
    return {"equal": key == skey, "stored": len(st), "conversation": len(conv),
            "missing": [t for t in conv if (t["role"], t["content"]) not in skey],
            "extra": [t for t in st if (t["role"], t["content"]) not in key],
            "memory_fed_back": sum(1 for t in st if _is_memory(t["content"]))}


# ------------------------------------------------------------------------------------------------ hook records
def hook_records(folder: str | Path) -> list[dict[str, Any]]:
    """What ``hooktee.sh`` recorded under ``folder``: one dict per hook run (``event``, ``start``, ``end``,
    ``stdin``, ``stdout``, ``stderr``, ``rc`` (None when it did not finish), ``signal`` (the signal the wrapper
    forwarded, or None), ``gate`` (``[start, end]`` of a runner's gate wait before the hook, or None)), by start
    time."""
    root = Path(folder)
    out = []
    for meta in sorted(root.glob("*.start")):
        base = meta.with_suffix("")
        def read(ext: str, _b: Path = base) -> str | None:
            p = _b.parent / f"{_b.name}.{ext}"
            return p.read_text("utf-8", "replace") if p.exists() else None
        rc, end, gate = read("rc"), read("end"), (read("gate") or "").split()
        out.append({"event": base.name.rsplit("-", 2)[0], "start": float((read("start") or "0").strip()),
                    "end": float(end.strip()) if end and end.strip() else None,
                    "stdin": read("stdin") or "", "stdout": read("stdout") or "", "stderr": read("stderr") or "",
                    "rc": int(rc.strip()) if rc and rc.strip() else None,
                    "signal": (read("signal") or "").strip() or None, "base": str(base),
                    "gate": [float(x) for x in gate] if len(gate) == 2 else None})
    return sorted(out, key=lambda r: r["start"])


def items_from_records(records: Iterable[dict[str, Any]]) -> list[MemoryItem]:
    """The memory items of every recorded hook run, in run order (a run killed before it finished printed nothing
    the host used, so it yields none)."""
    out: list[MemoryItem] = []
    for r in records:
        if r.get("rc") is not None:
            out += memory_items(str(r.get("event", "")), str(r.get("stdout", "")))
    return out
