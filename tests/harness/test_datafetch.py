"""`memsim data fetch` against a loopback HTTP server, the one data resolver, and the data check's folder rules.

The server (http.server in a daemon thread on 127.0.0.1, shut down by the fixture and by a timer if a test hangs)
serves copies of the development data found through ``$MEMSIM_LOCOMO_DATA`` / ``$MEMSIM_AGENTFLY_DATA``; tests
that need those skip cleanly without them. The pinned registry names upstream files, so the tests inject their
own registry with hashes computed from the served bytes.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from typer.testing import CliRunner

from harness import datafetch
from harness.datafetch import DataFile, FetchError, fetch, fetch_file
from harness.datapaths import DataPathError, find_agentfly, find_locomo, resolve_agentfly, resolve_locomo
from harness.faults import FaultInjected, FaultPlan

DATA_ENVS = ("MEMSIM_LOCOMO_DATA", "MEMSIM_AGENTFLY_DATA", "MEMSIM_DATA_DIR")


def _dev(env: str) -> Path | None:
    value = os.environ.get(env)
    return Path(value) if value and Path(value).exists() else None


LOCOMO_DEV = _dev("MEMSIM_LOCOMO_DATA")
AGENTFLY_DEV = _dev("MEMSIM_AGENTFLY_DATA")


def _locomo_files() -> list[Path]:
    if LOCOMO_DEV is None:
        return []
    return sorted(LOCOMO_DEV.glob("*.json")) if LOCOMO_DEV.is_dir() else [LOCOMO_DEV]


needs_locomo = pytest.mark.skipif(not _locomo_files(), reason="LoCoMo development data not present")
needs_agentfly = pytest.mark.skipif(AGENTFLY_DEV is None or not (AGENTFLY_DEV / "dummy_memo.jsonl").is_file(),
                                    reason="AgentFly development data not present")


# ------------------------------------------------------------------------------------------ loopback server
class _Handler(BaseHTTPRequestHandler):
    """``/ok/<name>`` the bytes; ``/truncate/<name>`` half of them, then the connection closes under a full
    Content-Length; ``/wrong/<name>`` other bytes of the same length; anything else 404."""

    timeout = 5  # a stalled client cannot hold a handler thread

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        _, mode, name = (self.path.split("/", 2) + ["", ""])[:3]
        body = self.server.files.get(name)  # type: ignore[attr-defined]
        if body is None or mode not in ("ok", "truncate", "wrong"):
            self.send_error(404)
            return
        self.server.hits.append(self.path)  # type: ignore[attr-defined]
        if mode == "wrong":
            body = bytes(b ^ 0x20 if i == len(body) // 2 else b for i, b in enumerate(body))
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body[: len(body) // 2] if mode == "truncate" else body)
        self.wfile.flush()
        self.close_connection = True

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def server() -> Iterator[ThreadingHTTPServer]:
    srv = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    srv.daemon_threads = True
    srv.files = {}  # type: ignore[attr-defined]
    srv.hits = []  # type: ignore[attr-defined]
    thread = threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    stop = threading.Timer(120, srv.shutdown)  # bounded: stops by itself if a test never returns
    stop.daemon = True
    stop.start()
    try:
        yield srv
    finally:
        stop.cancel()
        srv.shutdown()
        srv.server_close()
        thread.join(timeout=5)


def _url(srv: ThreadingHTTPServer, mode: str, name: str) -> str:
    return f"http://127.0.0.1:{srv.server_address[1]}/{mode}/{name}"


def _refusing_port() -> int:
    with socket.socket() as s:  # bound and closed again: nothing listens there
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _serve(srv: ThreadingHTTPServer, name: str, body: bytes) -> str:
    srv.files[name] = body  # type: ignore[attr-defined]
    return hashlib.sha256(body).hexdigest()


def _served_locomo(srv: ThreadingHTTPServer, mode: str, name: str) -> DataFile:
    """The LoCoMo file as a DataFile that ``srv`` serves as ``name`` under ``mode`` (ok, wrong, truncate, ...)."""
    body = _locomo_files()[0].read_bytes()
    return DataFile("locomo", "locomo10.json", _url(srv, mode, name), _serve(srv, name, body))


def _tree(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*")) if root.exists() else []


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty data folder, and no data environment variables (the resolver sees only what a test puts there)."""
    for env in DATA_ENVS:
        monkeypatch.delenv(env, raising=False)
    h = tmp_path / "data-home"
    monkeypatch.setenv("MEMSIM_DATA_DIR", str(h))
    return h


def _canonical(files: list[Path]) -> bytes:
    """The shipped per-conversation files rewritten in the canonical ``locomo10.json`` list layout."""
    out = []
    for f in files:
        d = json.loads(f.read_text(encoding="utf-8"))
        conv = {k: v for k, v in d.items()
                if k in ("speaker_a", "speaker_b") or re.fullmatch(r"session_\d+(_date_time)?", k)}
        out.append({"sample_id": d.get("sample_id", f.stem), "conversation": conv, "qa": d["qa"],
                    "observation": {k: v for k, v in d.items() if k.endswith("_observation")},
                    "session_summary": {k: v for k, v in d.items() if k.endswith("_summary")},
                    "event_summary": {k: v for k, v in d.items() if k.startswith("events_")}})
    return json.dumps(out).encode()


# ------------------------------------------------------------------------------------------------- fetch
@needs_locomo
@needs_agentfly
def test_fetch_stores_the_served_bytes_and_every_command_finds_them(server, home) -> None:
    locomo = _canonical([f for f in _locomo_files() if f.suffix == ".json"][:2])
    memo = (AGENTFLY_DEV / "dummy_memo.jsonl").read_bytes()
    reg = (DataFile("locomo", "locomo10.json", _url(server, "ok", "l.json"), _serve(server, "l.json", locomo)),
           DataFile("agentfly", "dummy_memo.jsonl", _url(server, "ok", "m.jsonl"), _serve(server, "m.jsonl", memo)))
    seen = []
    res = fetch("all", registry=reg, on_result=seen.append)
    assert [r.status for r in res] == ["fetched", "fetched"] and seen == res
    assert (home / "locomo" / "locomo10.json").read_bytes() == locomo
    assert (home / "agentfly" / "dummy_memo.jsonl").read_bytes() == memo
    assert _tree(home) == ["agentfly", "agentfly/dummy_memo.jsonl", "locomo", "locomo/locomo10.json"]
    # found without flags, through the one resolver
    assert resolve_locomo() == home / "locomo" / "locomo10.json"
    assert find_agentfly() == home / "agentfly"
    # a second fetch uses the files already there: not one more request
    hits = len(server.hits)
    assert [r.status for r in fetch("locomo", registry=reg)] == ["present"] and len(server.hits) == hits


@needs_locomo
def test_a_file_placed_by_hand_with_the_pinned_checksum_needs_no_network(home) -> None:
    body = _locomo_files()[0].read_bytes()
    f = DataFile("locomo", "locomo10.json", f"http://127.0.0.1:{_refusing_port()}/ok/x",
                 hashlib.sha256(body).hexdigest())
    f.destination().parent.mkdir(parents=True)
    f.destination().write_bytes(body)
    assert fetch_file(f) == (f.destination(), False)


@needs_locomo
def test_checksum_mismatch_is_refused_and_nothing_is_cached(server, home) -> None:
    f = _served_locomo(server, "wrong", "c.json")
    with pytest.raises(FetchError) as err:
        fetch_file(f)
    assert err.value.kind == "checksum"
    msg = str(err.value)
    assert "\n" not in msg and f.url in msg and f.sha256 in msg and "refused" in msg
    assert server.hits == ["/wrong/c.json"]  # it was downloaded, then refused
    assert _tree(home) == []  # no file, no temporary file, not even the folders


@needs_locomo
def test_checksum_mismatch_keeps_an_earlier_file_untouched(server, home) -> None:
    f = _served_locomo(server, "wrong", "c.json")
    f.destination().parent.mkdir(parents=True)
    f.destination().write_bytes(b"[]")  # a stale file under the name: pooch would update it
    with pytest.raises(FetchError, match=re.escape(f"the file there now (sha256 {hashlib.sha256(b'[]').hexdigest()}) "
                                                   "is kept as it is")):
        fetch_file(f)
    assert f.destination().read_bytes() == b"[]" and _tree(home) == ["locomo", "locomo/locomo10.json"]


@needs_locomo
def test_interrupted_download_leaves_nothing_half_written(server, home) -> None:
    f = _served_locomo(server, "truncate", "t.json")
    with pytest.raises(FetchError) as err:
        fetch_file(f)
    assert err.value.kind == "interrupted", str(err.value)
    assert "\n" not in str(err.value) and f.url in str(err.value)
    assert _tree(home) == []


def test_unreachable_server_is_one_line_naming_the_url_and_how_to_place_the_file(home) -> None:
    f = DataFile("agentfly", "memory.jsonl", f"http://127.0.0.1:{_refusing_port()}/ok/memory.jsonl", "ab" * 32)
    with pytest.raises(FetchError) as err:
        fetch_file(f, timeout=5)
    msg = str(err.value)
    assert err.value.kind == "unreachable"
    assert "\n" not in msg and msg.startswith(f"cannot reach {f.url}")
    assert str(f.destination()) in msg and f"sha256 {f.sha256}" in msg and "connection refused" in msg
    assert _tree(home.parent) == []  # the data folder was not even created


@needs_agentfly
def test_if_reachable_warns_per_unreachable_file_and_fetches_the_rest(server, home) -> None:
    memo = (AGENTFLY_DEV / "dummy_memo.jsonl").read_bytes()
    dead = f"http://127.0.0.1:{_refusing_port()}"
    reg = (DataFile("locomo", "locomo10.json", f"{dead}/ok/a", "00" * 32),
           DataFile("agentfly", "dummy_memo.jsonl", _url(server, "ok", "m"), _serve(server, "m", memo)),
           DataFile("agentfly", "memory.jsonl", f"{dead}/ok/b", "11" * 32))
    with pytest.raises(FetchError):
        fetch("all", registry=reg, timeout=5)  # without the option the first unreachable file is an error
    res = fetch("all", registry=reg, timeout=5, if_reachable=True)
    assert [r.status for r in res] == ["unreachable", "fetched", "unreachable"]
    assert all(r.message.startswith(f"cannot reach {r.file.url}") for r in res if r.status == "unreachable")
    assert _tree(home) == ["agentfly", "agentfly/dummy_memo.jsonl"]


@needs_agentfly
def test_if_reachable_still_fails_on_a_checksum_mismatch(server, home) -> None:
    memo = (AGENTFLY_DEV / "dummy_memo.jsonl").read_bytes()
    reg = (DataFile("agentfly", "dummy_memo.jsonl", _url(server, "wrong", "m"), _serve(server, "m", memo)),)
    with pytest.raises(FetchError, match="refused"):
        fetch("agentfly", registry=reg, if_reachable=True)


@needs_agentfly
def test_a_fault_before_the_move_into_place_leaves_nothing(server, home) -> None:
    memo = (AGENTFLY_DEV / "dummy_memo.jsonl").read_bytes()
    f = DataFile("agentfly", "dummy_memo.jsonl", _url(server, "ok", "m"), _serve(server, "m", memo))
    plan = FaultPlan({"data.fetch.download": 1})
    with pytest.raises(FaultInjected):
        fetch_file(f, fault_hook=plan)
    assert plan.calls == ["data.fetch.download"] and _tree(home) == []
    assert fetch_file(f, fault_hook=FaultPlan()) == (f.destination(), True)  # the same fetch without the fault


def test_the_pinned_registry_names_every_file_once() -> None:
    reg = datafetch.REGISTRY
    assert {(f.dataset, f.name) for f in reg} == {
        ("locomo", "locomo10.json"), ("agentfly", "memory.jsonl"), ("agentfly", "training_data.jsonl"),
        ("agentfly", "dummy_memo.jsonl"), ("agentfly", "deepresearcher.jsonl"),
        ("longmemeval", "longmemeval_oracle.json"), ("longmemeval", "longmemeval_s_cleaned.json"),
        ("longmemeval", "longmemeval_m_cleaned.json"), ("longmemeval", "longmemeval_s_original.json")}
    assert len({(f.dataset, f.name) for f in reg}) == len(reg) and len({f.sha256 for f in reg}) == len(reg)
    assert all(re.fullmatch(r"[0-9a-f]{64}", f.sha256) and f.url.startswith("https://") for f in reg)
    with pytest.raises(ValueError, match="unknown data set 'lcomo'"):
        datafetch.files_for("lcomo")


@needs_agentfly
def test_the_pinned_agentfly_hashes_match_the_development_copies() -> None:
    """The development AgentFly files are the pinned upstream files (LoCoMo's are another layout)."""
    for f in datafetch.files_for("agentfly"):
        assert datafetch.sha256_of(AGENTFLY_DEV / f.name) == f.sha256, f.name


# --------------------------------------------------------------------------------------------------- CLI
def _cli(args: list[str]) -> object:
    from harness.cli.main import app

    return CliRunner().invoke(app, args)


def _lines(text: str) -> list[str]:
    return [x for x in text.splitlines() if x.strip()]


def test_cli_fetch_offline_is_one_error_line_and_if_reachable_exits_0(home, monkeypatch) -> None:
    dead = f"http://127.0.0.1:{_refusing_port()}"
    monkeypatch.setattr(datafetch, "REGISTRY", (DataFile("locomo", "locomo10.json", f"{dead}/a", "00" * 32),
                                                DataFile("agentfly", "memory.jsonl", f"{dead}/b", "11" * 32)))
    r = _cli(["data", "fetch", "all", "--no-progress", "--timeout", "5"])
    assert r.exit_code == 1
    assert _lines(r.stderr) == [f"error: cannot reach {dead}/a (connection refused); to place it by hand, download "
                                f"it on a connected machine and save it as {home / 'locomo' / 'locomo10.json'} "
                                f"(sha256 {'00' * 32})"]
    r = _cli(["data", "fetch", "all", "--if-reachable", "--no-progress", "--timeout", "5"])
    assert r.exit_code == 0, r.output
    warn = _lines(r.stderr)
    assert len(warn) == 2 and all(w.startswith("warning: cannot reach ") for w in warn)
    assert "2 file(s) not fetched" in r.stdout and _tree(home) == []


@needs_agentfly
def test_cli_fetch_prints_every_path(server, home, monkeypatch) -> None:
    memo = (AGENTFLY_DEV / "dummy_memo.jsonl").read_bytes()
    monkeypatch.setattr(datafetch, "REGISTRY", (DataFile("agentfly", "dummy_memo.jsonl", _url(server, "ok", "m"),
                                                         _serve(server, "m", memo)),))
    r = _cli(["data", "fetch", "agentfly"])
    assert r.exit_code == 0, r.output
    assert f"wrote {home / 'agentfly' / 'dummy_memo.jsonl'}" in r.stdout and f"data folder: {home}" in r.stdout
    r = _cli(["data", "fetch", "nope"])
    [line] = _lines(r.stderr)  # an unknown data set name is a usage error
    assert r.exit_code == 2 and "invalid value for 'DATASET': 'nope'; choose agentfly or all" in line, line


# ---------------------------------------------------------------------------------------------- resolver
def test_resolver_order_explicit_then_environment_then_fetched_copy(home, tmp_path, monkeypatch) -> None:
    assert find_locomo() is None and find_agentfly() is None
    with pytest.raises(DataPathError, match="run `memsim data fetch locomo`"):
        resolve_locomo()
    with pytest.raises(DataPathError, match="run `memsim data fetch agentfly`"):
        resolve_agentfly()
    cached = home / "locomo" / "locomo10.json"
    cached.parent.mkdir(parents=True)
    cached.write_text("[]")
    (home / "agentfly").mkdir()
    (home / "agentfly" / "memory.jsonl").write_text("")
    assert resolve_locomo() == cached and resolve_agentfly() == home / "agentfly"
    env_l, env_a = tmp_path / "env.json", tmp_path / "env-af"
    env_l.write_text("[]")
    env_a.mkdir()
    (env_a / "dummy_memo.jsonl").write_text("")
    monkeypatch.setenv("MEMSIM_LOCOMO_DATA", str(env_l))
    monkeypatch.setenv("MEMSIM_AGENTFLY_DATA", str(env_a))
    assert resolve_locomo() == env_l and resolve_agentfly() == env_a
    exp_l, exp_a = tmp_path / "exp.json", tmp_path / "exp-af"
    exp_l.write_text("[]")
    exp_a.mkdir()
    (exp_a / "deepresearcher.jsonl").write_text("")
    assert resolve_locomo(exp_l) == exp_l and resolve_agentfly(exp_a) == exp_a


def test_a_missing_given_path_is_an_error_naming_it_never_a_fall_through(home, tmp_path, monkeypatch) -> None:
    cached = home / "locomo" / "locomo10.json"
    cached.parent.mkdir(parents=True)
    cached.write_text("[]")
    with pytest.raises(DataPathError, match=re.escape(f"{tmp_path / 'typo'}: no such file or folder (given "
                                                      "with --data)")):
        find_locomo(tmp_path / "typo")
    monkeypatch.setenv("MEMSIM_LOCOMO_DATA", str(tmp_path / "gone"))
    with pytest.raises(DataPathError, match=re.escape("(from $MEMSIM_LOCOMO_DATA)")):
        find_locomo()
    monkeypatch.setenv("MEMSIM_AGENTFLY_DATA", str(tmp_path / "gone"))
    with pytest.raises(DataPathError, match=re.escape("(from $MEMSIM_AGENTFLY_DATA)")):
        find_agentfly()
    monkeypatch.delenv("MEMSIM_AGENTFLY_DATA")
    (tmp_path / "empty").mkdir()
    with pytest.raises(DataPathError, match="holds none of memory.jsonl"):
        find_agentfly(tmp_path / "empty")


def test_the_locomo_loader_resolves_through_the_same_order(home, tmp_path, monkeypatch) -> None:
    from harness.workloads.locomo import LocomoDataError, find_locomo_path, resolve_locomo_path

    assert find_locomo_path() is None
    with pytest.raises(LocomoDataError, match="memsim data fetch locomo"):
        resolve_locomo_path()
    cached = home / "locomo" / "locomo10.json"
    cached.parent.mkdir(parents=True)
    cached.write_text("[]")
    assert resolve_locomo_path() == cached
    monkeypatch.setenv("MEMSIM_LOCOMO_DATA", str(tmp_path / "gone"))
    with pytest.raises(LocomoDataError, match="MEMSIM_LOCOMO_DATA"):
        resolve_locomo_path()  # the environment is not skipped for the fetched copy
    assert find_locomo_path() is None


def test_the_library_knows_no_sibling_data_folder() -> None:
    root = Path(__file__).resolve().parents[2]
    for rel in ("harness/datapaths.py", "harness/datafetch.py", "harness/ledger.py", "harness/workloads/locomo.py",
                "harness/claims/cross.py", "benchmarks/engines.py", "benchmarks/corpus.py"):
        text = (root / rel).read_text(encoding="utf-8")
        assert "shared/data" not in text and '"shared"' not in text and "/work/" not in text, rel


@needs_locomo
def test_the_canonical_layout_fetched_is_what_the_claims_and_benches_load(server, home) -> None:
    """All shipped conversations in one list-layout file, fetched, found without flags; the cross claims pick
    their conversation by sample id whichever file holds it."""
    from harness.claims import cross
    from harness.workloads.locomo import load_locomo

    files = [f for f in _locomo_files() if f.suffix == ".json"]
    body = _canonical(files)
    fetch("locomo", registry=(DataFile("locomo", "locomo10.json", _url(server, "ok", "l"), _serve(server, "l", body)),))
    convs = load_locomo(resolve_locomo())
    assert [c.sample_id for c in convs] == [json.loads(body)[i]["sample_id"] for i in range(len(files))]
    folder = {c.sample_id: c for c in load_locomo(LOCOMO_DEV)}
    for c in convs:  # the same turns and probes as the per-conversation files
        assert [t.dia_id for t in c.turns()] == [t.dia_id for t in folder[c.sample_id].turns()]
        assert len(c.probes) == len(folder[c.sample_id].probes)
    cross._conversation.cache_clear()
    try:
        picked = cross._conversation()
    finally:
        cross._conversation.cache_clear()
    if cross.CLAIM_CONVERSATION in folder:
        assert picked is not None and picked.sample_id == cross.CLAIM_CONVERSATION
        assert len(picked.turns()) == len(folder[cross.CLAIM_CONVERSATION].turns())
    else:
        assert picked is None


# -------------------------------------------------------------------------------------------- --data-dir
@pytest.mark.parametrize("args", [
    ["claims", "--id", "FRA-01", "--data-dir"],
    ["bench", "selectors", "--quick", "--data-dir"],
    ["agentfly", "run", "--limit", "1", "--data_dir"],
])
def test_a_mistyped_data_dir_is_one_error_line(args, home, tmp_path) -> None:
    typo = tmp_path / "agentfyl"
    r = _cli([*args, str(typo), *(["--out", str(tmp_path / "out")] if args[0] != "agentfly" else [])])
    assert r.exit_code == 1
    assert _lines(r.stderr) == [f"error: {typo}: no such folder (given with {args[-1]})"]
    assert not (tmp_path / "out").exists()


def test_claims_refuse_a_locomo_variable_naming_nothing(home, tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("MEMSIM_LOCOMO_DATA", str(tmp_path / "locmo"))
    r = _cli(["claims", "--design", "cross", "--out", str(tmp_path / "out")])
    assert r.exit_code == 1
    assert _lines(r.stderr) == [f"error: {tmp_path / 'locmo'}: no such file or folder (from $MEMSIM_LOCOMO_DATA)"]


# ------------------------------------------------------------------------------------------- data check
@needs_agentfly
def test_data_check_reports_every_file_when_a_folder_entry_is_a_directory(tmp_path) -> None:
    from harness.datacheck import DIRECTORY, check_agentfly

    root = tmp_path / "af"
    root.mkdir()
    for name in ("memory.jsonl", "dummy_memo.jsonl", "deepresearcher.jsonl"):
        (root / name).symlink_to(AGENTFLY_DEV / name)
    (root / "training_data.jsonl").mkdir()  # a known name that is a folder: that file is missing
    (root / "extra.jsonl").mkdir()  # another entry that is a folder: listed, nothing reads it
    (root / "notes.jsonl").write_text('{"a": 1}\n')
    reps = {Path(r.path).name: r for r in check_agentfly(root)}
    assert set(reps) == {"memory.jsonl", "dummy_memo.jsonl", "deepresearcher.jsonl", "training_data.jsonl",
                         "extra.jsonl", "notes.jsonl"}
    assert reps["training_data.jsonl"].errors == ["is a directory, not a file"]
    assert reps["extra.jsonl"].kind == DIRECTORY and reps["extra.jsonl"].usable
    assert reps["notes.jsonl"].rows == 1 and reps["memory.jsonl"].rows > 0


@needs_locomo
def test_data_check_locomo_folder_with_a_directory_and_a_duplicate_conversation(tmp_path) -> None:
    from harness.datacheck import DIRECTORY, check_locomo

    src = [f for f in _locomo_files() if f.suffix == ".json"][0]
    folder = tmp_path / "lo"
    folder.mkdir()
    (folder / src.name).write_bytes(src.read_bytes())
    (folder / "sub.json").mkdir()
    reps = check_locomo(folder)
    assert [(Path(r.path).name, r.kind, r.usable) for r in reps] == [
        (src.name, "LoCoMo conversations", True), ("sub.json", DIRECTORY, True)]
    # the same conversation again, in the canonical layout: refused on the later file, as the loader refuses it
    (folder / "zz-locomo10.json").write_bytes(_canonical([src]))
    reps = {Path(r.path).name: r for r in check_locomo(folder)}
    sid = json.loads(src.read_text(encoding="utf-8")).get("sample_id", src.stem)
    assert reps[src.name].usable
    assert any(e.startswith(f"conversation {sid} is already in {folder / src.name}")
               for e in reps["zz-locomo10.json"].errors)
    from harness.workloads.locomo import LocomoDataError, load_locomo

    with pytest.raises(LocomoDataError, match="already loaded"):
        load_locomo(folder)
    # a copy under another name loads twice (two ids): a quirk, not an error
    (folder / "zz-locomo10.json").unlink()
    (folder / "copy.json").write_bytes(src.read_bytes())
    reps = {Path(r.path).name: r for r in check_locomo(folder)}
    assert reps["copy.json"].usable and any("same turns" in q for q in reps[src.name].quirks + reps["copy.json"].quirks)


def test_cli_fetch_list_names_url_place_and_sha256_without_the_network(home, tmp_path, monkeypatch) -> None:
    body = b'{"question": "q", "plan": "p", "reward": 1}\n'
    reg = (DataFile("agentfly", "dummy_memo.jsonl", f"http://127.0.0.1:{_refusing_port()}/m",
                    hashlib.sha256(body).hexdigest()),
           DataFile("agentfly", "memory.jsonl", f"http://127.0.0.1:{_refusing_port()}/p", "22" * 32))
    monkeypatch.setattr(datafetch, "REGISTRY", reg)
    (home / "agentfly").mkdir(parents=True)
    (home / "agentfly" / "dummy_memo.jsonl").write_bytes(body)
    (home / "agentfly" / "memory.jsonl").write_bytes(body)
    r = _cli(["data", "fetch", "agentfly", "--list"])
    assert r.exit_code == 0, r.output
    assert _lines(r.stdout) == [
        "agentfly/dummy_memo.jsonl: present", f"  url    {reg[0].url}",
        f"  place  {home / 'agentfly' / 'dummy_memo.jsonl'}", f"  sha256 {reg[0].sha256}",
        "agentfly/memory.jsonl: checksum differs", f"  url    {reg[1].url}",
        f"  place  {home / 'agentfly' / 'memory.jsonl'}", f"  sha256 {reg[1].sha256}"]


@needs_agentfly
def test_data_check_without_options_checks_the_fetched_copy(home) -> None:
    (home / "agentfly").mkdir(parents=True)
    for f in datafetch.files_for("agentfly"):
        (home / "agentfly" / f.name).symlink_to(AGENTFLY_DEV / f.name)
    r = _cli(["data", "check"])
    assert r.exit_code == 0, r.output
    assert f"AgentFly: {home / 'agentfly'}" in r.stdout and "LoCoMo: not found" in r.stdout
    assert "4 file(s) usable" in r.stdout


# ------------------------------------------------------------------------------------------- LongMemEval
def _lme_bytes() -> bytes:
    from tests.harness import lme_fixture

    return json.dumps(lme_fixture.quirky_questions(), indent=2).encode()


def test_longmemeval_fetch_names_pin_the_spec_revisions_and_sizes() -> None:
    """The four LongMemEval files: the cleaned revision for oracle/S/M, the original revision's extension-less S
    (stored under a name that says it is the original), sizes and hashes as the spec's table gives them."""
    by_key = {f.key: f for f in datafetch.REGISTRY if f.key}
    assert set(by_key) == {"longmemeval-oracle", "longmemeval-s", "longmemeval-m", "longmemeval-s-original"}
    cleaned = "https://huggingface.co/datasets/xiaowu0162/longmemeval-cleaned/resolve/" \
              "98d7416c24c778c2fee6e6f3006e7a073259d48f/"
    original = "https://huggingface.co/datasets/xiaowu0162/longmemeval/resolve/2ec2a557f339b6c0369619b1ed5793734cc87533/"
    assert by_key["longmemeval-s"].url == cleaned + "longmemeval_s_cleaned.json"
    assert by_key["longmemeval-m"].size == 2_737_100_077 and by_key["longmemeval-oracle"].size == 15_388_478
    assert by_key["longmemeval-s-original"].url == original + "longmemeval_s"
    assert by_key["longmemeval-s-original"].name == "longmemeval_s_original.json"
    assert by_key["longmemeval-s-original"].sha256.startswith("08d8dad4")


def test_a_bare_fetch_takes_the_oracle_file_only_and_big_files_only_when_named() -> None:
    bare = datafetch.files_for("all")
    assert [f.name for f in bare if f.dataset == "longmemeval"] == ["longmemeval_oracle.json"]
    assert {f.dataset for f in bare} == {"locomo", "agentfly", "longmemeval"}
    assert [f.name for f in datafetch.files_for("longmemeval-m")] == ["longmemeval_m_cleaned.json"]
    assert [f.name for f in datafetch.files_for("agentfly")] == [
        "memory.jsonl", "training_data.jsonl", "dummy_memo.jsonl", "deepresearcher.jsonl"]
    with pytest.raises(ValueError) as err:  # one name for 3 GB of downloads: refused, naming the files
        datafetch.files_for("longmemeval")
    msg = str(err.value)
    assert "fetched file by file" in msg and "longmemeval-m (2.5 GiB)" in msg and "longmemeval-s (265 MiB)" in msg


def test_cli_fetch_longmemeval_group_is_a_usage_error_and_list_names_the_files(home) -> None:
    r = _cli(["data", "fetch", "longmemeval"])
    [line] = _lines(r.stderr)
    assert r.exit_code == 2 and "longmemeval-oracle (15 MiB)" in line, line
    r = _cli(["data", "fetch", "nope"])
    assert r.exit_code == 2 and "longmemeval-s-original or all" in _lines(r.stderr)[0]
    r = _cli(["data", "fetch", "longmemeval-s", "--list"])
    assert r.exit_code == 0 and _lines(r.stdout)[0] == "longmemeval/longmemeval_s_cleaned.json: absent"
    assert f"  place  {home / 'longmemeval' / 'longmemeval_s_cleaned.json'}" in r.stdout


def test_longmemeval_fetch_over_loopback_then_found_by_the_resolver(server, home, monkeypatch) -> None:
    from harness.workloads.longmemeval import describe_data, resolve_longmemeval_path

    body = _lme_bytes()
    reg = (DataFile("longmemeval", "longmemeval_oracle.json", _url(server, "ok", "o.json"),
                    _serve(server, "o.json", body), len(body), key="longmemeval-oracle"),
           DataFile("longmemeval", "longmemeval_s_cleaned.json", _url(server, "ok", "s.json"),
                    _serve(server, "s.json", body + b" "), len(body) + 1, key="longmemeval-s", default=False))
    res = fetch("all", registry=reg)
    assert [r.file.name for r in res] == ["longmemeval_oracle.json"] and server.hits == ["/ok/o.json"]
    assert resolve_longmemeval_path() == home / "longmemeval" / "longmemeval_oracle.json"
    assert [r.status for r in fetch("longmemeval-s", registry=reg)] == ["fetched"]
    assert resolve_longmemeval_path() == home / "longmemeval" / "longmemeval_s_cleaned.json"  # S when several
    assert "not a published release" in describe_data(resolve_longmemeval_path())


@pytest.mark.parametrize(("mode", "kind"), [("truncate", "interrupted"), ("wrong", "checksum")])
def test_longmemeval_bad_download_leaves_nothing_under_the_name(server, home, mode, kind) -> None:
    body = _lme_bytes()
    f = DataFile("longmemeval", "longmemeval_s_cleaned.json", _url(server, mode, "s.json"),
                 _serve(server, "s.json", body), len(body), key="longmemeval-s", default=False)
    with pytest.raises(FetchError) as err:
        fetch("longmemeval-s", registry=(f,))
    assert err.value.kind == kind and "\n" not in str(err.value) and f.url in str(err.value)
    assert _tree(home) == []  # no file, no temporary file, no folder


def test_longmemeval_refused_server_is_one_line_and_leaves_nothing(home) -> None:
    f = DataFile("longmemeval", "longmemeval_oracle.json", f"http://127.0.0.1:{_refusing_port()}/o.json",
                 "cd" * 32, 10, key="longmemeval-oracle")
    with pytest.raises(FetchError) as err:
        fetch("longmemeval-oracle", registry=(f,), timeout=5)
    assert err.value.kind == "unreachable" and "connection refused" in str(err.value)
    assert str(f.destination()) in str(err.value) and "\n" not in str(err.value)
    assert _tree(home.parent) == []
