"""The Responses family: ``/v1/responses`` and its input-token count (``routes``), the body and the
answer (``wire``), the named events (``stream``)."""
