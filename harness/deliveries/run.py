"""Run arms over one conversation and feed every delivered row, with what its arm stored, to a delivery store.

The runner (:func:`harness.workloads.runner.run_conversation`) reads ``Arm.stored()`` once after ingest and keeps
only counts; the store wants the ids, so the page can mark evidence an arm stored but did not deliver.
:func:`run_recorded` runs the same runner with each arm behind :class:`StoredTap`, an arm of the same protocol that
builds the named arm, passes every call through unchanged and keeps what ``stored()`` returned; its
``on_delivery`` then hands each delivered row to the writer with those ids, and the caller may ask for the ids
themselves (``stored=``: the LongMemEval design run scores its stored-evidence views with them). What the arms
deliver is untouched: the tap is transparent (same rows, same texts, the same construction errors reported at
ingest).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness.workloads.arms import ArmSpec, ArmUnavailable, build_arm

if TYPE_CHECKING:
    from harness.deliveries import DeliveryWriter
    from harness.workloads.base import ArmContext, Delivery
    from harness.workloads.locomo import Conversation, Probe

_TAPS: dict[str, dict[str, frozenset[str]]] = {}
CURRENT = "\0current"
"""Per run key: arm name -> the ids its ``stored()`` returned (filled by the taps of that run)."""


class StoredTap:
    """The named arm behind the same protocol, keeping its ``stored()`` ids for the run ``sink_key``. A
    construction failure is raised at ``ingest`` (``ArmUnavailable`` stays unavailable), so the runner reports it
    as it would for the arm itself."""

    def __init__(self, ctx: ArmContext, inner: str | ArmSpec = "", sink_key: str = "") -> None:
        self.name = inner.name if isinstance(inner, ArmSpec) else inner
        self.sink = _TAPS.setdefault(sink_key, {})
        self.failure: BaseException | None = None
        try:
            self.arm: Any = build_arm(inner, ctx)
            self.rows = tuple(self.arm.rows)
        except Exception as exc:  # reported by ingest
            self.arm, self.rows, self.failure = None, ("?",), exc

    def ingest(self, conversation: Conversation) -> None:
        if self.failure is not None:
            if isinstance(self.failure, ArmUnavailable):
                raise ArmUnavailable(str(self.failure))
            raise RuntimeError(f"constructing arm {self.name!r} failed: {type(self.failure).__name__}: "
                               f"{self.failure}")
        self.arm.ingest(conversation)

    def deliver(self, probe: Probe) -> dict[str, Delivery]:
        return self.arm.deliver(probe)

    def stored(self) -> frozenset[str]:
        got = frozenset(self.arm.stored())
        self.sink[self.name] = self.sink[CURRENT] = got  # the runner delivers this arm's probes next
        return got

    def close(self) -> None:
        if self.arm is not None:
            self.arm.close()


def tap_spec(entry: str | ArmSpec, sink_key: str) -> ArmSpec:
    """The :class:`StoredTap` spec standing in for ``entry`` (same name)."""
    name = entry.name if isinstance(entry, ArmSpec) else entry
    return ArmSpec(name, "design", f"{name} (stored ids kept)", __name__, "StoredTap",
                   {"inner": entry, "sink_key": sink_key})


def run_recorded(conv: Conversation, arms: Sequence[str | ArmSpec], workdir: Path, writer: DeliveryWriter,
                 on_delivery: Callable[[str, Probe, Delivery], None] | None = None,
                 stored: dict[str, frozenset[str]] | None = None, **kwargs: Any) -> dict[str, Any]:
    """:func:`~harness.workloads.runner.run_conversation` over ``arms`` with every delivered row of an arm that
    finished added to ``writer`` (with its arm's stored ids); returns the runner's result. ``kwargs`` go to the
    runner; ``on_delivery`` (optional) still sees every row; ``stored`` (optional) receives, per arm name, the ids
    its ``stored()`` returned (an arm that never got that far has none)."""
    from harness.workloads.runner import run_conversation

    key = f"{id(writer)}:{conv.sample_id}"
    sink = _TAPS.setdefault(key, {})
    enc = writer.encoder(conv)

    def tap(row: str, probe: Probe, d: Delivery) -> None:
        if on_delivery is not None:
            on_delivery(row, probe, d)
        enc.add(probe, row, d, stored=sink.get(CURRENT))

    try:
        res = run_conversation(conv, [tap_spec(a, key) for a in arms], workdir, on_delivery=tap, **kwargs)
    finally:
        got = _TAPS.pop(key, {})
        if stored is not None:
            stored.update({arm: ids for arm, ids in got.items() if arm != CURRENT})
    failed = [row for info in res["arms"].values() if info.get("status") != "ok" for row in info.get("rows", [])]
    enc.drop_rows(failed)  # an arm that failed part-way: its rows are not in the run's records either
    return res


def write_design_run(out_dir: Path, name: str, conversations: Sequence[Conversation], arms: Sequence[str | ArmSpec],
                     workdir: Path, *, data: str, synthetic: bool = False,
                     others: Callable[[Conversation], tuple[Conversation, ...]] | None = None,
                     config: dict[str, Any] | None = None, **kwargs: Any) -> tuple[Path, Path, list[dict[str, Any]]]:
    """A design run folder as the LoCoMo and LongMemEval benches write it, for what reads one (the explorer, its
    benchmark, its docs): every conversation through :func:`run_recorded`, then ``<out_dir>/<name>.probes.parquet``
    (:mod:`harness.probes`, one row per probe and delivered row) and ``<out_dir>/<name>.deliveries.json.gz``.
    ``others(conv)`` gives the conversations PM trains on (default: none); ``kwargs`` go to the runner. Returns the
    table's path, the store's path and the runner's results."""
    from harness.deliveries.encode import DeliveryWriter
    from harness.deliveries.templates import deliveries_path
    from harness.probes import from_probe_record, probe_table, write_probes

    writer = DeliveryWriter(deliveries_path(out_dir, name), data=data, synthetic=synthetic)
    results, rows = [], []
    for conv in conversations:
        res = run_recorded(conv, arms, workdir, writer, others=others(conv) if others else (), **kwargs)
        row_arm = {row: arm for arm, info in res["arms"].items() if info.get("status") == "ok"
                   for row in info.get("rows", [])}
        rows += [from_probe_record(r, workload=conv.workload, arm=row_arm[r["row"]]) for r in res["records"]]
        results.append(res)
    table = write_probes(Path(out_dir) / f"{name}.probes.parquet", probe_table(rows), data=data,
                         config=dict(config or {}), stratify=any(c.workload == "locomo" for c in conversations))
    return table, writer.close(), results
