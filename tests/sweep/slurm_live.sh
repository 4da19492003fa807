#!/usr/bin/env bash
# The sweep's Slurm job array against a live one-node Slurm cluster (scripts/slurm-cluster.sh):
#   1. the smoke sweep, written by `loopscale sweep slurm` and submitted with sbatch as a 2-task
#      array, completes; every run finishes exactly once (one results line, trained once);
#      `sweep merge` and `sweep report` work on it, and its losses, probe scores and recurrence
#      curves are identical to those of the same sweep run locally (`sweep run`);
#   2. faults: the same array again; task 1 cancelled (scancel) in the middle of a run stays
#      cancelled until requeued (scontrol requeue), task 0 warned of its time limit (USR1 to the
#      batch shell, as --signal=B:USR1 does) in the middle of a run requeues itself; both resume
#      their run from its checkpoint, and the results are identical again.
# The cluster is always stopped at the end, also on failure. Builds nothing: the loopscale
# program is the first argument (CMake passes the built one). Exit 77 (skipped) without root or
# without slurm-wlm and munge (scripts/setup.sh installs them).
#
#   bash tests/sweep/slurm_live.sh LOOPSCALE [WORK_DIR]
set -euo pipefail

[ $# -ge 1 ] || {
  echo "usage: $0 LOOPSCALE [WORK_DIR]" >&2
  exit 2
}
bin=$(realpath "$1")
work=${2:-$(mktemp -d /tmp/loopscale-slurm.XXXXXX)}
root=$(cd "$(dirname "$0")/../.." && pwd)
cluster="$root/scripts/slurm-cluster.sh"

skip() {
  echo "slurm_live: SKIPPED: $*"
  exit 77
}
[ "$(id -u)" -eq 0 ] || skip "needs root (slurmd runs the jobs, munged runs as munge)"
for p in slurmctld slurmd munged munge sbatch squeue scontrol scancel; do
  command -v "$p" > /dev/null || skip "$p is not installed (scripts/setup.sh installs slurm-wlm and munge)"
done
[ -x "$bin" ] || {
  echo "slurm_live: $bin is not an executable" >&2
  exit 2
}

t0=$SECONDS
phase_start=$SECONDS
times=()
phase() {  # records how long the previous phase took
  times+=("$1 $((SECONDS - phase_start)) s")
  echo "slurm_live: [$((SECONDS - t0)) s] $1 done"
  phase_start=$SECONDS
}
fail() {
  echo "slurm_live: FAILED: $*" >&2
  exit 1
}

rm -rf "$work"
mkdir -p "$work"
export SLURM_CONF="$work/cluster/etc/slurm.conf"
local_pid=""
finish() {
  local rc=$?
  set +e
  if [ $rc -ne 0 ]; then
    echo "slurm_live: exit $rc; the task logs and the queue:" >&2
    squeue >&2 2> /dev/null
    for f in "$work"/array/slurm-*.log "$work"/fault/slurm-*.log; do [ -f "$f" ] && { echo "== $f" && tail -n 15 "$f"; } >&2; done
  fi
  [ -z "$local_pid" ] || { kill "$local_pid" 2> /dev/null && wait "$local_pid" 2> /dev/null; }
  bash "$cluster" stop "$work/cluster"
  exit $rc
}
trap finish EXIT
# Interrupted (Ctrl-C, a test runner's TERM): exit, so that finish stops the cluster.
trap 'exit 130' INT
trap 'exit 143' TERM

# A tiny byte-level corpus from texts every Debian system has (base-files' licences): about 100 kB
# to train on, 30 kB to validate on (the smoke sweep validates on 8192 tokens).
lic=/usr/share/common-licenses
"$bin" data prepare --quiet --tokenizer byte --shard-tokens 0 --format text --input "$lic/GPL-3" "$lic/LGPL-2.1" "$lic/GFDL-1.3" \
  --val-input "$lic/Apache-2.0" "$lic/MPL-2.0" --out "$work/corpus" > /dev/null
phase "corpus"

# The reference: the same sweep in one local process, beside the cluster's tasks.
"$bin" sweep run --preset smoke --data "$work/corpus" --out "$work/local" > "$work/local.log" 2>&1 &
local_pid=$!

bash "$cluster" start "$work/cluster"
phase "cluster start"

runs=$("$bin" sweep plan --preset smoke --json | python3 -c 'import json, sys; print(sum(r["runnable"] for r in json.load(sys.stdin)["runs"]))')
[ "$runs" -gt 0 ] || fail "the smoke plan has no runnable run"

# Waits until job $1 has left the queue, $2 seconds at most.
wait_job() {
  local end=$((SECONDS + $2))
  while [ -n "$(squeue -h -j "$1" 2> /dev/null)" ]; do
    [ $SECONDS -lt $end ] || fail "job $1 still in the queue after $2 s: $(squeue -h -j "$1" -o '%i %T %r' | tr '\n' ' ')"
    sleep 0.5
  done
}

# Every array task of job $1 ended COMPLETED with exit 0.
check_completed() {
  local tasks
  tasks=$(scontrol show job "$1" -o)
  if [ "$(grep -c 'JobState=COMPLETED' <<< "$tasks")" -ne 2 ] || [ "$(grep -c 'ExitCode=0:0' <<< "$tasks")" -ne 2 ]; then
    fail "job $1: not every task completed with exit 0: $(grep -oE 'ArrayTaskId=[0-9]+|JobState=[A-Z_]+|ExitCode=[0-9:]+' <<< "$tasks" | tr '\n' ' ')"
  fi
}

# Sweep folder $1 holds each of the plan's runs exactly once across its shard files, and (with $2
# = fresh) no run was resumed, i.e. each was trained once.
check_once() {
  python3 - "$1" "$runs" "${2:-}" << 'PY'
import glob, json, sys
d, want, fresh = sys.argv[1], int(sys.argv[2]), sys.argv[3] == "fresh"
ids = []
for f in sorted(glob.glob(d + "/results.shard-*.jsonl")):
    ids += [json.loads(l)["id"] for l in open(f) if l.strip()]
dup = sorted({i for i in ids if ids.count(i) > 1})
if dup or len(ids) != want:
    sys.exit(f"{d}: {len(ids)} results lines for {want} runs, twice: {dup}")
if fresh:
    for f in glob.glob(d + "/results.shard-*.jsonl"):
        for l in open(f):
            r = json.loads(l)
            if r["summary"].get("resumed_from", -1) >= 0:
                sys.exit(f"{d}: run {r['id']} was resumed from step {r['summary']['resumed_from']}; it should have trained once")
print(f"{d}: {want} runs, each exactly once")
PY
}

# The merged results of folder $1 equal the local sweep's: losses, probe scores and recurrence
# curve of every run, to the last bit (JSON numbers compared as written), all but the time taken.
check_identical() {
  python3 - "$1" "$work/local" << 'PY'
import json, sys
def untimed(x):
    if isinstance(x, dict):
        return {k: untimed(v) for k, v in x.items() if k != "seconds"}
    return [untimed(v) for v in x] if isinstance(x, list) else x
def load(d):
    return {r["id"]: r for r in (json.loads(l) for l in open(d + "/results.jsonl") if l.strip())}
a, b = load(sys.argv[1]), load(sys.argv[2])
if a.keys() != b.keys():
    sys.exit(f"different runs: {sorted(a.keys() ^ b.keys())}")
for i in sorted(a):
    x, y = a[i], b[i]
    for what, u, v in (("loss", x["loss"], y["loss"]),
                       ("validation loss", x["summary"].get("val_loss"), y["summary"].get("val_loss")),
                       ("last training loss", x["summary"].get("train_loss"), y["summary"].get("train_loss")),
                       ("probe scores", untimed(x["summary"].get("eval")), untimed(y["summary"].get("eval"))),
                       ("recurrence curve", untimed(x["summary"].get("recurrence_curve")), untimed(y["summary"].get("recurrence_curve")))):
        if u != v:
            sys.exit(f"run {i}: {what} differs from the local sweep's: {json.dumps(u)[:200]} against {json.dumps(v)[:200]}")
print(f"{sys.argv[1]}: {len(a)} runs identical to the local sweep (losses " +
      ", ".join(f"{a[i]['loss']:.4f}" for i in sorted(a)) + ")")
PY
}

# A sbatch script for sweep folder $1: two tasks of one CPU (the machine's two cores), small
# memory and time limits a one-node test cluster grants.
write_script() {
  "$bin" sweep slurm --preset smoke --out "$1" --data "$work/corpus" --program "$bin" --shards 2 --cpus 1 --mem 500M --time 10 \
    --script "$1.sbatch" > /dev/null
}

# 1. The array, then merge, report and the comparison with the local sweep.
write_script "$work/array"
job=$(sbatch --parsable "$work/array.sbatch")
echo "slurm_live: submitted job array $job"
wait_job "$job" 300
check_completed "$job"
phase "job array (2 tasks)"
check_once "$work/array" fresh
trained=$(grep -ho 'sweep smoke: [0-9]* trained' "$work"/array/slurm-*.log | awk '{s += $3} END {print s + 0}')
[ "$trained" -eq "$runs" ] || fail "the tasks' logs report $trained runs trained, not $runs"
"$bin" sweep merge --preset smoke --out "$work/array" "$work/array"
"$bin" sweep report "$work/array" --starts 20 --bootstrap 0 --no-plots > /dev/null
if [ ! -s "$work/array/report.md" ] || [ ! -s "$work/array/runs.csv" ]; then fail "sweep report wrote no report.md or runs.csv"; fi
phase "merge + report"
end=$((SECONDS + 300))
while kill -0 "$local_pid" 2> /dev/null; do
  [ $SECONDS -lt $end ] || fail "the local sweep still runs after 300 s"
  sleep 0.5
done
wait "$local_pid" || fail "the local sweep failed: $(tail -n 3 "$work/local.log")"
local_pid=""
phase "local sweep (rest)"
check_identical "$work/array"

# 2. Faults, in one array: task 1 is cancelled in the middle of one of its runs and stays
# cancelled until the test requeues it; task 0 gets the time limit's warning (USR1 to the batch
# shell, what --signal=B:USR1@S sends) in the middle of a run and requeues itself. Both resume
# their run from its checkpoint.
write_script "$work/fault"
# Submitted held and released one task at a time: the smoke runs take a second or two each, so
# task 0 could finish its whole shard while the test deals with task 1 (it did, once runs trained
# in thread lanes and were scored on both threads).
job=$(sbatch --parsable --hold "$work/fault.sbatch")
echo "slurm_live: submitted job array $job (fault case), held"
scontrol release "${job}_1"
plan_json=$("$bin" sweep plan --preset smoke --json)

# The id of a run of shard $1 (of 2) that is training now and has not reached half of its steps:
# steps logged, no result yet. (A run about to end could finish before the signal arrives, which
# then lands between two runs; the live test once saw that.)
training_run() {
  local runs run id steps at end=$((SECONDS + 120))
  runs=$(python3 -c '
import json, sys
print(" ".join(r["id"] + ":" + str(r["steps"]) for i, r in enumerate(json.loads(sys.argv[1])["runs"]) if r["runnable"] and i % 2 == int(sys.argv[2])))' "$plan_json" "$1")
  while [ $SECONDS -lt $end ]; do
    for run in $runs; do
      id=${run%:*} steps=${run#*:}
      if [ -s "$work/fault/runs/$id/log.jsonl" ] && [ ! -e "$work/fault/runs/$id/result.json" ]; then
        at=$(step_of "$id")
        if [ "${at:-0}" -lt $((steps / 2)) ]; then
          echo "$id"
          return 0
        fi
      fi
    done
    sleep 0.05
  done
  fail "no run of task $1 was seen in the first half of its training within 120 s"
}
task_state() { scontrol show job "${job}_$1" -o | grep -oE 'JobState=[A-Z_]+' | cut -d= -f2; }
restarts() { scontrol show job "${job}_$1" -o | grep -oE 'Restarts=[0-9]+' | cut -d= -f2; }
step_of() { tail -n 1 "$work/fault/runs/$1/log.jsonl" | grep -oE '"step":[0-9]+' | cut -d: -f2 || true; }

cancelled=$(training_run 1)
scancel "${job}_1"
echo "slurm_live: cancelled ${job}_1 while run $cancelled trained (at step $(step_of "$cancelled"))"
end=$((SECONDS + 60))
until [ "$(task_state 1)" = CANCELLED ]; do
  [ $SECONDS -lt $end ] || fail "${job}_1 is $(task_state 1), not CANCELLED, 60 s after scancel"
  sleep 0.2
done
sleep 3  # long enough for a task that would requeue itself to have done so
[ "$(task_state 1)" = CANCELLED ] || fail "${job}_1 requeued itself after scancel (now $(task_state 1)): scancel must stop a task"
scontrol requeue "${job}_1"
echo "slurm_live: ${job}_1 stayed cancelled; requeued it"

scontrol release "${job}_0"
warned=$(training_run 0)
scancel --batch --signal=USR1 "${job}_0"
echo "slurm_live: sent USR1 to the batch shell of ${job}_0 while run $warned trained (at step $(step_of "$warned"))"
end=$((SECONDS + 60))
until [ "$(restarts 0)" -ge 1 ]; do
  [ $SECONDS -lt $end ] || fail "${job}_0 did not requeue itself within 60 s of USR1 (state $(task_state 0))"
  sleep 0.2
done
echo "slurm_live: ${job}_0 requeued itself"

wait_job "$job" 300
check_completed "$job"
for t in 0 1; do [ "$(restarts $t)" -eq 1 ] || fail "${job}_$t restarted $(restarts $t) times, not once"; done
phase "fault case: task 1 cancelled and requeued, task 0 warned and requeued by itself"
check_once "$work/fault"
resumed_from() {
  python3 -c '
import json, sys
for l in open(sys.argv[1]):
    r = json.loads(l)
    if r["id"] == sys.argv[2]:
        print(r["summary"].get("resumed_from", -1))' "$work/fault/results.shard-$1-of-2.jsonl" "$2"
}
for t in 0 1; do
  id=$([ $t -eq 0 ] && echo "$warned" || echo "$cancelled")
  from=$(resumed_from $t "$id")
  [ "${from:--1}" -gt 0 ] || fail "run $id (task $t) did not resume from a checkpoint (resumed_from ${from:-none})"
  grep -q '"event":"interrupted"' "$work/fault/runs/$id/log.jsonl" ||
    echo "slurm_live: note: run $id's log has no interrupted event (its stop came between two checkpoints' steps?)"
  echo "slurm_live: run $id (task $t) resumed from its checkpoint at step $from"
done
"$bin" sweep merge --preset smoke --out "$work/fault" "$work/fault"
check_identical "$work/fault"
phase "fault case checks + merge"

printf 'slurm_live: %s\n' "${times[@]}"
echo "slurm_live: PASSED in $((SECONDS - t0)) s (cluster stop follows)"
