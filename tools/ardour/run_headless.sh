#!/bin/sh
# Runs a headless Ardour test script (ardour7-lua) and fails when Ardour's own output carries a
# warning about the plugin's messages: Ardour 7.3 prints "warning: patch:Set for unknown
# property" for every patch:Set of a property that is not patch:writable.
# Usage: run_headless.sh ARDOUR_LUA SCRIPT ARGS...
set -u
lua="$1"
shift
log=$(mktemp)
"$lua" "$@" > "$log" 2>&1
rc=$?
cat "$log"
if grep -q "patch:Set for un" "$log"; then
	echo "FAIL: Ardour warned about the plugin's patch:Set messages:"
	grep -c "patch:Set for un" "$log"
	rc=1
fi
rm -f "$log"
exit $rc
