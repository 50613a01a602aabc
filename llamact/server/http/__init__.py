"""The HTTP edge: bodies read within the limits (``body``), errors and their statuses (``errors``:
the one table), server-sent events (``sse``), the connection's bounds (``transport``), keys, prefix
and CORS (``edge``), and the server's log and access lines (``logs``)."""
