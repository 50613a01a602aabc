#!/usr/bin/env bash
# The test suite: set up everything (build, models, test tools), then pytest over tests/ against
# the installed package, listing the 30 slowest steps (where the wall time goes).
#
#   bash scripts/test.sh               # the whole suite: every test (CI runs exactly this)
#   bash scripts/test.sh --fast        # the inner loop: every test not marked slow (-m "not slow")
#   bash scripts/test.sh [--fast] ARGS # extra arguments go to pytest (-k stop, tests/chat, -x, ...)
#
# The slow tests (marker `slow`: the list in tests/conftest.py and each module's own marks) are the
# full-corpus scoreboard, the server suites against llama-server, the sdist build, the README's
# examples, the tools (ruff, mypy) and the real clients; the full suite runs them all.
set -euo pipefail
fast=no
if [ "${1:-}" = "--fast" ]; then
    fast=yes
    shift
fi
source "$(dirname "${BASH_SOURCE[0]}")/_env.sh"
llamact_setup tests
cd "$LLAMACT_REPO"
args=(-ra --durations=30)
[ "$fast" = yes ] && args+=(-m "not slow")
exec pytest "${args[@]}" "$@"
