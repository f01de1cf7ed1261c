"""A worker outside Deckyard, in plain Python over HTTP: claim, heartbeat, complete or fail.

    python examples/external_worker.py --url http://127.0.0.1:8000 --token dy_... \
        --queue thumbnails --worker laptop-1

It long-polls `POST /v1/queues/{queue}/claim`, runs `handle(job)` while a thread heartbeats the
lease, and finishes with the fencing token the claim answered. A 409 on heartbeat or finish
means the lease was lost (expired and recovered, or cancelled): the result is dropped, and the
job is someone else's now. Any language can do the same; see docs/external-workers.md for the
curl version.
"""

from __future__ import annotations

import argparse
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import httpx


@dataclass
class Claim:
    """A claimed job and its fencing token."""

    job: dict[str, Any]
    token: str
    lease_seconds: float

    @property
    def id(self) -> int:
        return int(self.job["id"])


class LeaseLost(Exception):
    """The server refused the token (409): the job is no longer ours."""


class ExternalWorker:
    """The protocol's four calls."""

    def __init__(self, url: str, token: str, queue: str, name: str) -> None:
        self.http = httpx.Client(
            base_url=url, headers={"authorization": f"Bearer {token}"}, timeout=60
        )
        self.queue, self.name = queue, name

    def close(self) -> None:
        self.http.close()

    def claim(self, wait: float) -> Claim | None:
        r = self.http.post(
            f"/v1/queues/{self.queue}/claim",
            json={"worker": self.name, "wait_seconds": wait},
            timeout=wait + 30,
        )
        if r.status_code == 204:
            return None
        r.raise_for_status()
        body = r.json()
        return Claim(body["job"], body["token"], float(body["lease_seconds"]))

    def _post(self, claim: Claim, action: str, body: dict[str, Any]) -> dict[str, Any]:
        r = self.http.post(f"/v1/claims/{claim.id}/{action}", json={"token": claim.token, **body})
        if r.status_code == 409:
            raise LeaseLost(r.json()["error"]["message"])
        r.raise_for_status()
        out: dict[str, Any] = r.json()
        return out

    def heartbeat(self, claim: Claim) -> bool:
        """Extend the lease; True when the job's cancel was requested."""
        return bool(self._post(claim, "heartbeat", {})["cancel_requested"])

    def complete(self, claim: Claim, result: Any) -> dict[str, Any]:
        return self._post(claim, "complete", {"result": result})

    def fail(self, claim: Claim, code: str, message: str, retryable: bool = True) -> dict[str, Any]:
        return self._post(
            claim, "fail", {"error_code": code, "message": message, "retryable": retryable}
        )

    def run_one(self, claim: Claim, handle: Callable[[dict[str, Any]], Any]) -> None:
        """Run `handle` with a heartbeat thread; finish with its result or its error."""
        done = threading.Event()

        def beat() -> None:
            while not done.wait(claim.lease_seconds / 3):
                try:
                    self.heartbeat(claim)
                except (LeaseLost, httpx.HTTPError):
                    return

        beater = threading.Thread(target=beat, daemon=True)
        beater.start()
        try:
            result = handle(claim.job)
        except Exception as exc:
            done.set()
            self.fail(claim, "EXTERNAL_ERROR", f"{type(exc).__name__}: {exc}")
            return
        finally:
            done.set()
        self.complete(claim, result)

    def serve(self, handle: Callable[[dict[str, Any]], Any], wait: float = 20.0) -> None:
        """Claim and run jobs until interrupted."""
        while True:
            claim = self.claim(wait)
            if claim is None:
                continue
            print(f"claimed {claim.id} attempt {claim.job['attempt']}", flush=True)
            try:
                self.run_one(claim, handle)
                print(f"finished {claim.id}", flush=True)
            except LeaseLost as exc:
                print(f"lost {claim.id}: {exc}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", required=True)
    parser.add_argument("--token", required=True)
    parser.add_argument("--queue", required=True)
    parser.add_argument("--worker", default="example")
    args = parser.parse_args()
    worker = ExternalWorker(args.url, args.token, args.queue, args.worker)

    def handle(job: dict[str, Any]) -> dict[str, Any]:
        """The demo job: wait `seconds`, then echo the payload with this worker's name."""
        payload = job.get("payload") or {}
        time.sleep(float(payload.get("seconds", 0)))
        return {"worker": args.worker, "echo": payload}

    try:
        worker.serve(handle)
    except KeyboardInterrupt:
        pass
    finally:
        worker.close()
    sys.exit(0)


if __name__ == "__main__":
    main()
