"""How requests run on a model: the chat path (``chat``: every chat-shaped family), the raw path
(``raw``: the raw completion families), the tool policy, a request's LoRA scales, and tokenizing
within a limit (``tokens``)."""
