"""The delivery store: what every row delivered for every probe of a design run, kept compactly and rebuilt exactly.

A LoCoMo or LongMemEval design run writes ``<name>.deliveries.json.gz`` beside its per-probe table
(``<name>.probes.parquet``, :mod:`harness.probes`). The table holds ids and numbers; the store holds the texts, so
the explorer page (:mod:`harness.explore`) can show, for one question, the exact text each row put in front of the
model. The store holds text from the data files: it is a run artefact, never committed (the synthetic LongMemEval
run's is the exception, labelled synthetic).

**Layout.** Per conversation (a LoCoMo conversation, or one LongMemEval question with its own haystack):

- ``turns`` once: ``[dia_id, speaker, text, caption, session index, role]``, and ``sessions``
  ``[index, date-time, session id]``; ``probes``: the question, its date, the gold (or adversarial) answer, the
  category or question type, abstention and the evidence turns, so a page never needs the data file;
- a delivery is a list of **parts**, each an integer ``index * 4 + kind``: kind 0 a literal text (``lits``, each
  distinct string once per conversation), kind 1 a *unit* (``units[i] = [turn, template, escape]``: the turn rendered
  by one of :data:`TEMPLATES`, escaped by one of :data:`ESCAPES`), kind 2 a *slice* of a unit (``slices[i] = [unit,
  start, end]``: a turn cut at a limit, as Tortoise's digest and synopses cut point texts), kind 3 a **block**
  (``blocks[i]``: a list of parts);
- blocks are cut from the part sequences by content (a boundary after a part where a hash of it and the part before
  it hits one in :data:`FANOUT`, recursively until a delivery's top list is short), so a run of parts that recurs
  anywhere in the conversation (every probe of ``full`` delivers the same transcript; Fractal's instructions, summary
  and history, NP's planner prompt, Tortoise's digest recur from probe to probe; two rows share retrieved turns) is
  stored once and referenced, wherever it sits;
- ``deliveries``: ``[probe position, row, top parts, evidence credited, ranking, sha1 prefix]``: the evidence turns
  the arm credited as delivered (``Delivery.dia_ids``, its own provenance rule), the delivered ranking as turn
  positions (-1 for a unit that maps to no turn) for a ranked row, and the first 16 hex digits of the text's SHA-1
  (a damaged store is found when a rebuilt text does not match it); ``stored``: per row, the turns the arm holds
  after ingest (``Arm.stored()``) when the run passed them.

**Why templates learned from the texts, not declared by arms.** Arms render turns with the harness's own functions
(``locomo.render_turn`` with or without date for the baselines, ``arm_text.dated_line`` for AgentFly cases and
Tortoise points, ``arm_text.turn_line`` for Fractal, ``"[speaker] body"`` for Tortoise's turn Points), sometimes
JSON-escaped (Fractal's ``session_history``), sometimes cut. The encoder renders every turn with every template of
:data:`TEMPLATES` (each checked against the function it mirrors, turn by turn: a template that renders a turn
differently is not used for that turn) and finds those renderings in the delivered text; whatever it does not find
stays literal text. So no arm changes what it delivers or declares anything, an external arm's text is stored
exactly too (as literals where it renders turns its own way), and an arm whose rendering drifts costs compactness,
never exactness: :func:`ConversationEncoder.add` rebuilds every delivery it encodes and compares it byte for byte.

**Finding renderings.** A template marks where the speaker starts (the anchor) and where the turn's body starts.
One regular expression finds every anchor (the speaker and separator of some rendering, e.g. ``"Caroline: "``); at
each, the first characters of the body select the candidate renderings (a dictionary), and the candidate whose
rendering matches longest from its own start wins: all of it (a unit) or a prefix of it (a slice). The probe's
question (raw and JSON-escaped) is split out of literal text, so the framing around it is one shared literal.

The writer (:class:`DeliveryWriter`) is the hook the benches call: ``add(conversation, probe, row, delivery,
stored=...)`` per delivered row, ``close()`` writes the file atomically (fault-hook step :data:`WRITE_STEP`). A
worker process can encode its conversations with :class:`ConversationEncoder` and hand ``record()`` to the main
process's ``DeliveryWriter.add_record``. :func:`read_deliveries` reads a store back (one-line
:class:`DeliveryStoreError` naming the file for a missing, foreign or damaged one), :meth:`DeliveryStore.text`
rebuilds one delivered text, :func:`measure` reports the size against the texts inline.
"""

from __future__ import annotations

from harness.deliveries.encode import ConversationEncoder, DeliveryWriter
from harness.deliveries.store import DeliveryStore, StoredConversation, compact, measure, read_deliveries
from harness.deliveries.templates import (
    ESCAPES,
    FANOUT,
    FORMAT,
    SUFFIX,
    TEMPLATES,
    VERSION,
    WRITE_STEP,
    DeliveryStoreError,
    deliveries_path,
    escape,
    probe_key,
    rebuild,
    render,
)

__all__ = ["ESCAPES", "FANOUT", "FORMAT", "SUFFIX", "TEMPLATES", "VERSION", "WRITE_STEP", "ConversationEncoder",
           "DeliveryStore", "DeliveryStoreError", "DeliveryWriter", "StoredConversation", "compact", "deliveries_path",
           "escape", "measure", "probe_key", "read_deliveries", "rebuild", "render"]
