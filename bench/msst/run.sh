#!/bin/sh
# A RoFormer on the native CPU path beside the reference PyTorch (MSST's model on Debian's
# python3-torch 1.13), in one sitting on one machine, same checkpoint, same threads: one chunk
# (seconds, CPU seconds, GFLOP a chunk, the matrix products' rate, peak RSS), the reference once
# more with OPENBLAS_CORETYPE=Haswell, and songs of two lengths through each one's demix (the
# peak RSS should not grow with the length). Runs alternate Stembridge / reference, each
# preceded by the load average, and one table is printed at the end (README.md has the results).
#
#   bench/msst/run.sh [CONFIG=ep317] [THREADS=2]
#
# environment (defaults):
#   BUILD=/tmp/b/bench        the meson build dir holding bench/msst/bench_msst
#   OUT=/tmp/sb-roformer-bench  where the models and results go (outside the repository)
#   REF=/tmp/roformer-ref     MSST + rotary-embedding-torch + einops (make_roformer_golden.py)
#   SCALE=                    the chunk's model: "" full size, or e.g. depth=2 (make_model.py)
#   SONGS="20 40"             song lengths in seconds ("" for none)
#   SONG_SCALE=depth=2        the songs' model ("" full size)
#   WARMUP=1 REPEAT=1         chunk passes before / in the timing (both engines)
#   CORETYPES="- Haswell"     OPENBLAS_CORETYPE values for the reference chunk ("-": unset)
#   DEVICE=cpu                Stembridge's device (opencl:N for PoCL)
set -eu
CONFIG=${1:-ep317}
THREADS=${2:-2}
HERE=$(cd "$(dirname "$0")" && pwd)
BUILD=${BUILD:-/tmp/b/bench}
OUT=${OUT:-/tmp/sb-roformer-bench}
REF=${REF:-/tmp/roformer-ref}
SCALE=${SCALE-}
SONGS=${SONGS-20 40}
SONG_SCALE=${SONG_SCALE-depth=2}
WARMUP=${WARMUP:-1}
REPEAT=${REPEAT:-1}
CORETYPES=${CORETYPES:--  Haswell}
DEVICE=${DEVICE:-cpu}
PY=/usr/bin/python3
B=$BUILD/bench/msst/bench_msst
[ -x "$B" ] || { echo "no $B: meson setup $BUILD && ninja -C $BUILD" >&2; exit 1; }
unset OPENBLAS_CORETYPE SB_GEMM SB_CPU_ISA
mkdir -p "$OUT"
RES=$OUT/results-$CONFIG-$(date -u +%Y%m%dT%H%M%S).jsonl
: >"$RES"

model() { # scale -> prints the checkpoint's path without .ckpt
	n=$CONFIG
	[ -z "$1" ] || n=$CONFIG-$(echo "$1" | tr -d '=' | tr ',' '-')
	if [ ! -f "$OUT/$n.ckpt" ] || [ ! -f "$OUT/$n.yaml" ]; then
		$PY "$HERE/make_model.py" "$CONFIG" --out "$OUT" --ref "$REF" \
			${1:+--scale "$1"} >/dev/null
	fi
	echo "$OUT/$n"
}
# runs a command that prints one JSON line; adds the load average before it, a label, and
# appends it to the results
record() { # label, command...
	label=$1
	shift
	load=$(cut -d' ' -f1-3 /proc/loadavg)
	echo "-- $(date -u +%H:%M:%S) load $load: $label" >&2
	line=$("$@" | tail -1)
	echo "$line" | $PY -c "
import json, sys
r = json.loads(sys.stdin.read()); r['label'] = '$label'; r['load'] = '$load'
print(json.dumps(r))" | tee -a "$RES" >&2
}

echo "== $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) cores, $(date -u '+%Y-%m-%d %H:%M UTC'), $CONFIG, $THREADS threads"
echo "== torch: $($PY -c 'import torch; print(torch.__version__)'), products through $(ldd "$($PY -c 'import torch, os; print(os.path.join(os.path.dirname(torch.__file__), "lib", "libtorch_cpu.so"))')" 2>/dev/null | grep -o 'libblas.so.3 => [^ ]*' | sed 's/.*=> //' | xargs readlink -f)"

M=$(model "$SCALE")
DUMP=$OUT/dump-$(basename "$M")
mkdir -p "$DUMP"
"$B" "$M.ckpt" --config "$M.yaml" --convert-only # converts once, outside the timings
for ct in $CORETYPES; do
	if [ "$ct" = - ]; then
		record "stembridge chunk" "$B" "$M.safetensors" --device "$DEVICE" --threads "$THREADS" \
			--warmup "$WARMUP" --repeat "$REPEAT" --dump "$DUMP"
		record "pytorch chunk" $PY "$HERE/reference.py" "$M.ckpt" "$M.yaml" chunk \
			--threads "$THREADS" --warmup "$WARMUP" --repeat "$REPEAT" --ref "$REF" \
			--input "$DUMP/input.f32" --compare "$DUMP/output.f32"
	else
		record "pytorch chunk, OPENBLAS_CORETYPE=$ct" env OPENBLAS_CORETYPE="$ct" \
			$PY "$HERE/reference.py" "$M.ckpt" "$M.yaml" chunk --threads "$THREADS" \
			--warmup "$WARMUP" --repeat "$REPEAT" --ref "$REF"
	fi
done
if [ -n "$SONGS" ]; then
	S=$(model "$SONG_SCALE")
	"$B" "$S.ckpt" --config "$S.yaml" --convert-only
	for sec in $SONGS; do
		record "stembridge song $sec" "$B" "$S.safetensors" --device "$DEVICE" \
			--threads "$THREADS" --song "$sec"
		record "pytorch song $sec" $PY "$HERE/reference.py" "$S.ckpt" "$S.yaml" song "$sec" \
			--threads "$THREADS" --ref "$REF"
	done
fi

$PY - "$RES" <<'EOF'
import json, os, sys
rs = [json.loads(l) for l in open(sys.argv[1])]
by = {r["label"]: r for r in rs}
sc = by.get("stembridge chunk")
pc = by.get("pytorch chunk")
ph = next((r for k, r in by.items() if k.startswith("pytorch chunk, ")), None)
cols = [("Stembridge", sc), ("PyTorch", pc)]
if ph:
    cols.append((f"PyTorch, CORETYPE={ph['openblas_coretype']}", ph))
name = os.path.basename(sc["model"]).rsplit(".", 1)[0] if sc else "?"
print(f"\n{name}, {sc['threads'] if sc else '?'} threads, Stembridge on {sc['device'] if sc else '?'}"
      f" ({sc['gemm'] if sc else '?'})")
print("| | " + " | ".join(c for c, _ in cols) + " | PyTorch / Stembridge |")
print("|---|" + "---:|" * (len(cols) + 1))
def row(title, key, fmt="{:.2f}", ratio=True):
    vals = [r.get(key) if r else None for _, r in cols]
    cells = [fmt.format(v) if isinstance(v, (int, float)) else "" for v in vals]
    rt = ""
    if ratio and isinstance(vals[0], (int, float)) and isinstance(vals[1], (int, float)) and vals[0]:
        rt = f"{vals[1] / vals[0]:.2f}x"
    print(f"| {title} | " + " | ".join(cells) + f" | {rt} |")
if sc:
    row(f"chunk ({sc['chunk_seconds']:.1f} s), wall s", "chunk_s")
    row("chunk, CPU s", "chunk_cpu_s")
    for r in (pc, ph):
        if r:
            r["gflops_effective"] = sc["gflop_chunk"] / r["chunk_s"]
    row("GFLOP per chunk (counted)", "gflop_chunk", "{:.0f}", False)
    row("GFLOP/s, whole chunk", "gflops_effective", "{:.1f}", False)
    row("GFLOP/s, matrix products (profile)", "gemm_gflops", "{:.1f}", False)
    row("GFLOP/s, attention (profile)", "attention_gflops", "{:.1f}", False)
    row("RSS once loaded, MB", "rss_loaded_mb", "{:.0f}")
    row("peak RSS, MB", "peak_rss_mb", "{:.0f}")
    print("| load average (1, 5, 15 min) before | " + " | ".join(r["load"] if r else "" for _, r in cols) + " | |")
songs = sorted({r["song_seconds"] for r in rs if "song_s" in r})
if songs:
    s0 = next(r for r in rs if "song_s" in r)
    print(f"\nsongs: {os.path.basename(s0['model']).rsplit('.', 1)[0]}")
    print("| song | Stembridge s | PyTorch s | PyTorch / Stembridge | Stembridge RTF | PyTorch RTF "
          "| Stembridge peak RSS MB | PyTorch peak RSS MB | load before (S; P) |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---|")
    for s in songs:
        a = by.get(f"stembridge song {s:g}")
        b = by.get(f"pytorch song {s:g}")
        if not (a and b):
            continue
        print(f"| {s:g} s | {a['song_s']:.1f} | {b['song_s']:.1f} | {b['song_s'] / a['song_s']:.2f}x "
              f"| {a['rtf']:.2f} | {b['rtf']:.2f} | {a['peak_rss_mb']:.0f} | {b['peak_rss_mb']:.0f} "
              f"| {a['load']}; {b['load']} |")
if pc and "rel_l2_vs_stembridge" in pc:
    print(f"\nsame chunk, Stembridge vs PyTorch output: relative L2 {pc['rel_l2_vs_stembridge']:.2e}")
print(f"results: {sys.argv[1]}")
EOF
