#!/bin/sh
# Tune CLBlast's kernels for one OpenCL device and install the results where Stembridge reads
# them (engine/backend/opencl/cl_blas.h): CLBlast ships tuned parameters for many GPUs but none for
# recent ones (the H100 among them), and untuned it reaches about half of what tuned kernels do.
#
#   tools/clblast_tune.sh [DEVICE] [--quick] [--out DIR] [--only T1,T2] [--dry-run]
#
# DEVICE is a Stembridge device name (opencl:N, as `stembridge devices` lists them; default:
# the first GPU, else opencl:0). The tuners come from Debian's clblast-utils. Results go to
# DIR (default ${XDG_DATA_HOME:-~/.local/share}/stembridge/clblast/<device>/), one JSON file
# per kernel family, written by the tuners in a scratch folder and moved in when they finish.
# --quick samples far fewer configurations (minutes instead of an hour or more on a GPU);
# --only runs those tuners alone (names without "clblast_tuner_": xgemm, copy_fast, ...);
# --dry-run prints the tuner commands and exits. The sizes are HTDemucs's products: the
# transformer's 2688 x 2048 x 512 and the decoders' 384 x 2688 x 1536 are near 2048^2 x 512.
set -eu

device=""
quick=0
dry=0
out=""
only=""
while [ $# -gt 0 ]; do
	case "$1" in
	--quick) quick=1 ;;
	--dry-run) dry=1 ;;
	--out) out="$2"; shift ;;
	--only) only=",$2,"; shift ;;
	-h|--help) sed -n '2,19p' "$0"; exit 0 ;;
	-*) echo "clblast_tune.sh: unknown option $1" >&2; exit 2 ;;
	*) device="$1" ;;
	esac
	shift
done

here=$(cd "$(dirname "$0")/.." && pwd)
sb="${STEMBRIDGE:-}"
if [ -z "$sb" ]; then
	if [ -x "$here/build/tools/cli/stembridge" ]; then sb="$here/build/tools/cli/stembridge"
	elif command -v stembridge >/dev/null 2>&1; then sb=stembridge
	else echo "clblast_tune.sh: no stembridge binary (build it, or set STEMBRIDGE)" >&2; exit 1
	fi
fi

# platform index, device index and name of the device, from the device table
info=$("$sb" devices --json | python3 -c '
import json, sys
want = sys.argv[1]
devs = [d for d in json.load(sys.stdin) if d["id"].startswith("opencl:")]
if not want:
    gpus = [d for d in devs if "GPU" in d["type"]]
    want = (gpus or devs or [{"id": ""}])[0]["id"]
for d in devs:
    if d["id"] == want:
        print(d["platform_index"], d["device_index"], d["id"], d["name"], sep="\t")
        break
else:
    sys.exit("no OpenCL device %r (see: stembridge devices)" % (want or "at all"))
' "$device") || exit 1
plat=$(printf '%s' "$info" | cut -f1)
dev=$(printf '%s' "$info" | cut -f2)
id=$(printf '%s' "$info" | cut -f3)
name=$(printf '%s' "$info" | cut -f4)
slug=$(printf '%s' "$name" | tr -c 'A-Za-z0-9._-' '_' | sed 's/_*$//')
[ -n "$out" ] || out="${XDG_DATA_HOME:-$HOME/.local/share}/stembridge/clblast/$slug"

common="-platform $plat -device $dev -precision 32"
frac=""
[ "$quick" = 1 ] && frac="-fraction 0.002"
# tuner, then its arguments
runs="clblast_tuner_xgemm|$common -m 2048 -n 2048 -k 512 $frac
clblast_tuner_xgemm_direct|$common -m 256 -n 256 -k 256 $frac
clblast_tuner_copy_fast|$common
clblast_tuner_copy_pad|$common
clblast_tuner_transpose_fast|$common
clblast_tuner_transpose_pad|$common
clblast_tuner_routine_xgemm|$common"
if [ -n "$only" ]; then
	runs=$(printf '%s\n' "$runs" | while IFS='|' read -r t a; do
		case "$only" in *",${t#clblast_tuner_},"*) printf '%s|%s\n' "$t" "$a" ;; esac
	done)
	[ -n "$runs" ] || { echo "clblast_tune.sh: --only names no tuner" >&2; exit 2; }
fi

echo "Tuning CLBlast for $id: $name (platform $plat, device $dev) into $out"
if [ "$dry" = 1 ]; then
	printf '%s\n' "$runs" | tr '|' ' '
	exit 0
fi
if ! command -v clblast_tuner_xgemm >/dev/null 2>&1; then
	echo "clblast_tune.sh: CLBlast's tuners are missing: apt-get install clblast-utils" >&2
	exit 1
fi
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
start=$(date +%s)
printf '%s\n' "$runs" | while IFS='|' read -r tuner args; do
	echo "  $tuner $args"
	# shellcheck disable=SC2086
	if ! (cd "$scratch" && "$tuner" $args >"$scratch/$tuner.log" 2>&1); then
		# a tuner that stops early may still have written its best result so far
		echo "    $tuner stopped early (log: $(tail -n 1 "$scratch/$tuner.log"))" >&2
	fi
done
mkdir -p "$out"
n=0
for f in "$scratch"/clblast_*.json; do
	[ -e "$f" ] || continue
	cp "$f" "$out/.$(basename "$f").tmp" && mv "$out/.$(basename "$f").tmp" "$out/$(basename "$f")"
	n=$((n + 1))
done
echo "$n tuning files in $out ($(( $(date +%s) - start )) s); Stembridge applies them when it next opens $id."
[ "$n" -gt 0 ]
