"""Where memsim finds its data sets: one resolver for LoCoMo, the AgentFly corpora and LongMemEval.

For each data set the first of these that is given wins:

1. the path a command was given (``--data`` for LoCoMo and LongMemEval, ``--data-dir`` for the AgentFly corpora);
2. the environment variable: ``$MEMSIM_LOCOMO_DATA`` (a LoCoMo file or a folder of conversation files, either
   layout), ``$MEMSIM_AGENTFLY_DATA`` (a folder holding the AgentFly files side by side) or
   ``$MEMSIM_LONGMEMEVAL_DATA`` (one LongMemEval file);
3. the copy ``memsim data fetch`` placed in the data folder: ``$MEMSIM_DATA_DIR`` when set, else the user cache
   folder (``platformdirs.user_cache_dir("memsim")``, e.g. ``~/.cache/memsim`` on Linux), as
   ``locomo/locomo10.json`` and ``agentfly/<file>.jsonl``. Per-conversation LoCoMo files placed by hand in
   ``locomo/`` (``conv-26.json``, ..., any ``*.json``) are read as a folder when ``locomo10.json`` is not there;
   when it is, it alone is read (the same conversations twice would be refused) and :func:`lookup` says the others
   are not read. LongMemEval's fetched files are ``longmemeval/<file>``; when several are there, the first of
   :data:`LONGMEMEVAL_FILES` is read (S cleaned, S original, M, then the oracle file: "S when several are
   present", and the oracle file, which every bare fetch brings, never hides a file fetched by name).

A path given explicitly or through an environment variable that does not exist is an error naming it
(:class:`DataPathError`, one line), never a silent fall-through to the next source: a mistyped path must not turn
into a run that quietly skips its data. An AgentFly folder holding none of the known files is refused the same way.
Nothing here downloads; :mod:`harness.datafetch` does.
"""

from __future__ import annotations

import os
from pathlib import Path

DATA_DIR_ENV = "MEMSIM_DATA_DIR"
LOCOMO_ENV = "MEMSIM_LOCOMO_DATA"
AGENTFLY_ENV = "MEMSIM_AGENTFLY_DATA"
LOCOMO_FILE = "locomo10.json"
AGENTFLY_FILES = ("memory.jsonl", "training_data.jsonl", "dummy_memo.jsonl", "deepresearcher.jsonl")
"""The AgentFly files memsim reads, side by side in one folder."""
LONGMEMEVAL_ENV = "MEMSIM_LONGMEMEVAL_DATA"
LONGMEMEVAL_FILES = ("longmemeval_s_cleaned.json", "longmemeval_s_original.json", "longmemeval_m_cleaned.json",
                     "longmemeval_oracle.json")
"""The fetched LongMemEval files in the order the resolver prefers them when several are in the data folder."""


class DataPathError(ValueError):
    """A data path that was asked for but cannot be used, as one line naming it."""


def data_home() -> Path:
    """The folder ``memsim data fetch`` writes to: ``$MEMSIM_DATA_DIR``, else the user cache folder."""
    env = os.environ.get(DATA_DIR_ENV)
    if env:
        return Path(env).expanduser()
    from platformdirs import user_cache_dir

    return Path(user_cache_dir("memsim"))


def dataset_dir(dataset: str) -> Path:
    """The data folder's sub-folder for ``dataset`` (``locomo`` or ``agentfly``)."""
    return data_home() / dataset


def _other_locomo_files(d: Path) -> list[Path]:
    """The ``*.json`` files of the data folder's ``locomo/`` other than ``locomo10.json`` (placed by hand)."""
    if not d.is_dir():
        return []
    return sorted(p for p in d.glob("*.json") if p.is_file() and p.name != LOCOMO_FILE)


def cached_locomo() -> Path | None:
    """The fetched ``locomo10.json`` when it is in the data folder; else the data folder's ``locomo/`` when it
    holds per-conversation ``*.json`` files (placed by hand); else ``None``."""
    d = dataset_dir("locomo")
    p = d / LOCOMO_FILE
    if p.is_file():
        return p
    return d if _other_locomo_files(d) else None


def cached_agentfly() -> Path | None:
    """The fetched AgentFly folder when it holds at least one of the known files, else ``None``."""
    d = dataset_dir("agentfly")
    return d if any((d / f).is_file() for f in AGENTFLY_FILES) else None


def cached_longmemeval() -> Path | None:
    """The first of :data:`LONGMEMEVAL_FILES` present in the data folder's ``longmemeval/``, else ``None``."""
    d = dataset_dir("longmemeval")
    return next((d / f for f in LONGMEMEVAL_FILES if (d / f).is_file()), None)


def _given(explicit: Path | str | None, env: str, option: str) -> tuple[Path, str] | None:
    """The explicit path (with the option that gave it) or the environment's, or ``None`` when neither is set."""
    if explicit is not None and str(explicit) != "":
        return Path(explicit).expanduser(), f"given with {option}"
    value = os.environ.get(env)
    if value:
        return Path(value).expanduser(), f"from ${env}"
    return None


def find_locomo(explicit: Path | str | None = None, *, option: str = "--data") -> Path | None:
    """The LoCoMo file or folder: ``explicit``, ``$MEMSIM_LOCOMO_DATA``, then the fetched copy; ``None`` when none
    is set and nothing was fetched. Raises :class:`DataPathError` when a given path does not exist."""
    given = _given(explicit, LOCOMO_ENV, option)
    if given is not None:
        path, source = given
        if not path.exists():
            raise DataPathError(f"{path}: no such file or folder ({source})")
        return path
    return cached_locomo()


def _found(path: Path | None, where: Path, what: str, name: str, option: str, env: str) -> Path:
    """``path``, or the error saying how to get the data set ``name`` (fetch it, pass ``option`` or set ``env``)."""
    if path is None:
        raise DataPathError(f"{where}: {what} not found; run `memsim data fetch {name}`, pass {option} or set ${env}")
    return path


def resolve_locomo(explicit: Path | str | None = None, *, option: str = "--data") -> Path:
    """Like :func:`find_locomo`, but nothing found is an error saying how to get the data."""
    return _found(find_locomo(explicit, option=option), dataset_dir("locomo") / LOCOMO_FILE, "LoCoMo data", "locomo",
                  f"{option} PATH", LOCOMO_ENV)


def find_agentfly(explicit: Path | str | None = None, *, option: str = "--data-dir") -> Path | None:
    """The AgentFly corpora folder: ``explicit``, ``$MEMSIM_AGENTFLY_DATA``, then the fetched copy; ``None`` when none
    is set and nothing was fetched. Raises :class:`DataPathError` when a given path is not a folder or holds none
    of the known files."""
    given = _given(explicit, AGENTFLY_ENV, option)
    if given is not None:
        path, source = given
        if not path.exists():
            raise DataPathError(f"{path}: no such folder ({source})")
        if not path.is_dir():
            raise DataPathError(f"{path}: not a folder ({source}); give the folder holding the AgentFly files")
        if not any((path / f).is_file() for f in AGENTFLY_FILES):
            raise DataPathError(f"{path}: holds none of {', '.join(AGENTFLY_FILES)} ({source}); put the AgentFly "
                                "files side by side in one folder")
        return path
    return cached_agentfly()


def resolve_agentfly(explicit: Path | str | None = None, *, option: str = "--data-dir") -> Path:
    """Like :func:`find_agentfly`, but nothing found is an error saying how to get the data."""
    return _found(find_agentfly(explicit, option=option), dataset_dir("agentfly"), "AgentFly corpora", "agentfly",
                  f"{option} DIR", AGENTFLY_ENV)


def find_longmemeval(explicit: Path | str | None = None, *, option: str = "--data") -> Path | None:
    """The LongMemEval file: ``explicit``, ``$MEMSIM_LONGMEMEVAL_DATA``, then the fetched copy (the first of
    :data:`LONGMEMEVAL_FILES` present); ``None`` when none is set and nothing was fetched. Raises
    :class:`DataPathError` when a given path does not exist or is a folder (a LongMemEval data set is one file)."""
    given = _given(explicit, LONGMEMEVAL_ENV, option)
    if given is not None:
        path, source = given
        if not path.exists():
            raise DataPathError(f"{path}: no such file ({source})")
        if path.is_dir():
            raise DataPathError(f"{path}: a folder ({source}); give one LongMemEval file (a JSON array of questions)")
        return path
    return cached_longmemeval()


def resolve_longmemeval(explicit: Path | str | None = None, *, option: str = "--data") -> Path:
    """Like :func:`find_longmemeval`, but nothing found is an error saying how to get the data."""
    path = find_longmemeval(explicit, option=option)
    if path is None:
        raise DataPathError(f"{dataset_dir('longmemeval')}: no LongMemEval file found; run `memsim data fetch "
                            f"longmemeval-s` (or longmemeval-oracle), pass {option} FILE or set ${LONGMEMEVAL_ENV}")
    return path


def lookup(dataset: str) -> tuple[Path | None, str, list[str]]:
    """Where the commands would find ``dataset`` (``locomo``, ``agentfly`` or ``longmemeval``) without a path
    option: ``(path or None, where it came from, every place looked at with what was found there)``, for a report
    that names each data set whether or not it was found."""
    if dataset == "longmemeval":
        return _lookup_longmemeval()
    env, found_cached = (LOCOMO_ENV, cached_locomo) if dataset == "locomo" else (AGENTFLY_ENV, cached_agentfly)
    looked: list[str] = []
    value = os.environ.get(env)
    if value:
        return Path(value).expanduser(), f"from ${env}", [f"${env} = {value}"]
    looked.append(f"${env} (not set)")
    d = dataset_dir(dataset)
    path = found_cached()
    if dataset == "locomo":
        others = _other_locomo_files(d)
        if path is not None and path.name == LOCOMO_FILE:
            note = (f"; {len(others)} other *.json file(s) there are not read while {LOCOMO_FILE} is"
                    if others else "")
            looked.append(f"{path} (found{note})")
            return path, "the copy in the data folder", looked
        if path is not None:
            looked.append(f"{d / LOCOMO_FILE} (absent); {d} holds {len(others)} per-conversation file(s): "
                          f"{', '.join(p.name for p in others[:4])}{', ...' if len(others) > 4 else ''}")
            return path, "per-conversation files in the data folder", looked
        looked.append(f"{d / LOCOMO_FILE} (absent), and no other *.json file in {d}")
        return None, "", looked
    if path is not None:
        present = [f for f in AGENTFLY_FILES if (d / f).is_file()]
        looked.append(f"{d} (holds {', '.join(present)})")
        return path, "the copy in the data folder", looked
    looked.append(f"{d} ({'holds none of ' + ', '.join(AGENTFLY_FILES) if d.is_dir() else 'absent'})")
    return None, "", looked


def _lookup_longmemeval() -> tuple[Path | None, str, list[str]]:
    value = os.environ.get(LONGMEMEVAL_ENV)
    if value:
        return Path(value).expanduser(), f"from ${LONGMEMEVAL_ENV}", [f"${LONGMEMEVAL_ENV} = {value}"]
    looked = [f"${LONGMEMEVAL_ENV} (not set)"]
    d = dataset_dir("longmemeval")
    present = [f for f in LONGMEMEVAL_FILES if (d / f).is_file()]
    if not present:
        looked.append(f"{d} ({'holds none of ' + ', '.join(LONGMEMEVAL_FILES) if d.is_dir() else 'absent'})")
        return None, "", looked
    note = f"; {', '.join(present[1:])} also there, not read while it is" if present[1:] else ""
    looked.append(f"{d / present[0]} (found{note})")
    return d / present[0], "the copy in the data folder", looked
