"""A big deck is compiled off the API's event loop: `/healthz` keeps answering meanwhile.

Issue 30 item 5: `POST /v1/decks` with 10 HTML pages of 10,000 elements each (1.6 MB) took
5.3 s and held `/healthz` for 5.2 s, because the compile (html5lib, soupsieve: pure Python)
ran on the event loop. A real `deckyard serve` runs here, on SQLite and PostgreSQL; while a
deck of 5 such pages is created (half the issue's deck, to keep the drill short), and while a
page of 50,000 is validated, a second client polls `/healthz` and every answer must come within
100 ms.

The bound is the issue's. The only allowance is the machine's own noise, measured in the same
window: the poller alternates between the server and a second, idle `deckyard serve` (same
code, same answer) and the idle one's slowest answer is added to the 100 ms; one isolated
answer of up to 300 ms is also let pass, since a stall of the box that lands on the server's
poll and not the idle one's is noise all the same. A busy shared box stalls every process for
up to a few hundred ms at times; a blocked loop stalls the server for seconds.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import httpx
import pytest

from tests.helpers.server import Server, clean_env, workspace_tokens

pytestmark = [pytest.mark.processes, pytest.mark.slow]

BOUND_SECONDS = 0.100
PAGES = 5
NODES = 10_000
HICCUP_SECONDS = 0.300
"""The longest single answer allowed once per drill as machine noise (see `healthz_during`)."""
MIN_POLLS = 20
"""Polls that must fall inside the work, or the drill measured nothing."""


def big_page(nodes: int) -> str:
    """An HTML page of `nodes` paragraphs in one slide."""
    return "<div class='s'>" + "".join(f"<p>item {i}</p>" for i in range(nodes)) + "</div>"


@dataclass
class Shared:
    url: str
    client: httpx.Client
    headers: dict[str, str]


@pytest.fixture(scope="module")
def shared(module_db_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Shared]:
    """One server per dialect, without a renderer (the compile is what is measured)."""
    tmp = tmp_path_factory.mktemp("offloop")
    env = clean_env(tmp, DECKYARD_DATABASE_URL=module_db_url, DECKYARD_RENDERERS="0")
    token = workspace_tokens(module_db_url, ["ws"])["ws"]
    server = Server([], env, tmp)
    try:
        server.wait_ready(60)
        with httpx.Client(timeout=300) as client:
            yield Shared(server.url, client, {"authorization": f"Bearer {token}"})
    finally:
        server.stop()


@pytest.fixture(scope="module")
def control(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The `/healthz` URL of a second, idle server: the machine's noise for the same code."""
    tmp = tmp_path_factory.mktemp("control")
    env = clean_env(
        tmp, DECKYARD_DATABASE_URL=f"sqlite:///{tmp / 'control.db'}", DECKYARD_RENDERERS="0"
    )
    server = Server([], env, tmp)
    try:
        server.wait_ready(60)
        yield f"{server.url}/healthz"
    finally:
        server.stop()


Polls = tuple[list[tuple[float, float]], list[tuple[float, float]]]
"""For each URL: (when it was sent, seconds it took) of every poll."""


def poll(urls: tuple[str, str], stop: threading.Event) -> Polls:
    """Every GET's start and duration, alternating between the two URLs until `stop`."""
    took: Polls = ([], [])
    with httpx.Client(timeout=30) as client:
        for url in urls:
            client.get(url).raise_for_status()
        while not stop.is_set():
            for url, into in zip(urls, took, strict=True):
                started = time.perf_counter()
                client.get(url).raise_for_status()
                into.append((started, time.perf_counter() - started))
    return took


def healthz_during(url: str, control: str, work: Callable[[], httpx.Response]) -> httpx.Response:
    """`work`'s answer, once every `/healthz` answer while it ran came within the bound (plus
    the idle server's slowest answer in the same window)."""
    stop = threading.Event()
    found: list[Polls] = []
    poller = threading.Thread(target=lambda: found.append(poll((f"{url}/healthz", control), stop)))
    began = time.perf_counter()
    poller.start()
    try:
        answer = work()
    finally:
        ended = time.perf_counter()
        stop.set()
        poller.join(60)
    server, noise = found[0]
    assert len(server) >= MIN_POLLS, f"only {len(server)} polls fell inside the work"
    bound = BOUND_SECONDS + max(took for _, took in noise)
    slow = [(round(at - began, 2), round(took * 1000)) for at, took in server if took > bound]
    # One isolated answer up to HICCUP_SECONDS is the machine's, not the loop's: the poller
    # alternates, so a stall of the shared box lands on the server's poll or on the idle one's,
    # and only the latter raises the bound (seen: 1 answer of 185 ms in 2 980, CI on 2 cores).
    # A loop held by a compile shows as one answer as long as the compile (5.2 s before the fix)
    # or as several slow answers.
    if len(slow) == 1 and slow[0][1] <= HICCUP_SECONDS * 1000:
        slow = []
    assert not slow, (
        f"/healthz answers slower than {bound * 1000:.0f} ms (100 + the idle server's slowest) "
        f"while the work ran for {ended - began:.1f} s, (s into it, ms): {slow[:20]}; "
        f"{len(server)} polls"
    )
    return answer


def test_healthz_answers_while_a_big_deck_is_created(shared: Shared, control: str) -> None:
    deck = {
        "manifest": {"title": "Big"},
        "pages": [
            {"name": f"p{i:02d}", "kind": "html", "text": big_page(NODES)} for i in range(PAGES)
        ],
    }
    body = json.dumps(deck).encode()
    headers = {**shared.headers, "content-type": "application/json"}

    answer = healthz_during(
        shared.url,
        control,
        lambda: shared.client.post(f"{shared.url}/v1/decks", content=body, headers=headers),
    )

    assert answer.status_code == 201, answer.text
    created = answer.json()
    assert created["problems"] == []
    assert [p["page"] for p in created["pages"]] == [f"p{i:02d}" for i in range(PAGES)]
    assert all(p["compiled"] for p in created["pages"])


def test_healthz_answers_while_a_big_page_is_validated(shared: Shared, control: str) -> None:
    page = {"kind": "html", "source": big_page(PAGES * NODES)}

    answer = healthz_during(
        shared.url,
        control,
        lambda: shared.client.post(f"{shared.url}/v1/validate", json=page, headers=shared.headers),
    )

    # No renderer runs: the page compiled, and the render check could not run (never a pass).
    assert answer.status_code == 503, answer.text
    result = answer.json()
    assert result["valid"] is False
    assert result["result"]["stages"]["compile"]["status"] == "passed"
