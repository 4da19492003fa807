#!/usr/bin/env bash
# A one-node Slurm cluster on this machine, for testing loopscale's job arrays against a real
# scheduler (tests/sweep/slurm_live.sh, docs/sweeps.md "The live Slurm test"). Needs root and
# Debian's slurm-wlm and munge (scripts/setup.sh); works without systemd and without cgroups.
#
#   scripts/slurm-cluster.sh start DIR    write DIR/etc/slurm.conf, start munged, slurmctld and slurmd,
#                                         wait until the node is idle; prints the SLURM_CONF to export
#   scripts/slurm-cluster.sh status DIR   the node and the queue (exit 3 when the cluster is not up)
#   scripts/slurm-cluster.sh stop DIR     cancel every job, shut the daemons down, end munged
#
# DIR holds the configuration, state, spool and logs (DIR/log/); DIR/cluster.env records the
# daemons' PIDs for `stop`. Clients find the cluster through SLURM_CONF=DIR/etc/slurm.conf. One
# such cluster at a time per machine: slurmctld and slurmd listen on Slurm's default ports.
set -euo pipefail

usage() {
  echo "usage: $0 start|status|stop DIR" >&2
  exit 2
}
[ $# -eq 2 ] || usage
cmd=$1
mkdir -p "$2"
dir=$(cd "$2" && pwd)
export SLURM_CONF="$dir/etc/slurm.conf"
state="$dir/cluster.env"

say() { echo "slurm-cluster: $*"; }
fail() {
  echo "slurm-cluster: $*" >&2
  exit 1
}

# True when PID is alive and is the program NAME: a PID recorded earlier may since belong to
# another process, which must not be signalled.
is_ours() {
  local pid=$1 name=$2
  [ -n "$pid" ] && [ -r "/proc/$pid/comm" ] && [ "$(cat "/proc/$pid/comm" 2> /dev/null)" = "$name" ]
}

# Waits up to $2 seconds for process $1 to end; true when it did.
wait_gone() {
  local pid=$1 end=$((SECONDS + $2))
  while kill -0 "$pid" 2> /dev/null; do
    [ $SECONDS -lt $end ] || return 1
    sleep 0.2
  done
}

port_in_use() { (exec 3<> "/dev/tcp/127.0.0.1/$1") 2> /dev/null; }

munge_works() { munge -n 2> /dev/null | unmunge > /dev/null 2>&1; }

stop() {
  [ -f "$state" ] || {
    say "no cluster recorded in $dir; nothing to stop"
    return 0
  }
  # shellcheck disable=SC1090
  . "$state"
  if is_ours "${CTLD_PID:-}" slurmctld; then
    # Jobs first: shutting down with jobs running would orphan their slurmstepd.
    local jobs
    jobs=$(squeue -h -o %A 2> /dev/null || true)
    # shellcheck disable=SC2086 # one word per job id
    [ -z "$jobs" ] || scancel $jobs 2> /dev/null || true
    local end=$((SECONDS + 60))
    while [ -n "$(squeue -h 2> /dev/null)" ] && [ $SECONDS -lt $end ]; do sleep 0.5; done
    [ -z "$(squeue -h 2> /dev/null)" ] || say "jobs still in the queue after 60 s: $(squeue -h -o '%i %T' | tr '\n' ' ')"
    scontrol shutdown > /dev/null 2>&1 || true  # slurmctld and slurmd both
  fi
  local name pid
  for name in slurmctld slurmd; do
    pid=$([ "$name" = slurmctld ] && echo "${CTLD_PID:-}" || echo "${SLURMD_PID:-}")
    is_ours "$pid" "$name" || continue
    wait_gone "$pid" 30 && continue
    say "$name ($pid) still running 30 s after scontrol shutdown; SIGKILL"
    kill -KILL "$pid" 2> /dev/null || true
    wait_gone "$pid" 5 || true
  done
  # munged last: slurmctld and slurmd authenticate through it until they end. One that was
  # already running before `start` (MUNGED_PID empty) is not ours to stop.
  if is_ours "${MUNGED_PID:-}" munged; then
    kill -TERM "$MUNGED_PID" 2> /dev/null || true
    wait_gone "$MUNGED_PID" 10 || say "munged ($MUNGED_PID) did not end within 10 s"
  fi
  rm -f "$state"
  say "stopped the cluster of $dir"
}

status() {
  [ -f "$state" ] || {
    say "no cluster recorded in $dir"
    return 3
  }
  # shellcheck disable=SC1090
  . "$state"
  if ! is_ours "${CTLD_PID:-}" slurmctld || ! is_ours "${SLURMD_PID:-}" slurmd; then
    say "the daemons recorded in $state are not running"
    return 3
  fi
  sinfo -N -o '%N %T %c %m'
  squeue
}

start() {
  [ "$(id -u)" -eq 0 ] || fail "needs root (slurmd runs jobs as their users; munged as munge)"
  local p
  for p in slurmctld slurmd munged munge sinfo sbatch; do
    command -v "$p" > /dev/null || fail "$p not found: install slurm-wlm and munge (scripts/setup.sh)"
  done
  if [ -f "$state" ] && status > /dev/null 2>&1; then
    say "already running in $dir"
    echo "export SLURM_CONF=$SLURM_CONF"
    return 0
  fi
  for p in 6817 6818; do
    port_in_use "$p" && fail "port $p is in use: another Slurm cluster runs here (stop it with $0 stop ITS_DIR)"
  done
  mkdir -p "$dir"/{etc,log,run,spool/slurmd,spool/ctld}
  # stop() reads this file even when start fails half-way, so it always holds what was started.
  local munged_pid="" ctld_pid="" slurmd_pid=""
  record() { printf 'MUNGED_PID=%s\nCTLD_PID=%s\nSLURMD_PID=%s\n' "$munged_pid" "$ctld_pid" "$slurmd_pid" > "$state"; }
  record
  # Any failure from here on (fail, or a command failing under set -e) stops what was started.
  # shellcheck disable=SC2154 # rc is assigned inside the trap
  trap 'rc=$?; if [ $rc -ne 0 ]; then say "start failed; stopping what it started"; stop; fi; exit $rc' EXIT

  # munged refuses to run as root, and without systemd nothing creates its runtime folder.
  if munge_works; then
    say "using the munged that already runs (not stopped by $0 stop)"
  else
    [ -s /etc/munge/munge.key ] || runuser -u munge -- mungekey --create
    install -d -o munge -g munge -m 0755 /run/munge
    rm -f /run/munge/munged.pid
    runuser -u munge -- /usr/sbin/munged
    local end=$((SECONDS + 10))
    until [ -s /run/munge/munged.pid ] && munge_works; do
      [ $SECONDS -lt $end ] || fail "munged did not start (see /var/log/munge/munged.log)"
      sleep 0.1
    done
    munged_pid=$(cat /run/munge/munged.pid)
    record
  fi

  local host cpus mem
  host=$(hostname -s)
  cpus=$(nproc)
  # slurmd refuses a node that claims more memory than it finds.
  mem=$(free -m | awk '/^Mem:/ {print $2}')
  cat > "$SLURM_CONF" << EOF
# Written by scripts/slurm-cluster.sh: a one-node test cluster without systemd or cgroups.
ClusterName=loopscale-test
SlurmctldHost=$host
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
# A requeued job may start again only once the credentials of its last run have expired: 10 s
# instead of 120, and a scheduling pass every 2 s instead of 60, bring a requeued task back in
# about 12 s instead of about 2.5 minutes.
AuthInfo=cred_expire=10
SchedulerType=sched/backfill
SchedulerParameters=sched_interval=2
# Without cgroups: processes tracked through /proc, no CPU binding.
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MpiDefault=none
MailProg=/bin/true
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
ReturnToService=2
SlurmctldPidFile=$dir/run/slurmctld.pid
SlurmdPidFile=$dir/run/slurmd.pid
SlurmdSpoolDir=$dir/spool/slurmd
StateSaveLocation=$dir/spool/ctld
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd.log
NodeName=$host CPUs=$cpus RealMemory=$mem State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP
EOF

  # In the foreground (-D) as background jobs: $! is the daemon at once, whereas the PID files
  # of daemon mode appear only some time after the command returns.
  slurmctld -D < /dev/null > "$dir/log/slurmctld.out" 2>&1 &
  ctld_pid=$!
  record
  slurmd -D < /dev/null > "$dir/log/slurmd.out" 2>&1 &
  slurmd_pid=$!
  record

  local end=$((SECONDS + 60)) node=""
  while :; do
    node=$(sinfo -h -o %T 2> /dev/null || true)
    [ "$node" = idle ] && break
    if [ $SECONDS -ge $end ] || ! kill -0 "$ctld_pid" 2> /dev/null || ! kill -0 "$slurmd_pid" 2> /dev/null; then
      tail -n 20 "$dir/log/slurmctld.out" "$dir/log/slurmctld.log" "$dir/log/slurmd.out" "$dir/log/slurmd.log" >&2 2> /dev/null || true
      fail "the node did not become idle (state '${node:-none}'); logs above"
    fi
    sleep 0.3
  done
  trap - EXIT
  say "node $host idle ($cpus CPUs, $mem MiB): slurmctld $ctld_pid, slurmd $slurmd_pid, munged ${munged_pid:-already running}"
  echo "export SLURM_CONF=$SLURM_CONF"
}

case $cmd in
  start) start ;;
  stop) stop ;;
  status) status ;;
  *) usage ;;
esac
