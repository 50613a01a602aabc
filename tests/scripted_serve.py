"""``llamact`` (``serve ARGS``) whose engines obey scripted replies (``scripted_model``): how the
server tests reach outputs a tiny model does not write. Run as a script (``server_live.LiveServer(
..., scripted=True)``)."""

from __future__ import annotations

import sys

from scripted_model import install

from llamact.cli import main

if __name__ == "__main__":
    install()
    sys.exit(main())
