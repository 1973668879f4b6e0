"""Host scenarios: multi-session scripts a real agent host runs against the loopback model server, with the memory
under test given as a hook set.

A scenario is one YAML file (the format, key by key, with an example: docs/hosts.md, "Scenario files"). The package
is split by responsibility; every public name is importable from here:

- :mod:`~harness.hosts.scenario.model`: the strict pydantic model of a file (:class:`Scenario`, :class:`Session`,
  :class:`Prompt`, :class:`ReplySpec`, :class:`Op`, :class:`Hooks`, :class:`Expect`), the hook lines of the memory
  under test (:data:`TORTOISE_HOOKS`, :func:`hook_lines`, :func:`expand`, :func:`tee_command`) and the constants
  (:data:`KNOWN_HOSTS`, :data:`RUN_HOSTS`, :data:`HARNESS`, :data:`SHELL_TOOLS`, :data:`PLACEHOLDERS`);
- :mod:`~harness.hosts.scenario.load`: reading and checking a file (:func:`load_scenario`, :func:`validate`,
  :func:`scenario_files`), every problem one line naming the file and the key path, unknown keys first;
  ``python -m harness.hosts.scenario FILE...`` prints ``FILE: ok`` or every problem;
- :mod:`~harness.hosts.scenario.memory`: the memory operations (``create_point``, ``retract``, ``service``,
  ``lock_store``, ``wait``) through the ``memsim tortoise`` command line;
- :mod:`~harness.hosts.scenario.run`: :func:`run_scenario`, the sessions on one host and what they showed.
"""

from __future__ import annotations

from harness.hosts.scenario.load import load_scenario, scenario_files, validate
from harness.hosts.scenario.memory import LOCK_WAIT_S, _Memory, memsim_executable, pid_alive
from harness.hosts.scenario.model import (
    EVENTS,
    EXAMPLES_DIR,
    HARNESS,
    HOOKTEE,
    KNOWN_HOSTS,
    PLACEHOLDERS,
    RUN_HOSTS,
    SCENARIO_DIR,
    SHELL_TOOLS,
    TORTOISE_HOOKS,
    CreatePoint,
    Expect,
    Hooks,
    HostReply,
    Op,
    Prompt,
    ReplySpec,
    Retract,
    Scenario,
    ScenarioError,
    Seconds,
    Session,
    expand,
    hook_lines,
    tee_command,
)
from harness.hosts.scenario.run import PER_PROMPT_SESSION_END, run_scenario

__all__ = [
    "Scenario", "Session", "Prompt", "ReplySpec", "HostReply", "Op", "CreatePoint", "Retract", "Seconds", "Hooks",
    "Expect", "ScenarioError", "load_scenario", "validate", "scenario_files", "SCENARIO_DIR", "EXAMPLES_DIR",
    "HOOKTEE", "PLACEHOLDERS", "HARNESS", "SHELL_TOOLS", "KNOWN_HOSTS", "RUN_HOSTS", "TORTOISE_HOOKS", "EVENTS",
    "expand", "hook_lines", "tee_command", "run_scenario", "pid_alive", "LOCK_WAIT_S", "PER_PROMPT_SESSION_END",
    "_Memory", "memsim_executable",
]
