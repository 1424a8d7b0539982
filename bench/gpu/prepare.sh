#!/bin/sh
# Pack what a check on the lent GPU machine needs into .devcarry/ (git-ignored), within the
# device tool's 64 MiB carry limit: that machine reaches no package registry and ../shared does
# not travel there. Run here, after building; then on the device machine, carrying .devcarry:
#   bench/gpu/run.sh
#
#   bench/gpu/prepare.sh [BUILD_DIR=build]
#
# BEFORE=DIR (a build of the commit to compare with, e.g. a worktree's build of the branch
# point): its bench_msst, bench_demucs and stembridge go into .devcarry/bin-before, for run.sh's
# profile and batch steps (the same call measures both builds).
#
# It holds: the programs (statically linked against the engine), the Debian packages of the
# libraries they load (extracted there with dpkg -x, never installed) plus CLBlast's tuners,
# the golden files a GPU check needs (tiny and mid weights, htdemucs-mid-io, released shapes,
# the demo clip),
# the reference demucs package with its stand-ins (REF, default /tmp/demucs-ref), and for the
# RoFormer step bench/msst's scripts with MSST, rotary-embedding-torch and einops
# (RFREF, default /tmp/roformer-ref: tests/fixtures/make_roformer_golden.py fetches them).
set -eu
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=$(cd "${1:-$ROOT/build}" && pwd)
OUT=$ROOT/.devcarry
GOLDEN=${GOLDEN:-$ROOT/../shared/golden/htdemucs}
REF=${REF:-/tmp/demucs-ref}
RFREF=${RFREF:-/tmp/roformer-ref}
[ -d "$REF/demucs" ] || { echo "prepare.sh: no reference demucs/ package in $REF" >&2; exit 1; }

rm -rf "$OUT"
mkdir -p "$OUT/bin" "$OUT/debs" "$OUT/golden" "$OUT/ref" "$OUT/roformer" "$OUT/rfref"
for b in bench/demucs/bench_demucs bench/opencl/bench_opencl bench/jobs/bench_jobs bench/cpu/bench_gemm \
         bench/msst/bench_msst bench/opencl/bench_cl_gemm \
         tools/cli/stembridge tests/demucs/test_demucs tests/opencl/test_cl_blas \
         tests/opencl/test_cl_pick tests/opencl/test_opencl tests/backend/test_ops \
         tests/msst/test_msst; do
	cp "$BUILD/$b" "$OUT/bin/"
done
if [ -n "${BEFORE:-}" ]; then
	mkdir -p "$OUT/bin-before"
	for b in bench/msst/bench_msst bench/demucs/bench_demucs tools/cli/stembridge; do
		cp "$BEFORE/$b" "$OUT/bin-before/"
	done
fi
for f in README.md htdemucs-tiny.safetensors htdemucs-mid.safetensors \
         htdemucs-mid-io.safetensors released-shapes.json; do
	cp "$GOLDEN/$f" "$OUT/golden/"
done
# the demo clip (sox here; that machine has none) for the bf16 stems' change (precision.py)
"$ROOT/tools/make_demo_clip.sh" "$OUT/golden/clip.wav"
cp -r "$REF/demucs" "$OUT/ref/"
find "$OUT/ref" -name __pycache__ -prune -exec rm -rf {} +
"$ROOT/bench/demucs/make_shims.sh" "$OUT/ref/shims"
cp "$ROOT/bench/demucs/reference.py" "$OUT/"
cp "$ROOT"/bench/msst/*.py "$OUT/roformer/"
for d in ZFTurbo+Music-Source-Separation-Training lucidrains+rotary-embedding-torch \
         arogozhnikov+einops; do
	if [ -d "$RFREF/$d" ]; then
		cp -r "$RFREF/$d" "$OUT/rfref/"
	else
		echo "prepare.sh: no $RFREF/$d: the RoFormer step's reference is missing" >&2
	fi
done
find "$OUT/rfref" \( -name .git -o -name __pycache__ \) -prune -exec rm -rf {} +

# the packages behind every shared library the programs load, less the C library itself
pkgs=$(ldd "$OUT"/bin/* 2>/dev/null | awk '/=> \// {print $3}' | sort -u |
	while read -r lib; do dpkg -S "$(readlink -f "$lib")" 2>/dev/null || dpkg -S "$lib" 2>/dev/null; done |
	cut -d: -f1 | sort -u | grep -v -x -e libc6 -e libgcc-s1)
# loaded with dlopen, so ldd does not see them: oneDNN (the CPU's products), OpenBLAS (compared)
pkgs="$pkgs clblast-utils ocl-icd-libopencl1 libdnnl2 libgomp1 libopenblas0-pthread"
(cd "$OUT/debs" && apt-get download $pkgs >/dev/null)
echo "$pkgs" | tr ' ' '\n' | sort -u > "$OUT/debs/LIST"
# the device tool's 64 MiB counts the repository's files too: when both do not fit, the
# packages only the cpu and tune steps load go (oneDNN, OpenBLAS, CLBlast's tuners)
tree=$(cd "$ROOT" && git ls-files -z | du -cm --files0-from=- | tail -1 | cut -f1)
size=$(du -sm "$OUT" | cut -f1)
if [ $((size + tree)) -ge 64 ]; then
	rm -f "$OUT"/debs/libdnnl2_* "$OUT"/debs/libopenblas0-pthread_* "$OUT"/debs/clblast-utils_*
	size=$(du -sm "$OUT" | cut -f1)
	echo "prepare.sh: without oneDNN, OpenBLAS and CLBlast's tuners, to fit beside the" \
		"repository's $tree MiB: run.sh cpu and tune will not run there" >&2
fi
# then the goldens' inputs and outputs (14 MiB), which only step check and the reference's own
# check in step demucs read: issue #50's call (run.sh all) needs neither
if [ $((size + tree)) -ge 64 ]; then
	rm -f "$OUT"/golden/htdemucs-mid-io.safetensors
	size=$(du -sm "$OUT" | cut -f1)
	echo "prepare.sh: without htdemucs-mid-io, to fit: run.sh check's goldens and the" \
		"reference's check will not run there" >&2
fi
echo "prepare.sh: $OUT holds $size MiB, the repository $tree MiB ($(ls "$OUT/debs" |
	grep -c '\.deb$') packages)"
[ $((size + tree)) -lt 64 ] || { echo "prepare.sh: over the 64 MiB carry limit" >&2; exit 1; }
