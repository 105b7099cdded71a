"""An error's fingerprint: its text with the parts that vary between occurrences of one failure
masked (URLs, UUIDs, IP addresses, host:port, hex ids, numbers), hashed short, so that dead
letters that failed the same way group together (issue 31). Pure: reads and writes nothing.
"""

from __future__ import annotations

import functools
import hashlib
import re
from collections.abc import Callable

MAX_CHARS = 1_000  # of an error read: a longer tail is not part of its fingerprint
FINGERPRINT = re.compile(r"[0-9a-f]{16}")  # what fingerprint() gives

# Applied in order (a URL may hold every later kind, an address a number), each only to a text
# holding its trigger (a plain substring test: most errors hold no URL, UUID or IPv6 address).
# A token's edges are any character that is not a letter or digit, so `job_0193ab...` masks to
# `job_<hex>`. Patterns start with a character class and look behind after it, so the regex
# engine skips in C the positions that cannot start a match; a candidate that needs a check the
# pattern cannot say cheaply is checked by its mask function (and left as it was if it fails).
_ALNUM = "0-9A-Za-z"
_HEX = "0-9A-Fa-f"
_AFTER = f"(?![{_ALNUM}])"
_HEX_LETTERS = frozenset("abcdefABCDEF")
_LETTERS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")
_DIGITS = frozenset("0123456789")

Mask = str | Callable[[re.Match[str]], str]


def _ipv6(found: re.Match[str]) -> str:
    text = found.group()
    is_address = text.count(":") >= 2 and ("::" in text or not _HEX_LETTERS.isdisjoint(text))
    return "<ip>" if is_address else text


def _host_port(found: re.Match[str]) -> str:
    return "<host:port>" if not _LETTERS.isdisjoint(found.group(1)) else found.group()


def _hex_id(found: re.Match[str]) -> str:
    text = found.group()
    is_id = not _HEX_LETTERS.isdisjoint(text) and not _DIGITS.isdisjoint(text)
    return "<hex>" if is_id else text


_MASKS: tuple[tuple[str, re.Pattern[str], Mask], ...] = (
    ("://", re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://[^\s'\"<>()\[\]{}]+"), "<url>"),
    (
        "-",
        re.compile(
            f"[{_HEX}](?<![{_ALNUM}][{_HEX}])[{_HEX}]{{7}}-[{_HEX}]{{4}}-[{_HEX}]{{4}}-"
            f"[{_HEX}]{{4}}-[{_HEX}]{{12}}{_AFTER}"
        ),
        "<uuid>",
    ),
    (  # IPv4, with an optional port
        ".",
        re.compile(rf"\d(?<![{_ALNUM}.]\d)\d{{0,2}}(?:\.\d{{1,3}}){{3}}(?::\d{{1,5}})?{_AFTER}"),
        "<ip>",
    ),
    ("[", re.compile(rf"\[[{_HEX}:.]*:[{_HEX}:.]*\](?::\d{{1,5}})?"), "<ip>"),  # [IPv6]:port
    (  # IPv6: two colons or more, and "::" or a hex letter
        ":",
        re.compile(rf"[{_HEX}:](?<![{_ALNUM}:][{_HEX}:])[{_HEX}:]*:[{_HEX}:]*{_AFTER}"),
        _ipv6,
    ),
    (  # host:port: a DNS name with a letter in it, then a port
        ":",
        re.compile(rf"([{_ALNUM}](?<![{_ALNUM}.-][{_ALNUM}])[{_ALNUM}.-]*):\d{{1,5}}{_AFTER}"),
        _host_port,
    ),
    ("0", re.compile(rf"0(?<![{_ALNUM}]0)[xX][{_HEX}]+{_AFTER}"), "<hex>"),
    (  # hex ids: 6 or more hex digits, letters and digits both (not "deadbeef", not 123456)
        "",
        re.compile(rf"[{_HEX}](?<![{_ALNUM}][{_HEX}])[{_HEX}]{{5,}}{_AFTER}"),
        _hex_id,
    ),
    # Numbers, but not an HTTP status after "http " (a 404 and a 500 are different failures).
    ("", re.compile(r"\d(?<![0-9A-Za-z]\d)(?<![Hh][Tt][Tt][Pp] \d)\d*(?:\.\d+)?"), "<n>"),
)
_SPACES = re.compile(r"\s+")


def normalise(error: str | None) -> str:
    """The error text with its varying parts masked and its whitespace collapsed ("" for
    none)."""
    if not error:
        return ""
    text = error[:MAX_CHARS]
    for trigger, pattern, mask in _MASKS:
        if trigger in text:
            text = pattern.sub(mask, text)
    return _SPACES.sub(" ", text).strip()


def fingerprint(error: str | None) -> str:
    """16 hex digits naming the normalised error (SHA-256's first 64 bits)."""
    return _fingerprint(error[:MAX_CHARS] if error else None)


# One error text often fails many runs. Keyed by at most MAX_CHARS characters: at most about
# 16 MB of keys however long the errors (a nack's may hold 4,000 characters).
@functools.lru_cache(maxsize=16_384)
def _fingerprint(head: str | None) -> str:
    return hashlib.sha256(normalise(head).encode()).hexdigest()[:16]
