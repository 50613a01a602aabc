"""The native family: llama-server's own ``/completion``, ``/completions`` and ``/infill`` (``routes``),
written in its own shape (``wire``)."""
