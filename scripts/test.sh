#!/usr/bin/env bash
# The whole test suite: set up everything (build, models, test tools), then pytest over tests/
# against the installed package, listing the 30 slowest steps (where the wall time goes). Extra
# arguments go to pytest.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/_env.sh"
llamact_setup tests
cd "$LLAMACT_REPO"
exec pytest -ra --durations=30 "$@"
