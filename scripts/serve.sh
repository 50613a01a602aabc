#!/usr/bin/env bash
# `llamact serve` from a clone in one command: set up everything as scripts/chat.sh does, add the
# server's extra dependencies, then serve the bundled SmolLM2 on http://127.0.0.1:8080 (the page
# at /). Extra arguments go to `llamact serve` (e.g. --model PATH --parallel 4 --port 8081).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/_env.sh"
llamact_setup
_llamact_log "server dependencies (llamact[server])"
python -m pip install --quiet --disable-pip-version-check fastapi uvicorn pydantic-settings
cd "$LLAMACT_CACHE"
exec llamact serve "$@"
