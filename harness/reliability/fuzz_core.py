"""The fuzzer's vocabulary: inputs, outcome classes and the checks the targets share.

- :class:`FuzzInput` (file bytes, or a directory standing where the file should be) and the inputs of every target:
  :func:`fuzz_inputs` (a hypothesis strategy built around a loader's seed document and keys) and
  :func:`special_inputs` (fixed specials run first: empty, whitespace, a directory, a 20 MB line, deep nesting,
  huge integers, NaN/Infinity, invalid UTF-8, bidi and control characters, a BOM, a truncation, the seed);
- :data:`OUTCOMES` and the two verdicts that are bugs: :class:`Crash` and :class:`PartialWrite`;
- :class:`Target` (one loader: how to run an input through it, its seed, its keys, its documented outcome);
- the checks: :func:`place` (put an input where the loader reads it), :func:`read_only` (a read-only loader wrote
  nothing), :func:`documented_rejection` (an exception of the documented types naming the file),
  :func:`cli_rejected` (a CLI loader's one ``error:`` line naming the file, judged on :func:`plain_text`).

The targets per design are in ``fuzz_fractal``, ``fuzz_agentfly``, ``fuzz_tortoise`` and ``fuzz_harness``; the
registry and runner in ``fuzz_runner``; the report in ``fuzz``.
"""

from __future__ import annotations

import contextlib
import json
import re
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

OUTCOMES = ("accepted", "skipped", "rejected", "crash", "partial_write")
BIG_LINE_BYTES = 20_000_000


@dataclass(frozen=True)
class FuzzInput:
    """File content (``data``), or a directory in the file's place (``data is None``); ``family`` names the
    generator that made it (for the report)."""

    family: str
    data: bytes | None

    def __repr__(self) -> str:
        if self.data is None:
            return f"FuzzInput({self.family}, <directory>)"
        shown = self.data[:120]
        more = f"... ({len(self.data)} bytes)" if len(self.data) > 120 else ""
        return f"FuzzInput({self.family}, {shown!r}{more})"


class Crash(Exception):
    """A target's verdict that the loader misbehaved (the message says how)."""


class PartialWrite(Exception):
    """A target's verdict that the loader left a file that is not a complete, consistent copy."""


# ------------------------------------------------------------------------------------------------ inputs
INSERTS = (b"\xff", b"\xfe\xfd", b"\xc3", b"\xed\xa0\x80", b"\x00", b"\x1b[31m", b"\r", b"\x7f", b"\x0c",
           "\u202e".encode(), "\u2066".encode(), "\ufeff".encode(), "\u2028".encode(), b'"', b"\\", b"{", b"]",
           b"\n", b"NaN", b"-Infinity", b"1e999999")


def special_inputs(seed_doc: bytes, jsonl: bool) -> list[FuzzInput]:
    nl = b"\n" if jsonl else b""
    return [
        FuzzInput("empty", b""),
        FuzzInput("whitespace", b" \n\t\r\n"),
        FuzzInput("directory", None),
        FuzzInput("big_line", b'{"content": "' + b"a" * BIG_LINE_BYTES + b'", "case": "x", "query": "q"}' + nl),
        FuzzInput("deep_nesting", b"[" * 100_000 + b"]" * 100_000 + nl),
        FuzzInput("deep_object", b'{"a":' * 50_000 + b"1" + b"}" * 50_000 + nl),
        FuzzInput("huge_int", b'{"x": ' + b"9" * 5000 + b"}" + nl),
        FuzzInput("nan_inf", b'{"x": NaN, "y": -Infinity, "z": 1e999}' + nl),
        FuzzInput("invalid_utf8", seed_doc[: len(seed_doc) // 2] + b"\xff\xfe" + seed_doc[len(seed_doc) // 2:]),
        FuzzInput("bidi_controls", seed_doc.replace(b'"', "\"\u202e\x1b\x00".encode(), 2)),
        FuzzInput("bom", "\ufeff".encode() + seed_doc),
        FuzzInput("truncated", seed_doc[: max(1, len(seed_doc) - 3)]),
        FuzzInput("seed", seed_doc),
    ]


def fuzz_inputs(seed_doc: bytes, keys: tuple[str, ...], *, jsonl: bool, words: tuple[str, ...] = ()) -> Any:
    """A hypothesis strategy of :class:`FuzzInput` for a loader whose valid input is ``seed_doc`` and whose objects
    use ``keys``; ``words``: string values the loader gives a meaning to (a line type, a role, a marker text),
    sampled among the scalars so generated objects reach the loader's branches."""
    from hypothesis import strategies as st

    scalars = (st.none() | st.booleans() | st.integers() | st.integers(min_value=-(10**40), max_value=10**40)
               | st.floats(allow_nan=True, allow_infinity=True) | st.text(max_size=40)
               | st.sampled_from(["", "user", "assistant", "true", "positive", "1", "\u202e", "\x00", *words]))
    key = st.sampled_from(keys) | st.text(max_size=8)
    values = st.recursive(scalars, lambda ch: st.lists(ch, max_size=4) | st.dictionaries(key, ch, max_size=5),
                          max_leaves=25)
    objects = st.dictionaries(key, values, max_size=6)

    def dumps(v: Any) -> bytes:
        return json.dumps(v, allow_nan=True, ensure_ascii=False).encode("utf-8", "surrogatepass")

    if jsonl:
        docs = st.lists(objects | values, max_size=6).map(lambda rows: b"\n".join(dumps(r) for r in rows) + b"\n")
    else:
        docs = (objects | values).map(dumps)
    generated = docs.map(lambda b: FuzzInput("json_value", b))
    truncated = st.integers(min_value=0, max_value=len(seed_doc)).map(
        lambda n: FuzzInput("truncated", seed_doc[:n]))
    inserted = st.tuples(st.integers(min_value=0, max_value=len(seed_doc)), st.lists(st.sampled_from(INSERTS),
                                                                                   min_size=1, max_size=3)).map(
        lambda t: FuzzInput("inserted", seed_doc[: t[0]] + b"".join(t[1]) + seed_doc[t[0]:]))
    random_bytes = st.binary(max_size=200).map(lambda b: FuzzInput("bytes", b))
    nesting = st.integers(min_value=1, max_value=3000).map(
        lambda n: FuzzInput("nesting", b"[" * n + b"]" * n + (b"\n" if jsonl else b"")))
    return st.one_of(generated, generated, truncated, inserted, inserted, random_bytes, nesting)


# ------------------------------------------------------------------------------------------------ helpers
PLACED: set[bytes] = set()  # the bytes of the last input placed (a target may find them left in place)


def place(inp: FuzzInput, path: Path) -> None:
    """Put ``inp`` at ``path`` (its bytes, or a directory), creating the parent folders."""
    path.parent.mkdir(parents=True, exist_ok=True)
    PLACED.clear()
    if inp.data is None:
        path.mkdir()
    else:
        path.write_bytes(inp.data)
        PLACED.add(inp.data)


def snapshot(root: Path) -> dict[str, bytes | None]:
    """Every path under ``root`` with its bytes (``None`` for a folder)."""
    out: dict[str, bytes | None] = {}
    for p in sorted(root.rglob("*")):
        out[str(p.relative_to(root))] = None if p.is_dir() else p.read_bytes()
    return out


def no_writes(before: dict[str, bytes | None], root: Path) -> None:
    """:class:`PartialWrite` when ``root`` differs from its :func:`snapshot` ``before``."""
    after = snapshot(root)
    if after != before:
        changed = sorted(set(after) ^ set(before)) or [k for k in after if after[k] != before.get(k)]
        raise PartialWrite(f"a read-only loader changed files: {changed[:3]}")


def names_file(exc: BaseException, path: Path) -> bool:
    """Whether the exception's message (or ``filename``) names ``path``."""
    text = str(exc)
    return str(path) in text or path.name in text or getattr(exc, "filename", None) in (str(path), path)


def documented_rejection(exc: BaseException, path: Path, kinds: tuple[type[BaseException], ...]) -> str:
    """``rejected`` when ``exc`` is one of the documented ``kinds`` and names the file, else :class:`Crash`."""
    if isinstance(exc, kinds) and names_file(exc, path):
        return "rejected"
    raise Crash(f"{type(exc).__name__}: {str(exc)[:200]} (documented: {[k.__name__ for k in kinds]}, must name "
                f"{path.name})")


@contextlib.contextmanager
def read_only(inp: FuzzInput, path: Path, root: Path) -> Iterator[Path]:
    """Place ``inp`` at ``path`` for a read-only loader; on the way out (a return, a rejection or a crash) fail
    with :class:`PartialWrite` when anything under ``root`` changed."""
    place(inp, path)
    before = snapshot(root)
    try:
        yield path
    finally:
        no_writes(before, root)


# CSI sequences (colours, bold, cursor moves), OSC sequences (hyperlinks, titles) and lone two-byte escapes.
_ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[@-Z\\-_]")


def plain_text(text: str) -> str:
    """``text`` without terminal escape sequences (what a terminal shows of it)."""
    return _ANSI.sub("", text)


def cli_rejected(exit_code: int | None, stderr: str, path: Path) -> str:
    """A CLI loader's exit: ``rejected`` when it is exit 1 with one ``error:`` line naming ``path``, else a crash.

    The line is judged as a terminal shows it (escape codes removed: in a terminal the prefix is coloured)."""
    line = plain_text(stderr).strip()
    if exit_code == 1 and line.startswith("error:") and str(path) in line and "\n" not in line:
        return "rejected"
    raise Crash(f"exit {exit_code} with {line[:200]!r}")


@dataclass
class Target:
    """One loader under the fuzzer: ``run(input, fresh folder) -> outcome`` (raising :class:`Crash` or
    :class:`PartialWrite` for a bug), its valid ``seed_doc`` and the ``keys`` (and ``words``) generated inputs are
    built around, whether the format is JSON lines, and the ``documented`` outcome in words (for the report)."""

    name: str
    loader: str
    run: Callable[[FuzzInput, Path], str]
    seed_doc: bytes
    keys: tuple[str, ...]
    jsonl: bool
    documented: str
    counters: Counter = field(default_factory=Counter)
    words: tuple[str, ...] = ()
