#!/usr/bin/env bash
# Old and new server binaries, alternating, under one baton-bench binary: the same-run A/B
# a device is judged by (docs/performance.md). Prints each round's rows with its binary.
#
#   cargo build --release --workspace
#   tests/ab-bench.sh OLD_SERVER NEW_SERVER ROUNDS [baton-bench flags...]
#   tests/ab-bench.sh /tmp/baton-server-old target/release/baton-server 3 --only hot,spread
#
# The old binary: `git worktree add /tmp/old <commit> && cargo build --release -p baton-server
# --manifest-path /tmp/old/Cargo.toml --target-dir target/old` (one target/ for both).
set -euo pipefail
if [ $# -lt 3 ]; then
  sed -n '2,9p' "$0" >&2
  exit 2
fi
old=$1; new=$2; rounds=$3; shift 3
bench="$(dirname "$0")/../target/release/baton-bench"
for round in $(seq 1 "$rounds"); do
  for side in old new; do
    bin=$old; [ "$side" = new ] && bin=$new
    echo "=== round $round: $side ($bin)"
    BATON_TEST_BATON_SERVER_BIN=$bin "$bench" "$@" 2>/dev/null | grep '^| ' | grep -v -e '^| scenario' -e '^| ---'
  done
done
