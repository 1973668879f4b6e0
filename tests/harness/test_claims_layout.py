"""The claims package stays split by spec section: no oversized module, Tortoise claims in tortoise_* modules."""

from __future__ import annotations

from pathlib import Path

from harness.claims import all_claims

CLAIMS_DIR = Path(__file__).resolve().parents[2] / "harness" / "claims"

# spec section module -> the TOR claims it holds
TORTOISE_SECTIONS = {
    "tortoise_capture": {f"TOR-{i:02d}" for i in range(1, 10)},
    "tortoise_admission": {"TOR-10", "TOR-11", "TOR-12", "TOR-13", "TOR-14", "TOR-41"},
    "tortoise_lifecycle": {"TOR-23", "TOR-24", "TOR-25", "TOR-27", "TOR-49"},
    "tortoise_digest": {"TOR-30", "TOR-31", "TOR-32", "TOR-33"},
    "tortoise_volunteer": {"TOR-34", "TOR-35", "TOR-36", "TOR-37", "TOR-38", "TOR-39", "TOR-40", "TOR-47"},
    "tortoise_spool": {"TOR-42", "TOR-43", "TOR-51", "TOR-52"},
    "tortoise_expansion": {"TOR-44", "TOR-45", "TOR-46", "TOR-48"},
    "tortoise_hosts": {f"HOST-{i:02d}" for i in range(1, 11)},
}


def test_no_claims_module_is_oversized():
    sizes = {p.name: len(p.read_text(encoding="utf-8").splitlines()) for p in CLAIMS_DIR.glob("*.py")}
    assert "tortoise.py" not in sizes
    assert max(sizes.values()) <= 800, sizes


def test_tortoise_claims_live_in_their_section_module():
    by_module: dict[str, set[str]] = {}
    for c in all_claims(design="tortoise"):
        module = c.demonstrate.__module__.rsplit(".", 1)[1]
        assert module.startswith("tortoise_"), (c.id, module)
        by_module.setdefault(module, set()).add(c.id)
    for module, ids in TORTOISE_SECTIONS.items():
        assert by_module.get(module) == ids, module
    assert len(all_claims(design="tortoise")) == 62
