"""The SSRF guard, with a fake resolver so no name is ever looked up for real."""

from __future__ import annotations

import ipaddress

import pytest

from deckyard.render.protocol import RenderErrorCode
from deckyard.render.renderer.ssrf import UrlGuard, address_problem

NAMES = {
    "public.example": ["93.184.215.14"],
    "localhost": ["127.0.0.1", "::1"],
    "mixed.example": ["93.184.215.14", "10.1.2.3"],
    "metadata.example": ["169.254.169.254"],
}


async def fake_resolver(host: str, port: int) -> list[str]:
    if host not in NAMES:
        raise OSError("name not known")
    return NAMES[host]


def guard(allow: list[str] | None = None) -> UrlGuard:
    return UrlGuard(allow or [], dns_timeout_seconds=1, resolver=fake_resolver)


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1/",
        "http://[::1]/",
        "http://10.0.0.1/",
        "http://169.254.169.254/latest/",
        "http://[::ffff:127.0.0.1]/",
        "http://[::ffff:a9fe:a9fe]/",
        "http://[2002:7f00:1::]/",
        "http://[64:ff9b::a00:1]/",
        "http://[fe80::1]/",
        "http://[fc00::1]/",
        "http://0.0.0.0/",
        "http://224.0.0.1/",
        "http://100.64.0.1/",
        "http://localhost/",
        "http://LOCALHOST./",
        "http://mixed.example/",
        "http://metadata.example/",
        "FILE:///etc/passwd",
        "view-source:http://public.example/",
        "javascript:alert(1)",
        "ftp://public.example/",
    ],
)
async def test_refused(url: str) -> None:
    verdict = await guard().check_url(url)
    assert not verdict.allowed
    assert verdict.code is RenderErrorCode.SSRF_BLOCKED


async def test_public_name_is_allowed_with_its_addresses() -> None:
    verdict = await guard().check_url("HTTPS://Public.Example/deck")
    assert verdict.allowed
    assert verdict.addresses == ("93.184.215.14",)


async def test_unresolvable_name_is_a_navigation_failure_not_ssrf() -> None:
    verdict = await guard().check_url("http://nowhere.example/")
    assert not verdict.allowed
    assert verdict.code is RenderErrorCode.NAVIGATION_FAILED


async def test_allow_list_by_host_and_by_host_and_port() -> None:
    assert (await guard(["localhost"]).check_url("http://localhost:8080/")).allowed
    by_port = guard(["127.0.0.1:8080"])
    assert (await by_port.check_url("http://127.0.0.1:8080/")).allowed
    assert not (await by_port.check_url("http://127.0.0.1:8081/")).allowed
    assert (await guard(["[::1]:9000"]).check_host("::1", 9000)).allowed


def test_address_problem_names_the_range() -> None:
    assert address_problem(ipaddress.ip_address("8.8.8.8")) is None
    problem = address_problem(ipaddress.ip_address("::ffff:10.0.0.1"))
    assert problem is not None and "private" in problem
