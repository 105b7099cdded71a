"""Payload encryption at rest: sealing, opening, key files and key rotation."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from schedd.errors import ConfigError
from schedd.sealing import PREFIX, VERBATIM, PayloadKeys, PayloadUnreadable, new_key_line

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text() | st.floats(allow_nan=False),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=12,
)


def keys_from(tmp_path: Path, *lines: str) -> PayloadKeys:
    path = tmp_path / "payload.keys"
    path.write_text("\n".join(lines) + "\n")
    return PayloadKeys.from_file(path)


def key(key_id: str, byte: int) -> tuple[str, bytes]:
    return key_id, bytes([byte]) * 32


@given(JSON)
def test_what_is_sealed_opens_to_the_same_value(payload: Any) -> None:
    keys = PayloadKeys([key("k1", 1)])
    sealed = keys.seal(payload)
    assert isinstance(sealed, str) and sealed.startswith(PREFIX + "k1:")
    assert keys.open(sealed) == payload
    assert json.loads(keys.open_text(json.dumps(sealed))) == payload


def test_without_keys_payloads_pass_through() -> None:
    keys = PayloadKeys()
    assert not keys.enabled
    assert keys.seal({"a": 1}) == {"a": 1}
    assert keys.open({"a": 1}) == {"a": 1}
    assert keys.open_text('{"a":1}') == '{"a":1}'


def test_the_same_payload_seals_differently_each_time() -> None:
    keys = PayloadKeys([key("k1", 1)])
    assert keys.seal("secret") != keys.seal("secret")  # a fresh nonce each time


def test_rotation_old_payloads_open_new_ones_use_the_new_key() -> None:
    old = PayloadKeys([key("k1", 1)])
    sealed_before = old.seal({"n": 1})
    rotated = PayloadKeys([key("k2", 2), key("k1", 1)])  # k2 promoted, k1 kept to open
    assert rotated.open(sealed_before) == {"n": 1}
    assert rotated.seal({"n": 2}).startswith(PREFIX + "k2:")
    retired = PayloadKeys([key("k2", 2)])
    with pytest.raises(PayloadUnreadable, match="'k1', not configured"):
        retired.open(sealed_before)


def test_tampering_or_another_keys_id_is_refused() -> None:
    keys = PayloadKeys([key("k1", 1), key("k2", 2)])
    sealed = keys.seal({"n": 1})
    blob = bytearray(base64.b64decode(sealed.rsplit(":", 1)[1]))
    blob[-1] ^= 1
    tampered = f"{PREFIX}k1:{base64.b64encode(bytes(blob)).decode()}"
    relabelled = sealed.replace(PREFIX + "k1:", PREFIX + "k2:")
    for bad in (tampered, relabelled, PREFIX + "k1:not base64!"):
        with pytest.raises(PayloadUnreadable, match="damaged"):
            keys.open(bad)


def test_a_key_file_reads_comments_and_refuses_bad_lines(tmp_path: Path) -> None:
    good = new_key_line("2026-11")
    keys = keys_from(tmp_path, "# current key first", good, "", new_key_line("2026-10"))
    assert keys.seal(1).startswith(PREFIX + "2026-11:")
    secret_part = good.split()[1]
    for lines, message in (
        ((), "holds no key"),
        (("k1",), "expected '<key id> <base64"),
        (("k 1 xx",), "expected '<key id> <base64"),
        (("k1 not-base64!",), "not base64"),
        (("k1 " + base64.b64encode(b"short").decode(),), "must be 32 bytes, got 5"),
        ((good, good), "names a key id twice"),
    ):
        with pytest.raises(ConfigError, match=message) as caught:
            keys_from(tmp_path, *lines)
        assert secret_part not in str(caught.value)
    with pytest.raises(ConfigError, match="cannot read"):
        PayloadKeys.from_file(tmp_path / "missing.keys")


LOOKALIKES = [
    PREFIX + "junk",
    PREFIX + "k1:" + base64.b64encode(bytes(40)).decode(),  # the shape of a real sealed payload
    PREFIX + "k1:not base64!",
    PREFIX,
    VERBATIM + "x",
    VERBATIM,
    "schedd:sealed:v2:k1:abc",
]


@pytest.mark.parametrize("payload", LOOKALIKES)
@pytest.mark.parametrize("keys", [PayloadKeys(), PayloadKeys([key("k1", 1)])], ids=["none", "k1"])
def test_a_tenant_string_like_a_sealed_payload_round_trips_exactly(
    keys: PayloadKeys, payload: str
) -> None:
    stored = keys.seal(payload)
    assert keys.open(stored) == payload
    assert json.loads(keys.open_text(json.dumps(stored))) == payload
    assert keys.open({"nested": stored}) == {"nested": stored}  # only the top level is sealed


def test_a_plain_lookalike_is_never_stored_as_ciphertext_without_keys() -> None:
    stored = PayloadKeys().seal(PREFIX + "k1:AAAA")
    assert stored == VERBATIM + PREFIX + "k1:AAAA"
    # A node that has key k1 reads it as the tenant's string too, not as a sealed payload.
    assert PayloadKeys([key("k1", 1)]).open(stored) == PREFIX + "k1:AAAA"


def test_what_older_versions_stored_reads_as_before() -> None:
    keys = PayloadKeys([key("k1", 1)])
    sealed = keys.seal({"n": 1})  # the sealed form is unchanged
    assert keys.open(sealed) == {"n": 1}
    assert PayloadKeys().open("plain") == "plain"
    # A tenant's string stored raw without keys: seal() never writes a key id without a ':'
    # after it, so it cannot be ciphertext and reads as the string it was.
    assert PayloadKeys().open(PREFIX + "junk") == PREFIX + "junk"
    assert keys.open_text(json.dumps(PREFIX + "junk")) == json.dumps(PREFIX + "junk")
    # One shaped like ciphertext stays unreadable, as it always was: it cannot be told apart.
    with pytest.raises(PayloadUnreadable):
        PayloadKeys().open(PREFIX + "k9:AAAA")


@given(st.text())
def test_without_keys_every_string_round_trips(text: str) -> None:
    keys = PayloadKeys()
    for payload in (text, PREFIX + text, VERBATIM + text):
        assert keys.open(keys.seal(payload)) == payload
        assert json.loads(keys.open_text(json.dumps(keys.seal(payload)))) == payload
