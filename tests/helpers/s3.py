"""A real S3 API server on loopback for tests: moto's server mode, stopped by the test.

`S3Server` runs moto's threaded server on 127.0.0.1 (a free port). It can be stopped and started
again on the same port to play an outage: moto keeps its buckets in the test process, so what
was stored before the outage is there after it, as on a real S3. Each test takes a bucket of
its own (`create_bucket`), so tests sharing the process never see each other's objects.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import boto3  # type: ignore[import-untyped]
from moto.server import ThreadedMotoServer

ACCESS_KEY_ID = "deckyard-test"
SECRET_ACCESS_KEY = "deckyard-test-secret"
REGION = "us-east-1"
PREFIX = "artefacts"


class S3Server:
    """moto's S3 API on 127.0.0.1; `stop()` and `start()` again keep the port and the data."""

    def __init__(self) -> None:
        self.port = 0
        self._server: ThreadedMotoServer | None = None

    @property
    def endpoint(self) -> str:
        assert self.port, "start() first"
        return f"http://127.0.0.1:{self.port}"

    @property
    def running(self) -> bool:
        return self._server is not None

    def start(self) -> None:
        """Listen (on the port of the previous start, if any) and serve."""
        assert self._server is None, "already running"
        # werkzeug logs every request at INFO to stderr unless told otherwise
        logging.getLogger("werkzeug").setLevel(logging.WARNING)
        server = ThreadedMotoServer(ip_address="127.0.0.1", port=self.port, verbose=False)
        server.start()
        self.port = server.get_host_and_port()[1]
        self._server = server

    def stop(self) -> None:
        """Stop listening: connections are refused until `start()`."""
        if self._server is not None:
            self._server.stop()
            self._server = None

    def client(self) -> Any:
        """A boto3 S3 client for the test's own checks."""
        return boto3.client(
            "s3",
            endpoint_url=self.endpoint,
            aws_access_key_id=ACCESS_KEY_ID,
            aws_secret_access_key=SECRET_ACCESS_KEY,
            region_name=REGION,
        )

    def create_bucket(self) -> str:
        """A new, empty bucket's name."""
        name = f"deckyard-{uuid.uuid4().hex[:16]}"
        self.client().create_bucket(Bucket=name)
        return name

    def object_keys(self, bucket: str) -> list[str]:
        """Every key in `bucket`, read past the store (temporary names and other prefixes too)."""
        pages = self.client().get_paginator("list_objects_v2").paginate(Bucket=bucket)
        return sorted(o["Key"] for page in pages for o in page.get("Contents", []))


@contextmanager
def s3_server() -> Iterator[S3Server]:
    """A running `S3Server`, stopped on leaving."""
    server = S3Server()
    server.start()
    try:
        yield server
    finally:
        server.stop()


def s3_settings(server: S3Server, bucket: str, prefix: str = PREFIX, **over: Any) -> dict[str, Any]:
    """`Settings` overrides for an artefact store at `s3://bucket/prefix` on `server`, with
    short timeouts and one try per request, so an outage answers at once."""
    return {
        "artifact_store_url": f"s3://{bucket}/{prefix}",
        "artifact_store_endpoint_url": server.endpoint,
        "artifact_store_access_key_id": ACCESS_KEY_ID,
        "artifact_store_secret_access_key": SECRET_ACCESS_KEY,
        "artifact_store_region": REGION,
        "artifact_store_addressing_style": "path",
        "artifact_store_timeout_seconds": 2.0,
        "artifact_store_max_attempts": 1,
        **over,
    }


def s3_env(server: S3Server, bucket: str, prefix: str = PREFIX) -> dict[str, str]:
    """The same as `DECKYARD_*` environment variables, for `deckyard serve` subprocesses."""
    return {f"DECKYARD_{k.upper()}": str(v) for k, v in s3_settings(server, bucket, prefix).items()}
