"""Claims ledger runner and writers (``ledger.json``, ``ledger.md``, ``ledger.html``).

The runner isolates each claim in its own fresh temporary directory, times it, and turns any exception into the
verdict ``error`` with the traceback as evidence. ``refuted`` is a finding about the reference design, not a
failure of memsim; ``skipped`` means a needed corpus is absent (the reason is recorded).
"""

from __future__ import annotations

import contextlib
import html
import io
import json
import logging
import platform
import shutil
import tempfile
import time
import traceback
import warnings
from collections import Counter
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from harness.claims import Claim, ClaimContext, Observation
from harness.runs import code_text, published_folder

VERDICTS = ("holds", "refuted", "error", "skipped")


class LedgerRow(BaseModel):
    id: str
    design: str
    record: str
    kind: str
    statement: str
    verdict: str
    measured: dict[str, Any]
    evidence: str
    note: str
    seconds: float
    source: str
    source_path: str = ""  # "<path relative to the repo root>:<line>" of the demonstration function


class Ledger(BaseModel):
    created: str
    memsim_version: str
    machine: str
    python: str
    rows: list[LedgerRow]
    run: dict[str, Any] | None = None  # harness.runs.run_record of the run that wrote it (None: not recorded)

    def counts(self) -> dict[str, dict[str, int]]:
        """``{design: {verdict: n}}`` plus ``{"kind:<k>": {...}}`` and ``{"all": {...}}``."""
        out: dict[str, Counter[str]] = {}
        for r in self.rows:
            for key in (r.design, f"kind:{r.kind}", "all"):
                out.setdefault(key, Counter())[r.verdict] += 1
        return {k: {v: c.get(v, 0) for v in VERDICTS} for k, c in out.items()}


def find_data_dir(explicit: Path | None = None) -> Path | None:
    """The AgentFly corpora folder through the one data resolver (:func:`harness.datapaths.find_agentfly`):
    ``explicit``, ``$MEMSIM_AGENTFLY_DATA``, then the copy ``memsim data fetch`` placed in the data folder; ``None``
    when none is given and nothing was fetched. A given path that is missing raises ``DataPathError``."""
    from harness.datapaths import find_agentfly

    return find_agentfly(explicit)


REPO_ROOT = Path(__file__).resolve().parent.parent


def source_location(fn: Callable[..., Any]) -> str:
    """``path:line`` of ``fn`` (the path relative to the repo root when inside it); ``""`` when unknown."""
    import inspect

    try:
        path = Path(inspect.getsourcefile(inspect.unwrap(fn)) or "").resolve()
        line = inspect.getsourcelines(inspect.unwrap(fn))[1]
    except (OSError, TypeError):
        return ""
    try:
        path = path.relative_to(REPO_ROOT)
    except ValueError:
        pass
    return f"{path.as_posix()}:{line}"


def _jsonable(value: Any) -> Any:
    return json.loads(json.dumps(value, default=repr))


CAPTURED_HEADER = "--- captured during the demonstration (logging, warnings, stderr) ---"


class _Capture:
    """Collects what a demonstration says on the side while it runs: log records (WARNING and above, any
    logger), ``warnings.warn`` calls and Python-level writes to ``sys.stderr``. Fault-injection demonstrations
    provoke such messages on purpose ("graph feed write failed ..."); they belong to the claim's evidence,
    not to the terminal above the progress bar."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self._stderr = io.StringIO()
        self._stack = contextlib.ExitStack()

    def __enter__(self) -> _Capture:
        lines = self.lines

        class _ToList(logging.Handler):
            def emit(self, record: logging.LogRecord) -> None:
                try:
                    lines.append(f"log {record.levelname} {record.name}: {record.getMessage()}")
                except Exception:  # noqa: BLE001 - a bad log call must not break the demonstration
                    lines.append(f"log {record.levelname} {record.name}: {record.msg!r}")

        handler = _ToList(level=logging.WARNING)
        root = logging.getLogger()
        root.addHandler(handler)
        self._stack.callback(root.removeHandler, handler)
        caught = self._stack.enter_context(warnings.catch_warnings(record=True))
        warnings.simplefilter("always")
        self._caught = caught
        self._stack.enter_context(contextlib.redirect_stderr(self._stderr))
        return self

    def __exit__(self, *exc: object) -> None:
        self._stack.close()
        for w in self._caught:
            self.lines.append(f"warning {w.category.__name__}: {w.message}")
        err = self._stderr.getvalue().rstrip("\n")
        if err:
            self.lines += [f"stderr: {line}" for line in err.splitlines()]

    def text(self) -> str:
        return "\n".join([CAPTURED_HEADER, *self.lines]) if self.lines else ""


def run_claim(c: Claim, *, seed: int = 0, data_dir: Path | None = None, quick: bool = False,
              keep_tmp: bool = False) -> LedgerRow:
    """Run one claim in a fresh temporary directory; exceptions become verdict ``error``. Log records,
    warnings and stderr output of the demonstration are appended to its evidence instead of the terminal."""
    tmp = Path(tempfile.mkdtemp(prefix=f"memsim-{c.id}-"))
    t0 = time.perf_counter()
    cap = _Capture()
    try:
        with cap:
            obs = c.demonstrate(ClaimContext(tmp_path=tmp, seed=seed, data_dir=data_dir, quick=quick))
        if not isinstance(obs, Observation):
            raise TypeError(f"{c.source} returned {type(obs).__name__}, not Observation")
    except Exception:  # noqa: BLE001 - the ledger records every failure as a verdict
        obs = Observation(verdict="error", evidence=traceback.format_exc(limit=20))
    finally:
        seconds = time.perf_counter() - t0
        if not keep_tmp:
            shutil.rmtree(tmp, ignore_errors=True)
    evidence = obs.evidence
    if cap.text():
        evidence = f"{evidence}\n\n{cap.text()}" if evidence else cap.text()
    return LedgerRow(id=c.id, design=c.design, record=c.record, kind=c.kind, statement=c.statement,
                     verdict=obs.verdict, measured=_jsonable(obs.measured), evidence=evidence,
                     note=obs.note, seconds=round(seconds, 3), source=c.source,
                     source_path=source_location(c.demonstrate))


def run_claims(claims: Sequence[Claim], *, seed: int = 0, data_dir: Path | None = None, quick: bool = False,
               progress: bool = True, on_row: Callable[[LedgerRow], None] | None = None) -> Ledger:
    """Run ``claims`` in order with a rich progress bar; returns the ``Ledger``."""
    from harness import __version__

    rows: list[LedgerRow] = []
    if progress:
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        with Progress(TextColumn("[bold]claims"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                      TextColumn("{task.description}")) as bar:
            task = bar.add_task("", total=len(claims))
            for c in claims:
                bar.update(task, description=c.id)
                row = run_claim(c, seed=seed, data_dir=data_dir, quick=quick)
                rows.append(row)
                if on_row:
                    on_row(row)
                bar.advance(task)
    else:
        for c in claims:
            rows.append(run_claim(c, seed=seed, data_dir=data_dir, quick=quick))
            if on_row:
                on_row(rows[-1])
    return Ledger(created=datetime.now(UTC).isoformat(timespec="seconds"), memsim_version=__version__,
                  machine=f"{platform.machine()} {platform.system()} {platform.release()}",
                  python=platform.python_version(), rows=rows)


# ---------------------------------------------------------------------------------------------------- writers

def write_json(ledger: Ledger, path: Path) -> Path:
    path.write_text(json.dumps({**ledger.model_dump(), "counts": ledger.counts()}, indent=2, ensure_ascii=False)
                    + "\n", encoding="utf-8")
    return path


def _md_cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def write_markdown(ledger: Ledger, path: Path) -> Path:
    counts = ledger.counts()
    lines = ["# memsim claims ledger", "", f"Created {ledger.created} with memsim {ledger.memsim_version} "
             f"on {ledger.machine}, Python {ledger.python}. Code: {code_text(ledger.run)}.", "",
             "| scope | " + " | ".join(VERDICTS) + " |", "|---|" + "---|" * len(VERDICTS)]
    for scope, c in sorted(counts.items(), key=lambda kv: (kv[0] == "all", kv[0])):
        lines.append(f"| {scope} | " + " | ".join(str(c[v]) for v in VERDICTS) + " |")
    by_record: dict[tuple[str, str], list[LedgerRow]] = {}
    for r in ledger.rows:
        by_record.setdefault((r.design, r.record), []).append(r)
    for (design, record), rows in by_record.items():
        lines += ["", f"## {design}: {record}", ""]
        for r in rows:
            lines += [f"### {r.id} [{r.verdict}] ({r.kind})", "", r.statement, ""]
            if r.measured:
                lines += ["Measured:", "", "```json", json.dumps(r.measured, indent=2, ensure_ascii=False)[:4000],
                          "```", ""]
            if r.evidence:
                lines += ["<details><summary>evidence</summary>", "", "```", r.evidence[:4000], "```", "",
                          "</details>", ""]
            if r.note:
                lines += [f"Note: {_md_cell(r.note)}", ""]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


_HTML_HEAD = """<!doctype html><html lang="en"><head><meta charset="utf-8"><title>memsim claims ledger</title>
<style>
body{font-family:system-ui,sans-serif;margin:2em;max-width:1400px}
table{border-collapse:collapse;width:100%}th,td{border:1px solid #ccc;padding:4px 8px;vertical-align:top;text-align:left}
th{background:#f3f3f3}table.sortable th{cursor:pointer;user-select:none;white-space:nowrap}#claims>tbody>tr>td:first-child{white-space:nowrap}
table.sortable th:hover{background:#e6e6e6}th .dir{color:#245;font-size:small;margin-left:4px}
.holds{background:#e6f6e6}.refuted{background:#fdf1d8}.error{background:#f9d6d6}.skipped{background:#ececec}
pre{white-space:pre-wrap;max-height:30em;overflow:auto;background:#fafafa;padding:6px;margin:4px 0}
summary{cursor:pointer;color:#245}table.counts{width:auto;margin-bottom:1em}.counts td{text-align:right}
.filters{display:flex;flex-wrap:wrap;gap:1em;align-items:center;margin:0.5em 0 1em 0;padding:0.6em;
background:#f6f8fa;border:1px solid #ddd}.filters label{font-size:small}.filters input[type=search]{width:22em}
table.eo{width:auto;margin:4px 0;font-size:small}table.eo td,table.eo th{padding:2px 6px;border-color:#ddd}
table.eo td.bad{background:#f9d6d6}table.eo code{white-space:pre-wrap}
.links{font-size:small;color:#777}.links a{color:#245}
*{box-sizing:border-box}#claims{table-layout:fixed}#claims td,#claims th{overflow-wrap:break-word}
#claims th:nth-child(1){width:6.5em}#claims th:nth-child(2){width:6.5em}#claims th:nth-child(3){width:12em}
#claims th:nth-child(4){width:9em}#claims th:nth-child(5){width:6.5em}#claims th:nth-child(6){width:6em}
table.eo{width:100%}table.eo td:first-child{width:50%}pre,code{overflow-wrap:anywhere}
</style></head><body>"""

_HTML_SCRIPT = """<script>
(function(){
  var table = document.getElementById('claims'), body = table.tBodies[0];
  var sel = {design: document.getElementById('f-design'), verdict: document.getElementById('f-verdict'),
             kind: document.getElementById('f-kind')};
  var text = document.getElementById('f-text'), shown = document.getElementById('f-count');
  function applyFilters(){
    var q = text.value.trim().toLowerCase(), n = 0;
    Array.prototype.forEach.call(body.rows, function(r){
      var ok = ['design', 'verdict', 'kind'].every(function(k){
        return !sel[k].value || r.dataset[k] === sel[k].value; });
      if (ok && q) { ok = r.innerText.toLowerCase().indexOf(q) >= 0; }
      r.style.display = ok ? '' : 'none'; if (ok) { n++; }
    });
    shown.textContent = n + ' of ' + body.rows.length + ' claims shown';
  }
  [sel.design, sel.verdict, sel.kind].forEach(function(s){ s.addEventListener('change', applyFilters); });
  text.addEventListener('input', applyFilters);
  var heads = table.tHead.rows[0].cells;
  Array.prototype.forEach.call(heads, function(th, col){
    if (th.dataset.nosort) { return; }
    th.addEventListener('click', function(){
      var asc = th.getAttribute('aria-sort') !== 'ascending';
      Array.prototype.forEach.call(heads, function(h){
        h.removeAttribute('aria-sort'); var d = h.querySelector('.dir'); if (d) { d.textContent = ''; } });
      th.setAttribute('aria-sort', asc ? 'ascending' : 'descending');
      th.querySelector('.dir').textContent = asc ? '\\u25b2 ascending' : '\\u25bc descending';
      var rows = Array.prototype.slice.call(body.rows);
      rows.sort(function(a, b){
        var x = a.cells[col].dataset.key || a.cells[col].innerText, y = b.cells[col].dataset.key || b.cells[col].innerText;
        var nx = parseFloat(x), ny = parseFloat(y);
        var c = (!isNaN(nx) && !isNaN(ny)) ? nx - ny : x.localeCompare(y);
        return asc ? c : -c;
      });
      rows.forEach(function(r){ body.appendChild(r); });
    });
  });
  applyFilters();
})();
</script>"""


def _short(value: Any, limit: int = 300) -> str:
    text = json.dumps(value, ensure_ascii=False, default=repr)
    return text if len(text) <= limit else text[: limit - 1] + "\u2026"


def expected_observed(measured: dict[str, Any]) -> list[tuple[str, Any, Any, bool]]:
    """``(name, expected, observed, matches)`` rows recorded by the Observation API: ``compare()`` stores the
    prediction under ``measured["expected"]`` (observed values under their own keys, misses under
    ``mismatches``); ``from_checks()`` stores named checks whose expected value is ``true``."""
    rows: list[tuple[str, Any, Any, bool]] = []
    misses = measured.get("mismatches") or {}
    if isinstance(measured.get("expected"), dict):
        for key, want in measured["expected"].items():
            if key in misses:
                rows.append((key, want, misses[key].get("observed"), False))
            else:
                rows.append((key, want, measured.get(key, want), True))
    elif isinstance(misses, dict) and misses:  # a ledger written before "expected" was recorded
        rows += [(k, v.get("expected"), v.get("observed"), False) for k, v in misses.items()]
    if isinstance(measured.get("checks"), dict):
        rows += [(name, True, ok, ok is True) for name, ok in measured["checks"].items()]
    return rows


def _links(r: LedgerRow, out_dir: Path) -> str:
    """Relative links from the page to the demonstration's source and to its docs section."""
    import os

    e = html.escape
    parts = []
    if r.source_path:
        path, _, line = r.source_path.rpartition(":")
        target = Path(path) if Path(path).is_absolute() else REPO_ROOT / path
        href = os.path.relpath(target, out_dir.resolve()).replace(os.sep, "/") + (f"#L{line}" if line else "")
        parts.append(f"source <a href='{e(href)}'>{e(r.source_path)}</a> ({e(r.source)})")
    else:
        parts.append(e(r.source))
    anchor = r.id.lower()
    parts.append(f"docs <a href='{e(docs_site_link(r.design, anchor, out_dir))}'>{e(r.design)} page, "
                 f"#{e(anchor)}</a>")
    return "<div class='links'>" + " &middot; ".join(parts) + "</div>"


def _mkdocs_setting(key: str) -> str | None:
    """A top-level scalar of the checkout's ``mkdocs.yml`` (``None`` when absent or empty)."""
    import re

    try:
        text = (REPO_ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    except OSError:
        return None
    m = re.search(rf"^{re.escape(key)}:[ \t]*(.*?)[ \t]*$", text, re.M)
    value = m.group(1).strip().strip("'\"") if m else ""
    return value or None


def docs_site_link(design: str, anchor: str, out_dir: Path) -> str:
    """Where the ledger page links a claim's docs entry: the page of the built MkDocs site, not the raw
    ``docs/<design>.md`` (a browser does not follow anchors into a Markdown file).

    With a ``site_url`` in ``mkdocs.yml`` the link is ``<site_url>/<design>/#<anchor>``; without one (this
    checkout) it is relative from ``out_dir`` to ``<site_dir>/<design>/index.html#<anchor>`` of the checkout, the
    page ``mkdocs build`` writes there (``use_directory_urls`` off gives ``<site_dir>/<design>.html``). The anchor
    is the ``<a id="...">`` each claim entry carries."""
    import os

    directory_urls = (_mkdocs_setting("use_directory_urls") or "true").lower() not in ("false", "no", "off")
    page = f"{design}/" if directory_urls else f"{design}.html"
    site_url = _mkdocs_setting("site_url")
    if site_url:
        return f"{site_url.rstrip('/')}/{page}#{anchor}"
    site_dir = REPO_ROOT / (_mkdocs_setting("site_dir") or "site")
    target = site_dir / design / "index.html" if directory_urls else site_dir / page
    return os.path.relpath(target, out_dir.resolve()).replace(os.sep, "/") + f"#{anchor}"


def write_html(ledger: Ledger, path: Path) -> Path:
    """A self-contained page: counts per design and kind, filters (design, verdict, kind, free text), a table
    sortable by any column with the direction shown, expected versus observed per claim, evidence folded per
    row, and relative links to each demonstration's source and docs section."""
    e = html.escape
    counts = ledger.counts()
    parts = [_HTML_HEAD, "<h1>memsim claims ledger</h1>",
             f"<p>Created {e(ledger.created)} with memsim {e(ledger.memsim_version)} on {e(ledger.machine)}, "
             f"Python {e(ledger.python)}. Code: {e(code_text(ledger.run))}. Click a column header to sort (click "
             "again to reverse).</p>",
             "<table class='counts'><thead><tr><th>scope</th>" + "".join(f"<th>{v}</th>" for v in VERDICTS)
             + "</tr></thead><tbody>"]
    for scope, c in sorted(counts.items(), key=lambda kv: (kv[0] == "all", kv[0])):
        parts.append(f"<tr><td style='text-align:left'>{e(scope)}</td>"
                     + "".join(f"<td>{c[v]}</td>" for v in VERDICTS) + "</tr>")
    parts.append("</tbody></table><h2>Claims</h2>")

    def options(name: str, values: list[str]) -> str:
        opts = "".join(f"<option value='{e(v)}'>{e(v)}</option>" for v in values)
        return (f"<label>{name} <select id='f-{name}' aria-label='filter by {name}'><option value=''>all</option>"
                f"{opts}</select></label>")

    designs = sorted({r.design for r in ledger.rows})
    kinds = sorted({r.kind for r in ledger.rows})
    parts.append("<div class='filters'>" + options("design", designs) + options("verdict", list(VERDICTS))
                 + options("kind", kinds) + "<label>text <input type='search' id='f-text' "
                 "placeholder='id, statement, evidence...' aria-label='filter by text'></label>"
                 "<span id='f-count'></span></div>")
    heads = ["id", "design", "record", "kind", "verdict", "seconds"]
    parts.append("<table class='sortable' id='claims'><thead><tr>"
                 + "".join(f"<th>{h}<span class='dir'></span></th>" for h in heads)
                 + "<th data-nosort='1'>statement, expected vs observed, evidence</th></tr></thead><tbody>")
    out_dir = published_folder(path.parent)  # links are relative to where the page is published
    for r in ledger.rows:
        prefix, _, num = r.id.partition("-")
        key = f"{prefix}-{int(num):04d}" if num.isdigit() else r.id
        detail = [f"<div>{e(r.statement)}</div>"]
        if r.note:
            detail.append(f"<div><em>{e(r.note)}</em></div>")
        eo = expected_observed(r.measured)
        if eo:
            detail.append("<table class='eo'><tr><th></th><th>expected</th><th>observed</th></tr>" + "".join(
                f"<tr><td>{'&#10003;' if ok else '&#10007;'} {e(name)}</td><td><code>{e(_short(want))}</code></td>"
                f"<td class='{'' if ok else 'bad'}'><code>{e(_short(got))}</code></td></tr>"
                for name, want, got, ok in eo) + "</table>")
        elif r.verdict in ("holds", "refuted"):
            detail.append("<div class='links'>no expected values recorded (see measured)</div>")
        if r.measured:
            detail.append("<details><summary>measured</summary><pre>"
                          + e(json.dumps(r.measured, indent=2, ensure_ascii=False)) + "</pre></details>")
        if r.evidence:
            detail.append(f"<details><summary>evidence</summary><pre>{e(r.evidence)}</pre></details>")
        detail.append(_links(r, out_dir))
        parts.append(f"<tr class='{e(r.verdict)}' id='{e(r.id.lower())}' data-design='{e(r.design)}' "
                     f"data-verdict='{e(r.verdict)}' data-kind='{e(r.kind)}'>"
                     f"<td data-key='{e(key)}'>{e(r.id)}</td><td>{e(r.design)}</td>"
                     f"<td>{e(r.record)}</td><td>{e(r.kind)}</td><td>{e(r.verdict)}</td><td>{r.seconds:.2f}</td>"
                     f"<td>{''.join(detail)}</td></tr>")
    parts += ["</tbody></table>", _HTML_SCRIPT, "</body></html>"]
    path.write_text("\n".join(parts) + "\n", encoding="utf-8")
    return path


def write_all(ledger: Ledger, out_dir: Path) -> list[Path]:
    out_dir.mkdir(parents=True, exist_ok=True)
    return [write_json(ledger, out_dir / "ledger.json"), write_markdown(ledger, out_dir / "ledger.md"),
            write_html(ledger, out_dir / "ledger.html")]
