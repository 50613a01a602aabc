"""The server's settings: one table of fields (``settings.ServerSettings``), each a flag, an
``LLAMACT_*`` variable and a config key (``options``: the table's rows and their scopes)."""
