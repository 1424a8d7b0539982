#!/bin/bash
# The GPU checks and benchmarks, on the lent device machine, from the repository root, with
# .devcarry/ carried (bench/gpu/prepare.sh makes it). Each step fits one device call (10 min):
#
#   bench/gpu/run.sh all [SECONDS=180]   issue #50's targets in one call of under five minutes
#                               (what a lent machine should be spent on: one call, then give
#                               it back): quick, roformer 30, demucs SECONDS, profile, batch
#                               SECONDS; STEPS="check|gemm|demucs 180|share 180|roformer 60|cpu 30"
#                               is the longer list of issue #24
#   bench/gpu/run.sh quick      what issue #50 changed, checked on the GPU: a RoFormer chunk's
#                               goldens and its one upload, read-back and wait a pass (test_msst
#                               roformer chunk|transfers), HTDemucs's the same way
#   bench/gpu/run.sh batch [SECONDS=180]  `stembridge batch` on the GPU: BATCH_N songs of
#                               SECONDS with full-size HTDemucs, BATCH_RF_N of 30 s with ep_317,
#                               songs per GPU-hour; with the build before (.devcarry/bin-before)
#                               too where it was carried
#   bench/gpu/run.sh profile    the profile before and after: an ep_317 chunk and a HTDemucs
#                               segment, each operation timed (launches, transfers, waits), with
#                               .devcarry/bin-before's programs and this build's
#                               (batch, profile: HD_MODEL and RF_MODEL name other models than the
#                               ones steps demucs and roformer make, for a smoke test)
#   bench/gpu/run.sh check      golden vectors on the GPU (CLBlast, own and tiled products),
#                               the tiled kernel's per-operation test, CLBlast; bf16 on the
#                               tensor cores (--precision bf16): its products against the C
#                               reference, the stems' change from fp32 (precision.py)
#   bench/gpu/run.sh gemm [SCALE=1]   products alone (issue #24): HTDemucs's three largest and
#                               its two strided-batched attention products through CLBlast, the
#                               own kernel, the tiled kernel and a few other tilings of it, and
#                               bf16 on the tensor cores (mma, a few tilings), in TFLOP/s;
#                               the RoFormer's products; HTDemucs's products of few rows
#                               against the thin tiling's candidates (gemm-thin.jsonl)
#                               (bench_cl_gemm; SCALE divides the sizes, for PoCL)
#   bench/gpu/run.sh classic    the built-in model: bench_opencl, bench_jobs (issue #3)
#   bench/gpu/run.sh demucs [SECONDS=180]    HTDemucs full size: Stembridge (CLBlast, own
#                               kernel, tiled kernel, CLBlast with attention in one pass,
#                               bf16 on the tensor cores, profiles) beside PyTorch on CUDA
#                               (float32, TF32, and autocast to bf16)
#   bench/gpu/run.sh roformer [SECONDS=60]  BS-RoFormer ep_317 at full size (random weights
#                               from its public config): a chunk (profiled: launches, transfers;
#                               attention as products and in one pass) and a song on the GPU
#                               beside MSST's model in PyTorch on CUDA
#   bench/gpu/run.sh tune       CLBlast's tuners (--quick) for the GPU, then HTDemucs again
#   bench/gpu/run.sh cpu [SECONDS=60]   the machine's CPU (issue #27): products per library and
#                               bf16 (bench_gemm), a segment and a song at 2 and all threads in
#                               fp32 (oneDNN, OpenBLAS's own choice of core) and bf16, beside
#                               PyTorch on the CPU at the same threads
#
# It registers NVIDIA's OpenCL driver (present, not registered there), unpacks the carried
# Debian libraries into /tmp/sbdeb (only our programs see them) and writes its logs and JSON
# into $OUT (the device tool's folder, else .devcarry/results).
set -u -o pipefail
# all: every table in one device call (aimed at under five minutes on an H100): the checks, the
# GPU against PyTorch, sharing and batches, the CPU against PyTorch; each step in a child so
# one failing does not stop the others
if [ "${1:-}" = all ]; then
	rc=0
	t0=$(date +%s)
	# (STEPS: the steps and their order, first the ones that must come back; DEADLINE: seconds
	# the whole call may take, so a step that would run past it is cut short and the call's
	# files still come back)
	steps=${STEPS:-"quick|roformer 30|demucs ${2:-180}|profile|batch ${2:-180}"}
	# the shorter lists of issue #50's call (each can be set from outside): each shape's path
	# and attention's way measured from nothing and then kept (a GPU's default), bf16 and
	# tf32; PyTorch in fp32 and autocast
	export RF_RUNS=${RF_RUNS:-"auto-first:auto auto:auto"} RF_SONGS=${RF_SONGS:-"auto bf16"}
	export DEMUCS_RUNS=${DEMUCS_RUNS:-"auto-first:auto auto:auto own:bf16"}
	export REF_TF32=${REF_TF32:-"off bf16"} DEADLINE=${DEADLINE:-290} STEP_S=${STEP_S:-120}
	export BATCH_N=${BATCH_N:-6} BATCH_RF_N=${BATCH_RF_N:-3}
	IFS='|' read -r -a steps <<< "$steps"
	for s in "${steps[@]}"; do
		left=$(( ${DEADLINE:-100000} - ($(date +%s) - t0) ))
		if [ "$left" -le 20 ]; then
			echo "== run.sh $s: skipped, the deadline is near"
			rc=1
			continue
		fi
		lim=${STEP_S:-240}
		[ "$lim" -le "$left" ] || lim=$left
		echo "== run.sh $s ($(( $(date +%s) - t0 )) s in, at most $lim s)"
		# a step that hangs (a kernel never run on this GPU before) must not take the call
		# shellcheck disable=SC2086
		REPEAT=${REPEAT:-3} timeout -k 5 "$lim" "$0" $s || rc=1
	done
	echo "== all done in $(( $(date +%s) - t0 )) s"
	exit $rc
fi
C=$(pwd)/.devcarry
PY=${PY:-python3}   # the Python that has PyTorch
failed=0
note() { failed=1; echo "run.sh: FAILED: $*" >&2; }
R=${OUT:-$C/results}
mkdir -p "$R"
step=${1:-check}
[ -d "$C/bin" ] || { echo "run.sh: no .devcarry (run bench/gpu/prepare.sh here first)" >&2; exit 1; }

# NVIDIA's ICD (SB_GPU=opencl:N skips this and names the device: a smoke test elsewhere)
if [ -z "${SB_GPU:-}" ]; then
mkdir -p /tmp/vendors
icd=/usr/lib/libnvidia-opencl.so.1
for p in /usr/lib/x86_64-linux-gnu/libnvidia-opencl.so.1 /usr/local/nvidia/lib64/libnvidia-opencl.so.1; do
	[ -e "$icd" ] || { [ -e "$p" ] && icd=$p; }
done
echo "$icd" > /tmp/vendors/nvidia.icd
export OCL_ICD_VENDORS=/tmp/vendors
fi
REPEAT=${REPEAT:-5}
REF_DEVICE=${REF_DEVICE:-cuda}

# the carried libraries, unpacked without dpkg (the machine need not have it)
D=/tmp/sbdeb
if [ ! -e "$D/.done" ]; then
	python3 - "$C/debs" "$D" <<'EOF'
import io, os, sys, tarfile
src, dst = sys.argv[1], sys.argv[2]
for name in sorted(os.listdir(src)):
    if not name.endswith(".deb"):
        continue
    data = open(os.path.join(src, name), "rb").read()
    assert data[:8] == b"!<arch>\n", name
    at = 8
    while at < len(data):
        member = data[at:at + 16].decode().strip().rstrip("/")
        size = int(data[at + 48:at + 58].decode())
        body = data[at + 60:at + 60 + size]
        if member.startswith("data.tar"):
            tarfile.open(fileobj=io.BytesIO(body)).extractall(dst)
        at += 60 + size + (size & 1)
EOF
	# a newer C++ runtime on the machine wins over Debian 12's
	if ls /usr/lib/x86_64-linux-gnu/libstdc++.so.6 >/dev/null 2>&1; then
		rm -f "$D"/usr/lib/x86_64-linux-gnu/libstdc++.so.6*
	fi
	touch "$D/.done"
fi
libs=$(find "$D" -name '*.so*' -printf '%h\n' | sort -u | tr '\n' ':')
SBLD="$libs/usr/local/nvidia/lib64"
sb() { LD_LIBRARY_PATH="$SBLD:${LD_LIBRARY_PATH:-}" "$@"; }
export PATH="$D/usr/bin:$PATH"
export XDG_CACHE_HOME=/tmp/sbcache XDG_DATA_HOME=/tmp/sbdata

sb "$C/bin/stembridge" devices | tee "$R/devices.txt"
gpu=${SB_GPU:-$(sb "$C/bin/stembridge" devices --json | python3 -c '
import json, sys
d = [x for x in json.load(sys.stdin) if "GPU" in x["type"]]
print(d[0]["id"] if d else "")')}
[ -n "$gpu" ] || { echo "run.sh: no OpenCL GPU (is the NVIDIA driver there?)" >&2; exit 1; }
nvidia-smi --query-gpu=name,clocks.max.sm,memory.total,driver_version --format=csv 2>/dev/null |
	tee "$R/nvidia-smi.txt"

case "$step" in
check)
	# bf16 and tf32 on the tensor cores (mma.cl's and attention_mma.cl's inline PTX; tf32's
	# attention never run on a GPU before this call): the products and attention against the
	# C reference with the inputs rounded the same way, then the stems' change from fp32 on the
	# mid golden model and the demo clip
	for p in bf16 tf32; do
		SB_CL_GEMM=$([ $p = tf32 ] && echo tf32) sb "$C/bin/test_ops" --ops gemm,attention \
			--$p --expect "tensor cores, $p" --expect-kernel attention_mma \
			> "$R/check-ops-$p.txt" 2>&1 ||
			note "test_ops ($p on the tensor cores)"
		tail -n 3 "$R/check-ops-$p.txt"
		sb "$PY" bench/cpu/precision.py "$C/bin/stembridge" "$C/golden/htdemucs-mid.safetensors" \
			"$C/golden/clip.wav" --device "$gpu" $([ $p = tf32 ] && echo --tf32) 2>&1 |
			tee "$R/check-precision-$p.txt" || note "precision.py ($p on the GPU)"
	done
	# test_cl_blas and test_demucs open the first OpenCL device: the GPU, only NVIDIA registered
	sb "$C/bin/test_cl_blas" /tmp 2>&1 | tee "$R/check-cl_blas.txt" || note test_cl_blas
	# each shape's product path measured on the GPU (the default there): the choice follows the
	# timed runs (two paths slowed in them), is kept and read back; a failure here says whether
	# the driver's markers carry times
	sb "$C/bin/test_cl_pick" /tmp/sbpick 2>&1 | tee "$R/check-cl_pick.txt" || note test_cl_pick
	for g in clblast own tiled; do
		SB_CL_GEMM=$g sb "$C/bin/test_demucs" "$C/golden" opencl-mid 2>&1 |
			tee "$R/check-mid-$g.txt" || note "opencl-mid ($g)"
	done
	# the tiled kernel's products and attention against the C reference, with the table's
	# tilings for the GPU (all three: the small one serves the small products, the thin one
	# the products of few rows, which must take it)
	SB_CL_GEMM=tiled sb "$C/bin/test_ops" --ops gemm,attention --expect "tiled kernel" \
		--expect-path "tiled 16x" \
		> "$R/check-ops-tiled.txt" 2>&1 || note "test_ops (tiled)"
	tail -n 3 "$R/check-ops-tiled.txt"
	# attention in one pass (its local-memory form, never run on a GPU before) against the
	# C reference
	SB_CL_ATTENTION=fused sb "$C/bin/test_ops" --ops attention --expect-kernel attention_64 \
		> "$R/check-ops-attention.txt" 2>&1 || note "test_ops (attention in one pass)"
	tail -n 3 "$R/check-ops-attention.txt"
	SB_CL_ATTENTION=fused sb "$C/bin/test_demucs" "$C/golden" opencl-mid 2>&1 |
		tee "$R/check-mid-attention.txt" || note "opencl-mid (attention in one pass)"
	# attention by tiles (never run on a GPU before this call) the same two ways
	SB_CL_ATTENTION=tiles sb "$C/bin/test_ops" --ops attention --expect-kernel attention_tiles \
		> "$R/check-ops-attention-tiles.txt" 2>&1 || note "test_ops (attention by tiles)"
	tail -n 3 "$R/check-ops-attention-tiles.txt"
	SB_CL_ATTENTION=tiles sb "$C/bin/test_demucs" "$C/golden" opencl-mid 2>&1 |
		tee "$R/check-mid-attention-tiles.txt" || note "opencl-mid (attention by tiles)"
	sb "$C/bin/test_demucs" "$C/golden" opencl-full 2>&1 | tee "$R/check-full.txt" ||
		note opencl-full
	sb "$C/bin/test_opencl" > "$R/check-classic.txt" 2>&1 || note test_opencl
	tail -n 20 "$R/check-classic.txt"
	;;
classic)
	sb "$C/bin/bench_opencl" --chunks 0,1024,8192 2>&1 | tee "$R/bench_opencl.txt" ||
		note bench_opencl
	sb "$C/bin/bench_jobs" --seconds 30 --devices "$gpu" --single "$gpu" 2>&1 |
		tee "$R/bench_jobs.txt" || note bench_jobs
	;;
gemm)
	# products alone, every path on the same data (vs_first: each path against CLBlast's
	# results); the tilings beside the table's are the candidates for the H100's row, two of
	# 256 x 128 among them (16 paths x 5 shapes x 0.2 s, plus a context and a kernel build a
	# path: about a minute) (mma: bf16 on the tensor cores, --precision bf16, its default tiling
	# then others; tf32: its pair, then 64 x 64 and 128 x 64 each alone)
	sb "$C/bin/bench_cl_gemm" --device "$gpu" --gemm clblast,own,tiled,mma,tf32 --scale "${2:-1}" \
		--seconds 0.2 \
		--tiles "${TILES:-128,128,16,8,8;64,64,16,4,4/128,128,8,8,8/64,128,16,4,8/64,64,16,4,4/256,128,8,8,8/128,256,8,8,8}" \
		--mma-tiles "${MMA_TILES:-128,128/64,128/64,64/128,64;128,64}" \
		--tf32-tiles "${TF32_TILES:-64,64/128,64}" \
		2> "$R/gemm.log" | tee "$R/gemm.jsonl" || note bench_cl_gemm
	# the RoFormer's products (a layer's four over 49,662 tokens, a band's mask MLP): the product
	# path of a RoFormer chunk is chosen from these and the chunk times of step roformer
	sb "$C/bin/bench_cl_gemm" --device "$gpu" --model roformer --gemm clblast,own,tiled,mma,tf32 \
		--scale "${2:-1}" --seconds 0.2 \
		--tiles "${RF_TILES:-128,128,16,8,8/128,128,8,8,8/256,128,8,8,8/128,256,8,8,8}" \
		--mma-tiles "${MMA_TILES:-128,128/64,128/64,64/128,64;128,64}" \
		--tf32-tiles "${TF32_TILES:-64,64/128,64}" \
		2>> "$R/gemm.log" | tee "$R/gemm-roformer.jsonl" || note "bench_cl_gemm (roformer)"
	# HTDemucs's products of few rows (its frequency branch's convolutions of 6-48 channels over
	# 336 frames, batched over up to 512 rows): the table's thin tiling against the others and
	# the candidates for its row (6 shapes x 8 paths x 0.2 s: about 15 s)
	sb "$C/bin/bench_cl_gemm" --device "$gpu" --model thin --gemm clblast,own,tiled \
		--scale "${2:-1}" --seconds 0.2 \
		--tiles "${THIN_TILES:-128,64,16,8,4/16,128,16,4,4/8,128,8,4,4/32,128,8,4,8/16,64,16,4,4}" \
		2>> "$R/gemm.log" | tee "$R/gemm-thin.jsonl" || note "bench_cl_gemm (thin)"
	tail -n 5 "$R/gemm.log"
	;;
demucs)
	secs=${2:-180}
	model=/tmp/sb-htdemucs-full.safetensors
	# each product path with attention in one pass (NVIDIA's default since 1b9034b), then CLBlast
	# with attention as products around a softmax (split)
	# (tf32: the tensor cores with tf32 inputs; own:bf16: --precision bf16, every product on
	# the tensor cores in bf16)
	# (auto: the default on a GPU, each shape's fastest fp32 product path and attention's way
	# measured on the device; first from nothing, its measuring in the warm-up and the first
	# passes, then with what it kept)
	# (tiled:tiles: attention by tiles, the third way a GPU measures, forced)
	# (DEMUCS_RUNS: a shorter list of these, where a call's time is short)
	for run in ${DEMUCS_RUNS:-clblast:fused own:fused tiled:fused tiled:tiles auto-first:auto \
		auto:auto tf32:fused clblast:split own:bf16}; do
		g=${run%:*} a=${run#*:} p=fp32
		[ "$a" = bf16 ] && a=fused p=bf16
		[ "$g" = auto-first ] && g=auto && rm -f "$XDG_CACHE_HOME"/stembridge/products-*.txt \
			"$XDG_CACHE_HOME"/stembridge/attention-*.txt
		m="--model $model"
		[ -e "$model" ] || m="--write-model $model"
		f=demucs-${run%:*}
		[ "$a" = split ] || [ "$a" = tiles ] && f=$f-$a
		[ $p = bf16 ] && f=demucs-bf16
		SB_CL_ATTENTION=$a sb "$C/bin/bench_demucs" "$C/golden/released-shapes.json" $m \
			--device "$gpu" --gemm $g --precision $p --repeat "$REPEAT" --seconds "$secs" \
			--profile > "$R/$f.json" 2> "$R/$f-profile.txt" ||
			note "bench_demucs ($g, attention $a, $p)"
		cat "$R/$f-profile.txt" "$R/$f.json"
	done
	if [ -e "$C/golden/htdemucs-mid-io.safetensors" ]; then
		"$PY" "$C/reference.py" --ref "$C/ref" --shims "$C/ref/shims" check "$C/golden" |
			tee "$R/reference-check.txt" ||
			note "the reference does not reproduce the golden output"
	else
		echo "demucs: the goldens' io was not carried (prepare.sh): the reference's check skipped"
	fi
	for tf in ${REF_TF32:-off default bf16}; do
		amp=off
		[ $tf = bf16 ] && tf=default amp=bf16
		"$PY" "$C/reference.py" --ref "$C/ref" --shims "$C/ref/shims" bench "$model" "$secs" \
			--device "$REF_DEVICE" --tf32 $tf --amp $amp --repeat "$REPEAT" --threads "$(nproc)" |
			tee "$R/pytorch-$REF_DEVICE-tf32-$tf${amp/off/}.json" || note "PyTorch (tf32 $tf, amp $amp)"
	done
	;;
share)
	# batches of segments on the GPU (B = 1, 2, 4: GFLOP/s and launches per segment), then one
	# song shared by the GPU and the CPU against the GPU alone: the CPU as the engine opens it
	# beside a GPU (a core left to the GPU's feeding thread, its threads at nice +10), and as
	# before that (every core, no lower priority: "allcores")
	secs=${2:-180}
	model=/tmp/sb-htdemucs-full.safetensors
	# (SHARE_RUNS: a shorter list, "b1 b2 b4 cpu kept allcores", where a call's time is short;
	# cpu: GPU + CPU with no pace known, so the CPU measures itself on a first segment; kept:
	# the same again with the paces the first kept, as the next job would)
	export SB_PACE_FILE=/tmp/sbpaces.txt
	for dev in ${SHARE_RUNS:-b1 b2 b4 cpu kept allcores}; do
		case $dev in
		b*) dev="$gpu:${dev#b}:" ;;
		cpu) dev="$gpu,cpu:1:" && rm -f "$SB_PACE_FILE" ;;
		kept) dev="$gpu,cpu:1:kept" ;;
		allcores) dev="$gpu,cpu:1:allcores" && rm -f "$SB_PACE_FILE" ;;
		esac
		how=${dev##*:} dev=${dev%:*}
		d=${dev%:*} b=${dev##*:}
		m="--model $model" t="" nice=""
		[ -e "$model" ] || m="--write-model $model"
		[ "$how" = allcores ] && t="--threads $(nproc)" nice=0
		name="share-${d//[:,]/_}-b$b${how:+-$how}"
		SB_CPU_BESIDE_NICE=$nice sb "$C/bin/bench_demucs" "$C/golden/released-shapes.json" $m \
			--device "$d" $t --batch "$b" --repeat "$REPEAT" --seconds "$secs" --profile \
			> "$R/$name.json" 2> "$R/$name-profile.txt" || note "bench_demucs ($d, batch $b $how)"
		cat "$R/$name.json"
	done
	;;
cpu)
	secs=${2:-60}
	model=/tmp/sb-htdemucs-full.safetensors
	all=$(nproc)
	for t in 2 "$all"; do
		for g in onednn own openblas; do
			SB_GEMM=$g sb "$C/bin/bench_gemm" --threads "$t" --seconds 1 | tail -1 |
				tee -a "$R/cpu-gemm.jsonl" || note "bench_gemm ($g, $t threads)"
		done
		sb "$C/bin/bench_gemm" --threads "$t" --precision bf16 --seconds 1 | tail -1 |
			tee -a "$R/cpu-gemm.jsonl" || note "bench_gemm (bf16, $t threads)"
		for run in onednn:fp32 openblas:fp32 onednn:bf16; do
			g=${run%:*} p=${run#*:}
			m="--model $model"
			[ -e "$model" ] || m="--write-model $model"
			SB_GEMM=$g sb "$C/bin/bench_demucs" "$C/golden/released-shapes.json" $m --device cpu 				--threads "$t" --precision "$p" --repeat 3 --seconds "$secs" --profile 				2>/dev/null | tee -a "$R/cpu-demucs.jsonl" || note "bench_demucs (cpu $g $p, $t threads)"
		done
		"$PY" "$C/reference.py" --ref "$C/ref" --shims "$C/ref/shims" bench "$model" "$secs" \
			--device cpu --threads "$t" | tee -a "$R/cpu-pytorch.jsonl" || note "PyTorch (cpu, $t threads)"
	done
	;;
roformer)
	# the model is made there (640 MB: too large to carry) by make_model.py from the public
	# config, with the reference's own classes, then converted once outside the timings
	secs=${2:-60}
	# (RF_SCALE=depth=1 or the like: a smaller model, for a smoke test of this script on PoCL)
	W=/tmp/sb-roformer
	M=$W/ep317${RF_SCALE:+-$(echo "$RF_SCALE" | tr -d '=' | tr ',' '-')}
	mkdir -p "$W/dump"
	[ -e "$M.ckpt" ] || "$PY" "$C/roformer/make_model.py" ep317 --out "$W" --ref "$C/rfref" \
		${RF_SCALE:+--scale "$RF_SCALE"} >/dev/null || note "make_model.py"
	sb "$C/bin/bench_msst" "$M.ckpt" --config "$M.yaml" --convert-only || note "conversion"
	# a chunk on each product path, attention in one pass (NVIDIA's default), the first one's
	# output dumped for PyTorch's comparison; then CLBlast with attention as products (split)
	# (auto: as in step demucs, first from nothing, then with what it kept)
	# (RF_RUNS, RF_SONGS: shorter lists of these, where a call's time is short; the dump for
	# PyTorch's comparison comes from clblast:fused, so keep it first)
	for run in ${RF_RUNS:-clblast:fused own:fused tiled:fused tiled:tiles auto-first:auto \
		auto:auto clblast:split}; do
		g=${run%:*} a=${run#*:}
		[ "$g" = auto-first ] && g=auto && rm -f "$XDG_CACHE_HOME"/stembridge/products-*.txt \
			"$XDG_CACHE_HOME"/stembridge/attention-*.txt
		f=roformer-gpu-chunk-${run%:*}
		[ "$a" = split ] || [ "$a" = tiles ] && f=$f-$a
		dump=""
		[ "$run" = clblast:fused ] && dump="--dump $W/dump"
		SB_CL_GEMM=$g SB_CL_ATTENTION=$a sb "$C/bin/bench_msst" "$M.safetensors" \
			--device "$gpu" --warmup 1 --repeat "$REPEAT" $dump > "$R/$f.json" \
			2> "$R/$f-profile.txt" || note "bench_msst (chunk, $g, attention $a)"
		cat "$R/$f-profile.txt" "$R/$f.json"
	done
	# bf16 on the tensor cores (--precision bf16): a chunk
	sb "$C/bin/bench_msst" "$M.safetensors" --device "$gpu" --precision bf16 --warmup 1 \
		--repeat "$REPEAT" > "$R/roformer-gpu-chunk-bf16.json" \
		2> "$R/roformer-gpu-chunk-bf16-profile.txt" || note "bench_msst (chunk, bf16)"
	cat "$R/roformer-gpu-chunk-bf16-profile.txt" "$R/roformer-gpu-chunk-bf16.json"
	# tf32 on the tensor cores: a chunk
	SB_CL_GEMM=tf32 sb "$C/bin/bench_msst" "$M.safetensors" --device "$gpu" --warmup 1 \
		--repeat "$REPEAT" > "$R/roformer-gpu-chunk-tf32.json" \
		2> "$R/roformer-gpu-chunk-tf32-profile.txt" || note "bench_msst (chunk, tf32)"
	cat "$R/roformer-gpu-chunk-tf32-profile.txt" "$R/roformer-gpu-chunk-tf32.json"
	# songs: CLBlast, the own kernel, each shape's fastest (the default), tf32 and bf16 on the
	# tensor cores
	for g in ${RF_SONGS:-clblast own auto tf32 bf16}; do
		p=fp32
		[ $g = bf16 ] && p=bf16
		SB_CL_GEMM=${g/bf16/own} sb "$C/bin/bench_msst" "$M.safetensors" --device "$gpu" \
			--song "$secs" --precision $p > "$R/roformer-gpu-song-$g.json" 2>/dev/null ||
			note "bench_msst (song, $g)"
		cat "$R/roformer-gpu-song-$g.json"
	done
	"$PY" "$C/roformer/reference.py" "$M.ckpt" "$M.yaml" chunk --device "$REF_DEVICE" \
		--threads "$(nproc)" --repeat "$REPEAT" --ref "$C/rfref" --input "$W/dump/input.f32" \
		--compare "$W/dump/output.f32" | tee "$R/roformer-pytorch-chunk.json" ||
		note "PyTorch RoFormer (chunk)"
	"$PY" "$C/roformer/reference.py" "$M.ckpt" "$M.yaml" song "$secs" --device "$REF_DEVICE" \
		--threads "$(nproc)" --ref "$C/rfref" | tee "$R/roformer-pytorch-song.json" ||
		note "PyTorch RoFormer (song)"
	;;
quick)
	# issue #50 on the GPU: the RoFormer's goldens (every chunk runs the new rmsnorm_seg and the
	# grouped products) and its one upload, read-back and wait a pass (the chunk, two passes in
	# flight, a song through the demix), HTDemucs's the same way
	for c in chunk transfers; do
		sb "$C/bin/test_msst" tests/fixtures/roformer roformer $c > "$R/quick-roformer-$c.txt" \
			2>&1 || note "test_msst roformer $c"
		grep -E "opencl|pass|song|FAIL|failure" "$R/quick-roformer-$c.txt"
	done
	sb "$C/bin/test_demucs" tests/fixtures/htdemucs opencl-transfers htdemucs-mini htdemucs-mini2 \
		> "$R/quick-demucs-transfers.txt" 2>&1 || note "test_demucs opencl-transfers"
	tail -n 4 "$R/quick-demucs-transfers.txt"
	;;
batch)
	# songs per GPU-hour: BATCH_N songs of SECONDS (made here: chords that change every half
	# second, a kick and hats on the beat, each song its own seed) through `stembridge batch`
	# on the GPU with full-size HTDemucs (made by step demucs), BATCH_RF_N songs of 30 s with
	# ep_317 (made by step roformer); the build before too where .devcarry/bin-before holds it
	# (the model kept and the songs overlapped since issue #50)
	secs=${2:-180}
	W=/tmp/sb-batch
	rm -rf "$W" && mkdir -p "$W"
	"$PY" - "$W" "$secs" "${BATCH_N:-8}" "${BATCH_RF_N:-3}" <<'PYEOF' || note "batch inputs"
import sys, wave
import numpy as np
out, secs, n, nrf = sys.argv[1], float(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
rate = 44100
def song(path, seconds, seed):
    g = np.random.default_rng(seed)
    frames = int(seconds * rate)
    t = np.arange(frames) / rate
    y = np.zeros((frames, 2), np.float32)
    half = rate // 2
    for s0 in range(0, frames, half):
        f0 = 110.0 * 2 ** (g.integers(0, 24) / 12)
        seg = slice(s0, min(s0 + half, frames))
        for k, a in ((1, 0.2), (1.25, 0.12), (1.5, 0.1), (2, 0.05)):
            y[seg, 0] += a * np.sin(2 * np.pi * f0 * k * t[seg])
            y[seg, 1] += a * np.sin(2 * np.pi * f0 * k * t[seg] + 0.3)
    beat = (t % 0.5) < 0.08
    y[beat] += (0.5 * np.sin(2 * np.pi * 55 * t[beat]) * np.exp(-30 * (t[beat] % 0.5)))[:, None]
    y += 0.02 * g.standard_normal((frames, 2)) * ((t % 0.25) < 0.03)[:, None]
    v = wave.open(path, "wb")
    v.setnchannels(2)
    v.setsampwidth(2)
    v.setframerate(rate)
    v.writeframes((np.clip(y, -1, 1) * 32767).astype("<i2").tobytes())
for kind, count, seconds in (("demucs", n, secs), ("roformer", nrf, 30.0)):
    with open(f"{out}/{kind}.txt", "w") as f:
        for k in range(count):
            p = f"{out}/{kind}-{k}.wav"
            song(p, seconds, 50 * len(kind) + k)
            f.write(p + "\n")
PYEOF
	for b in bin bin-before; do
		[ -x "$C/$b/stembridge" ] || continue
		for run in demucs:"${HD_MODEL:-/tmp/sb-htdemucs-full.safetensors}" \
			roformer:"${RF_MODEL:-/tmp/sb-roformer/ep317.safetensors}"; do
			kind=${run%%:*} m=${run#*:}
			[ -e "$m" ] || { note "batch: no $m (steps demucs and roformer make them)"; continue; }
			XDG_CACHE_HOME=/tmp/sbcache-$b sb "$C/$b/stembridge" batch "$W/$kind.txt" \
				-o "$W/out-$b-$kind" --device "$gpu" --model "$m" --quiet \
				> "$R/batch-$b-$kind.txt" 2>&1 || note "stembridge batch ($b, $kind)"
			tail -n 1 "$R/batch-$b-$kind.txt"
			tail -n 1 "$W"/out-$b-$kind/logs/*.jsonl | tee "$R/batch-$b-$kind.json"
			rm -rf "$W/out-$b-$kind"
		done
	done
	;;
profile)
	# the profile before and after issue #50, in one call: a chunk of ep_317 and a segment of
	# HTDemucs (made by steps roformer and demucs), products through the tiled kernel and
	# attention in one pass on both builds (no measured choice to differ), each operation timed
	# with the device drained around it
	M=${RF_MODEL:-/tmp/sb-roformer/ep317.safetensors}
	for b in bin-before bin; do
		[ -x "$C/$b/bench_msst" ] || { echo "profile: no $b"; continue; }
		for what in roformer demucs; do
			f="$R/profile-$b-$what"
			if [ $what = roformer ]; then
				SB_CL_GEMM=tiled SB_CL_ATTENTION=fused XDG_CACHE_HOME=/tmp/sbcache-$b sb \
					"$C/$b/bench_msst" "$M" --device "$gpu" --warmup 1 --repeat "$REPEAT" \
					> "$f.json" 2> "$f.txt" || note "profile ($b, $what)"
			else
				SB_CL_ATTENTION=fused XDG_CACHE_HOME=/tmp/sbcache-$b sb "$C/$b/bench_demucs" \
					"$C/golden/released-shapes.json" \
					--model "${HD_MODEL:-/tmp/sb-htdemucs-full.safetensors}" \
					--device "$gpu" --gemm tiled --repeat "$REPEAT" --seconds 8 --profile \
					> "$f.json" 2> "$f.txt" || note "profile ($b, $what)"
			fi
			cat "$f.txt" "$f.json"
		done
	done
	;;
tune)
	STEMBRIDGE="$C/bin/stembridge" sb tools/clblast_tune.sh "$gpu" --quick --out "$R/clblast-tuning" \
		2>&1 | tee "$R/tune.txt" || note clblast_tune.sh
	SB_CLBLAST_TUNING="$R/clblast-tuning" sb "$C/bin/bench_demucs" "$C/golden/released-shapes.json" \
		$([ -e /tmp/sb-htdemucs-full.safetensors ] && echo --model || echo --write-model) \
		/tmp/sb-htdemucs-full.safetensors --device "$gpu" --gemm clblast --repeat "$REPEAT" \
		--seconds "${2:-180}" --profile > "$R/demucs-clblast-tuned.json" \
		2> "$R/demucs-clblast-tuned-profile.txt" || note "bench_demucs (tuned)"
	cat "$R/demucs-clblast-tuned-profile.txt" "$R/demucs-clblast-tuned.json"
	;;
*)
	echo "run.sh: unknown step '$step' (check, quick, gemm, classic, demucs, share, roformer," \
		"batch, profile, tune, cpu)" >&2
	exit 2
	;;
esac
exit $failed
