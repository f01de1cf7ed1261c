"""The persistence seam: the only package that knows which database it talks to."""

from deckyard.db.engine import NOTIFY_CHANNEL_SQL, Database, PgStatement, normalize_url, sqlite_file
from deckyard.db.errors import is_connection_lost, is_storage_full, is_transient_write_conflict
from deckyard.db.instrument import StatementCounter, current_loop
from deckyard.db.notify import ANY_CHANNEL, Subscription, WakeupBus
from deckyard.db.retry import WriteRetryPolicy, run_with_write_retry
from deckyard.db.schema import metadata, partial_index
from deckyard.db.types import JSONPayload, UTCDateTime
from deckyard.db.waiters import Follower, SharedFollowers, SharedWaiters

__all__ = [
    "ANY_CHANNEL",
    "NOTIFY_CHANNEL_SQL",
    "Database",
    "Follower",
    "JSONPayload",
    "PgStatement",
    "SharedFollowers",
    "SharedWaiters",
    "StatementCounter",
    "Subscription",
    "UTCDateTime",
    "WakeupBus",
    "WriteRetryPolicy",
    "current_loop",
    "is_connection_lost",
    "is_storage_full",
    "is_transient_write_conflict",
    "metadata",
    "normalize_url",
    "partial_index",
    "run_with_write_retry",
    "sqlite_file",
]
