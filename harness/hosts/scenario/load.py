"""Loading and checking host scenario files: strict YAML (a key given twice is an error, where YAML itself would
keep the last), the :class:`~harness.hosts.scenario.model.Scenario` model, then checks across keys.

Every problem is one line naming the file and the key path (``x.yaml: sessions[1].prompts[0].replies[2].tool:
...``); :func:`validate` returns them all, unknown keys first (a misspelt key, ``replys:``, explains the other
lines), and :func:`load_scenario` raises :class:`~harness.hosts.scenario.model.ScenarioError` with the first and
how many more. ``python -m harness.hosts.scenario FILE...`` (:func:`main`) prints ``FILE: ok`` for a valid file and
every problem of one that is not (exit status 1).
"""

from __future__ import annotations

import difflib
import shlex
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ValidationError

from harness.hosts.scenario.model import (
    _PLACEHOLDER,
    EVENTS,
    KNOWN_HOSTS,
    PLACEHOLDERS,
    SCENARIO_DIR,
    SHELL_TOOLS,
    HostReply,
    ReplySpec,
    Scenario,
    ScenarioError,
)


class _StrictLoader(yaml.SafeLoader):
    """SafeLoader that refuses a mapping with the same key twice."""


def _mapping(loader: _StrictLoader, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
    loader.flatten_mapping(node)
    seen: dict[Any, Any] = {}
    for knode, vnode in node.value:
        key = loader.construct_object(knode, deep=deep)
        if key in seen:
            mark = knode.start_mark
            raise yaml.constructor.ConstructorError(None, None, f"duplicate key {key!r}", mark)
        seen[key] = loader.construct_object(vnode, deep=deep)
    return seen


_StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _mapping)


def _path(loc: tuple[Any, ...]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif part in ("[key]",) or (isinstance(part, str) and ("[" in part or part.startswith("function-"))):
            continue
        else:  # a key with a line break or another control character is shown escaped: the error stays one line
            text = str(part)
            out += ("." if out else "") + (text if text.isprintable() else repr(text))
    return out or "(top level)"


def _allowed(loc: tuple[Any, ...]) -> list[str]:
    """The keys the model at ``loc`` (the parent of an unknown key) allows."""
    import typing

    model: Any = Scenario
    for part in loc:
        if isinstance(part, int) or model is None:
            continue
        fields = getattr(model, "model_fields", None)
        if fields is None:
            model = None
            break
        if part not in fields:
            if isinstance(part, str) and part in KNOWN_HOSTS and model is ReplySpec:
                model = HostReply
            continue
        ann = fields[part].annotation
        model = None
        stack = [ann]
        while stack:
            t = stack.pop()
            if isinstance(t, type) and issubclass(t, BaseModel):
                model = t
                break
            stack.extend(typing.get_args(t))
    return list(getattr(model, "model_fields", {}) or [])


def _message(err: dict[str, Any]) -> str:
    kind, msg = err["type"], err["msg"]
    if kind == "extra_forbidden":
        allowed = _allowed(err["loc"][:-1])
        close = difflib.get_close_matches(str(err["loc"][-1]), allowed, n=1, cutoff=0.75)
        return ("unknown key" + (f"; did you mean {close[0]!r}?" if close else "")
                + (f" (allowed: {', '.join(allowed)})" if allowed else ""))
    if kind == "missing":
        return "missing"
    msg = msg.removeprefix("Value error, ")
    if kind not in ("value_error",) and "input" in err and not isinstance(err["input"], dict | list):
        shown = repr(err["input"])
        msg += f" (got {shown if len(shown) <= 60 else shown[:57] + '...'})"
    return msg


def _cross_checks(scn: Scenario) -> list[str]:
    """Checks across keys: refs defined once and before use, per-host replies covering the run hosts, a host
    tool only in a one-host scenario, shell tools known for every run host, hook placeholders known."""
    out: list[str] = []
    refs: set[str] = set()
    ops = list(scn.ops())
    for path, op in ops:
        if op.create_point is not None:
            if op.create_point.ref in refs:
                out.append(f"{path}.create_point.ref: ref {op.create_point.ref!r} is defined twice")
            refs.add(op.create_point.ref)
        elif op.retract is not None and op.retract.ref not in refs:
            out.append(f"{path}.retract.ref: no create_point before it defines ref {op.retract.ref!r}")
    all_refs = {op.create_point.ref for _, op in ops if op.create_point is not None}
    hosts = scn.run_hosts
    for i, s in enumerate(scn.sessions):
        known = {op.create_point.ref for p, op in ops
                 if op.create_point is not None and int(p.split("]")[0].split("[")[1]) <= i}
        if s.expect is not None:
            for key in ("volunteered", "not_volunteered", "in_digest", "not_in_digest"):
                for j, entry in enumerate(getattr(s.expect, key)):
                    if entry.startswith("ref:") and entry[4:] not in known:
                        why = "later" if entry[4:] in all_refs else "nowhere"
                        out.append(f"sessions[{i}].expect.{key}[{j}]: ref {entry[4:]!r} is defined {why} "
                                   "(a create_point up to this session's operations must define it)")
        for k, p in enumerate(s.prompts):
            for r, rep in enumerate(p.replies):
                where = f"sessions[{i}].prompts[{k}].replies[{r}]"
                if rep.tool is not None and len(hosts) != 1:
                    out.append(f"{where}.tool: a host's own tool needs hosts to name that one host "
                               f"(runs on {', '.join(hosts)}); use shell or per_host")
                if rep.shell is not None:
                    out += [f"{where}.shell: no shell tool is known for host {h!r}" for h in hosts
                            if h not in SHELL_TOOLS]
                if rep.per_host is not None:
                    missing = [h for h in hosts if h not in rep.per_host]
                    if missing:
                        out.append(f"{where}.per_host: no reply for host {', '.join(missing)}")
                    for h, hr in rep.per_host.items():
                        if hr.shell is not None and h not in SHELL_TOOLS:
                            out.append(f"{where}.per_host.{h}.shell: no shell tool is known for host {h!r}")
    for attr in EVENTS:
        line = getattr(scn.hooks, attr)
        for m in _PLACEHOLDER.finditer(line or ""):
            if m.group(1) not in PLACEHOLDERS:
                out.append(f"hooks.{attr}: unknown placeholder {{{m.group(1)}}} (known: {', '.join(PLACEHOLDERS)})")
    return out


def _errors(path: Path) -> tuple[Scenario | None, list[str]]:
    name = str(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        return None, [f"{name}: cannot read: {exc}"]
    try:
        data = yaml.load(text, Loader=_StrictLoader)  # noqa: S506 - a SafeLoader subclass
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f":{mark.line + 1}:{mark.column + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        return None, [f"{name}{where}: YAML error: {problem}"]
    except RecursionError:  # PyYAML's composer recurses once per nesting level
        return None, [f"{name}: YAML error: nested too deeply"]
    except ValueError as exc:  # a scalar PyYAML cannot convert (a 5,000-digit integer, a date like 2026-13-45)
        return None, [f"{name}: YAML error: {' '.join(str(exc).split())[:200]}"]
    if not isinstance(data, dict):
        return None, [f"{name}: (top level): a scenario is a mapping, not {type(data).__name__}"]
    try:
        scn = Scenario.model_validate(data)
    except ValidationError as exc:  # unknown keys first: a misspelt key explains the other lines
        errs = sorted(exc.errors(), key=lambda e: e["type"] != "extra_forbidden")
        return None, [f"{name}: {_path(e['loc'])}: {_message(e)}" for e in errs]
    return scn, [f"{name}: {line}" for line in _cross_checks(scn)]


def validate(path: str | Path) -> list[str]:
    """Every problem of a scenario file, one line each (empty when it is valid)."""
    return _errors(Path(path))[1]


def load_scenario(path: str | Path) -> Scenario:
    """The scenario in ``path``; :class:`ScenarioError` otherwise, one line: the first problem (an unknown key
    first) and how many more there are, with the command that lists every one."""
    scn, errors = _errors(Path(path))
    if errors or scn is None:
        more = (f" (and {len(errors) - 1} more: python -m harness.hosts.scenario {shlex.quote(str(path))} "
                "lists every one)" if len(errors) > 1 else "")
        raise ScenarioError(errors[0] + more)
    return scn


def scenario_files(folder: Path = SCENARIO_DIR) -> list[Path]:
    """The scenario YAMLs shipped with memsim (or under ``folder``), by name."""
    return sorted(folder.glob("*.yaml"))


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m harness.hosts.scenario [FILE...]``: one ``FILE: ok`` line per valid file, every problem of the
    others one line each; exit status 1 when any file has a problem. No FILE: the shipped scenarios."""
    args = list(sys.argv[1:] if argv is None else argv)
    if any(a in ("-h", "--help") for a in args):
        sys.stdout.write("usage: python -m harness.hosts.scenario [FILE...]\n\nCheck host scenario files: one "
                         "'FILE: ok' line per valid file, every problem of the others one line each (exit status "
                         "1). Without FILE, the shipped scenarios (harness/hosts/scenarios/).\n")
        return 0
    files = args or [str(x) for x in scenario_files()]
    bad = False
    for f in files:
        problems = validate(f)
        bad = bad or bool(problems)
        sys.stdout.write("".join(line + "\n" for line in problems) if problems else f"{f}: ok\n")
    return 1 if bad else 0
