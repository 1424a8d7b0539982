#!/bin/sh
# The man pages as man(1) and lintian read them: groff with every warning on prints nothing
# (a line that starts with a dot is a request, a mistyped macro a lost sentence).
# usage: test_man.sh SOURCE_ROOT
root=$1
if ! command -v groff >/dev/null 2>&1; then
	echo "groff is not installed (Debian: groff-base): skipped"
	exit 77
fi
fail=0 n=0
for page in "$root"/man/*.[1-8]; do
	n=$((n + 1))
	out=$(LC_ALL=C.UTF-8 groff -ww -b -man -Tutf8 -z "$page" 2>&1)
	if [ -n "$out" ]; then
		echo "FAIL: $(basename "$page"): $out"
		fail=1
	fi
done
[ "$n" -gt 0 ] || { echo "FAIL: no man page under $root/man"; exit 1; }
[ "$fail" -eq 0 ] && echo "$n man pages read without a warning"
exit $fail
