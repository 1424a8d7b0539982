#!/bin/sh
# Takes that survive Ardour: a headless Ardour 7.3 records a take through the plugin with a slow
# job (SB_FAULT_INJECT=job:slow:MS), is killed with SIGKILL while the job runs, and the session
# is reopened: the take resumes, its stems are complete and add back to what the plugin
# recorded, and the take's recording is gone after the commit (test_takes_headless.lua).
# Usage: takes_kill_test.sh ARDOUR_LUA WORK_DIR IMPORT_SCRIPT TEST_TAKES
#   TEST_TAKES: the plugin test's test_takes, whose "sum" compares the stems with the recording.
set -u
lua="$1"
work="$2"
import="$3"
check="$4"
here=$(dirname "$0")
script="$here/test_takes_headless.lua"
rm -rf "$work"
mkdir -p "$work"
session="$work/session"

SB_FAULT_INJECT=job:slow:8000 "$lua" "$script" record "$session" "$import" "$work" \
	> "$work/record.log" 2>&1 &
pid=$!
i=0
while [ ! -e "$work/RUNNING" ] && kill -0 "$pid" 2>/dev/null && [ $i -lt 1200 ]; do
	sleep 0.1
	i=$((i + 1))
done
if [ ! -e "$work/RUNNING" ]; then
	cat "$work/record.log"
	echo "FAIL: the recording Ardour never reached its running job"
	kill -9 "$pid" 2>/dev/null
	exit 1
fi
kill -9 "$pid"
wait "$pid"
rc=$?
cat "$work/record.log"
echo "the recording Ardour (pid $pid) was killed with SIGKILL while the job ran (status $rc)"
[ "$rc" -eq 137 ] || { echo "FAIL: not killed by SIGKILL"; exit 1; }

# the resumed job slowed a little too, so that its Resumed state lasts long enough to be read
SB_FAULT_INJECT=job:slow:1500 \
	sh "$here/run_headless.sh" "$lua" "$script" reopen "$session" "$import" "$work" || exit 1
"$check" sum "$(cat "$work/stems_txt")" "$work/recorded.wav" || exit 1
echo "ALL OK"
