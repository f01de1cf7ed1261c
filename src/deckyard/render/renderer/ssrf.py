"""The SSRF guard: which URLs and hosts a URL render may reach.

A URL passes when its scheme is http or https (compared case-insensitively, so `FILE:` and
`view-source:` fail) and every address its host resolves to is public: not loopback, private,
link-local (`169.254.169.254`), multicast, reserved or unspecified, in IPv4 or IPv6, including
IPv4-mapped, 6to4, Teredo and NAT64 forms. Hosts named in `renderer_url_allow_hosts` (`host` or
`host:port`) skip the address check. The guard runs at admission and again in the egress proxy
for every request, redirect and tunnel, which also connects only to the addresses it checked.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from urllib.parse import urlsplit

import httpx

from deckyard.render.protocol import RenderErrorCode

Resolver = Callable[[str, int], Awaitable[list[str]]]
IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

ALLOWED_SCHEMES = frozenset({"http", "https"})
_NAT64 = ipaddress.IPv6Network("64:ff9b::/96")


@dataclass(frozen=True)
class Verdict:
    """The guard's answer: allowed with the addresses to connect to, or refused with a reason."""

    allowed: bool
    reason: str = ""
    addresses: tuple[str, ...] = ()
    code: RenderErrorCode = RenderErrorCode.SSRF_BLOCKED


async def system_resolver(host: str, port: int) -> list[str]:
    """Resolve `host` with the system resolver, returning unique address strings."""
    infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    seen: dict[str, None] = {}
    for info in infos:
        seen[str(info[4][0])] = None
    return list(seen)


def _embedded_ipv4(address: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    if address.ipv4_mapped is not None:
        return address.ipv4_mapped
    if address.sixtofour is not None:
        return address.sixtofour
    if address.teredo is not None:
        return address.teredo[1]
    if address in _NAT64:
        return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    return None


def address_problem(address: IPAddress) -> str | None:
    """Why `address` must not be contacted, or None when it is a public address."""
    if isinstance(address, ipaddress.IPv6Address):
        embedded = _embedded_ipv4(address)
        if embedded is not None:
            problem = address_problem(embedded)
            return f"{problem} (embedded in {address})" if problem else None
    checks = (
        (address.is_unspecified, "unspecified"),
        (address.is_loopback, "loopback"),
        (address.is_link_local, "link-local"),
        (address.is_multicast, "multicast"),
        (address.is_private, "private"),
        (address.is_reserved, "reserved"),
        (not address.is_global, "not globally routable"),
    )
    for failed, name in checks:
        if failed:
            return f"{name} address {address}"
    return None


def split_host(authority: str) -> tuple[str, int | None]:
    """Split `host:port` (IPv6 in brackets) into a lower-case host and an optional port."""
    parsed = urlsplit(f"//{authority}")
    host = (parsed.hostname or "").rstrip(".")
    return host, parsed.port


class UrlGuard:
    """Decides whether a URL render may reach a URL or host; see the module docstring."""

    def __init__(
        self,
        allow_hosts: list[str],
        dns_timeout_seconds: float,
        resolver: Resolver = system_resolver,
    ) -> None:
        self._allow: set[tuple[str, int | None]] = {split_host(h.lower()) for h in allow_hosts}
        self._dns_timeout = dns_timeout_seconds
        self._resolve = resolver

    def _allow_listed(self, host: str, port: int) -> bool:
        return (host, None) in self._allow or (host, port) in self._allow

    async def check_url(self, url: str) -> Verdict:
        """Check a URL's scheme, then its host and port."""
        try:
            parsed = urlsplit(url.strip())
            scheme = parsed.scheme.lower()
            port = parsed.port
        except ValueError as exc:
            return Verdict(False, f"malformed URL: {exc}", code=RenderErrorCode.INVALID_INPUT)
        if scheme not in ALLOWED_SCHEMES:
            return Verdict(False, f"scheme {scheme or '(none)'!r} is not http or https")
        host = (parsed.hostname or "").rstrip(".")
        if not host:
            return Verdict(False, "URL has no host", code=RenderErrorCode.INVALID_INPUT)
        return await self.check_host(host, port or (443 if scheme == "https" else 80))

    async def check_host(self, host: str, port: int) -> Verdict:
        """Check that `host` resolves only to addresses the guard allows."""
        host = host.lower().strip("[]").rstrip(".")
        try:
            literal: IPAddress | None = ipaddress.ip_address(host)
        except ValueError:
            literal = None
        if literal is not None:
            addresses = [str(literal)]
        else:
            try:
                async with asyncio.timeout(self._dns_timeout):
                    addresses = await self._resolve(host, port)
            except (OSError, TimeoutError) as exc:
                reason = f"cannot resolve {host}: {exc or 'timed out'}"
                return Verdict(False, reason, code=RenderErrorCode.NAVIGATION_FAILED)
        if not addresses:
            return Verdict(False, f"{host} has no address", code=RenderErrorCode.NAVIGATION_FAILED)
        if self._allow_listed(host, port):
            return Verdict(True, "allow-listed", tuple(addresses))
        for text in addresses:
            problem = address_problem(ipaddress.ip_address(text.split("%", 1)[0]))
            if problem:
                return Verdict(False, f"{host} resolves to a {problem}")
        return Verdict(True, "public", tuple(addresses))


def pinned_request(
    client: httpx.AsyncClient,
    url: str,
    address: str,
    *,
    method: str = "GET",
    headers: dict[str, str] | None = None,
    content: bytes | None = None,
) -> httpx.Request:
    """A request for `url` that connects to `address`, the one the guard checked, not to
    whatever the host resolves to a moment later (DNS rebinding): the URL names the address,
    `Host` the original host, and TLS sends and verifies the original name (httpcore's SNI
    name). Used by remote deck files and webhook deliveries alike."""
    parts = httpx.URL(url)
    extensions = {"sni_hostname": parts.host} if parts.scheme == "https" else {}
    return client.build_request(
        method,
        parts.copy_with(host=address.split("%", 1)[0]),
        headers={**(headers or {}), "host": parts.netloc.decode("ascii")},
        content=content,
        extensions=extensions,
    )
