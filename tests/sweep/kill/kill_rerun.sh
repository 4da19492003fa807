#!/usr/bin/env bash
# Kill-and-rerun: SIGKILL the sweep at random moments (random within each run, between runs, during
# an append), run it again until it finishes, then check that every run is in results.jsonl exactly
# once with the loss the engine computed, that each run a kill left partway resumed from its
# checkpoint, and that the kills repeated at most a checkpoint interval of steps each. Then the same
# with two shards killed independently and merged.
set -euo pipefail
driver=$1
work=$2
rm -rf "$work"
mkdir -p "$work"
RANDOM=12345  # reproducible kill times
kills=0       # SIGKILLs sent for the folder under test (verify bounds the repeated steps by them)
left=         # the runs the last kill left partway (kill_once)

# kill_once OUT PID: SIGKILLs the driver, waits for it to be gone, and sets `left` to (and appends
# to OUT.partway) the runs the kill left with a checkpoint short of their end, which verify requires
# to have resumed. A kill after the driver has exited counts too: that only loosens the bound.
kill_once() {
  local out=$1 pid=$2
  kill -9 "$pid" 2> /dev/null || true
  wait "$pid" 2> /dev/null || true
  kills=$((kills + 1))
  left=$("$driver" partway "$out")
  if [[ -n $left ]]; then echo "$left" >> "$out.partway"; fi
}

kill_loop() {  # kill_loop OUT [SHARD]: kills the driver 12 times at random moments, then partway through a run, then lets it finish
  local out=$1 shard=${2:-}
  : >> "$out.partway"
  for i in $(seq 1 12); do
    "$driver" run "$out" $shard > /dev/null &
    local pid=$!
    sleep "0.$(printf '%03d' $((RANDOM % 400 + 20)))"
    kill_once "$out" "$pid"
  done
  # Then once a run has a checkpoint short of its end, until a kill leaves one so (the finished run
  # may end between the look and the kill): on a loaded machine every kill above could have come
  # before the first checkpoint, and then nothing would test a resume.
  for try in 1 2 3 4 5; do
    "$driver" run "$out" $shard > /dev/null &
    local pid=$!
    for t in $(seq 1 600); do  # 30 s at most
      [[ -n $("$driver" partway "$out") ]] && break
      kill -0 "$pid" 2> /dev/null || break
      sleep 0.05
    done
    kill_once "$out" "$pid"
    [[ -n $left ]] && break
  done
  if [[ -z $left ]]; then
    echo "FAIL: no kill left a run of $out ${shard:+(shard $shard) }partway in 5 tries"
    exit 1
  fi
  "$driver" run "$out" $shard
}

echo "== one process"
kill_loop "$work/whole"
"$driver" verify "$work/whole" "$kills" "$work/whole.partway"
# A rerun of a finished sweep trains nothing.
"$driver" run "$work/whole" | grep -q "^trained 0 recovered 0 already 36$"

echo "== two shards, killed independently, then merged"
kills=0
kill_loop "$work/shared" 0/2
kill_loop "$work/shared" 1/2
"$driver" merge "$work/shared" "$work/shared"
"$driver" verify "$work/shared" "$kills" "$work/shared.partway"

# Merging the same shard twice is an error, not a silent dedupe. Every shard is given, so a dedupe
# would have found all 36 runs and exited 0 (as the same files without the copy do); the error
# names the first run of the shard and both files, and nothing is written.
shard0=$work/shared/results.shard-0-of-2.jsonl
shard1=$work/shared/results.shard-1-of-2.jsonl
mkdir -p "$work/copy"
cp "$shard0" "$work/copy/"
"$driver" merge "$work/nodup" "$shard0" "$shard1" > /dev/null || { echo "FAIL: the two shards do not merge"; exit 1; }
if "$driver" merge "$work/dup" "$shard0" "$shard1" "$work/copy/results.shard-0-of-2.jsonl" 2> "$work/dup.err"; then
  echo "FAIL: merging a shard twice succeeded"; exit 1
fi
first=$(sed -n '1s/.*"id":"\([^"]*\)".*/\1/p' "$shard0")
want="sweep_kill_driver: run $first appears twice: in $shard0 and in $work/copy/results.shard-0-of-2.jsonl"
if [[ -z $first ]] || ! grep -qxF "$want" "$work/dup.err"; then
  echo "FAIL: merging a shard twice did not say: $want"
  echo "it said:"; cat "$work/dup.err"
  exit 1
fi
if [[ -e $work/dup ]]; then
  echo "FAIL: the refused merge wrote $work/dup"; exit 1
fi
echo "ok"
