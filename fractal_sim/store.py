"""State directory, workspace key, session paths and listing (spec 6.1-6.3, 6.6).

Layout: ``<state>/workspaces/<workspace-key>/sessions/<session_id>.json``. Nothing is ever written inside the
workspace. Saving and loading live on :class:`fractal_sim.session.FractalSession` (the load warnings must be
issued from there, stacklevel 2, as upstream).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path

from .models import SessionInfo, SessionState

STATE_DIR_NAME = "fractal"
WORKSPACES_DIR_NAME = "workspaces"
SESSIONS_DIR_NAME = "sessions"
BACKUP_STAMP_FORMAT = "%Y%m%d%H%M%S"
_SLUG_BAD = re.compile(r"[^A-Za-z0-9._-]+")


def default_state_dir(env: Mapping[str, str] | None = None, home: Path | str | None = None) -> Path:
    """``FRACTAL_STATE_HOME`` (non-empty, expanduser), else ``$XDG_STATE_HOME/fractal``, else
    ``<home>/.local/state/fractal``. Resolved at every call; normalised by ``Path()`` only, never resolved.
    ``env`` replaces ``os.environ`` entirely when given."""
    environ = os.environ if env is None else env
    explicit = environ.get("FRACTAL_STATE_HOME", "")
    if explicit:
        return Path(explicit).expanduser()
    xdg = environ.get("XDG_STATE_HOME", "")
    if xdg:
        return Path(xdg) / STATE_DIR_NAME
    base = Path.home() if home is None else Path(home)
    return base / ".local" / "state" / STATE_DIR_NAME


def resolve_workspace(workspace: str | os.PathLike[str]) -> Path:
    return Path(workspace).expanduser().resolve()


def workspace_key(workspace: str | os.PathLike[str]) -> str:
    """Slug of the resolved path (parts minus anchor, ``-``-joined, runs outside ``[A-Za-z0-9._-]`` → ``-``,
    stripped of ``-._``, ``workspace`` if empty, cut to 80) + ``--`` + 16 hex of SHA-256 of the resolved path.

    Keyed by resolved path, so moving a workspace loses its sessions and a symlink shares them (FRA-23)."""
    resolved = resolve_workspace(workspace)
    parts = resolved.parts[1:] if resolved.anchor else resolved.parts
    slug = _SLUG_BAD.sub("-", "-".join(parts)).strip("-._") or "workspace"
    digest = hashlib.sha256(str(resolved).encode("utf-8")).hexdigest()[:16]
    return f"{slug[:80]}--{digest}"


def sessions_dir(workspace: str | os.PathLike[str], state_dir: Path | str | None = None) -> Path:
    base = default_state_dir() if state_dir is None else Path(state_dir)
    return base / WORKSPACES_DIR_NAME / workspace_key(workspace) / SESSIONS_DIR_NAME


def validate_session_id(session_id: str) -> str:
    """Reject ``""``, anything whose ``Path(id).name != id`` and ids ending ``.json`` (FRA-40: ``..`` passes)."""
    if not isinstance(session_id, str) or not session_id or Path(session_id).name != session_id \
            or session_id.endswith(".json"):
        raise ValueError(f"Invalid Fractal session id: '{session_id}'")
    return session_id


def session_path(workspace: str | os.PathLike[str], session_id: str,
                 state_dir: Path | str | None = None) -> Path:
    validate_session_id(session_id)
    return sessions_dir(workspace, state_dir) / f"{session_id}.json"


def backup_path_for(path: Path, now: datetime | None = None) -> Path:
    """``<file>.bad-YYYYMMDDHHMMSS`` (UTC), then ``-1``, ``-2`` … on collision."""
    stamp = (now or datetime.now(UTC)).strftime(BACKUP_STAMP_FORMAT)
    candidate = path.with_name(f"{path.name}.bad-{stamp}")
    n = 1
    while candidate.exists():
        candidate = path.with_name(f"{path.name}.bad-{stamp}-{n}")
        n += 1
    return candidate


def serialize_state(state: SessionState) -> str:
    """``json.dumps(model_dump(mode="json"), indent=2) + "\\n"``: ASCII escapes, nulls written, §2 key order."""
    return json.dumps(state.model_dump(mode="json"), indent=2) + "\n"


def list_sessions(workspace: str | os.PathLike[str], state_dir: Path | str | None = None) -> list[SessionInfo]:
    """mtime-ordered listing (newest first) of ``sessions/*.json``.

    Faithful quirks: rows carry the **embedded** id, never compared with the filename (FRA-25); no schema
    pre-check, so a file without ``session_id`` is listed under a fresh random id per call (FRA-26);
    unreadable/invalid files are skipped silently."""
    directory = sessions_dir(workspace, state_dir)
    if not directory.is_dir():
        return []
    rows: list[tuple[float, SessionInfo]] = []
    for path in directory.glob("*.json"):
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            state = SessionState.model_validate(data)
            mtime = path.stat().st_mtime
        except (OSError, json.JSONDecodeError, ValueError):
            continue
        turns = state.summary.turns
        rows.append((mtime, SessionInfo(
            session_id=state.session_id,
            updated_at=datetime.fromtimestamp(mtime, UTC).isoformat(),
            turn_count=len(turns),
            first_message=turns[0].user.message if turns else "",
        )))
    rows.sort(key=lambda r: r[0], reverse=True)
    return [info for _, info in rows]


def format_session_list(sessions: list[SessionInfo], current_id: str | None = None) -> str:
    """The ``/sessions`` display (spec 6.6)."""
    if not sessions:
        return "No stored sessions in this workspace."
    lines = []
    for info in sessions:
        marker = " (current)" if info.session_id == current_id else ""
        lines.append(f"{info.session_id}{marker}  {info.turn_count} turns  {info.first_message or '(empty)'}")
    lines.append("Resume one with /resume <session-id>.")
    return "\n".join(lines)
