"""The `ip` PII class on IPv6: every textual form of an address goes, code and ids that look alike stay."""

from __future__ import annotations

import ipaddress

from hypothesis import given, settings
from hypothesis import strategies as st

from worldline.redaction.detect import redact

IP = frozenset({"ip"})
addresses = st.ip_addresses(v=6).filter(lambda a: not (a.is_loopback or a.is_unspecified))


@settings(max_examples=300, deadline=None)
@given(
    addresses,
    st.sampled_from(["", "%eth0", "%25en0", "%wlp3s0"]),
    st.sampled_from(["{} up", "[{}]:443", "x={}."]),
)
def test_full_form_with_or_without_zone_is_removed(
    address: ipaddress.IPv6Address, zone: str, frame: str
) -> None:
    text = frame.format(address.exploded + zone)
    out = redact(text, None, IP)
    assert address.exploded not in out and "[REDACTED:ip]" in out
    assert zone == "" or zone not in out


@settings(max_examples=300, deadline=None)
@given(addresses)
def test_compressed_form_is_removed_when_a_group_has_three_digits_or_more(
    address: ipaddress.IPv6Address,
) -> None:
    text = f"inet6 {address.compressed}/64 scope global"
    groups = [g for g in address.compressed.split(":") if g]
    if (
        any(len(g) >= 3 for g in groups)
        or "::" not in address.compressed
        and not all(len(g) == 2 for g in groups)
    ):
        assert redact(text, None, IP) == "inet6 [REDACTED:ip]/64 scope global"


@settings(max_examples=200, deadline=None)
@given(st.ip_addresses(v=4).filter(lambda a: not str(a).startswith(("127.", "0.", "255."))))
def test_ipv4_tail_forms_are_removed(v4: ipaddress.IPv4Address) -> None:
    for text in (f"::ffff:{v4}", f"64:ff9b::{v4}", f"0:0:0:0:0:ffff:{v4}"):
        out = redact(f"from {text}, port 22", None, IP)
        assert str(v4) not in out and out == "from [REDACTED:ip], port 22"


@settings(max_examples=300, deadline=None)
@given(
    st.integers(0, 23),
    st.integers(0, 59),
    st.integers(0, 59),
    st.lists(st.integers(0, 255), min_size=6, max_size=8),
    st.integers(0, 99),
    st.integers(0, 99),
    st.sampled_from(["std", "Add", "Bad", "Face", "ns", "Cafe", "io"]),
)
def test_lookalikes_stay(h: int, m: int, s: int, mac: list[int], i: int, j: int, scope: str) -> None:
    hardware = ":".join(f"{b:02x}" for b in mac)
    text = (
        f"at {h:02d}:{m:02d}:{s:02d} link/ether {hardware} brd ff:ff:ff:ff:ff:ff\n"
        f"{scope}::vector<int> v; auto w = {scope}::Bad::find(v);\n"
        f"evens = a[{i}::{j}]; rev = b[::-1]; c[{i}::] = d[::{j}]\n"
        "listening on [::]:8080 and [::1]:9090\n"
    )
    assert redact(text, None, IP) == text
