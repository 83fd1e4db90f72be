#!/usr/bin/env bash
# A one-node SLURM cluster with accounting, for the tests: munge, MariaDB, slurmdbd, slurmctld and
# slurmd on this host, every file and socket under one folder, every daemon stopped by process id.
#
#   tests/cluster/slurm.sh start DIR   generate the configuration for this host, start the daemons,
#                                      wait until sinfo shows the node idle (prints SLURM_CONF=...)
#   tests/cluster/slurm.sh stop DIR    stop every daemon started under DIR (by the pids it recorded)
#   tests/cluster/slurm.sh check       exit 0 when this machine can run it (root, the packages, no
#                                      SLURM configuration of its own)
#
# The configuration lives in DIR and is linked from /etc/slurm/slurm.conf while the cluster runs:
# the executor plugin's job step removes every SLURM_* variable (SLURM_CONF too) before it calls
# srun inside a job, so srun reads the default path. A machine with a slurm.conf of its own there
# is left alone (check fails).
#
# Packages (Debian 12): slurm-wlm slurmdbd munge mariadb-server. Run as root: slurmd starts jobs
# as their users, and munged, slurmdbd and slurmctld run as root here (SlurmUser=root).
set -euo pipefail

PARTITION="${ATTNKNN_SLURM_PARTITION:-attnknn}"
CLUSTER=attnknn
NEEDED=(munged mariadbd mariadb-install-db slurmdbd slurmctld slurmd sacctmgr sinfo sbatch sacct)

check() {
    [[ "$(id -u)" == 0 ]] || { echo "needs root (slurmd and munged run as root here)"; return 1; }
    if [[ -e /etc/slurm/slurm.conf && ! -L /etc/slurm/slurm.conf ]]; then
        echo "this machine has its own /etc/slurm/slurm.conf; the test cluster would shadow it"; return 1
    fi
    local missing=()
    for b in "${NEEDED[@]}"; do command -v "$b" > /dev/null || PATH="$PATH:/usr/sbin" command -v "$b" > /dev/null \
        || missing+=("$b"); done
    if (( ${#missing[@]} )); then
        echo "missing ${missing[*]}: apt-get install slurm-wlm slurmdbd munge mariadb-server"; return 1
    fi
}

free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

wait_for() {  # wait_for SECONDS WHAT COMMAND...: poll until COMMAND succeeds
    local secs="$1" what="$2"; shift 2
    local end=$((SECONDS + secs))
    while (( SECONDS < end )); do timeout 10 "$@" > /dev/null 2>&1 && return 0; sleep 0.25; done
    echo "slurm.sh: $what did not come up within ${secs}s; logs in $DIR" >&2
    tail -n 20 "$DIR"/log/*.log >&2 || true
    return 1
}

start() {
    DIR="$(mkdir -p "$1" && cd "$1" && pwd)"
    export PATH="$PATH:/usr/sbin"
    check
    mkdir -p "$DIR"/{log,run,state,spool,mysql}
    local host cpus mem_mb dbd_port ctl_port d_port db_port
    host="$(hostname -s)"
    cpus="$(nproc)"
    mem_mb=$(( $(awk '/MemTotal/ {print $2}' /proc/meminfo) / 1024 * 9 / 10 ))
    dbd_port="$(free_port)"; ctl_port="$(free_port)"; d_port="$(free_port)"; db_port="$(free_port)"

    # munge: its own key and socket
    dd if=/dev/urandom bs=1 count=1024 of="$DIR/munge.key" 2> /dev/null
    chmod 400 "$DIR/munge.key"
    munged --force --key-file="$DIR/munge.key" --socket="$DIR/run/munge.socket" \
        --pid-file="$DIR/run/munged.pid" --log-file="$DIR/log/munged.log" --seed-file="$DIR/run/munge.seed"
    wait_for 20 munged test -S "$DIR/run/munge.socket"

    # MariaDB on a local port, with the accounting database's user
    mariadb-install-db --datadir="$DIR/mysql" --user=root --auth-root-authentication-method=socket \
        --skip-test-db > "$DIR/log/mariadb-install.log" 2>&1
    (mariadbd --no-defaults --datadir="$DIR/mysql" --socket="$DIR/run/mysql.sock" --port="$db_port" \
        --bind-address=127.0.0.1 --pid-file="$DIR/run/mariadbd.pid" --user=root \
        --log-error="$DIR/log/mariadbd.log" > /dev/null 2>&1 &)
    wait_for 60 MariaDB mariadb --no-defaults -S "$DIR/run/mysql.sock" -u root -e "select 1"
    mariadb --no-defaults -S "$DIR/run/mysql.sock" -u root -e \
        "CREATE USER 'slurm'@'127.0.0.1' IDENTIFIED BY 'attnknn'; GRANT ALL ON slurm_acct_db.* TO 'slurm'@'127.0.0.1';"

    cat > "$DIR/slurmdbd.conf" <<CONF
AuthType=auth/munge
AuthInfo=socket=$DIR/run/munge.socket
DbdHost=localhost
DbdPort=$dbd_port
SlurmUser=root
LogFile=$DIR/log/slurmdbd.log
PidFile=$DIR/run/slurmdbd.pid
StorageType=accounting_storage/mysql
StorageHost=127.0.0.1
StoragePort=$db_port
StorageUser=slurm
StoragePass=attnknn
StorageLoc=slurm_acct_db
CONF
    chmod 600 "$DIR/slurmdbd.conf"
    cat > "$DIR/slurm.conf" <<CONF
ClusterName=$CLUSTER
SlurmctldHost=$host
SlurmUser=root
SlurmctldPort=$ctl_port
SlurmdPort=$d_port
AuthType=auth/munge
AuthInfo=socket=$DIR/run/munge.socket
StateSaveLocation=$DIR/state
SlurmdSpoolDir=$DIR/spool
SlurmctldPidFile=$DIR/run/slurmctld.pid
SlurmdPidFile=$DIR/run/slurmd.pid
SlurmctldLogFile=$DIR/log/slurmctld.log
SlurmdLogFile=$DIR/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
MpiDefault=none
ReturnToService=2
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU_Memory
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=localhost
AccountingStoragePort=$dbd_port
AccountingStoragePass=$DIR/run/munge.socket
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/none
AccountingStoreFlags=job_comment
MinJobAge=600
NodeName=$host CPUs=$cpus RealMemory=$mem_mb State=UNKNOWN
PartitionName=$PARTITION Nodes=$host Default=YES MaxTime=INFINITE State=UP
CONF
    export SLURM_CONF="$DIR/slurm.conf"
    mkdir -p /etc/slurm
    ln -sfn "$DIR/slurm.conf" /etc/slurm/slurm.conf  # for srun inside jobs (see the top)
    slurmdbd  # reads slurmdbd.conf beside $SLURM_CONF
    wait_for 60 slurmdbd sacctmgr -n list cluster
    sacctmgr -i add cluster "$CLUSTER" > /dev/null
    sacctmgr -i add account attnknn Cluster="$CLUSTER" Description=tests Organization=tests > /dev/null
    sacctmgr -i add user "$(id -un)" Account=attnknn Cluster="$CLUSTER" > /dev/null
    slurmctld -f "$DIR/slurm.conf"
    wait_for 60 slurmctld scontrol ping
    slurmd -f "$DIR/slurm.conf"
    wait_for 60 "the node (idle in sinfo)" bash -c "sinfo -h -o %T | grep -qx idle"
    echo "SLURM_CONF=$DIR/slurm.conf"
}

stop() {
    DIR="$(cd "$1" && pwd)"
    local pid
    for d in slurmd slurmctld slurmdbd mariadbd munged; do
        [[ -f "$DIR/run/$d.pid" ]] || continue
        pid="$(cat "$DIR/run/$d.pid")"
        kill "$pid" 2> /dev/null || continue
        for _ in $(seq 40); do kill -0 "$pid" 2> /dev/null || break; sleep 0.25; done
        kill -9 "$pid" 2> /dev/null || true
    done
    # jobs still running under slurmd (slurmstepd) were started from this folder's configuration
    pkill -9 -f "slurmstepd.*" 2> /dev/null || true
    if [[ "$(readlink /etc/slurm/slurm.conf 2> /dev/null)" == "$DIR/slurm.conf" ]]; then
        rm -f /etc/slurm/slurm.conf
    fi
}

case "${1:-}" in
    start) start "${2:?usage: slurm.sh start DIR}" ;;
    stop) stop "${2:?usage: slurm.sh stop DIR}" ;;
    check) check ;;
    *) echo "usage: slurm.sh start DIR | stop DIR | check" >&2; exit 2 ;;
esac
