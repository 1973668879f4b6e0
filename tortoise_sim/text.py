"""Text helpers shared by capture, search and volunteering: tokens, stopwords, synopsis/label, hashed ids."""

from __future__ import annotations

import hashlib
import re

__all__ = [
    "STOPWORDS", "significant_tokens", "synopsis", "label_of", "sha256_hex", "pt_id", "ev_id", "object_id",
    "subject_id", "normalise_content",
]

# Effective upstream stopword list (spec §6.11 C5, replacing the [SIM] list of §6.2); used for every
# "significant token" computation (search lexical leg, marker search keys, source topics, volunteering).
STOPWORDS: frozenset[str] = frozenset(
    "about again also been could does from have here just know more most over please should some than that then "
    "there these they this those very were what will with would your".split()
)
_TOKEN = re.compile(r"[a-z0-9']+")
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
_WS = re.compile(r"\s+")


def significant_tokens(text: str | None) -> list[str]:
    """Lower-case ``[a-z0-9']+`` matches of length >= 4 minus stopwords, in order (duplicates kept)."""
    if not text:
        return []
    return [t for t in _TOKEN.findall(text.lower()) if len(t) >= 4 and t not in STOPWORDS]


def synopsis(content: str | None, limit: int = 160) -> str:
    """Spec §6.8: strip control characters, collapse whitespace, cut to 159 + '…' when over ``limit``."""
    text = _WS.sub(" ", _CONTROL.sub("", content or "")).strip()
    if len(text) > limit:
        text = text[: limit - 1].rstrip() + "\u2026"
    return text


def label_of(content: str | None) -> str:
    """Pointer label from the *raw* content (spec §6.11 C9): first <= 6 ``str.split`` tokens, right-strip
    ``,:;. ``, then cut to 48 characters (a trailing ``,``/``.``/space may remain); empty ⇒ ``content[:48]``."""
    raw = content or ""
    text = " ".join(raw.split()[:6]).rstrip(",:;. ")[:48]
    return text if text else raw[:48]


def sha256_hex(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def pt_id(content: str) -> str:
    """Extraction point id: ``pt_`` + sha256(content)[:62] (spec §3.6)."""
    return "pt_" + sha256_hex(content)[:62]


def ev_id(content: str) -> str:
    return "ev_" + sha256_hex(content)[:62]


def object_id(name: str) -> str:
    return "obj-" + sha256_hex("Object:" + name)[:26]


def subject_id(name: str) -> str:
    return "sub-" + sha256_hex("Subject:" + name)[:26]


def normalise_content(text: str | None) -> str:
    """Dedupe/consolidation key (spec §3.6 gate 2): lower-case, whitespace runs -> one space, strip."""
    return _WS.sub(" ", (text or "").lower()).strip()
