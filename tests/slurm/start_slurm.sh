#!/bin/bash
# A single-node Slurm for the batch test: munged, slurmctld and slurmd on this host, all its
# cores, 80 % of its memory and two fake GPUs (gres "gpu" backed by two character devices that
# are /dev/null's clones), so `--gres=gpu:N` is granted and Slurm sets CUDA_VISIBLE_DEVICES per
# task as on a GPU node. Runs as root; does nothing when a node answers already.
#   exit 0: a node is idle (prints "started" when this script started the daemons)
#   exit 1: it cannot be had here (the reason on stderr): the test skips
# Daemons run directly (no systemd in CI containers), without cgroups (proctrack/linuxproc,
# task/none) and without accounting. Stop them with tests/slurm/stop_slurm.sh.
set -u
up() { sinfo -h -o %t 2>/dev/null | grep -qE '^(idle|mix|alloc)'; }
if up; then exit 0; fi
[ "$(id -u)" = 0 ] || { echo "Slurm needs root to start its daemons" >&2; exit 1; }
for p in slurmctld slurmd sbatch munged; do
	command -v "$p" >/dev/null || [ -x "/usr/sbin/$p" ] || {
		echo "$p is not installed (apt-get install slurmctld slurmd slurm-client munge)" >&2
		exit 1; }
done
host=$(hostname -s)
# state folders of our own: another cluster's state (its ClusterName) would stop slurmctld
state=/var/spool/stembridge-test
mkdir -p /run/munge $state/ctld $state/d /var/log/slurm
chown munge:munge /run/munge
if [ ! -f /etc/munge/munge.key ]; then
	head -c 128 /dev/urandom > /etc/munge/munge.key
	chown munge:munge /etc/munge/munge.key
	chmod 400 /etc/munge/munge.key
fi
pidof munged >/dev/null || runuser -u munge -- /usr/sbin/munged ||
	{ echo "munged did not start" >&2; exit 1; }
for i in 0 1; do [ -e /dev/fakegpu$i ] || mknod /dev/fakegpu$i c 1 3; done
mem=$(( $(free -m | awk '/^Mem/{print $2}') * 8 / 10 ))
cat > /etc/slurm/slurm.conf <<CONF
ClusterName=stembridge-test
SlurmctldHost=$host
SlurmUser=root
AuthType=auth/munge
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
StateSaveLocation=$state/ctld
SlurmdSpoolDir=$state/d
SlurmctldLogFile=/var/log/slurm/slurmctld.log
SlurmdLogFile=/var/log/slurm/slurmd.log
SlurmctldPidFile=/run/slurmctld.pid
SlurmdPidFile=/run/slurmd.pid
ReturnToService=2
GresTypes=gpu
NodeName=$host CPUs=$(nproc) RealMemory=$mem Gres=gpu:2 State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP
CONF
echo "NodeName=$host Name=gpu File=/dev/fakegpu[0-1]" > /etc/slurm/gres.conf
pidof slurmctld >/dev/null || /usr/sbin/slurmctld || { echo "slurmctld did not start" >&2; exit 1; }
pidof slurmd >/dev/null || /usr/sbin/slurmd || { echo "slurmd did not start" >&2; exit 1; }
for _ in $(seq 60); do
	if up; then echo started; exit 0; fi
	scontrol update nodename="$host" state=resume >/dev/null 2>&1
	sleep 1
done
echo "the node never became idle: $(scontrol show node "$host" 2>&1 | grep -o 'Reason=.*')" >&2
exit 1
