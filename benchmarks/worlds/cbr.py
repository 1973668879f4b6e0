"""Synthetic case-based-reasoning task world for the selector, learning-curve and cost benchmarks.

The world (seeded, deterministic):

- ``F`` task families (default 40, :data:`benchmarks.worlds.families.FAMILIES`), each with four paraphrase templates
  filled with seeded synthetic entities, and one canonical three-step plan per family.
- A **case bank** of ``n`` cases (100 .. 1,000,000): each case is a question of some family with a plan that is
  either the family's canonical plan (probability ``p_correct``) or a wrong plan: a *sibling* family's canonical
  plan for the same entity (share ``wrong_sibling_share``) or the canonical plan truncated to its first step.
  The case label (``positive``/``negative``) says whether the plan was correct, flipped with probability
  ``label_noise`` (the judge of a real run is noisy too).
- **Query sets** from the same families with fresh draws (distinct question texts within a set), each with a
  ground-truth answer string.
- **Graded relevance** of a case to a query: 2 = same family and a correct plan, 1 = same family and a wrong plan,
  0 = another family. Relevance uses the case's *true* plan correctness; the stored label (which a selector may
  see) is noisy. "Negative share" metrics use the stored label, i.e. what the planner is told.

Bank arrays are numpy, so a 1e6-case bank is generated in well under a second; question and plan texts are only
materialised on demand (``questions()``/``plan()``). Case index order is admission order (recency = index).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from benchmarks.worlds.families import ENTITY_PERIOD, ENTITY_TYPES, FAMILIES, Family, entity_name

PLAN_CANONICAL, PLAN_SIBLING, PLAN_TRUNCATED = 0, 1, 2


def _step_matches(parts: tuple[str, ...], step: str) -> bool:
    if len(parts) == 1:
        return step == parts[0]
    return step.startswith(parts[0]) and step.endswith(parts[1]) and len(step) > len(parts[0]) + len(parts[1])


def _plan_json(steps: Sequence[str]) -> str:
    return json.dumps({"plan": [{"id": j + 1, "description": s} for j, s in enumerate(steps)]}, ensure_ascii=False)


@dataclass
class CaseBank:
    """A bank of cases as parallel arrays (index = admission order)."""

    world: CBRWorld
    family: np.ndarray  # int16, family index of the case's question
    template: np.ndarray  # int8
    entity: np.ndarray  # int32, entity index within the family's entity type
    plan_kind: np.ndarray  # int8: PLAN_CANONICAL | PLAN_SIBLING | PLAN_TRUNCATED
    plan_family: np.ndarray  # int16: family whose plan was used (-1 for a truncated plan)
    correct: np.ndarray  # bool: the plan is the canonical plan of the case's family
    label: np.ndarray  # bool: stored label positive (= correct, flipped with label_noise)
    seed: int = 0

    def __len__(self) -> int:
        return int(self.family.shape[0])

    def question(self, i: int) -> str:
        return self.world.question_text(int(self.family[i]), int(self.template[i]), int(self.entity[i]))

    def questions(self, idx: Iterable[int] | None = None) -> list[str]:
        rng = range(len(self)) if idx is None else idx
        return [self.question(int(i)) for i in rng]

    def plan(self, i: int) -> str:
        """The case's plan as upstream-style JSON text ``{"plan":[{"id","description"},...]}``."""
        kind = int(self.plan_kind[i])
        fam = self.world.families[int(self.family[i])]
        ent = self.world.entity(fam, int(self.entity[i]))
        if kind == PLAN_TRUNCATED:
            return _plan_json([fam.plan[0].format(e=ent)])
        used = self.world.families[int(self.plan_family[i])]
        return _plan_json([s.format(e=ent) for s in used.plan])

    def label_str(self, i: int) -> str:
        return "positive" if bool(self.label[i]) else "negative"

    def pm_records(self, idx: Iterable[int] | None = None) -> list[dict]:
        """PM bank rows ``{"case", "plan", "case_label"}`` (agentfly spec §2.2 key order)."""
        rng = range(len(self)) if idx is None else idx
        return [{"case": self.question(i), "plan": self.plan(i), "case_label": self.label_str(i)} for i in rng]

    def np_records(self, idx: Iterable[int] | None = None) -> list[dict]:
        """NP bank rows ``{"question", "plan", "reward"}`` (agentfly spec §2.1 key order)."""
        rng = range(len(self)) if idx is None else idx
        return [{"question": self.question(i), "plan": self.plan(i), "reward": int(bool(self.label[i]))}
                for i in rng]

    def write_jsonl(self, path: Path, kind: str = "pm") -> Path:
        """Write the bank as an upstream-format JSONL file (``kind`` = ``pm`` or ``np``)."""
        rows = self.pm_records() if kind == "pm" else self.np_records()
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("w", encoding="utf-8") as fh:
            for r in rows:
                fh.write(json.dumps(r, ensure_ascii=False) + "\n")
        return path

    def subset(self, idx: np.ndarray | Sequence[int]) -> CaseBank:
        idx = np.asarray(idx)
        return CaseBank(self.world, self.family[idx], self.template[idx], self.entity[idx], self.plan_kind[idx],
                        self.plan_family[idx], self.correct[idx], self.label[idx], self.seed)


@dataclass
class QuerySet:
    """Queries (distinct question texts) with their family and ground-truth answer."""

    world: CBRWorld
    family: np.ndarray
    template: np.ndarray
    entity: np.ndarray
    seed: int = 0
    _texts: list[str] = field(default_factory=list, repr=False)

    def __len__(self) -> int:
        return int(self.family.shape[0])

    def questions(self) -> list[str]:
        if not self._texts:
            self._texts = [self.world.question_text(int(f), int(t), int(e))
                           for f, t, e in zip(self.family, self.template, self.entity, strict=True)]
        return self._texts

    def answers(self) -> list[str]:
        return [self.world.answer(int(f), int(e)) for f, e in zip(self.family, self.entity, strict=True)]

    def dataset_rows(self) -> list[dict]:
        """Benchmark rows ``{"question", "ground_truth", "data_source"}`` (agentfly spec §2.5)."""
        fams = self.world.families
        return [{"question": q, "ground_truth": a, "data_source": f"synthetic:{fams[int(f)].name}"}
                for q, a, f in zip(self.questions(), self.answers(), self.family, strict=True)]

    def write_dataset(self, path: Path) -> Path:
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("w", encoding="utf-8") as fh:
            for r in self.dataset_rows():
                fh.write(json.dumps(r, ensure_ascii=False) + "\n")
        return path


class CBRWorld:
    """The seeded synthetic CBR task world (see the module docstring)."""

    def __init__(self, n_families: int = 40, *, seed: int = 0, p_correct: float = 0.7, label_noise: float = 0.1,
                 wrong_sibling_share: float = 0.5) -> None:
        if not 1 <= n_families <= len(FAMILIES):
            raise ValueError(f"n_families must be in 1..{len(FAMILIES)}")
        # Take families round-robin over entity types so a small F still has siblings and several types.
        by_type = {t: [f for f in FAMILIES if f.entity_type == t] for t in ENTITY_TYPES}
        order = [by_type[t][j] for j in range(5) for t in ENTITY_TYPES]
        self.families: list[Family] = order[:n_families]
        self.seed = seed
        self.p_correct = p_correct
        self.label_noise = label_noise
        self.wrong_sibling_share = wrong_sibling_share
        self._siblings = [np.array([j for j, g in enumerate(self.families)
                                    if g.entity_type == f.entity_type and j != i], dtype=np.int16)
                          for i, f in enumerate(self.families)]
        self._period = np.array([ENTITY_PERIOD[f.entity_type] for f in self.families], dtype=np.int64)
        # Step templates split around {e}, for decoding a plan back to its family.
        self._plan_keys = {
            tuple(tuple(s.split("{e}")) for s in f.plan): i for i, f in enumerate(self.families)
        }
        self._entity_cache: dict[tuple[str, int], str] = {}

    @property
    def n_families(self) -> int:
        return len(self.families)

    def config(self) -> dict:
        return {"n_families": self.n_families, "seed": self.seed, "p_correct": self.p_correct,
                "label_noise": self.label_noise, "wrong_sibling_share": self.wrong_sibling_share}

    # --- texts -------------------------------------------------------------------------------------------
    def entity(self, fam: Family, i: int) -> str:
        key = (fam.entity_type, i)
        name = self._entity_cache.get(key)
        if name is None:
            name = entity_name(fam.entity_type, i)
            if len(self._entity_cache) < 200_000:
                self._entity_cache[key] = name
        return name

    def question_text(self, family: int, template: int, entity: int) -> str:
        fam = self.families[family]
        text = fam.templates[template].format(e=self.entity(fam, entity))
        return text[0].upper() + text[1:]

    def canonical_plan(self, family: int, entity: int) -> str:
        fam = self.families[family]
        ent = self.entity(fam, entity)
        return _plan_json([s.format(e=ent) for s in fam.plan])

    def answer(self, family: int, entity: int) -> str:
        """A deterministic synthetic ground-truth answer for (family, entity)."""
        h = hashlib.blake2b(f"{self.seed}|{self.families[family].name}|{entity}".encode(), digest_size=4)
        return f"{self.families[family].name.split('_')[0]}-{h.hexdigest()}"

    def decode_plan(self, plan: str | dict | None) -> int | None:
        """The family whose full canonical plan this is (any entity), or None (truncated / unknown / malformed)."""
        try:
            obj = json.loads(plan) if isinstance(plan, str) else plan
            steps = [s["description"] for s in obj["plan"]]
        except Exception:
            return None
        return self.decode_steps(steps)

    def decode_steps(self, steps: Sequence[str]) -> int | None:
        for key, fam in self._plan_keys.items():
            if len(key) != len(steps):
                continue
            if all(_step_matches(parts, s) for parts, s in zip(key, steps, strict=True)):
                return fam
        return None

    # --- sampling ----------------------------------------------------------------------------------------
    def _draw(self, rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        fam = rng.integers(0, self.n_families, size=n).astype(np.int16)
        tpl = rng.integers(0, 4, size=n).astype(np.int8)
        ent = (rng.random(n) * self._period[fam]).astype(np.int32)
        return fam, tpl, ent

    def bank(self, n_cases: int, *, seed: int | None = None) -> CaseBank:
        """A case bank of ``n_cases`` cases (seeded by ``seed``, default the world seed)."""
        s = self.seed if seed is None else seed
        rng = np.random.default_rng([s, 1, n_cases])
        fam, tpl, ent = self._draw(rng, n_cases)
        correct = rng.random(n_cases) < self.p_correct
        wrong_kind = np.where(rng.random(n_cases) < self.wrong_sibling_share, PLAN_SIBLING, PLAN_TRUNCATED)
        plan_kind = np.where(correct, PLAN_CANONICAL, wrong_kind).astype(np.int8)
        plan_family = fam.copy()
        pick = rng.random(n_cases)
        for f in range(self.n_families):
            sib = self._siblings[f]
            m = (fam == f) & (plan_kind == PLAN_SIBLING)
            if len(sib) == 0:  # a lone family has no sibling: its wrong plans are truncated
                plan_kind[m] = PLAN_TRUNCATED
            else:
                plan_family[m] = sib[(pick[m] * len(sib)).astype(np.int64)]
        plan_family[plan_kind == PLAN_TRUNCATED] = -1
        flip = rng.random(n_cases) < self.label_noise
        label = correct ^ flip
        return CaseBank(self, fam, tpl, ent, plan_kind, plan_family.astype(np.int16), correct, label, s)

    def queries(self, n: int, *, seed: int | None = None, exclude: Iterable[str] = ()) -> QuerySet:
        """``n`` queries with distinct texts (not in ``exclude``), seeded separately from banks."""
        s = self.seed if seed is None else seed
        rng = np.random.default_rng([s, 2, n])
        seen = set(exclude)
        fams: list[int] = []
        tpls: list[int] = []
        ents: list[int] = []
        while len(fams) < n:
            f, t, e = self._draw(rng, max(16, 2 * (n - len(fams))))
            for a, b, c in zip(f, t, e, strict=True):
                q = self.question_text(int(a), int(b), int(c))
                if q in seen:
                    continue
                seen.add(q)
                fams.append(int(a))
                tpls.append(int(b))
                ents.append(int(c))
                if len(fams) == n:
                    break
        return QuerySet(self, np.array(fams, dtype=np.int16), np.array(tpls, dtype=np.int8),
                        np.array(ents, dtype=np.int32), s)

    # --- relevance ---------------------------------------------------------------------------------------
    def relevance(self, query_family: int, bank: CaseBank) -> np.ndarray:
        """Graded relevance of every bank case to a query of ``query_family``: 2 / 1 / 0 (int8)."""
        same = bank.family == query_family
        return np.where(same, np.where(bank.correct, 2, 1), 0).astype(np.int8)

    def qrels(self, queries: QuerySet, bank: CaseBank) -> list[np.ndarray]:
        return [self.relevance(int(f), bank) for f in queries.family]
