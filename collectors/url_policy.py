"""Which http(s) URLs the collector, on the host, may connect to for a task: only servers whose every
address is public, unless the operator (never a task) names the server's origin as allowed.

`forbidden_address` and `origin_of` are shared by the mcp domain (collectors/mcp_client.py, operator
setting WORLDLINE_MCP_ALLOWED_URLS) and the search domain (collectors/search_backends.py, operator
setting WORLDLINE_SEARCH_ALLOWED_URLS); `OriginPolicy` is the search domain's policy object, read from
the variable its caller names.
"""

from __future__ import annotations

import ipaddress
import os
import socket
import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass

DEFAULT_PORTS = {"http": 80, "https": 443}


class URLNotAllowed(ValueError):
    """A URL (or where it resolves, or redirects) that this machine does not connect to for a task;
    `unresolved` when the reason is that its host name has no address now."""

    def __init__(self, message: str, unresolved: bool = False) -> None:
        super().__init__(message)
        self.unresolved = unresolved


def forbidden_address(address: str) -> str | None:
    """Why connecting to the IP `address` could reach this machine or its private networks (None when
    it is a public unicast address): loopback, private, link-local (cloud metadata at 169.254.169.254),
    multicast, unspecified, reserved or otherwise not globally routable; an IPv4-mapped or NAT64-style
    IPv6 address is judged by the IPv4 address inside it."""
    ip: ipaddress.IPv4Address | ipaddress.IPv6Address = ipaddress.ip_address(address.split("%", 1)[0])
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    for kind in ("loopback", "unspecified", "link_local", "multicast", "private", "reserved"):
        if getattr(ip, f"is_{kind}"):
            return kind.replace("_", "-")
    if not ip.is_global:
        return "not globally routable"
    return None


def origin_of(url: str) -> tuple[str, str, int]:
    """(scheme, lower-case host without brackets, port) of an http(s) URL; ValueError otherwise."""
    parts = urllib.parse.urlsplit(url.strip())
    scheme = parts.scheme.lower()
    if scheme not in DEFAULT_PORTS:
        raise ValueError(f"{url!r} is not an http:// or https:// URL")
    host = (parts.hostname or "").lower()
    if not host:
        raise ValueError(f"{url!r} names no host")
    return scheme, host, parts.port or DEFAULT_PORTS[scheme]


@dataclass(frozen=True)
class OriginPolicy:
    """The origins an operator allowed (from the variable `env`), and the public-address rule for
    every other URL."""

    allowed: frozenset[tuple[str, str, int]] = frozenset()
    env: str = ""

    @classmethod
    def from_env(cls, env: str, environ: Mapping[str, str] | None = None) -> OriginPolicy:
        """The origins named in the variable `env` (comma- or space-separated)."""
        text = (os.environ if environ is None else environ).get(env, "")
        allowed = set()
        for item in text.replace(",", " ").split():
            try:
                allowed.add(origin_of(item))
            except ValueError as exc:
                raise ValueError(f"{env}: {exc}; give origins such as http://127.0.0.1:8888") from exc
        return cls(frozenset(allowed), env)

    def allows(self, host: str, port: int) -> bool:
        """Whether the operator named an origin on this host and port."""
        host = host.lower().strip("[]")
        return any(h == host and p == port for _, h, p in self.allowed)

    def check_url(self, url: str, *, resolve_failure_ok: bool = False) -> None:
        """Raise URLNotAllowed unless `url` may be reached. With `resolve_failure_ok`, a host name that
        does not resolve now passes (task validation: connecting checks it again)."""
        try:
            scheme, host, port = origin_of(url)
        except ValueError as exc:
            raise URLNotAllowed(str(exc)) from exc
        if (scheme, host, port) in self.allowed:
            return
        try:
            OriginPolicy().resolve_checked(host, port)
        except URLNotAllowed as exc:
            if resolve_failure_ok and exc.unresolved:
                return
            raise

    def resolve_checked(self, host: str, port: int) -> list[str]:
        """The addresses of `host` (an IP literal is its own), each one checked unless the operator
        allowed this host and port; URLNotAllowed naming the first forbidden address."""
        host = host.strip("[]")
        try:
            infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        except (OSError, UnicodeError) as exc:
            raise URLNotAllowed(f"the host {host!r} does not resolve ({exc})", unresolved=True) from exc
        addresses = list(dict.fromkeys(str(info[4][0]) for info in infos))
        if self.allows(host, port):
            return addresses
        for address in addresses:
            why = forbidden_address(address)
            if why is not None:
                shown = host if host == address else f"{host} (which resolves to {address})"
                raise URLNotAllowed(f"{shown} is not a public address ({why}), and a task may not reach it")
        if not addresses:
            raise URLNotAllowed(f"the host {host!r} has no address", unresolved=True)
        return addresses
