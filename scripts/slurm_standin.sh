#!/usr/bin/env bash
# A single-node SLURM on this machine, without accounting (no slurmdbd): the stand-in cluster that
# tests/test_slurm_standin.py runs the first stages of the DAG on through profiles/slurm.
#
#   scripts/slurm_standin.sh start    # as root: install slurm + munge if missing, write slurm.conf, start
#                                     #   munged, slurmctld and slurmd, wait until the node is idle
#   scripts/slurm_standin.sh stop     # stop the daemons this script started (by their pid files)
#
# Needs root (it installs Debian packages and runs the SLURM daemons); without root it says so and exits 2.
# Exit codes of start: 0 ready, 2 not possible here (not root, or no apt-get / the packages cannot be
# installed), 1 anything else (a daemon did not come up: the tail of its log is printed).
#
# The configuration goes where every SLURM client looks, /etc/slurm/slurm.conf (SLURM_CONF is no way
# round that: the executor's job step drops every SLURM_* variable before its inner srun, so srun would
# find no configuration); it starts with a marker line, a slurm.conf without it (this machine's own SLURM)
# is never overwritten (exit 2), and stop removes ours. Everything else lives in STANDIN_DIR (default
# /tmp/slurm-standin): the daemons' logs, pid files and state, and jobcomp.log, one line per finished job
# with what it was given (Tres=cpu=..,mem=.., TimeLimit=..), a record that needs no accounting database.
# The daemons are started directly (no systemd in containers); cgroups are not used (proctrack/linuxproc,
# task/none), so memory limits are recorded and scheduled on, not enforced by the kernel.
#
# Settings (environment): STANDIN_DIR, STANDIN_PARTITION (default standin), STANDIN_PORT (slurmctld's port,
# default 6817; slurmd uses the next one), STANDIN_NO_INSTALL=1 (never run apt-get).
set -euo pipefail

DIR=${STANDIN_DIR:-/tmp/slurm-standin}
PARTITION=${STANDIN_PARTITION:-standin}
PORT=${STANDIN_PORT:-6817}
CONF=/etc/slurm/slurm.conf
MARKER="# Written by scripts/slurm_standin.sh: one node (this machine), no accounting database."
PACKAGES=(slurmctld slurmd slurm-client munge)

say() { echo "slurm_standin: $*" >&2; }
ours() { [ -f "$CONF" ] && [ "$(head -n 1 "$CONF")" = "$MARKER" ]; }

need_root() {
    if [ "$(id -u)" != 0 ]; then
        say "not root: starting the SLURM daemons (and installing slurm-wlm, munge) needs root; skipped"
        exit 2
    fi
}

install_packages() {
    local missing=()
    command -v slurmctld >/dev/null || missing+=(slurmctld)
    command -v slurmd >/dev/null || missing+=(slurmd)
    command -v sbatch >/dev/null || missing+=(slurm-client)
    command -v munged >/dev/null || missing+=(munge)
    [ ${#missing[@]} -eq 0 ] && return 0
    if [ "${STANDIN_NO_INSTALL:-0}" = 1 ] || ! command -v apt-get >/dev/null; then
        say "missing ${missing[*]} and no apt-get to install them (STANDIN_NO_INSTALL or not Debian/Ubuntu)"
        exit 2
    fi
    say "installing ${PACKAGES[*]} (apt-get, --no-install-recommends; as root)"
    local start=$SECONDS
    # the packages' own service start is not wanted (no slurm.conf yet; we start the daemons below): a
    # policy-rc.d that denies it, for the install only, where the machine has none (Docker images do)
    local policy=/usr/sbin/policy-rc.d
    if [ ! -e $policy ]; then
        printf '#!/bin/sh\nexit 101\n' >$policy && chmod 0755 $policy
        trap "rm -f $policy" EXIT
    fi
    if ! DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${PACKAGES[@]}" \
            >"$DIR/apt.log" 2>&1; then
        say "apt-get install failed; updating the package lists once and retrying"
        if ! { apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q \
                --no-install-recommends "${PACKAGES[@]}"; } >>"$DIR/apt.log" 2>&1; then
            tail -n 20 "$DIR/apt.log" >&2
            say "apt-get could not install ${PACKAGES[*]}"
            exit 2
        fi
    fi
    if [ "$(trap -p EXIT)" ]; then rm -f $policy; trap - EXIT; fi
    say "installed in $((SECONDS - start)) s"
}

start_munge() {
    if munge -n </dev/null 2>/dev/null | unmunge >/dev/null 2>&1; then
        say "munged is already running"
        return 0
    fi
    [ -s /etc/munge/munge.key ] || { mungekey --create 2>/dev/null || create-munge-key -f; }
    chown munge:munge /etc/munge/munge.key && chmod 0400 /etc/munge/munge.key
    install -d -o munge -g munge -m 0755 /run/munge
    install -d -o munge -g munge -m 0700 /var/lib/munge /var/log/munge
    runuser -u munge -- /usr/sbin/munged --pid-file="/run/munge/munged.pid"
    echo standin >"$DIR/munged.ours"       # stop kills munged only when we started it
    for _ in $(seq 50); do
        munge -n </dev/null 2>/dev/null | unmunge >/dev/null 2>&1 && return 0
        sleep 0.1
    done
    say "munged did not answer"; exit 1
}

write_conf() {
    local host node
    host=$(hostname -s)
    # CPUs, sockets/cores/threads and RealMemory as slurmd measures them on this machine
    node=$(slurmd -C | head -n 1 | sed -e 's/^NodeName=[^ ]* //')
    mkdir -p "$DIR/state" "$DIR/spool" /etc/slurm
    cat >"$CONF" <<EOF
$MARKER
ClusterName=standin
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=$PORT
SlurmdPort=$((PORT + 1))
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
StateSaveLocation=$DIR/state
SlurmdSpoolDir=$DIR/spool
SlurmctldPidFile=$DIR/slurmctld.pid
SlurmdPidFile=$DIR/slurmd.pid
SlurmctldLogFile=$DIR/slurmctld.log
SlurmdLogFile=$DIR/slurmd.log
ReturnToService=2
MpiDefault=none
# no cgroups (containers often lack them): processes tracked by their parent pids, no task binding
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
# --cpus-per-task and --mem are scheduled on (and recorded) per CPU and MB
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU_Memory
# no slurmdbd: sacct has nothing to ask; finished jobs stay in squeue/scontrol for MinJobAge (default 300 s)
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
# one line per finished job with the resources it was given (the sacct-free record the test reads)
JobCompType=jobcomp/filetxt
JobCompLoc=$DIR/jobcomp.log
SchedulerType=sched/backfill
SchedulerParameters=sched_interval=2
NodeName=$host NodeAddr=127.0.0.1 $node State=UNKNOWN
PartitionName=$PARTITION Nodes=$host Default=YES MaxTime=INFINITE State=UP
EOF
    say "wrote $CONF ($host: $node)"
}

wait_idle() {
    local state=""
    for _ in $(seq 60); do
        state=$(sinfo -h -p "$PARTITION" -o '%t' 2>/dev/null || true)
        case "$state" in
            idle|mix|alloc) say "node $state in partition $PARTITION"; return 0 ;;
            down*|drain*) scontrol update nodename="$(hostname -s)" state=resume 2>/dev/null || true ;;
        esac
        sleep 0.5
    done
    say "the node did not become idle (sinfo: '${state}')"
    for log in slurmctld slurmd; do echo "--- $DIR/$log.log" >&2; tail -n 15 "$DIR/$log.log" >&2 || true; done
    exit 1
}

start() {
    need_root
    mkdir -p "$DIR"
    if [ -f "$CONF" ] && ! ours; then
        say "$CONF exists and was not written by this script (this machine has its own SLURM); not touched"
        exit 2
    fi
    install_packages
    if [ -f "$DIR/slurmctld.pid" ] && kill -0 "$(cat "$DIR/slurmctld.pid")" 2>/dev/null; then
        say "already running ($CONF)"; wait_idle; return 0
    fi
    start_munge
    write_conf
    rm -rf "$DIR/state"/* "$DIR/jobcomp.log"
    # -c: a clean start (no jobs from an earlier stand-in); the daemons fork into the background
    /usr/sbin/slurmctld -c -f "$CONF"
    /usr/sbin/slurmd -f "$CONF"
    wait_idle
}

stop_pidfile() {  # $1 name, $2 pid file: TERM, then KILL after 10 s
    local pid
    [ -f "$2" ] || return 0
    pid=$(cat "$2")
    if kill -0 "$pid" 2>/dev/null; then
        kill "$pid"
        for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
        kill -0 "$pid" 2>/dev/null && kill -9 "$pid" 2>/dev/null
        say "stopped $1 ($pid)"
    fi
    rm -f "$2"
}

stop() {
    [ "$(id -u)" = 0 ] || { say "not root: nothing of ours to stop"; return 0; }
    if ours && [ -f "$DIR/slurmctld.pid" ]; then
        # jobs still on the node end with the stand-in
        timeout 10 scancel --partition "$PARTITION" 2>/dev/null || true
    fi
    stop_pidfile slurmd "$DIR/slurmd.pid"
    stop_pidfile slurmctld "$DIR/slurmctld.pid"
    if [ -f "$DIR/munged.ours" ]; then
        stop_pidfile munged /run/munge/munged.pid
        rm -f "$DIR/munged.ours"
    fi
    if ours; then rm -f "$CONF"; fi
}

case "${1:-}" in
    start) start ;;
    stop) stop ;;
    *) echo "usage: $0 start|stop" >&2; exit 64 ;;
esac
