#!/bin/sh
# lv2_validate (Debian's lv2-dev, sord_validate against the installed specs), stricter: it
# fails on its exit status, and also on any "error:" or "warning:" line (warnings alone leave
# the exit status 0), and needs its "Found 0 errors" summary. Prints what it said either way.
# usage: lv2_validate.sh FILE.ttl...
out=$(lv2_validate "$@" 2>&1)
rc=$?
printf '%s\n' "$out" | grep -v '^Skipping file'
[ $rc -eq 0 ] || { echo "lv2_validate exited $rc"; exit 1; }
printf '%s\n' "$out" | grep -q '^Found 0 errors' || { echo "FAIL: lv2_validate found errors"; exit 1; }
if printf '%s\n' "$out" | grep -qiE '^(error|warning):'; then
	echo "FAIL: lv2_validate reported problems"
	exit 1
fi
echo "OK: $# files valid"
