#!/bin/bash
# Builds the engine's OpenCL kernels for the GPUs nobody here owns, with the compiler their
# drivers use, and says what each kernel costs there before anyone runs it:
#   AMD: ROCm's and Mesa's OpenCL compile with clang's AMDGPU target (gfx906: Vega and MI50,
#        wave64; gfx1030: RDNA2, wave32), so Debian's clang 14 with libclc's builtins shows the
#        registers a work-item takes (VGPRs) and the private memory it spills to (scratch);
#   NVIDIA: its driver compiles OpenCL C through its own LLVM-based front end to PTX, so clang's
#        NVPTX target (sm_80) is a stand-in: a kernel that keeps an array in local memory here
#        (a __local_depot) indexes it at run time, which no register allocator undoes.
# Scratch or local memory in a kernel's inner loop costs a global memory access per use: the
# one-pass attention had 1 KB of it a work-item on AMD until it was built per head size, and
# the tiled product's epilogue kept each item's block in local memory in NVPTX.
#
#   tools/cl_kernels.sh            the table (markdown): every kernel, build, VGPRs, scratch
#   tools/cl_kernels.sh --check    exit 1 when a kernel does not build for a target it runs on
#                                  (the tensor-core kernels: NVIDIA only), when a build names
#                                  no kernel or its figures cannot be read, or when a hot one
#                                  (the fp32 products and attention at the tilings and head
#                                  sizes the engine builds on that vendor, every kernel of
#                                  ops.cl) uses scratch or local memory there
# Needs clang-14 and libclc-14 (Debian 12's packages: libclc's bitcode is read by its own
# LLVM); exits 77 (a skip) without them. The options are the engine's (cl_*.c).
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
SRC=$HERE/../engine/backend/opencl
CHECK=0
[ "${1:-}" = --check ] && CHECK=1
CLANG=$(command -v clang-14 || true)
CLC=/usr/lib/clc
if [ -z "$CLANG" ] || [ ! -f "$CLC/amdgcn--amdhsa.bc" ] ||
	[ ! -f "$CLC/nvptx64--nvidiacl.bc" ]; then
	echo "skip: clang-14 and libclc-14 (apt-get install clang-14 libclc-14) build the kernels" \
	     "for AMD and NVIDIA targets; not installed"
	exit 77
fi
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
cat "$SRC/gemm_rows.cl" "$SRC/ops.cl" > "$TMP/ops.cl"
cat "$SRC/gemm_rows.cl" "$SRC/gemm.cl" > "$TMP/gemm.cl"
cat "$SRC/gemm_rows.cl" "$SRC/mma.cl" > "$TMP/mma.cl"
cat "$SRC/gemm_rows.cl" "$SRC/mma.cl" "$SRC/attention_mma.cl" > "$TMP/attention_mma.cl"

fails=0
echo "| kernel | built as | AMD gfx906: VGPRs, scratch | AMD gfx1030: VGPRs, scratch |" \
     "NVPTX sm_80: local memory |"
echo "|---|---|---|---|---|"
# build NAME OUT LIBCLC TARGET-OPTIONS...: the job's source and options ($src, $opts) for one
# target; a build that fails is counted, its first errors shown
build() {
	local name=$1 out=$2 lib=$3
	shift 3
	if ! "$CLANG" -cl-std=CL1.2 "$@" -Xclang -finclude-default-header \
		-Xclang -mlink-builtin-bitcode -Xclang "$lib" -O3 -S "${opts[@]}" "$src" \
		-o "$out" 2> "$out.err"; then
		echo "$label (${opts[*]}): does not build for $name:" >&2
		grep -m3 error "$out.err" >&2
		fails=$((fails + 1))
		rm -f "$out"
	fi
}
# job LABEL SOURCE HOT TARGETS DEFINES...: HOT: amd, nvidia, all or none (where no scratch
# and no local memory are allowed); TARGETS: amd, nvidia or all (where the kernel runs)
job() {
	local label=$1 src=$2 hot=$3 targets=$4
	shift 4
	local opts=("$@") n=$((++jobs)) t
	if [ "$targets" != nvidia ]; then
		for t in gfx906 gfx1030; do
			build "$t" "$TMP/$n.$t.s" "$CLC/amdgcn--amdhsa.bc" \
				-target amdgcn-amd-amdhsa -mcpu=$t -nogpulib
		done
	fi
	if [ "$targets" != amd ]; then
		build sm_80 "$TMP/$n.ptx" "$CLC/nvptx64--nvidiacl.bc" \
			-target nvptx64-nvidia-nvcl -march=sm_80
	fi
	# one row per kernel: AMD's from the .amdhsa_kernel blocks, NVPTX's from the depots
	# (a depot in a function the kernels call counts for every kernel of the file)
	local kernels
	kernels=$(cat "$TMP/$n".*.s "$TMP/$n.ptx" 2>/dev/null |
		sed -n -e 's/^[[:space:]]*\.amdhsa_kernel \(.*\)$/\1/p' \
			-e 's/^.*\.entry \([A-Za-z0-9_]*\)(.*$/\1/p' |
		sort -u)
	if [ -z "$kernels" ]; then # built, yet nothing this script can read: not a pass
		echo "$label (${opts[*]}): no kernel found in the compiler's output" >&2
		fails=$((fails + 1))
	fi
	local k
	for k in $kernels; do
		local cell=() bad=0
		for t in gfx906 gfx1030; do
			if [ ! -f "$TMP/$n.$t.s" ]; then
				cell+=("-")
				continue
			fi
			local vgpr scratch
			read -r vgpr scratch < <(awk -v k="$k" '$1 == ".amdhsa_kernel" { on = $2 == k }
				on && $1 == ".amdhsa_private_segment_fixed_size" { s = $2 }
				on && $1 == ".amdhsa_next_free_vgpr" { v = $2 }
				END { print (v == "" ? "?" : v) " " (s == "" ? "?" : s) }' "$TMP/$n.$t.s")
			cell+=("$vgpr, $scratch B")
			if [ "$vgpr" = "?" ] || [ "$scratch" = "?" ]; then
				bad=1 # figures this script cannot read are no pass
			elif [ "$scratch" != 0 ] && { [ "$hot" = amd ] || [ "$hot" = all ]; }; then
				bad=1
			fi
		done
		if [ -f "$TMP/$n.ptx" ]; then
			local depot
			depot=$(awk -v k="$k" '/\.entry|\.func/ {
					f = $0 ~ "\\.entry " k "\\(" || $0 ~ /\.func/ }
				f && /__local_depot[0-9]*\[/ { gsub(/.*\[|\].*/, ""); s += $0 }
				END { print s + 0 }' "$TMP/$n.ptx")
			cell+=("$depot B")
			if [ "$depot" != 0 ] && { [ "$hot" = nvidia ] || [ "$hot" = all ]; }; then
				bad=1
			fi
		else
			cell+=("-")
		fi
		local mark=""
		if [ $bad = 1 ]; then
			mark=" **spills or unread**"
			fails=$((fails + 1))
		fi
		echo "| $k$mark | $label | ${cell[0]} | ${cell[1]} | ${cell[2]} |"
	done
}
jobs=0
job "ops.cl, RED_WG=256" "$TMP/ops.cl" all all -DRED_WG=256
job "classic.cl" "$SRC/classic.cl" none all
for hd in 16 32 64; do
	job "attention.cl, ATT_HD=$hd, GPU form" "$SRC/attention.cl" all all -DATT_LOCAL=1 -DATT_HD=$hd
	job "attention_tiles.cl, ATT_HD=$hd" "$SRC/attention_tiles.cl" all all -DATT_HD=$hd
done
# gemm.cl at cl_gemm_tiled.c's tilings: NVIDIA's row, then every other vendor's big, small and
# thin (built with -cl-mad-enable, as cl_gemm_tiled.c builds it)
job "gemm.cl 128x128x8, 8x8 an item (NVIDIA)" "$TMP/gemm.cl" nvidia all \
	-cl-mad-enable -DTM=128 -DTN=128 -DTK=8 -DWM=8 -DWN=8
job "gemm.cl 128x64x16, 8x4 an item (NVIDIA, small)" "$TMP/gemm.cl" nvidia all \
	-cl-mad-enable -DTM=128 -DTN=64 -DTK=16 -DWM=8 -DWN=4
job "gemm.cl 16x128x8, 4x8 an item (NVIDIA, thin)" "$TMP/gemm.cl" nvidia all \
	-cl-mad-enable -DTM=16 -DTN=128 -DTK=8 -DWM=4 -DWN=8
job "gemm.cl 64x64x16, 4x4 (others)" "$TMP/gemm.cl" all all \
	-cl-mad-enable -DTM=64 -DTN=64 -DTK=16 -DWM=4 -DWN=4
job "gemm.cl 32x32x16, 4x4 (others, small)" "$TMP/gemm.cl" all all \
	-cl-mad-enable -DTM=32 -DTN=32 -DTK=16 -DWM=4 -DWN=4
job "gemm.cl 16x64x16, 4x4 (others, thin)" "$TMP/gemm.cl" all all \
	-cl-mad-enable -DTM=16 -DTN=64 -DTK=16 -DWM=4 -DWN=4
job "gemm.cl 128x128x16, 8x8 (SB_CL_TILE)" "$TMP/gemm.cl" none all \
	-cl-mad-enable -DTM=128 -DTN=128 -DTK=16 -DWM=8 -DWN=8
# the tensor-core kernels run on NVIDIA only (their PTX inline; clang takes it spelt __asm__,
# as the engine tries second), at cl_gemm_mma.c's two tilings and every head size
for tf in 0 1; do
	for bm in 128 64; do
		job "mma.cl ${bm}x64, MMA_TF32=$tf" "$TMP/mma.cl" nvidia nvidia \
			-DBM=$bm -DBN=64 -DMMA_PTX=1 -DMMA_TF32=$tf -DMMA_BREAK=0 -DSB_ASM=__asm__
	done
done
for tf in 0 1; do
	for hd in 16 32 64; do
		job "attention_mma.cl, ATT_HD=$hd, MMA_TF32=$tf" "$TMP/attention_mma.cl" nvidia nvidia \
			-DATT_HD=$hd -DMMA_PTX=1 -DMMA_TF32=$tf -DSB_ASM=__asm__
	done
done
echo
if [ $CHECK = 1 ]; then
	echo "$fails problem(s)"
	[ $fails = 0 ]
fi
