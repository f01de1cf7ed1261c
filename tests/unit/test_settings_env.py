"""`serve --workers N` hands its settings to worker processes whole, secrets included."""

from __future__ import annotations

import json

from deckyard.config import Settings


def test_secrets_survive_the_trip_to_a_worker_process() -> None:
    settings = Settings.load(
        ai_api_key="sk-real-key",
        artifact_store_secret_access_key="s3-secret",
        port=8123,
    )
    again = Settings.load(**json.loads(settings.to_env_json()))
    assert again.ai_api_key is not None
    assert again.ai_api_key.get_secret_value() == "sk-real-key"
    assert again.artifact_store_secret_access_key is not None
    assert again.artifact_store_secret_access_key.get_secret_value() == "s3-secret"
    assert again.port == 8123
    assert again == settings
