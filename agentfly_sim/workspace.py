"""Workspace tools of ``server/code_agent.py`` with ``execution.log`` (spec §7).

Overwrites keep no versions and the log keeps metadata only (AGF-11); reads truncate non-code text, show code in
full, stub undecodable files, do not normalise names and are not logged (AGF-18, AGF-04); none of these files ever
enters a case bank (AGF-12).
"""

from __future__ import annotations

import json
import subprocess
import uuid
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

CODE_EXTENSIONS = frozenset(
    ".py .js .ts .java .cpp .c .h .cs .php .rb .go .rs .swift .jsx .tsx .vue .svelte .kt .scala .clj .hs .ml "
    ".sh .bash .ps1 .sql .r .m .ipynb".split()
)
READ_MAX_TOKENS = 1000

Runner = Callable[[str, str], tuple[int, str]]


def truncate_text(text: str, max_tokens: int, filename: str = "") -> str:
    """Code files unchanged; else keep ``max_tokens*4`` chars as head+tail halves with a marker (spec §7, §10.6)."""
    if Path(filename).suffix.lower() in CODE_EXTENSIONS:
        return text
    max_chars = max_tokens * 4
    if len(text) <= max_chars:
        return text
    c = max_chars // 2
    n = len(text) - 2 * c
    return text[:c] + f"\n\n... [Truncated {n:,} characters] ...\n\n" + text[-c:]


def bash_runner(command: str, cwd: str) -> tuple[int, str]:
    """Run through ``bash -c`` (cwd = workspace, stdout+stderr merged, 60 s timeout)."""
    p = subprocess.run(["bash", "-c", command], cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       timeout=60, text=True)
    return p.returncode, p.stdout


class WorkspaceTools:
    """``write_workspace_file``, ``read_workspace_file``, ``execute_terminal_command`` with an injectable clock
    (local naive timestamps) and command runner."""

    def __init__(self, clock: Callable[[], datetime] | None = None, runner: Runner | None = None):
        self.clock = clock or datetime.now
        self.runner = runner or bash_runner

    @staticmethod
    def workspace_dir(task_cache_dir: str | None) -> str:
        if not task_cache_dir:
            raise ValueError("task_cache_dir must be provided to locate the workspace.")
        ws = Path(task_cache_dir) / "workspace"
        ws.mkdir(parents=True, exist_ok=True)
        return str(ws)

    def _log(self, workspace: str, operation: str, details: dict[str, Any]) -> None:
        try:
            entry = {"timestamp": self.clock().isoformat(), "operation": operation, "workspace": workspace,
                     "details": details}
            with open(Path(workspace).parent / "execution.log", "a", encoding="utf-8") as f:
                f.write(json.dumps(entry, ensure_ascii=False) + "\n")
        except Exception:  # noqa: BLE001 - logging errors are swallowed
            pass

    def write_workspace_file(self, filename: Any, content: str, task_cache_dir: str | None = None) -> str:
        try:
            ws = self.workspace_dir(task_cache_dir)
            name = str(filename).strip().strip("'\"").replace("\\", "/")
            name = name.rsplit("/", 1)[-1] or f"file_{uuid.uuid4().hex[:8]}.txt"
            target = Path(ws) / name
            existed = target.exists()
            target.write_text(content, encoding="utf-8")
        except Exception as e:  # noqa: BLE001
            return f"❌ Failed to write file {filename}: {e}"
        self._log(ws, "write_workspace_file",
                  {"filename": filename, "file_existed": existed, "content_length": len(content)})
        verb = "OVERWRITTEN" if existed else "CREATED"
        return "\n".join([f"✅ File {verb}: {filename}", f"📁 Workspace: {ws}", f"📊 Size: {len(content)} characters"])

    def read_workspace_file(self, filename: str, task_cache_dir: str | None = None) -> str:
        ws = self.workspace_dir(task_cache_dir)
        path = Path(ws) / filename
        if not path.exists():
            names = sorted(p.name for p in Path(ws).iterdir() if p.is_file())
            return f"❌ File not found: {filename}\nAvailable files: {names}"
        if not path.is_file():
            return f"❌ Path is not a file: {filename}"
        try:
            content = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            return f"📄 Binary file: {filename} ({path.stat().st_size} bytes)\n❌ Cannot display binary content as text"
        shown = truncate_text(content, READ_MAX_TOKENS, filename)
        lines = [f"📄 File: {filename}", f"📁 Workspace: {ws}", f"📊 Size: {len(content)} characters"]
        if shown != content:
            lines.append("⚠️ Content truncated for display (non-code file)")
        lines += ["=" * 50, shown]
        return "\n".join(lines)

    def execute_terminal_command(self, command: str, task_cache_dir: str | None = None) -> str:
        if not command:
            return "❌ Error: Command cannot be empty."
        ws = self.workspace_dir(task_cache_dir)
        self._log(ws, "execute_terminal_command", {"command": command})
        try:
            code, output = self.runner(command, ws)
        except Exception as e:  # noqa: BLE001
            return f"❌ Error executing terminal command: {e}"
        if code == 0:
            return f"✅ Command executed successfully.\n\nSTDOUT/STDERR:\n{output}"
        return f"⚠️ Command finished with non-zero exit code: {code}.\n\nSTDOUT/STDERR:\n{output}"

    def as_tools(self) -> dict[str, Callable[..., str]]:
        """Tool table for the drivers; a tool exception becomes ``Error executing tool {name}: {e}`` text."""

        def wrap(name: str, fn: Callable[..., str]) -> Callable[..., str]:
            def call(**kwargs: Any) -> str:
                try:
                    return fn(**kwargs)
                except Exception as e:  # noqa: BLE001 - tool errors never reach the driver
                    return f"Error executing tool {name}: {e}"

            return call

        return {
            "write_workspace_file": wrap("write_workspace_file", self.write_workspace_file),
            "read_workspace_file": wrap("read_workspace_file", self.read_workspace_file),
            "execute_terminal_command": wrap("execute_terminal_command", self.execute_terminal_command),
        }


TOOL_SCHEMAS: list[dict[str, Any]] = [
    {"type": "function", "function": {"name": "write_workspace_file", "description": "Write a file in the workspace.",
     "parameters": {"type": "object", "properties": {"filename": {"type": "string"}, "content": {"type": "string"},
                                                     "task_cache_dir": {"type": "string"}},
                    "required": ["filename", "content", "task_cache_dir"]}}},
    {"type": "function", "function": {"name": "read_workspace_file", "description": "Read a workspace file.",
     "parameters": {"type": "object", "properties": {"filename": {"type": "string"},
                                                     "task_cache_dir": {"type": "string"}},
                    "required": ["filename", "task_cache_dir"]}}},
    {"type": "function", "function": {"name": "execute_terminal_command", "description": "Run a shell command.",
     "parameters": {"type": "object", "properties": {"command": {"type": "string"},
                                                     "task_cache_dir": {"type": "string"}},
                    "required": ["command", "task_cache_dir"]}}},
]


OUT_OF_SCOPE_SERVERS = ("ai_crawl", "documents_tool", "image_tool", "math_tool", "serp_search", "video_tool")


def connect_server(name: str) -> dict[str, Callable[..., str]]:
    """Tool table of an upstream MCP server: only ``code_agent``'s workspace tools are modelled (spec §1.2); the
    six other servers raise ``NotModelled`` (a driver can still inject canned stub tools by name)."""
    from .errors import NotModelled

    if name == "code_agent":
        return WorkspaceTools().as_tools()
    if name in OUT_OF_SCOPE_SERVERS:
        raise NotModelled(f"MCP server {name!r} is out of scope (spec §1.2); inject stub tools instead")
    raise KeyError(name)
