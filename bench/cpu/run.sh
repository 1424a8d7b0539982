#!/bin/sh
# The CPU's matrix products and HTDemucs on the CPU, every product path side by side, in one
# sitting on one machine (bench/cpu/README.md has the tables this prints):
#   1. products on HTDemucs's shapes (bench_gemm): our kernels per instruction set, oneDNN,
#      OpenBLAS (its own choice of core, OPENBLAS_CORETYPE=Haswell as some machines set it,
#      and =Prescott, the fallback core it ran on the Emerald Rapids Xeon), BLIS, and bf16;
#      GFLOP/s and share of the peak measured on the same threads;
#   2. a 7.8 s segment and a whole song of a released-size HTDemucs (bench_demucs), fp32
#      through each library and bf16, peak RSS; BEFORE=build-dir adds the same for a build of
#      an older commit (a git worktree), which ran OpenBLAS;
#   3. the reference PyTorch (Debian's python3-torch) on the same model file and threads, when
#      REF names a folder holding the reference's demucs/ package (bench/demucs/README.md);
#   4. bf16 against fp32 per stem (precision.py): golden models and the demo clip.
#
#   bench/cpu/run.sh BUILD_DIR [THREADS=2] [SONG_SECONDS=60]
#
# OpenBLAS and BLIS are only compared here (apt-get install libopenblas0-pthread libblis4);
# the engine runs oneDNN (libdnnl2) where installed, else its own kernels.
set -eu
BUILD=${1:?usage: run.sh BUILD_DIR [THREADS] [SONG_SECONDS]}
THREADS=${2:-2}
SONG=${3:-60}
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$HERE/../..
SHAPES=$ROOT/tests/fixtures/htdemucs/released-shapes.json
MODEL=${MODEL:-/tmp/sb-bench-cpu-htdemucs.safetensors}
G=$BUILD/bench/cpu/bench_gemm
D=$BUILD/bench/demucs/bench_demucs
unset OPENBLAS_CORETYPE OPENBLAS_L2_SIZE SB_GEMM SB_CPU_ISA

echo "== $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) cores, $(date -u '+%Y-%m-%d %H:%M UTC')"
echo
echo "== 1. products on HTDemucs's shapes, $THREADS threads (and 1)"
echo "| products | threads | GFLOP/s | of the measured peak |"
echo "|---|---:|---:|---:|"
gemm() { # label, env...
	label=$1
	shift
	for t in 1 "$THREADS"; do
		env "$@" "$G" --threads "$t" --seconds 1 | tail -1 | python3 -c "
import json, sys
r = json.load(sys.stdin)
share = f\"{100 * r['of_peak']:.0f} % of {r['peak_gflops']:.0f}\" if r['peak_gflops'] > 0 else 'no vector peak measured'
print(f\"| $label: {r['products']} | {r['threads']} | {r['gflops']:.1f} | {share} |\")"
	done
}
gemm "default" X=1
gemm "own" SB_GEMM=own
gemm "own, AVX2 only" SB_GEMM=own SB_CPU_ISA=avx2
gemm "own, portable C" SB_GEMM=own SB_CPU_ISA=generic
gemm "oneDNN" SB_GEMM=onednn
gemm "OpenBLAS, its choice" SB_GEMM=openblas
gemm "OpenBLAS, CORETYPE=Haswell" SB_GEMM=openblas OPENBLAS_CORETYPE=Haswell
gemm "OpenBLAS, CORETYPE=Prescott (fallback)" SB_GEMM=openblas OPENBLAS_CORETYPE=Prescott
gemm "BLIS" SB_GEMM=blis
for t in 1 "$THREADS"; do
	"$G" --threads "$t" --precision bf16 --seconds 1 | tail -1 | python3 -c "
import json, sys
r = json.load(sys.stdin)
print(f\"| bf16: {r['products']} | {r['threads']} | {r['gflops']:.1f} | {100 * r['of_peak']:.0f} % of {r['peak_gflops']:.0f} (bf16) |\")"
done

echo
echo "== 2. HTDemucs (released size), $THREADS threads: a segment and a ${SONG} s song"
"$D" "$SHAPES" --write-model "$MODEL" --threads 1 --seconds 1 >/dev/null 2>&1
echo "| build, products | segment s | song s | GFLOP/s in products | peak RSS MB |"
echo "|---|---:|---:|---:|---:|"
seg() { # binary, label, precision, env...
	bin=$1
	label=$2
	prec=$3
	shift 3
	set -- "$@" "$bin" --model "$MODEL" --threads "$THREADS" --seconds "$SONG" --repeat 3 --profile
	[ "$prec" = fp32 ] || set -- "$@" --precision "$prec"
	env "$@" 2>/dev/null | python3 -c "
import json, sys
r = json.load(sys.stdin)
print(f\"| $label ({r['gemm']}, {r.get('precision', 'fp32')}) | {r['segment_s']:.3f} | {r['song_s']:.2f} | {r['gemm_gflops']:.0f} | {r['peak_rss_mb']:.0f} |\")"
}
if [ -n "${BEFORE:-}" ]; then
	seg "$BEFORE/bench/demucs/bench_demucs" "before" fp32 X=1
	seg "$BEFORE/bench/demucs/bench_demucs" "before, CORETYPE=Haswell" fp32 OPENBLAS_CORETYPE=Haswell
	seg "$BEFORE/bench/demucs/bench_demucs" "before, CORETYPE=Prescott" fp32 OPENBLAS_CORETYPE=Prescott
fi
seg "$D" "after, default" fp32 X=1
seg "$D" "after, CORETYPE=Prescott" fp32 OPENBLAS_CORETYPE=Prescott
seg "$D" "after, own kernels" fp32 SB_GEMM=own
seg "$D" "after, OpenBLAS" fp32 SB_GEMM=openblas
seg "$D" "after, bf16" bf16 X=1
seg "$D" "after, bf16 on a CPU without it (capped)" bf16 SB_CPU_ISA=avx512-nobf16

if [ -n "${REF:-}" ] && [ -d "$REF/demucs" ]; then
	echo
	echo "== 3. the reference: PyTorch $(/usr/bin/python3 -c 'import torch; print(torch.__version__)'), $THREADS threads, same model file"
	S=$REF/shims
	"$ROOT/bench/demucs/make_shims.sh" "$S"
	/usr/bin/python3 "$ROOT/bench/demucs/reference.py" --ref "$REF" --shims "$S" bench "$MODEL" "$SONG" \
		--threads "$THREADS"
fi

echo
echo "== 4. bf16 against fp32, per stem"
CLIP=/tmp/sb-bench-clip.wav
"$ROOT/tools/make_demo_clip.sh" "$CLIP" >/dev/null
F=$ROOT/tests/fixtures/htdemucs
python3 "$HERE/precision.py" "$BUILD/tools/cli/stembridge" \
	"$F/htdemucs-mini.safetensors,$F/htdemucs_6s-mini.safetensors,$MODEL" "$CLIP" \
	--threads "$THREADS"
rm -f "$MODEL" "$CLIP"
