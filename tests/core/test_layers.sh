#!/bin/sh
# The engine's shape, checked on the sources (issues #26, #48):
#   1. the front ends (plugin/, gui/, tools/) include one header of the engine, stembridge.h,
#      which includes system headers only (tests/core/test_header.c compiles it alone);
#   2. includes inside the engine point one way: core <- io <- backend <- models <- jobs (a
#      folder includes only its own and earlier ones; convert sits beside models and sees
#      core, io and models' file readers);
#   3. nothing outside engine/backend/<name>/ includes a backend's own headers;
#   4. the OpenCL backend's folder reads one way (STYLE habit 25, as ggml-cuda's): the device,
#      the base every file calls (cl_base.c), the kernels over it, the dispatchers, the backend
#      on top; no file includes a header of a later layer or calls a function defined in one.
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

# 4. the OpenCL folder's layers
ocl=engine/backend/opencl
orank() {
	case $1 in
	cl_device | cl_internal | cl_enum | cl_blas) echo 0 ;;
	cl_base) echo 1 ;;
	cl_gemm_tiled | cl_gemm_mma | cl_signal | cl_classic | cl_convnet) echo 2 ;;
	cl_attention | cl_gemm_pick) echo 3 ;;
	cl_products) echo 4 ;;
	cl_ops) echo 5 ;;
	cl_backend) echo 6 ;;
	*) echo 9 ;;
	esac
}
if [ -d $ocl ]; then
	# where each function of the folder is defined: "name file", from the definitions that
	# start a line
	defs=$(for f in $ocl/*.c; do
		sed -n 's/^[a-z][a-z_ ]*[ *]\(sb_cl_[a-z0-9_]*\)(.*/\1/p' "$f" | sed "s|\$| $(basename "$f" .c)|"
	done)
	for f in $ocl/*.[ch]; do
		base=$(basename "$f"); base=${base%.[ch]}
		r=$(orank "$base")
		[ "$r" = 9 ] && bad "$f is in no layer of $ocl (tests/core/test_layers.sh: orank)"
		for inc in $(sed -n 's|^#include "backend/opencl/\([a-z_]*\)\.h".*|\1|p' "$f"); do
			[ "$(orank "$inc")" -le "$r" ] || bad "$f includes $inc.h, a later layer"
		done
		case $f in *.h) continue ;; esac
		for name in $(grep -o 'sb_cl_[a-z0-9_]*' "$f" | sort -u); do
			owner=$(printf '%s\n' "$defs" | awk -v n="$name" '$1 == n { print $2; exit }')
			[ -n "$owner" ] || continue
			[ "$(orank "$owner")" -le "$r" ] || bad "$f calls $name, defined in $owner.c, a later layer"
		done
	done
fi

[ $fail = 0 ] && echo "layers: the front ends see stembridge.h only, which stands alone; the engine's includes point one way; the OpenCL folder reads one way"
exit $fail
