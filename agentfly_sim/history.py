"""Shared history and executor trimming (spec §6.5, §6.6).

- NP: history reset per query, capped at ``MAX_TURNS_MEMORY = 50`` with one FIFO pop per add, so the question is
  evicted first and then the example prompt (AGF-19).
- PM: no reset at the start and no cap; cleared only on normal return, so an exception carries the partial
  history into the next question (AGF-20).
- Trimming applies to executor messages only; the planner is never trimmed (AGF-34).

Token counting is offline (tiktoken cannot fetch its BPE files here): ``HeuristicTokenCounter`` counts
``ceil(len(text)/4)`` (the documented default), ``LenTokenCounter`` counts characters (used by the acceptance
examples), ``WordPieceTokenCounter`` counts MiniLM WordPiece tokens without special tokens.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, Protocol

MAX_TURNS_MEMORY = 50
MAX_CTX = 175000
MESSAGE_OVERHEAD = 4
REPLY_OVERHEAD = 2


class TokenCounter(Protocol):
    def count(self, text: str) -> int: ...


class HeuristicTokenCounter:
    """Default offline counter: ``ceil(len(text) / 4)``."""

    def count(self, text: str) -> int:
        return math.ceil(len(text) / 4)


class LenTokenCounter:
    """One token per character (the acceptance examples of spec §10.7)."""

    def count(self, text: str) -> int:
        return len(text)


class WordPieceTokenCounter:
    """MiniLM WordPiece token count, no special tokens (loaded lazily from the local weights)."""

    def __init__(self, model_path: str | None = None):
        from transformers import AutoTokenizer

        from .embedding import minilm_path

        self.tokenizer = AutoTokenizer.from_pretrained(model_path or minilm_path())

    def count(self, text: str) -> int:
        return len(self.tokenizer.encode(text, add_special_tokens=False))


class TiktokenCounter:
    """tiktoken ``cl100k_base`` (upstream's counter), usable **only** when its BPE file is already cached locally
    (``TIKTOKEN_CACHE_DIR`` or tiktoken's default cache); offline it cannot be fetched, so construction then raises
    ``RuntimeError`` instead of touching the network."""

    def __init__(self, encoding: str = "cl100k_base"):
        import os
        import tempfile

        try:
            import tiktoken
            import tiktoken.load as tload
        except ImportError as e:  # pragma: no cover - tiktoken is a transitive dependency of dspy/litellm
            raise RuntimeError("tiktoken is not installed") from e
        cache = os.environ.get("TIKTOKEN_CACHE_DIR") or os.environ.get("DATA_GYM_CACHE_DIR") or os.path.join(
            tempfile.gettempdir(), "data-gym-cache")
        if not (os.path.isdir(cache) and os.listdir(cache)):
            raise RuntimeError(f"tiktoken {encoding} BPE file is not cached locally ({cache}); use the default "
                               "HeuristicTokenCounter or WordPieceTokenCounter offline")

        def _no_network(url: str, expected_hash: str | None = None) -> bytes:
            raise RuntimeError(f"tiktoken tried to download {url}; offline runs cannot fetch BPE files")

        cached_read = tload.read_file_cached

        def read_cached_only(blobpath: str, expected_hash: str | None = None) -> bytes:
            orig = tload.read_file
            tload.read_file = _no_network
            try:
                return cached_read(blobpath, expected_hash)
            finally:
                tload.read_file = orig

        tload.read_file_cached = read_cached_only
        try:
            self.encoding = tiktoken.get_encoding(encoding)
        finally:
            tload.read_file_cached = cached_read

    def count(self, text: str) -> int:
        return len(self.encoding.encode(text, disallowed_special=()))


class SharedHistory:
    """The driver's ``shared_history``: a list of ``{"role", "content"}`` dicts with an optional FIFO cap."""

    def __init__(self, cap: int | None = None):
        self.cap = cap
        self.messages: list[dict[str, Any]] = []

    def add(self, role: str, content: Any) -> None:
        self.messages.append({"role": role, "content": content})
        if self.cap is not None and len(self.messages) > self.cap:
            self.messages.pop(0)

    def clear(self) -> None:
        self.messages.clear()

    def __len__(self) -> int:
        return len(self.messages)

    def snapshot(self) -> list[dict[str, Any]]:
        return [dict(m) for m in self.messages]


def message_cost(message: dict[str, Any], counter: TokenCounter) -> int:
    """``4 + count(content or "")``; tool-call arguments are not counted."""
    return MESSAGE_OVERHEAD + counter.count(message.get("content") or "")


def trim_messages(messages: Sequence[dict[str, Any]], max_ctx: int = MAX_CTX,
                  counter: TokenCounter | None = None) -> list[dict[str, Any]]:
    """Executor trimming (spec §6.6): unchanged if ``sum + 2 <= max_ctx``; else keep the system message and walk
    from the newest message backwards, inserting after the system message while it fits, stopping at the first
    message that does not fit (an older message that would fit is never considered) (AGF-34)."""
    counter = counter or HeuristicTokenCounter()
    msgs = list(messages)
    if sum(message_cost(m, counter) for m in msgs) + REPLY_OVERHEAD <= max_ctx:
        return msgs
    system, rest = msgs[0], msgs[1:]
    total = message_cost(system, counter) + REPLY_OVERHEAD
    kept: list[dict[str, Any]] = []
    for m in reversed(rest):
        c = message_cost(m, counter)
        if total + c > max_ctx:
            break
        kept.insert(0, m)
        total += c
    return [system, *kept]
