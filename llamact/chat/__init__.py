"""The chat layer (upstream's ``common/chat``): the message type and PEG output parsing into it."""
