"""Prompt assembly: the ``EditWorkspaceWithSession`` dspy signature and the AGENTS.md loader (spec section 7).

Realises MEM-RTE-session-context / MEM-BAP-summary-context: the rendered summary is put in the signature's
*instructions* (the system part of every call, FRA-19), after static text, unescaped (FRA-20); the detailed tail
travels as the ``session_history`` *input*; the summary is deliberately not an input field. The wording of BASE,
PREAMBLE and TRAILER is memsim's own, with the upstream structure and similar length; the two ``##`` headings
are upstream's exactly.
"""

from __future__ import annotations

import inspect
import os
from pathlib import Path
from typing import Any

from .models import EMPTY_SUMMARY_TEXT, SessionHistoryTurn, Workspace

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

SIGNATURE_NAME = "EditWorkspaceWithSession"
AGENTS_FILE_NAME = "AGENTS.md"
AGENTS_MAX_CHARS = 20_000
AGENTS_TRUNCATION_MARKER = "\n\n[AGENTS.md truncated — read the full file from the workspace.]"
AGENTS_HEADING = "## Workspace instructions (AGENTS.md)"
SUMMARY_HEADING = "## Always-visible session summary"

BASE = """You are a careful coding agent working on the project mounted as `workspace`.

Each turn gives you:
- `workspace`: the project directory you should read and edit.
- `included_paths`: extra absolute paths mounted beside the workspace, if any.
- `user_message`: what the user is asking for in this turn.
- `session_history`: detailed records of earlier turns, including the files read,
  the files modified, the commands run and the execution trace of each turn.

Do your work inside `workspace`. Touch `included_paths` only when the request
needs them. Prefer safe file primitives from pathlib and os: open files relative
to directory descriptors with `os.open`, use pread, pwrite and ftruncate for
in-place edits, and write whole files through a temporary file followed by
`os.replace`.

Keep changes small and to the point. Look at a file before you change it, leave
unrelated content as it was, and check that each edit did what you intended.
When you are done, return only a short response for the user and the list of
changed paths, written relative to the workspace.
"""

PREAMBLE = """This workspace provides an AGENTS.md file with the user's guidance for the project.
Follow that guidance while you work on the request.
When it conflicts with the current `user_message`, the message takes precedence."""

TRAILER = """The summary above is compressed, structured context that stays visible on every turn:
it keeps the earlier user messages and a compressed record of each agent result.
For the exact reasoning, code, outputs, tool calls or predict calls of a prior turn,
inspect `session_history` from Python.
"""

INPUT_FIELDS: dict[str, tuple[Any, str]] = {
    "workspace": (Workspace, "The project directory, as a path the sandboxed code can open."),
    "included_paths": (list[Workspace] | None, "Additional absolute paths mounted for this turn, or None."),
    "user_message": (str, "The user's request for this turn."),
    "session_history": (list[SessionHistoryTurn],
                        "Earlier turns with their files, commands and traces, for exact recall from Python."),
}
OUTPUT_FIELDS: dict[str, tuple[Any, str]] = {
    "response": (str, "A short Markdown reply to show in the terminal."),
    "changed_files": (list[str], "Paths changed in this turn, relative to the workspace."),
}
#: The annotation text of each field, as the context meter prints it (spec 8).
FIELD_TYPE_NAMES = {
    "workspace": "Workspace",
    "included_paths": "Optional[list[Workspace]]",
    "user_message": "str",
    "session_history": "list[SessionHistoryTurn]",
    "response": "str",
    "changed_files": "list[str]",
}


def load_workspace_instructions(workspace: Workspace | str | os.PathLike[str]) -> str:
    """Root ``AGENTS.md`` only (no nested discovery), read as UTF-8 on every call; unreadable → ``""``;
    stripped; over 20,000 chars → first 20,000 + the 64-char marker (FRA-30)."""
    root = Path(workspace.path if isinstance(workspace, Workspace) else workspace)
    try:
        text = (root / AGENTS_FILE_NAME).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return ""
    text = text.strip()
    if len(text) > AGENTS_MAX_CHARS:
        text = text[:AGENTS_MAX_CHARS] + AGENTS_TRUNCATION_MARKER
    return text


def build_instruction_doc(rendered_session_summary: str, workspace_instructions: str = "") -> str:
    """The signature docstring: ``{BASE}⏎[⏎AGENTS block⏎]⏎## Always-visible session summary⏎⏎{SUMMARY}⏎⏎{TRAILER}``."""
    agents = workspace_instructions.strip()
    summary = rendered_session_summary.strip() or EMPTY_SUMMARY_TEXT
    doc = BASE + "\n"
    if agents:
        doc += f"\n{AGENTS_HEADING}\n\n{PREAMBLE}\n\n{agents}\n"
    doc += f"\n{SUMMARY_HEADING}\n\n{summary}\n\n{TRAILER}"
    return doc


class PlainSignature:
    """What the builder returns when dspy is not importable: name, doc, instructions and ordered fields."""

    def __init__(self, doc: str) -> None:
        self.__name__ = SIGNATURE_NAME
        self.__doc__ = doc
        self.instructions = inspect.cleandoc(doc)
        self.input_fields = {name: desc for name, (_, desc) in INPUT_FIELDS.items()}
        self.output_fields = {name: desc for name, (_, desc) in OUTPUT_FIELDS.items()}


def _dspy() -> Any:
    try:
        import dspy
    except ImportError:  # pragma: no cover - dspy is a declared dependency
        return None
    return dspy


def build_edit_workspace_signature(rendered_session_summary: str, workspace_instructions: str = "") -> Any:
    """A fresh ``dspy.Signature`` subclass named ``EditWorkspaceWithSession`` per call; its ``__doc__`` carries
    the summary, so ``instructions`` (``inspect.cleandoc(__doc__)``) is where the summary reaches the model."""
    doc = build_instruction_doc(rendered_session_summary, workspace_instructions)
    dspy = _dspy()
    if dspy is None:
        return PlainSignature(doc)
    namespace: dict[str, Any] = {"__doc__": doc, "__module__": __name__, "__annotations__": {}}
    for name, (annotation, desc) in INPUT_FIELDS.items():
        namespace["__annotations__"][name] = annotation
        namespace[name] = dspy.InputField(desc=desc)
    for name, (annotation, desc) in OUTPUT_FIELDS.items():
        namespace["__annotations__"][name] = annotation
        namespace[name] = dspy.OutputField(desc=desc)
    return type(SIGNATURE_NAME, (dspy.Signature,), namespace)


def field_descriptions(signature: Any) -> tuple[dict[str, str], dict[str, str]]:
    """Ordered ``name → description`` for inputs and outputs of a built signature (dspy or plain)."""
    if isinstance(signature, PlainSignature):
        return dict(signature.input_fields), dict(signature.output_fields)

    def desc(info: Any) -> str:
        extra = info.json_schema_extra or {}
        return str(extra.get("desc", ""))

    return ({n: desc(f) for n, f in signature.input_fields.items()},
            {n: desc(f) for n, f in signature.output_fields.items()})


def signature_instructions(signature: Any) -> str:
    return signature.instructions


def edit_workspace_signature() -> Any:
    """The signature for the empty-session text (upstream ``EditWorkspace``)."""
    return build_edit_workspace_signature("")


def __getattr__(name: str) -> Any:
    if name == "EditWorkspace":  # built lazily so importing this module does not import dspy
        return edit_workspace_signature()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
