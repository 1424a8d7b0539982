#!/bin/sh
# The engine's shape, checked on the sources (issues #26, #48):
#   1. the front ends (plugin/, gui/, tools/) include one header of the engine, stembridge.h,
#      which includes system headers only (tests/core/test_header.c compiles it alone);
#   2. includes inside the engine point one way: core <- io <- backend <- models <- jobs (a
#      folder includes only its own and earlier ones; convert sits beside models and sees
#      core, io and models' file readers);
#   3. nothing outside engine/backend/<name>/ includes a backend's own headers.
# usage: test_layers.sh SOURCE_ROOT
set -u
root=${1:?source root}
cd "$root" || exit 2
fail=0
bad() { echo "FAIL: $*"; fail=1; }

# 1. front ends
for f in $(find plugin gui tools -name '*.[ch]' 2>/dev/null); do
	grep -n '^#include "\(backend\|io\|jobs\|models\|core\|convert\)/\|^#include "sb_common.h"\|^#include ".*engine/' "$f" |
		while IFS= read -r line; do
			echo "FAIL: $f:$line (front ends include stembridge.h only)"
		done | grep . && fail=1
done
grep -n '^#include "' engine/stembridge.h | while IFS= read -r line; do
	echo "FAIL: engine/stembridge.h:$line (the public header includes system headers only)"
done | grep . && fail=1

# 2. the engine's folders in order
rank() {
	case $1 in core) echo 0 ;; io) echo 1 ;; backend) echo 2 ;; convert) echo 3 ;;
	models) echo 3 ;; jobs) echo 4 ;; *) echo 9 ;; esac
}
for dir in core io backend convert models jobs; do
	r=$(rank $dir)
	for f in $(find "engine/$dir" -name '*.[ch]'); do
		for inc in $(sed -n 's/^#include "\([a-z]*\)\/.*/\1/p' "$f" | sort -u); do
			ri=$(rank "$inc")
			[ "$ri" -le "$r" ] || bad "$f includes $inc/ (later than $dir/)"
		done
	done
done
# inside the engine the public header comes in through sb_common.h alone (its base, as lilv's
# internal header builds on lilv.h)
grep -rln '"stembridge.h"' engine | grep -v '^engine/sb_common.h$' | while read -r f; do
	echo "FAIL: $f includes stembridge.h (engine files include sb_common.h, which builds on it)"
done | grep . && fail=1

# 3. backends' own headers
for be in $(ls engine/backend); do
	[ -d "engine/backend/$be" ] || continue
	grep -rln "#include \"backend/$be/" engine plugin gui tools 2>/dev/null | grep -v "^engine/backend/$be/" |
		while read -r f; do echo "FAIL: $f includes engine/backend/$be's own headers"; done | grep . && fail=1
done

[ $fail = 0 ] && echo "layers: the front ends see stembridge.h only, which stands alone; the engine's includes point one way"
exit $fail
