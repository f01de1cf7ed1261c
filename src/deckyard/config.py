"""Settings: every cadence, lease, limit and retention Deckyard uses, in one place.

Values come from (highest first) explicit arguments, `DECKYARD_*` environment variables, an
optional `deckyard.toml` (path in `DECKYARD_CONFIG_FILE`, else `./deckyard.toml` when present),
and the defaults below. `Settings.load()` validates everything at startup; a bad value raises
`SettingsError`, whose lines name the environment variable to fix.
"""

from __future__ import annotations

import json
import os
from importlib.util import find_spec
from pathlib import Path
from typing import Any, Literal, Self

from pydantic import AliasChoices, Field, SecretStr, ValidationError, model_validator
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    TomlConfigSettingsSource,
)

ENV_PREFIX = "DECKYARD_"

PositiveSeconds = float


SETTINGS_ENV = "DECKYARD_SERVE_SETTINGS"
"""Resolved settings as JSON, handed by `serve --workers N` to its worker processes."""


class SettingsError(Exception):
    """Raised when settings fail validation; `problems` holds one readable line per problem."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("\n".join(problems))
        self.problems = problems


def _env_name(field: str) -> str:
    """The variable of `field`; a field read under an alias (`DECKYARD_…`) is named by it."""
    name = field.upper()
    return name if name.startswith(ENV_PREFIX) else f"{ENV_PREFIX}{name}"


class Settings(BaseSettings):
    """All of Deckyard's configuration. Field `x` is read from `DECKYARD_X`."""

    model_config = SettingsConfigDict(
        env_prefix=ENV_PREFIX,
        extra="ignore",
        validate_default=True,
        # fields with an alias (`artifact_store_url`) still take their name as a keyword
        populate_by_name=True,
    )

    # --- storage ---------------------------------------------------------------------------
    data_dir: Path = Field(Path("./deckyard-data"), description="Where Lite keeps its files.")
    database_url: str | None = Field(
        None, description="SQLAlchemy URL; default: a SQLite file in data_dir."
    )
    sqlite_busy_timeout_seconds: float = Field(5.0, gt=0)
    db_pool_size: int = Field(10, ge=1, le=200)
    db_connect_timeout_seconds: float = Field(10.0, gt=0)
    migrate_on_start: bool = True
    write_retry_attempts: int = Field(8, ge=1, le=100)
    write_retry_base_delay_seconds: float = Field(0.01, gt=0)
    write_retry_max_delay_seconds: float = Field(0.5, gt=0)
    notify_reconnect_delay_seconds: float = Field(1.0, gt=0)
    notify_reconnect_max_delay_seconds: float = Field(30.0, gt=0)
    instrument_sql: bool = False

    # --- server ----------------------------------------------------------------------------
    host: str = "127.0.0.1"
    port: int = Field(8000, ge=0, le=65535)
    workers: int = Field(1, ge=1, le=64)
    background_loops: bool = True
    api_max_body_bytes: int = Field(64 * 1024 * 1024, ge=1024)
    idempotency_retention_seconds: float = Field(24 * 3600.0, gt=0)
    storage_min_free_bytes: int = Field(
        8 * 1024 * 1024,
        ge=0,
        description="Below this much free space for the SQLite file or the local artefact "
        "store, /readyz reports the storage as full.",
    )
    readyz_token: str | None = Field(
        None,
        min_length=16,
        description="Bearer token that shows /readyz details (paths, URLs, errors, loops).",
    )
    readyz_public_details: bool = Field(
        False, description="Show /readyz details to anyone (a private network, a dev box)."
    )

    # --- processes -------------------------------------------------------------------------
    event_loop: Literal["auto", "asyncio", "uvloop"] = Field(
        "auto",
        description="Event loop of `deckyard serve`, `render`, `validate` and the other commands: "
        "`uvloop` (precise timers, less CPU per job), `asyncio` (the standard loop), or `auto` "
        "(uvloop when installed). The renderer process always runs the standard loop.",
    )

    # --- tracing (docs/tracing.md) ---------------------------------------------------------
    otel_exporter_otlp_endpoint: str | None = Field(
        None,
        description="OpenTelemetry collector (OTLP over HTTP) that gets every process's spans, "
        "e.g. http://127.0.0.1:4318 (spans go to its /v1/traces); needs the `otlp` extra. "
        "Unset (and no otel_spans_file): tracing is off.",
    )
    otel_spans_file: Path | None = Field(
        None, description="Append every finished span to this file as a JSON line (debugging)."
    )
    otel_service_name: str = Field("deckyard", min_length=1, max_length=200)
    otel_traces_sample_ratio: float = Field(
        1.0,
        ge=0,
        le=1,
        description="Share of new traces recorded; a continued trace follows its parent's choice.",
    )

    # --- job runtime -----------------------------------------------------------------------
    job_poll_interval_seconds: float = Field(0.25, gt=0)
    job_idle_poll_ceiling_seconds: float = Field(15.0, gt=0)
    job_claim_idle_ceiling_seconds: float = Field(
        60.0,
        gt=0,
        description="Idle safety-net poll of the claim loop; enqueues wake it anyway (in "
        "process, or by NOTIFY with a wake-all after a reconnect).",
    )
    job_lease_seconds: float = Field(30.0, gt=0)
    job_heartbeat_interval_seconds: float = Field(5.0, gt=0)
    job_default_max_attempts: int = Field(3, ge=1, le=1000)
    job_retry_base_delay_seconds: float = Field(1.0, gt=0)
    job_retry_max_delay_seconds: float = Field(300.0, gt=0)
    job_retry_jitter: float = Field(0.2, ge=0, le=1)
    job_concurrency: int = Field(10, ge=1, le=1000)
    job_prefetch: int = Field(
        10,
        ge=0,
        le=1000,
        description="Jobs a worker claims ahead of its free slots and keeps in a local buffer "
        "(their leases are heartbeated; handed back on stop), so slots stay busy between "
        "claim round trips. Only while its jobs are short (job_prefetch_max_job_seconds).",
    )
    job_hand_off: bool = Field(
        True,
        description="A job enqueued in a process whose worker has a free slot for its queue is "
        "inserted already claimed by that worker and starts at once (no wakeup, no second "
        "transaction).",
    )
    job_prefetch_max: int = Field(
        100,
        ge=0,
        le=10_000,
        description="Ceiling of the adaptive prefetch: a worker buffers enough jobs to cover "
        "two claim round trips at its current completion rate (at least job_prefetch, at most "
        "this), so slots stay busy when round trips are slow; a buffered job waits about two "
        "round trips.",
    )
    job_one_hop: bool = Field(
        True,
        description="PostgreSQL: a worker settles a batch of plain successes and claims its next "
        "jobs, with their events, in one statement (one round trip), and a hand-off is one "
        "statement too.",
    )
    job_one_hop_sqlite: bool = Field(
        False,
        description="SQLite: a worker's settle and claim as one synchronous call (on the loop's "
        "thread, see job_sqlite_inline_writes) instead of one thread hand-off per statement. "
        "Off by default: less CPU per job but fewer 5 ms jobs/s on a loaded machine "
        "(docs/benchmarks.md, issue 15). The hand-off is always one call on SQLite.",
    )
    job_enqueue_one_hop: bool = Field(
        True,
        description="An enqueue without a dedupe key and outside a caller's transaction is one "
        "write in one hop: one statement with its NOTIFY on PostgreSQL, one synchronous call on "
        "SQLite.",
    )
    job_prefetch_max_job_seconds: float = Field(
        0.5,
        ge=0,
        description="A worker prefetches only while its jobs' average run time stays below "
        "this: a buffered job of a slow kind would wait for a slot another node may have free.",
    )
    job_max_suspended: int = Field(
        64,
        ge=0,
        le=100_000,
        description="Jobs one worker lets wait for their children (or a render request) "
        "without holding a slot, so other jobs, those children among them, run meanwhile. A "
        "wait past this keeps its slot; 0 makes every wait keep it. Each suspended job keeps "
        "its lease (one batched heartbeat for all) and a task in the worker's process. It also "
        "bounds the render requests a node's deck (and AI) jobs keep active at once: keep "
        "nodes x (this + deck_job_concurrency) below render_workspace_queue_limit, or a big "
        "publish meets RENDER_QUEUE_FULL.",
    )
    job_stop_grace_seconds: float = Field(10.0, ge=0)
    job_recovery_backoff_seconds: float = Field(1.0, ge=0)
    job_retention_seconds: float = Field(7 * 24 * 3600.0, gt=0)
    job_prune_interval_seconds: float = Field(3600.0, gt=0)
    job_prune_batch_size: int = Field(500, ge=1, le=100_000)
    job_periodic_check_seconds: float = Field(1.0, gt=0)
    loop_error_backoff_seconds: float = Field(1.0, gt=0)
    loop_error_backoff_max_seconds: float = Field(30.0, gt=0)
    job_sqlite_inline_writes: bool = Field(
        True,
        description="SQLite: a one-hop write (job_one_hop_sqlite) runs on the event loop's "
        "thread instead of the database thread: no thread hand-off at all.",
    )

    # --- renderer process ------------------------------------------------------------------
    chromium_path: Path | None = None
    renderer_host: str = "127.0.0.1"
    renderer_port: int = Field(9000, ge=0, le=65535)
    renderer_slots: int = Field(2, ge=1, le=64)
    renderer_secret: str | None = Field(None, min_length=16)
    renderer_signature_skew_seconds: float = Field(300.0, gt=0)
    renderer_artifact_ttl_seconds: float = Field(600.0, gt=0)
    renderer_sweep_interval_seconds: float = Field(30.0, gt=0)
    renderer_recycle_after_renders: int = Field(200, ge=1)
    renderer_probe_interval_seconds: float = Field(10.0, gt=0)
    renderer_probe_timeout_seconds: float = Field(5.0, gt=0)
    renderer_default_timeout_seconds: float = Field(30.0, gt=0)
    renderer_max_timeout_seconds: float = Field(300.0, gt=0)
    renderer_max_dimension: int = Field(8192, ge=16)
    renderer_max_pixels: int = Field(8192 * 8192, ge=256)
    renderer_max_scale: float = Field(4.0, gt=0)
    renderer_max_document_bytes: int = Field(50 * 1024 * 1024, ge=1024)
    renderer_document_cache_bytes: int = Field(
        128 * 1024 * 1024,
        ge=0,
        description="Bytes of documents a renderer keeps by key (least recently used go first); "
        "a render by key that finds its document here needs no upload.",
    )
    renderer_url_allow_hosts: list[str] = Field(default_factory=list)
    renderer_tmp_dir: Path | None = None
    renderer_id: str | None = Field(None, min_length=1, max_length=200)
    renderer_launch_timeout_seconds: float = Field(30.0, gt=0)
    renderer_cleanup_timeout_seconds: float = Field(0.5, gt=0)
    renderer_cancel_wait_seconds: float = Field(1.0, gt=0)
    renderer_retry_after_seconds: float = Field(1.0, ge=0)
    renderer_dns_timeout_seconds: float = Field(5.0, gt=0)
    renderer_reap_interval_seconds: float = Field(1.0, gt=0)
    renderer_watchdog_grace_seconds: float = Field(5.0, gt=0)
    renderer_diagnostics_max_items: int = Field(50, ge=1, le=10_000)
    renderer_diagnostics_max_chars: int = Field(500, ge=16, le=100_000)
    renderer_overflow_scan_limit: int = Field(2000, ge=0, le=1_000_000)
    renderer_min_text_contrast: float = Field(
        1.2,
        ge=1.0,
        le=21.0,
        description="Text under this contrast ratio with what is behind it is invisible (fails).",
    )
    renderer_page_audit: bool = Field(
        True,
        description="Run axe-core's accessibility rules and the missing-glyph and font-fallback "
        "check on every document render (after its capture; URL renders are not audited).",
    )
    renderer_glyph_scan_limit: int = Field(
        300,
        ge=0,
        le=100_000,
        description="At most this many text-bearing elements per page get their fonts checked.",
    )
    renderer_layout_max_items: int = Field(
        400,
        ge=1,
        le=100_000,
        description="A render asked for its page layout (an editable export) describes at most "
        "this many elements; past it the layout is marked truncated.",
    )
    renderer_layout_max_chars: int = Field(
        20_000,
        ge=1,
        le=10_000_000,
        description="At most this many characters of text in a page layout.",
    )
    renderer_max_batch_ids: int = Field(200, ge=1, le=10_000)
    renderer_tab_reuse_limit: int = Field(
        50,
        ge=1,
        description="Document renders one browser context serves (reset and verified between "
        "them) before it is replaced by a never-used one; 1 gives every render a fresh context.",
    )
    renderer_tab_keep_for_tenant: bool = Field(
        True,
        description="A document render that runs no script and brings no files leaves its tab "
        "to the next render of the same workspace without a reset (no navigation between "
        "them); false resets after every render.",
    )
    renderer_spare_tabs: int = Field(
        1, ge=0, le=64, description="Document contexts kept warm beyond one per slot."
    )
    renderer_tab_reset_timeout_seconds: float = Field(2.0, gt=0)
    renderer_changes_max_wait_seconds: float = Field(
        1.0,
        gt=0,
        le=30,
        description="Longest a `GET /v1/changes` long-poll is held open (it also delays a "
        "renderer's graceful stop by at most this much).",
    )
    renderer_changes_inline_max_bytes: int = Field(
        4 * 1024 * 1024,
        ge=0,
        description="Artefact bytes a `GET /v1/changes?receipts=1` answer carries inline (the "
        "pages that just finished, each once, committed without an artefact round trip); "
        "larger ones are downloaded as before.",
    )
    renderer_inline_extract_min_bytes: int = Field(
        32 * 1024,
        ge=1,
        description="A document's base64 `data:` fonts and `<img>` images at least this long are "
        "served to its page from its own origin instead of being parsed out of the HTML.",
    )
    renderer_drain_timeout_seconds: float = Field(
        30.0,
        gt=0,
        description="A draining renderer (SIGTERM, or POST /v1/renderers/{id}/drain) lets its "
        "in-flight pages finish for at most this long; what still runs then is handed back "
        "(RENDER_WORKER_STOPPED, retried elsewhere without counting as an attempt).",
    )
    renderer_drain_collect_seconds: float = Field(
        5.0,
        ge=0,
        description="How long a draining renderer waits for the results of the attempts it had "
        "in flight to be fetched, from each one's end, unless the control plane releases it "
        "sooner.",
    )

    # --- render control plane --------------------------------------------------------------
    renderer_urls: list[str] = Field(default_factory=list)
    renderers: int = Field(1, ge=0, le=16)
    render_lease_seconds: float = Field(15.0, gt=0)
    render_receipt_poll_seconds: float = Field(0.1, gt=0)
    render_unknown_reconcile_after_seconds: float = Field(5.0, gt=0)
    render_attempt_timeout_seconds: float = Field(60.0, gt=0)
    render_request_deadline_seconds: float = Field(180.0, gt=0)
    render_max_attempts: int = Field(3, ge=1, le=100)
    render_retry_after_seconds: float = Field(1.0, ge=0)
    render_global_cap: int = Field(16, ge=1)
    render_workspace_cap: int = Field(4, ge=1)
    render_queue_limit: int = Field(1000, ge=1)
    render_workspace_queue_limit: int = Field(200, ge=1)
    render_workspace_slot_share: float = Field(
        0.5,
        gt=0,
        le=1,
        description="Share of the live renderers' slots one workspace's attempts may hold at "
        "once (at least one slot; also at most render_workspace_cap); beyond it its requests "
        "wait while other workspaces' are admitted. 1 lets one workspace take every slot.",
    )
    render_restart_backoff_seconds: float = Field(1.0, gt=0)
    render_restart_backoff_max_seconds: float = Field(30.0, gt=0)
    artifact_store_url: str | None = Field(
        None,
        validation_alias=AliasChoices("DECKYARD_ARTIFACT_STORE_URL", "DECKYARD_ARTIFACTS_URL"),
        description="Where artefacts live: any fsspec URL (`s3://bucket/prefix`, "
        "`file:///srv/artefacts`); unset: `<data_dir>/artifacts`. Nodes on separate hosts share "
        "one S3 bucket. `DECKYARD_ARTIFACTS_URL` is accepted as another name.",
    )
    artifact_store_endpoint_url: str | None = Field(
        None,
        description="An S3-compatible server (`https://s3.example.net`); unset: AWS S3.",
    )
    artifact_store_access_key_id: str | None = Field(
        None, description="S3 access key id; unset: boto's usual chain (AWS_*, instance role)."
    )
    artifact_store_secret_access_key: SecretStr | None = None
    artifact_store_region: str | None = Field(None, description="S3 region (`eu-west-1`).")
    artifact_store_addressing_style: Literal["auto", "path", "virtual"] = Field(
        "auto", description="S3 bucket addressing: `path` for most self-hosted servers."
    )
    artifact_store_timeout_seconds: float = Field(
        10.0, gt=0, description="Connect and read timeout of one S3 request."
    )
    artifact_store_max_attempts: int = Field(
        3,
        ge=1,
        le=20,
        description="Tries of one S3 request (with backoff) before the store counts as "
        "unavailable (API answers 503 ARTIFACT_STORE_UNAVAILABLE).",
    )
    render_probe_interval_seconds: float = Field(5.0, gt=0)
    render_idle_poll_ceiling_seconds: float = Field(5.0, gt=0)
    render_http_timeout_seconds: float = Field(10.0, gt=0)
    render_lease_renew_fraction: float = Field(0.5, gt=0, le=1)
    render_renderer_start_timeout_seconds: float = Field(60.0, gt=0)
    render_renderer_stop_grace_seconds: float = Field(10.0, gt=0)
    render_reap_interval_seconds: float = Field(1.0, gt=0)
    render_deck_page_seconds: float = Field(
        2.0,
        gt=0,
        description="A deck render request's deadline grows by this much per page, on top of "
        "render_request_deadline_seconds.",
    )
    render_receipt_watched_poll_seconds: float = Field(
        1.0,
        gt=0,
        description="Timed receipt passes while every renderer running our attempts holds a "
        "change long-poll open (it wakes the pass the moment an attempt ends): leases and "
        "deadlines only; render_receipt_poll_seconds otherwise. Capped by a sixth of the lease "
        "renewal window (six chances to renew before a lease runs out).",
    )
    render_drain_poll_seconds: float = Field(
        0.5,
        gt=0,
        description="Probe cadence while a renderer drains: how soon a node tells it to drain "
        "and, once none of its attempts holds a slot, releases it to exit.",
    )

    # --- tasks and reconciliation ----------------------------------------------------------
    reconciliation_interval_seconds: float = Field(300.0, gt=0)
    reconciliation_enabled: bool = True
    reconciliation_thresholds_seconds: dict[str, float] = Field(
        default_factory=lambda: {"running": 1800.0, "pending": 1800.0}
    )
    task_lease_seconds: float = Field(
        30.0,
        gt=0,
        description="Lease a process holds on each task it drives; when it lapses (the driver "
        "died), another process resumes the task.",
    )
    task_heartbeat_interval_seconds: float = Field(
        5.0, gt=0, description="How often a driving process extends its task leases (one UPDATE)."
    )

    # --- retention and the artefact sweep --------------------------------------------------
    render_retention_seconds: float = Field(
        7 * 24 * 3600.0,
        gt=0,
        description="Finished render requests (and their attempts) older than this are pruned; "
        "their artefacts go too unless a job, page version or publication still points at them.",
    )
    task_retention_seconds: float = Field(
        7 * 24 * 3600.0,
        gt=0,
        description="Finished tasks (and their events) older than this are pruned.",
    )
    retention_prune_interval_seconds: float = Field(
        3600.0, gt=0, description="How often the render request and task prune looks."
    )
    retention_batch_size: int = Field(
        500, ge=1, le=100_000, description="Rows one prune transaction deletes at most."
    )
    artifact_sweep_interval_seconds: float = Field(
        3600.0,
        gt=0,
        description="How often the sweep lists the artefact store and deletes objects no row "
        "refers to (and asset blobs no asset refers to).",
    )
    artifact_sweep_grace_seconds: float = Field(
        3600.0,
        gt=0,
        description="The sweep never deletes an object (or asset blob) written more recently "
        "than this: it may be a write whose row is not committed yet.",
    )
    artifact_sweep_batch_size: int = Field(
        1000, ge=1, le=100_000, description="Store objects one sweep step checks and deletes."
    )

    # --- decks -----------------------------------------------------------------------------
    deck_max_body_bytes: int = Field(
        64 * 1024 * 1024, ge=1024, description="Largest deck upload (ZIP or JSON); more is 413."
    )
    deck_max_zip_entries: int = Field(2000, ge=1, le=1_000_000)
    deck_max_uncompressed_bytes: int = Field(
        256 * 1024 * 1024, ge=1024, description="Sum of a deck's unpacked files."
    )
    deck_max_file_bytes: int = Field(32 * 1024 * 1024, ge=1024)
    deck_max_pages: int = Field(500, ge=1, le=100_000)
    deck_max_slide_dimension: int = Field(8192, ge=16)
    deck_max_document_bytes: int = Field(
        50 * 1024 * 1024, ge=1024, description="Largest compiled page or print document."
    )
    deck_site_max_uncompressed_bytes: int = Field(
        2 * 1024 * 1024 * 1024, ge=1024, description="Sum of a built site's unpacked files."
    )
    deck_markdown_html: bool = Field(True, description="Allow raw HTML inside Markdown pages.")
    deck_fetch_remote: bool = Field(
        True,
        description="Download the images, fonts and stylesheets a deck refers to by URL when "
        "it is uploaded or validated (through the SSRF guard; off refuses them). A workspace's "
        "`fetch_remote` setting, when not null, decides for that workspace instead.",
    )
    deck_fetch_remote_max_files: int = Field(
        50, ge=0, le=10_000, description="Remote files fetched for one deck; more are warnings."
    )
    deck_fetch_remote_timeout_seconds: float = Field(
        15.0, gt=0, description="Longest download of one remote file."
    )
    deck_fetch_remote_cache_seconds: float = Field(
        86_400.0, ge=0, description="How long `deckyard render` reuses a cached remote file."
    )
    deck_markdown_extensions: list[str] = Field(
        default_factory=lambda: ["table", "strikethrough"],
        description="markdown-it rules enabled on top of CommonMark.",
    )
    deck_marp_timeout_seconds: float = Field(
        60.0, gt=0, description="How long Marp's engine (Node) may take to convert one deck."
    )
    deck_accessibility_errors: bool = Field(
        False,
        description="Accessibility findings (RENDER_ACCESSIBILITY) fail a page at the write "
        "gate instead of warning.",
    )
    deck_validate_render_timeout_seconds: float = Field(
        75.0,
        gt=0,
        description="How long a page's render check may wait before `unavailable`. Keep it "
        "above render_attempt_timeout_seconds (the page's budget), so that a page which spends "
        "its whole budget is answered `failed` (RENDER_PAGE_BUDGET_EXCEEDED), not `unavailable`.",
    )
    deck_job_timeout_seconds: float = Field(
        300.0, gt=0, description="Longest run of one deck job (validate, edit, build, export)."
    )
    deck_job_max_attempts: int = Field(
        3, ge=1, le=100, description="Executions of a deck job before it fails for good."
    )
    deck_job_concurrency: int = Field(
        4,
        ge=1,
        le=1000,
        description="Deck jobs run at once (their own worker, apart from renders).",
    )
    deck_api_wait_seconds: float = Field(
        90.0, gt=0, description="How long a synchronous deck route waits for its job."
    )
    deck_compile_processes: int = Field(
        2,
        ge=0,
        le=64,
        description="Worker processes that load and compile large decks off the API's event "
        "loop (started on first use); 0 compiles every deck in a thread instead.",
    )
    deck_compile_process_min_bytes: int = Field(
        64 * 1024,
        ge=0,
        description="Page and theme text (bytes) from which a compile goes to a worker "
        "process; smaller ones run in a thread, where a process round trip would cost more.",
    )
    deck_compile_nice: int = Field(
        10,
        ge=0,
        le=19,
        description="Nice value added to the compile worker processes, so the API's own "
        "requests come first on a busy machine.",
    )
    deck_require_if_match: bool = Field(
        False,
        description="Refuse deck and page writes without an If-Match header (428); by default "
        "they are allowed (last writer wins) and recorded as unconditional.",
    )
    deck_pdf_warn_bytes_per_slide: int = Field(
        2 * 1024 * 1024,
        ge=0,
        description="A deck export whose PDF is larger than this many bytes a slide succeeds "
        "with a warning (Chromium rasterises CSS filters, shadows and blend modes); 0: never.",
    )
    render_result_cache_max_bytes: int = Field(
        1024 * 1024 * 1024,
        ge=0,
        description="How much `deckyard render` keeps of earlier runs' renders in the user "
        "cache (`~/.cache/deckyard/renders`), least recently used evicted first; 0: keep "
        "nothing (every run renders every page).",
    )

    # --- hosted sites ----------------------------------------------------------------------
    site_default_visibility: Literal["public", "private"] = Field(
        "private",
        description="Visibility of a publish that does not say: `private` sites are served only "
        "through a share link, `public` ones to anyone at /sites/{workspace}/{deck}/.",
    )
    site_signing_key: str | None = Field(
        None,
        min_length=32,
        description="Key that signs share links; unset: the key migration 0009 stored in the "
        "database (shared by every process on it). Changing it invalidates every link.",
    )
    site_share_default_seconds: int = Field(
        7 * 24 * 3600, ge=60, description="Lifetime of a share link that does not say."
    )
    site_share_max_seconds: int = Field(
        90 * 24 * 3600, ge=60, description="Longest lifetime a share link may ask for."
    )
    site_purge_grace_seconds: float = Field(
        3600.0,
        ge=0,
        description="How long a superseded or unpublished publication's files stay in the store "
        "before `SiteService.purge_ended` (the retention sweeper) may delete them.",
    )

    # --- webhooks (docs/webhooks.md) -------------------------------------------------------
    webhook_allow_private_targets: bool = Field(
        False,
        description="Let webhook endpoints be loopback, private or link-local addresses (tests, "
        "receivers on the same network); off: the SSRF guard of URL renders refuses them.",
    )
    webhook_timeout_seconds: float = Field(
        10.0, gt=0, le=300, description="Longest one delivery attempt may take, answer included."
    )
    webhook_max_attempts: int = Field(
        12, ge=1, le=100, description="Attempts of one delivery before it is given up."
    )
    webhook_retry_base_delay_seconds: float = Field(
        5.0, gt=0, description="Wait after a delivery's first failed attempt; doubles after each."
    )
    webhook_retry_max_delay_seconds: float = Field(
        3600.0, gt=0, description="Longest wait between two attempts of a delivery."
    )
    webhook_concurrency: int = Field(
        4, ge=1, le=1000, description="Deliveries a node sends at once (a worker of their own)."
    )
    webhook_max_endpoints_per_workspace: int = Field(20, ge=1, le=10_000)
    webhook_secret_rotation_grace_seconds: float = Field(
        24 * 3600.0,
        ge=0,
        description="After a secret rotation, deliveries are also signed with the old secret "
        "for this long (a second `v1=`), so receivers can switch without dropping any; 0: not.",
    )
    webhook_relay_interval_seconds: float = Field(
        1.0, gt=0, description="How often the job relay looks for finished jobs while busy."
    )
    webhook_relay_idle_seconds: float = Field(
        5.0, gt=0, description="Longest pause of the job relay while nothing finishes."
    )
    webhook_relay_lag_seconds: float = Field(
        5.0,
        gt=0,
        description="Each relay sweep looks again this far behind the newest finish it saw, "
        "for jobs that committed late (keep it above the nodes' clock skew).",
    )
    webhook_relay_batch_size: int = Field(500, ge=1, le=100_000)
    webhook_delivery_retention_seconds: float = Field(
        30 * 24 * 3600.0,
        gt=0,
        description="Delivered or given-up deliveries (and their attempts) older than this "
        "are pruned.",
    )

    # --- AI authoring ----------------------------------------------------------------------
    ai_base_url: str | None = Field(
        None,
        description="An OpenAI-compatible API (e.g. https://api.openai.com/v1 or Ollama's "
        "http://127.0.0.1:11434/v1); unset: the AI routes answer 503 AI_NOT_CONFIGURED.",
    )
    ai_api_key: SecretStr | None = Field(None, description="Bearer key for the provider.")
    ai_text_model: str = Field("gpt-4o-mini", min_length=1, max_length=200)
    ai_image_model: str = Field("gpt-image-1", min_length=1, max_length=200)
    ai_request_timeout_seconds: float = Field(120.0, gt=0, description="One provider call.")
    ai_connect_timeout_seconds: float = Field(10.0, gt=0)
    ai_job_timeout_seconds: float = Field(
        600.0, gt=0, description="Longest run of one AI job attempt (every round included)."
    )
    ai_job_max_attempts: int = Field(4, ge=1, le=100)
    ai_retry_after_max_seconds: float = Field(
        300.0, gt=0, description="Cap on a provider's Retry-After before the next attempt."
    )
    ai_workspace_concurrency: int = Field(
        2, ge=1, le=1000, description="Provider calls one workspace runs at once on a node."
    )
    ai_job_concurrency: int = Field(4, ge=1, le=1000, description="AI jobs a node runs at once.")
    ai_repair_rounds: int = Field(
        2, ge=0, le=20, description="Times a failed validation goes back to the model."
    )
    ai_max_answer_tokens: int = Field(4096, ge=16, le=1_000_000)
    ai_temperature: float = Field(0.2, ge=0, le=2)
    ai_image_max_bytes: int = Field(
        16 * 1024 * 1024, ge=1024, description="Largest generated image accepted as an asset."
    )
    ai_image_sizes: list[str] = Field(
        default_factory=lambda: ["256x256", "512x512", "1024x1024", "1024x1536", "1536x1024"],
        description="Sizes `assets:generate` accepts (WIDTHxHEIGHT).",
    )
    ai_catalog_cron: str | None = Field(
        "17 3 * * *", description="When the model catalog syncs (UTC cron); unset: never."
    )

    # --- external workers ------------------------------------------------------------------
    external_lease_seconds: float = Field(
        60.0,
        gt=0,
        validation_alias=AliasChoices(
            "DECKYARD_EXTERNAL_LEASE_SECONDS", "DECKYARD_AI_EXTERNAL_LEASE_SECONDS"
        ),
        description="Lease an external worker holds per claim or heartbeat. "
        "`DECKYARD_AI_EXTERNAL_LEASE_SECONDS` is accepted as another name.",
    )
    external_claim_max_wait_seconds: float = Field(
        30.0,
        ge=0,
        validation_alias=AliasChoices(
            "DECKYARD_EXTERNAL_CLAIM_MAX_WAIT_SECONDS",
            "DECKYARD_AI_EXTERNAL_CLAIM_MAX_WAIT_SECONDS",
        ),
        description="Longest long-poll of an external worker's claim. "
        "`DECKYARD_AI_EXTERNAL_CLAIM_MAX_WAIT_SECONDS` is accepted as another name.",
    )

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        toml_path = os.environ.get(f"{ENV_PREFIX}CONFIG_FILE", "deckyard.toml")
        sources: list[PydanticBaseSettingsSource] = [init_settings, env_settings]
        if Path(toml_path).is_file():
            sources.append(TomlConfigSettingsSource(settings_cls, toml_file=toml_path))
        return tuple(sources)

    @model_validator(mode="after")
    def _check_relations(self) -> Self:
        problems: list[str] = []

        def need(ok: bool, field: str, message: str) -> None:
            if not ok:
                problems.append(f"{_env_name(field)}: {message}")

        need(
            self.job_lease_seconds >= 3 * self.job_heartbeat_interval_seconds,
            "job_lease_seconds",
            f"must be at least 3 x DECKYARD_JOB_HEARTBEAT_INTERVAL_SECONDS "
            f"({self.job_lease_seconds} < 3 x {self.job_heartbeat_interval_seconds})",
        )
        need(
            self.task_lease_seconds >= 3 * self.task_heartbeat_interval_seconds,
            "task_lease_seconds",
            f"must be at least 3 x DECKYARD_TASK_HEARTBEAT_INTERVAL_SECONDS "
            f"({self.task_lease_seconds} < 3 x {self.task_heartbeat_interval_seconds})",
        )
        need(
            self.job_idle_poll_ceiling_seconds >= self.job_poll_interval_seconds,
            "job_idle_poll_ceiling_seconds",
            "must be at least DECKYARD_JOB_POLL_INTERVAL_SECONDS",
        )
        need(
            self.job_claim_idle_ceiling_seconds >= self.job_poll_interval_seconds,
            "job_claim_idle_ceiling_seconds",
            "must be at least DECKYARD_JOB_POLL_INTERVAL_SECONDS",
        )
        need(
            self.job_retry_max_delay_seconds >= self.job_retry_base_delay_seconds,
            "job_retry_max_delay_seconds",
            "must be at least DECKYARD_JOB_RETRY_BASE_DELAY_SECONDS",
        )
        need(
            self.webhook_retry_max_delay_seconds >= self.webhook_retry_base_delay_seconds,
            "webhook_retry_max_delay_seconds",
            "must be at least DECKYARD_WEBHOOK_RETRY_BASE_DELAY_SECONDS",
        )
        need(
            self.write_retry_max_delay_seconds >= self.write_retry_base_delay_seconds,
            "write_retry_max_delay_seconds",
            "must be at least DECKYARD_WRITE_RETRY_BASE_DELAY_SECONDS",
        )
        need(
            self.render_lease_seconds >= 3 * self.render_receipt_poll_seconds,
            "render_lease_seconds",
            "must be at least 3 x DECKYARD_RENDER_RECEIPT_POLL_SECONDS",
        )
        need(
            self.render_idle_poll_ceiling_seconds >= self.render_receipt_poll_seconds,
            "render_idle_poll_ceiling_seconds",
            "must be at least DECKYARD_RENDER_RECEIPT_POLL_SECONDS",
        )
        need(
            self.render_restart_backoff_max_seconds >= self.render_restart_backoff_seconds,
            "render_restart_backoff_max_seconds",
            "must be at least DECKYARD_RENDER_RESTART_BACKOFF_SECONDS",
        )
        need(
            self.render_workspace_cap <= self.render_global_cap,
            "render_workspace_cap",
            "must not exceed DECKYARD_RENDER_GLOBAL_CAP",
        )
        need(
            self.renderer_default_timeout_seconds <= self.renderer_max_timeout_seconds,
            "renderer_default_timeout_seconds",
            "must not exceed DECKYARD_RENDERER_MAX_TIMEOUT_SECONDS",
        )
        need(
            self.ai_base_url is None or self.ai_base_url.startswith(("http://", "https://")),
            "ai_base_url",
            "must start with http:// or https://",
        )
        if self.otel_exporter_otlp_endpoint is not None:
            need(
                self.otel_exporter_otlp_endpoint.startswith(("http://", "https://")),
                "otel_exporter_otlp_endpoint",
                "must start with http:// or https://",
            )
            need(
                _installed("opentelemetry.exporter.otlp.proto.http"),
                "otel_exporter_otlp_endpoint",
                "is set but the OTLP exporter is not installed: install deckyard with the "
                "`otlp` extra (pip install 'deckyard[otlp]')",
            )
        for size in self.ai_image_sizes:
            need(_is_size(size), "ai_image_sizes", f"{size!r} is not WIDTHxHEIGHT")
        for status, seconds in self.reconciliation_thresholds_seconds.items():
            need(seconds > 0, "reconciliation_thresholds_seconds", f"{status!r} must be > 0")
        if self.database_url is not None:
            need(
                self.database_url.split(":", 1)[0].split("+", 1)[0]
                in ("sqlite", "postgresql", "postgres"),
                "database_url",
                "must start with sqlite:// or postgresql://",
            )
        if problems:
            raise ValueError("\n".join(problems))
        return self

    @property
    def ai_configured(self) -> bool:
        """True when an AI provider is configured."""
        return self.ai_base_url is not None

    @property
    def resolved_database_url(self) -> str:
        """The database URL, defaulting to a SQLite file inside `data_dir`."""
        if self.database_url:
            return self.database_url
        return f"sqlite:///{self.default_database_file}"

    @property
    def default_database_file(self) -> Path:
        """The SQLite file used when no `database_url` is set."""
        return (self.data_dir / "deckyard.db").resolve()

    def to_env_json(self) -> str:
        """These settings as JSON that `Settings.load(**json.loads(...))` reads back whole.

        `model_dump_json` writes a `SecretStr` as `**********`: a worker process started from
        it would call the AI provider and the S3 store with that as the key.
        """
        data = self.model_dump(mode="json")
        for name, value in self:
            if isinstance(value, SecretStr):
                data[name] = value.get_secret_value()
        return json.dumps(data)

    @classmethod
    def load(cls, **overrides: Any) -> Settings:
        """Build and validate settings, turning pydantic's errors into readable lines."""
        try:
            return cls(**overrides)
        except ValidationError as exc:
            raise SettingsError(_readable(exc)) from None


def _installed(module: str) -> bool:
    try:
        return find_spec(module) is not None
    except ImportError:  # a parent package is missing
        return False


def _is_size(value: str) -> bool:
    width, sep, height = value.partition("x")
    return bool(sep) and width.isdigit() and height.isdigit() and int(width) > 0 < int(height)


def _readable(exc: ValidationError) -> list[str]:
    lines: list[str] = []
    for err in exc.errors():
        loc = [str(part) for part in err["loc"] if part != "__root__"]
        message = str(err["msg"]).removeprefix("Value error, ")
        if not loc:
            lines.extend(message.splitlines())
            continue
        got = err.get("input")
        shown = f" (got {got!r})" if got is not None and not isinstance(got, dict) else ""
        lines.append(f"{_env_name(loc[0])}: {message}{shown}")
    return lines
