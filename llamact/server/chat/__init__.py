"""The chat family: ``/v1/chat/completions`` (``routes``) and the chat body (``wire``), which the
Responses, Messages and templates families read through."""
