"""The SSRF guard: static URL checks, numeric host spellings, address classes, DNS pinning."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Sequence
from ipaddress import IPv4Address, IPv4Network, IPv6Address, IPv6Network, ip_network

import pytest
from hypothesis import given
from hypothesis import strategies as st

from schedd.errors import InvalidRequest
from schedd.guard.ssrf import (
    Address,
    BlockedTarget,
    Network,
    check_url,
    host_matches,
    is_blocked,
    parse_ipv4,
    resolve_and_check,
    system_resolver,
)

FAKE_DNS: dict[str, list[str]] = {
    "public.example": ["93.184.216.34", "2606:2800:220:1:248:1893:25c8:1946"],
    "api.acme.example": ["93.184.216.34"],
    "v6only.example": ["2606:4700::1111"],
    "localhost": ["127.0.0.1", "::1"],
    "internal.example": ["192.168.1.10"],
    "mixed.example": ["93.184.216.34", "10.0.0.7"],
    "rebind.example": ["8.8.8.8", "::ffff:169.254.169.254"],
    "nat64.example": ["64:ff9b::a00:1"],
    "empty.example": [],
}


class FakeResolver:
    """Answers from FAKE_DNS and records every lookup; never touches the network."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, int]] = []

    async def __call__(self, host: str, port: int) -> Sequence[str]:
        self.calls.append((host, port))
        if host not in FAKE_DNS:
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        return FAKE_DNS[host]


def guard(url: str, allow: Sequence[Network] = (), allowed_hosts: Sequence[str] = ()) -> Address:
    """The full check a delivery makes: static checks, then resolve and pin."""
    target = check_url(url, allow=allow, allowed_hosts=allowed_hosts)
    return asyncio.run(resolve_and_check(target, allow, FakeResolver()))


OK = "ok"
# (url, "ok" or a fragment of BlockedTarget.reason)
CASES = [
    # numeric spellings of IPv4, normalised the way inet_aton reads them
    ("http://127.0.0.1/", "loopback"),
    ("http://2130706433/", "loopback"),
    ("http://0177.0.0.1/", "loopback"),
    ("http://0x7f.1/", "loopback"),
    ("http://127.1/", "loopback"),
    ("http://0x7f000001/", "loopback"),
    ("http://017700000001/", "loopback"),
    ("http://0X7F.0.0.1/", "loopback"),
    ("http://127.0.0.1./", "loopback"),
    ("http://\uff11\uff12\uff17\uff0e\uff10\uff0e\uff10\uff0e\uff11/", "loopback"),
    ("http://0/", "unspecified"),
    ("http://0.0.0.0:8080/", "unspecified"),
    ("http://10.1.2.3/", "private"),
    ("http://012.0.0.1/", "private"),
    ("http://167772161/", "private"),
    ("http://172.16.0.1/", "private"),
    ("http://172.31.255.255/", "private"),
    ("http://192.168.0.1/", "private"),
    ("http://0xc0.0xa8.1/", "private"),
    ("http://169.254.169.254/latest/meta-data/", "link-local"),
    ("http://0xa9fea9fe/", "link-local"),
    ("http://100.64.0.1/", "cgnat"),
    ("http://100.127.255.254/", "cgnat"),
    ("http://224.0.0.1/", "multicast"),
    ("http://255.255.255.255/", "broadcast"),
    ("http://240.0.0.1/", "reserved"),
    ("http://192.0.2.10/", "reserved"),
    ("http://1.2.3.4.5/", "invalid numeric host"),
    ("http://256.0.0.1/", "invalid numeric host"),
    ("http://08.0.0.1/", "invalid numeric host"),
    ("http://0x100000000/", "invalid numeric host"),
    ("http://172.32.0.1/", OK),
    ("http://8.8.8.8/", OK),
    ("http://0x08080808/", OK),
    # IPv6 literals and IPv4 embedded in IPv6
    ("http://[::1]/", "loopback"),
    ("http://[0:0:0:0:0:0:0:1]:8080/", "loopback"),
    ("http://[::]/", "unspecified"),
    ("http://[::ffff:127.0.0.1]/", "loopback"),
    ("http://[::ffff:7f00:1]/", "loopback"),
    ("http://[::ffff:a9fe:a9fe]/", "link-local"),
    ("http://[::ffff:10.0.0.1]/", "private"),
    ("http://[::127.0.0.1]/", "loopback"),
    ("http://[::8.8.8.8]/", "reserved"),
    ("http://[fc00::1]/", "private"),
    ("http://[fd12:3456::1]/", "private"),
    ("http://[fec0::1]/", "private"),
    ("http://[fe80::1]/", "link-local"),
    ("http://[fe80::1%25eth0]/", "invalid IPv6 literal"),
    ("http://[ff02::1]/", "multicast"),
    ("http://[2002:7f00:1::]/", "loopback"),
    ("http://[2002:a9fe:a9fe::1]/", "link-local"),
    ("http://[64:ff9b::10.0.0.1]/", "private"),
    ("http://[64:ff9b:1::1]/", "private"),
    ("http://[2001:db8::1]/", "reserved"),
    ("http://[2001::1]/", "reserved"),
    ("http://[127.0.0.1]/", "not a valid URL"),
    ("http://[64:ff9b::8.8.8.8]/", OK),
    ("http://[::ffff:8.8.8.8]/", OK),
    ("http://[2606:4700::1111]:8443/", OK),
    # userinfo, schemes, hosts
    ("http://user:pass@public.example/", "userinfo"),
    ("http://user@public.example/", "userinfo"),
    ("http://public.example@127.0.0.1/", "userinfo"),
    ("http://@public.example/", "userinfo"),
    ("http://127.0.0.1\\@public.example/", "userinfo"),
    ("ftp://public.example/", "scheme"),
    ("file:///etc/passwd", "scheme"),
    ("gopher://127.0.0.1:6379/_INFO", "scheme"),
    ("javascript:alert(1)", "scheme"),
    ("//public.example/", "scheme"),
    ("http:///path", "no host"),
    ("http://local%68ost/", "invalid host name"),
    ("http://public.example\\.127.0.0.1/", "invalid host name"),
    ("http://a..b.example/", "invalid host name"),
    # ports
    ("http://public.example:22/", "port 22"),
    ("http://public.example:0/", "port 0"),
    ("http://public.example:1023/", "port 1023"),
    ("http://public.example:65536/", "not a valid URL"),
    ("http://public.example:http/", "not a valid URL"),
    ("http://public.example:1024/", OK),
    ("https://public.example:65535/", OK),
    ("http://public.example:443/", OK),
    ("https://public.example:80/", OK),
    # names resolved through the fake DNS: any bad address blocks the host
    ("http://localhost:8080/", "loopback"),
    ("http://internal.example/", "private"),
    ("http://mixed.example/", "private"),
    ("http://rebind.example/", "link-local"),
    ("http://nat64.example/", "private"),
    ("http://public.example/hook?x=1", OK),
    ("https://v6only.example/", OK),
    ("HTTP://PUBLIC.EXAMPLE./", OK),
]


@pytest.mark.parametrize(("url", "expected"), CASES, ids=[url for url, _ in CASES])
def test_ssrf_table(url: str, expected: str) -> None:
    if expected == OK:
        guard(url)
        return
    with pytest.raises(BlockedTarget) as info:
        guard(url)
    assert expected in info.value.reason


def test_the_table_is_large_enough() -> None:
    assert len(CASES) >= 35


def test_a_literal_ip_is_checked_without_dns() -> None:
    resolver = FakeResolver()
    target = check_url("http://[2606:4700::1111]/")
    assert asyncio.run(resolve_and_check(target, (), resolver)) == IPv6Address("2606:4700::1111")
    assert resolver.calls == []
    with pytest.raises(BlockedTarget, match="loopback"):
        check_url("http://0x7f.1/")


def test_a_name_is_pinned_to_its_first_checked_address() -> None:
    resolver = FakeResolver()
    target = check_url("https://public.example/x")
    assert asyncio.run(resolve_and_check(target, (), resolver)) == IPv4Address("93.184.216.34")
    assert resolver.calls == [("public.example", 443)]


def test_lookup_failures_propagate_as_oserror() -> None:
    with pytest.raises(socket.gaierror):
        guard("http://nxdomain.example/")
    with pytest.raises(OSError, match="no addresses"):
        guard("http://empty.example/")


def test_default_resolver_reads_a_numeric_host_without_dns() -> None:
    assert asyncio.run(system_resolver("127.0.0.1", 80)) == ["127.0.0.1"]


# ---------------------------------------------------------------- operator allow-list


@pytest.mark.parametrize(
    ("url", "cidrs"),
    [
        ("http://127.0.0.1:8080/", ["127.0.0.0/8"]),
        ("http://0x7f.1:8080/", ["127.0.0.0/8"]),
        ("http://localhost:8080/", ["127.0.0.0/8", "::1/128"]),
        ("http://[::ffff:127.0.0.1]/", ["127.0.0.0/8"]),
        ("http://internal.example/", ["192.168.1.0/24"]),
        ("http://[fd00::5]/", ["fd00::/8"]),
    ],
)
def test_allow_cidrs_override_the_blocks(url: str, cidrs: list[str]) -> None:
    guard(url, allow=[ip_network(cidr) for cidr in cidrs])


def test_allow_cidrs_do_not_open_anything_else() -> None:
    allow = [IPv4Network("127.0.0.0/8")]
    with pytest.raises(BlockedTarget, match="private"):
        guard("http://10.0.0.1/", allow=allow)
    with pytest.raises(BlockedTarget, match="loopback"):  # localhost also answers ::1
        guard("http://localhost/", allow=allow)


def test_allowed_ports_extra() -> None:
    assert check_url("http://public.example:22/", allowed_ports_extra=[22]).port == 22
    with pytest.raises(BlockedTarget, match="port 23"):
        check_url("http://public.example:23/", allowed_ports_extra=[22])


# ---------------------------------------------------------------- tenant allowed_hosts


@pytest.mark.parametrize(
    ("host", "patterns", "matches"),
    [
        ("api.acme.example", ["*.acme.example"], True),
        ("a.b.acme.example", ["*.acme.example"], True),
        ("API.Acme.Example.", ["*.acme.example"], True),
        ("api.acme.example", ["*.ACME.example."], True),
        ("acme.example", ["*.acme.example"], False),
        ("evilacme.example", ["*.acme.example"], False),
        ("acme.example.evil.com", ["*.acme.example"], False),
        ("api.acme.example", ["api.acme.example"], True),
        ("www.api.acme.example", ["api.acme.example"], False),
        ("other.example", ["*.acme.example", "other.example"], True),
        ("other.example", [], False),
    ],
)
def test_host_patterns(host: str, patterns: list[str], matches: bool) -> None:
    assert host_matches(host, patterns) is matches


def test_allowed_hosts_restrict_the_url() -> None:
    patterns = ["*.acme.example"]
    assert guard("https://api.acme.example/hook", allowed_hosts=patterns) == IPv4Address(
        "93.184.216.34"
    )
    with pytest.raises(BlockedTarget, match="allowed_hosts"):
        check_url("https://public.example/", allowed_hosts=patterns)
    with pytest.raises(BlockedTarget, match="allowed_hosts"):
        check_url("https://acme.example/", allowed_hosts=patterns)


# ---------------------------------------------------------------- the error and the target


def test_blocked_target_names_host_and_reason_but_never_credentials() -> None:
    with pytest.raises(BlockedTarget) as info:
        guard("http://mixed.example/")
    assert info.value.reason == "private"
    assert "'mixed.example'" in str(info.value) and "10.0.0.7" in str(info.value)
    with pytest.raises(BlockedTarget) as info:
        check_url("http://alice:s3cret@127.0.0.1/")
    assert "alice" not in str(info.value) and "s3cret" not in str(info.value)
    assert isinstance(info.value, InvalidRequest) and isinstance(info.value, ValueError)
    assert info.value.code == "blocked_target" and info.value.field == "target.url"


def test_parsed_target_fields_and_host_header() -> None:
    target = check_url("https://Public.Example:8443/a")
    assert (target.scheme, target.host, target.port, target.address) == (
        "https",
        "public.example",
        8443,
        None,
    )
    assert target.host_header == "public.example:8443"
    assert check_url("http://public.example/").host_header == "public.example"
    v6 = check_url("http://[2606:4700:0::1111]:8080/")
    assert v6.host == "2606:4700::1111" and v6.host_header == "[2606:4700::1111]:8080"
    assert check_url("http://0x08080808/").host == "8.8.8.8"


# ---------------------------------------------------------------- numeric spellings


def spell(value: int, draw_parts: int, bases: list[int], upper: bool) -> str:
    """Write a 32-bit value in `draw_parts` inet_aton parts, each in its own base."""
    widths = [8] * (draw_parts - 1) + [32 - 8 * (draw_parts - 1)]
    numbers, shift = [], 32
    for width in widths:
        shift -= width
        numbers.append((value >> shift) & ((1 << width) - 1))
    texts = []
    for number, base in zip(numbers, bases, strict=False):
        if base == 16:
            text = f"0x{number:x}"
            texts.append(text.upper() if upper else text)
        elif base == 8:
            texts.append(f"0{number:o}")
        else:
            texts.append(str(number))
    return ".".join(texts)


@st.composite
def spellings(draw: st.DrawFn, network: str = "0.0.0.0/0") -> tuple[IPv4Address, str]:
    net = IPv4Network(network)
    value = draw(st.integers(int(net.network_address), int(net.broadcast_address)))
    parts = draw(st.integers(1, 4))
    bases = draw(st.lists(st.sampled_from([8, 10, 16]), min_size=parts, max_size=parts))
    return IPv4Address(value), spell(value, parts, bases, draw(st.booleans()))


@given(spellings())
def test_every_spelling_reads_back_as_its_address(case: tuple[IPv4Address, str]) -> None:
    address, text = case
    assert parse_ipv4(text) == address
    assert socket.inet_aton(text) == address.packed  # the C library agrees


@given(spellings("10.0.0.0/8"))
def test_any_spelling_of_a_ten_address_is_blocked(case: tuple[IPv4Address, str]) -> None:
    with pytest.raises(BlockedTarget, match="private"):
        check_url(f"http://{case[1]}:8080/")


@given(spellings("127.0.0.0/8"))
def test_any_spelling_of_loopback_is_allowed_by_a_loopback_cidr(
    case: tuple[IPv4Address, str],
) -> None:
    target = check_url(f"http://{case[1]}/", allow=[IPv4Network("127.0.0.0/8")])
    assert target.address == case[0]


@given(st.integers(0, 2**32 - 1))
def test_mapped_and_nat64_forms_share_the_ipv4_verdict(value: int) -> None:
    v4 = IPv4Address(value)
    assert is_blocked(IPv6Address(f"::ffff:{v4}")) == is_blocked(v4)
    assert is_blocked(IPv6Address(f"64:ff9b::{v4}")) == is_blocked(v4)
    if is_blocked(v4) is not None:
        assert is_blocked(IPv6Address(f"::{v4}")) in (is_blocked(v4), "loopback", "unspecified")


@pytest.mark.parametrize(
    ("address", "reason"),
    [
        ("127.255.255.254", "loopback"),
        ("10.255.255.255", "private"),
        ("172.20.1.1", "private"),
        ("192.168.255.255", "private"),
        ("169.254.0.1", "link-local"),
        ("100.64.0.0", "cgnat"),
        ("0.1.2.3", "unspecified"),
        ("239.255.255.250", "multicast"),
        ("255.255.255.255", "broadcast"),
        ("250.1.1.1", "reserved"),
        ("198.18.0.1", "reserved"),
        ("::", "unspecified"),
        ("::1", "loopback"),
        ("fdff::1", "private"),
        ("febf::1", "link-local"),
        ("ff05::2", "multicast"),
        ("100::1", "reserved"),
        ("1.1.1.1", None),
        ("2a00:1450:4001::200e", None),
        ("2002:808:808::1", None),
    ],
)
def test_address_classes(address: str, reason: str | None) -> None:
    addr: Address = IPv6Address(address) if ":" in address else IPv4Address(address)
    assert is_blocked(addr, []) == reason


def test_an_allow_list_of_the_other_family_does_not_apply() -> None:
    allow: list[Network] = [IPv6Network("::/0")]
    assert is_blocked(IPv4Address("127.0.0.1"), allow) == "loopback"
    assert is_blocked(IPv6Address("::1"), allow) is None


@pytest.mark.parametrize(
    ("reason", "hinted"), [("private", True), ("loopback", True), ("link-local", False)]
)
def test_a_refusal_an_operator_can_lift_names_allow_cidrs(reason: str, hinted: bool) -> None:
    """Issue 30's newcomer trial: a private address was refused without saying how to allow
    it. The link-local range (cloud metadata) gets no hint: lifting it is rarely what is meant."""
    message = str(BlockedTarget(reason, host="db.internal"))
    assert message.startswith(f"target.url: host 'db.internal' is not allowed: {reason}")
    assert ("[delivery] allow_cidrs" in message) is hinted
