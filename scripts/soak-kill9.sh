#!/usr/bin/env bash
# More kill -9 rounds than the suite runs (test/durability/kill9.test.ts), for a change to the
# store or before a release: scripts/soak-kill9.sh [ROUNDS] (default 1000, about a second each).
# The other variables pass through: KILL9_SEED (the first round's seed), KILL9_PER_DIR (rounds
# per state directory), KILL9_CHECKPOINT_MS (--checkpoint-ms for every server). A failure names
# its seed and the command that reruns it.
set -euo pipefail
cd "$(dirname "$0")/.."
export KILL9_ROUNDS="${1:-${KILL9_ROUNDS:-1000}}"
exec npx vitest run test/durability/kill9.test.ts -t 'kill -9 at a random moment'
