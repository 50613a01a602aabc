#!/usr/bin/env bash
# The test suite: set up everything (build, models, test tools), then pytest over tests/ against
# the installed package, listing the 30 slowest steps (where the wall time goes).
#
#   bash scripts/test.sh               # the whole suite: every test (CI runs exactly this)
#   bash scripts/test.sh --fast        # the inner loop: every test not marked slow (-m "not slow")
#   bash scripts/test.sh [--fast] ARGS # extra arguments go to pytest (-k stop, tests/chat, -n 2, ...)
#
# The slow tests (marker `slow`: the list in tests/conftest.py and each module's own marks) are the
# full-corpus scoreboard and the tests that read the full corpus, the server suites against
# llama-server and the servers started per test, the peer, the sdist build, the README's examples,
# mypy and the real clients; the full suite runs them all. Oracle answers come from the answer
# cache under $LLAMACT_CACHE (tests/conftest.py says why that is honest), so a second run is faster.
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
