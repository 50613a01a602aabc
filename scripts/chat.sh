#!/usr/bin/env bash
# The main job: set up everything (first run builds llama.cpp), then a short streamed chat with
# the default model. Extra arguments go to `llamact chat` (e.g. --prompt "..." or --model PATH).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/_env.sh"
llamact_setup
cd "$LLAMACT_CACHE"
if [ "$#" -eq 0 ]; then
    set -- --prompt "In two sentences, what is a large language model?"
fi
exec llamact chat "$@"
