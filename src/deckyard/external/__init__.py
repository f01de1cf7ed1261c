"""External workers: jobs taken by workers outside the server, over HTTP (`protocol.py`)."""
