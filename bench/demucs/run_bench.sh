#!/bin/sh
# HTDemucs on the native CPU path beside the reference PyTorch implementation, in one run on
# the same machine, threads and model (a released-size htdemucs with random weights from
# shared/golden/htdemucs/released-shapes.json): seconds per 7.8 s segment, seconds for a song,
# peak RSS. Wall clocks and CPU seconds both: on a shared machine CPU seconds are steadier.
#
#   bench/demucs/run_bench.sh BUILD_DIR [SONG_SECONDS=180] [THREADS=2]
#
# REF: a folder holding the reference's demucs/ package, outside the repository
# (default /tmp/demucs-ref; e.g. `git archive` of github.com/facebookresearch/demucs). Its
# imports that Debian 12 lacks (einops, julius, openunmix, omegaconf, dora, tqdm) get stand-ins
# in $REF/shims, checked by reproducing the golden output before anything is timed.
set -eu
BUILD=${1:?usage: run_bench.sh BUILD_DIR [SONG_SECONDS] [THREADS]}
SECONDS_=${2:-180}
THREADS=${3:-2}
HERE=$(cd "$(dirname "$0")" && pwd)
GOLDEN=${GOLDEN:-$HERE/../../../shared/golden/htdemucs}
REF=${REF:-/tmp/demucs-ref}
PY=/usr/bin/python3
MODEL=${MODEL:-/tmp/sb-bench-htdemucs.safetensors}

[ -d "$REF/demucs" ] || { echo "no reference demucs/ package in $REF" >&2; exit 1; }
S="$REF/shims"
"$HERE/make_shims.sh" "$S"

echo "== the reference with its stand-ins reproduces the golden output"
$PY "$HERE/reference.py" --ref "$REF" --shims "$S" check "$GOLDEN"

echo "== stembridge (native CPU, $THREADS threads, ${SECONDS_} s song)"
C=$("$BUILD/bench/demucs/bench_demucs" "$GOLDEN/released-shapes.json" --write-model "$MODEL" \
	--threads "$THREADS" --seconds "$SECONDS_" 2>/dev/null)
echo "$C"
echo "== PyTorch $($PY -c 'import torch; print(torch.__version__)') (CPU, $THREADS threads)"
P=$($PY "$HERE/reference.py" --ref "$REF" --shims "$S" bench "$MODEL" "$SECONDS_" \
	--threads "$THREADS")
echo "$P"
rm -f "$MODEL"

$PY - "$C" "$P" <<'EOF'
import json, sys
c, p = json.loads(sys.argv[1]), json.loads(sys.argv[2])
rows = [("segment (7.8 s), wall s", "segment_s"), ("segment, CPU s", "segment_cpu_s"),
        (f"song ({c['song_seconds']:.0f} s), wall s", "song_s"), ("song, CPU s", "song_cpu_s"),
        ("peak RSS, MB", "peak_rss_mb")]
print(f"\n| {'':24} | stembridge | PyTorch | ratio |\n|---|---:|---:|---:|")
for name, k in rows:
    print(f"| {name:24} | {c[k]:10.2f} | {p[k]:7.2f} | {p[k] / c[k]:5.2f}x |")
EOF
