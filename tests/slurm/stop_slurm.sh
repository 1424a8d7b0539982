#!/bin/bash
# Stops what tests/slurm/start_slurm.sh started (its daemons' pid files).
for f in /run/slurmd.pid /run/slurmctld.pid /run/munge/munged.pid; do
	[ -f "$f" ] && kill "$(cat "$f")" 2>/dev/null
done
exit 0
