"""The Messages family: Anthropic's ``/v1/messages`` and its token count (``routes``), the body and
the answer (``wire``), the events (``stream``)."""
