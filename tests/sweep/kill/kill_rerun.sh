#!/usr/bin/env bash
# Kill-and-rerun: SIGKILL the sweep at random moments (random within each run, between runs, during
# an append), run it again until it finishes, then check that every run is in results.jsonl exactly
# once with the loss the engine computed. Then the same with two shards killed independently and
# merged.
set -euo pipefail
driver=$1
work=$2
rm -rf "$work"
mkdir -p "$work"
RANDOM=12345  # reproducible kill times

kill_loop() {  # kill_loop OUT [SHARD]: kills the driver 12 times at random moments, then lets it finish
  local out=$1 shard=${2:-}
  for i in $(seq 1 12); do
    "$driver" run "$out" $shard > /dev/null &
    local pid=$!
    sleep "0.$(printf '%03d' $((RANDOM % 400 + 20)))"
    kill -9 "$pid" 2> /dev/null || true
    wait "$pid" 2> /dev/null || true
  done
  "$driver" run "$out" $shard
}

echo "== one process"
kill_loop "$work/whole"
"$driver" verify "$work/whole"
# A rerun of a finished sweep trains nothing.
"$driver" run "$work/whole" | grep -q "^trained 0 recovered 0 already 36$"

echo "== two shards, killed independently, then merged"
kill_loop "$work/shared" 0/2
kill_loop "$work/shared" 1/2
"$driver" merge "$work/shared" "$work/shared"
"$driver" verify "$work/shared"
# Merging the same shard twice is an error, not a silent dedupe.
mkdir -p "$work/copy"
cp "$work/shared/results.shard-0-of-2.jsonl" "$work/copy/"
if "$driver" merge "$work/dup" "$work/shared/results.shard-0-of-2.jsonl" "$work/copy/results.shard-0-of-2.jsonl" 2> "$work/dup.err"; then
  echo "FAIL: merging a shard twice succeeded"; exit 1
fi
echo "ok"
