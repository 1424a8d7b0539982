#!/bin/sh
# Tune CLBlast's kernels for one OpenCL device and install the results where Stembridge reads
# them (engine/backend/opencl/cl_blas.h): CLBlast ships tuned parameters for many GPUs but none for
# recent ones (the H100 among them), and untuned it reaches about half of what tuned kernels do.
#
#   tools/clblast_tune.sh [DEVICE] [--quick] [--budget S] [--out DIR] [--only T1,T2] [--dry-run]
#
# DEVICE is a Stembridge device name (opencl:N, as `stembridge devices` lists them; default:
# the first GPU, else opencl:0). The tuners come from Debian's clblast-utils. Results go to
# DIR (default ${XDG_DATA_HOME:-~/.local/share}/stembridge/clblast/<device>/), one JSON file
# per kernel family (and per phase of the GEMM tuner), written by the tuners in a scratch folder
# and moved in as soon as each is complete: a run that is stopped, or a tuner cut off by its
# budget, keeps every result finished before it.
# --quick samples far fewer configurations and gives each tuner a budget (xgemm 150 s, the
# routine and direct GEMM 60 s, the copy and transpose kernels 20 s: about six minutes in all;
# the GEMM tuner's first phase is a fixed set of 578 configurations, which -fraction does not
# shorten); --budget S gives every tuner S seconds instead;
# --only runs those tuners alone (names without "clblast_tuner_": xgemm, copy_fast, ...);
# --dry-run prints the tuner commands and exits. The sizes are HTDemucs's products: the
# transformer's 2688 x 2048 x 512 and the decoders' 384 x 2688 x 1536 are near 2048^2 x 512.
set -eu

device=""
quick=0
dry=0
out=""
only=""
budget=""
while [ $# -gt 0 ]; do
	case "$1" in
	--quick) quick=1 ;;
	--budget) budget="$2"; shift ;;
	--dry-run) dry=1 ;;
	--out) out="$2"; shift ;;
	--only) only=",$2,"; shift ;;
	-h|--help) sed -n '2,25p' "$0"; exit 0 ;;
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
# tuner, its budget with --quick (seconds), then its arguments
runs="clblast_tuner_xgemm|150|$common -m 2048 -n 2048 -k 512 $frac
clblast_tuner_xgemm_direct|60|$common -m 256 -n 256 -k 256 $frac
clblast_tuner_copy_fast|20|$common
clblast_tuner_copy_pad|20|$common
clblast_tuner_transpose_fast|20|$common
clblast_tuner_transpose_pad|20|$common
clblast_tuner_routine_xgemm|60|$common"
if [ -n "$only" ]; then
	runs=$(printf '%s\n' "$runs" | while IFS='|' read -r t b a; do
		case "$only" in *",${t#clblast_tuner_},"*) printf '%s|%s|%s\n' "$t" "$b" "$a" ;; esac
	done)
	[ -n "$runs" ] || { echo "clblast_tune.sh: --only names no tuner" >&2; exit 2; }
fi

echo "Tuning CLBlast for $id: $name (platform $plat, device $dev) into $out"
if [ "$dry" = 1 ]; then
	printf '%s\n' "$runs" | while IFS='|' read -r t b a; do echo "$t $a"; done
	exit 0
fi
if ! command -v clblast_tuner_xgemm >/dev/null 2>&1; then
	echo "clblast_tune.sh: CLBlast's tuners are missing: apt-get install clblast-utils" >&2
	exit 1
fi
scratch=$(mktemp -d)
mkdir -p "$out"
# moves every complete result (a JSON file that parses) into $out, once per version
keep() {
	for f in "$scratch"/clblast_*.json; do
		[ -e "$f" ] || continue
		b=$(basename "$f")
		cmp -s "$f" "$out/$b" 2>/dev/null && continue
		python3 -c 'import json, sys; json.load(open(sys.argv[1]))' "$f" 2>/dev/null || continue
		cp "$f" "$out/.$b.tmp" && mv "$out/.$b.tmp" "$out/$b" && echo "    kept $b" &&
			kept=$((kept + 1))
	done
}
pid=""
kept=0
# a stop ends the tuner and waits for it, then keeps what it finished (EXIT)
stop() {
	[ -z "$pid" ] || { kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null; }
	exit "$1"
}
trap 'keep; rm -rf "$scratch"' EXIT
trap 'stop 130' INT
trap 'stop 143' TERM
start=$(date +%s)
# in this shell, not a pipeline's subshell, so that a signal stops the tuner and keeps its work
# (a line's spaces travel as \001 through the word splitting)
for line in $(printf '%s\n' "$runs" | tr ' ' '\001'); do
	line=$(printf '%s' "$line" | tr '\001' ' ')
	tuner=${line%%|*}
	rest=${line#*|}
	qb=${rest%%|*}
	args=${rest#*|}
	limit=${budget:-}
	[ -n "$limit" ] || { [ "$quick" = 1 ] && limit=$qb; }
	echo "  $tuner $args${limit:+ (at most $limit s)}"
	# shellcheck disable=SC2086
	(cd "$scratch" && if [ -n "$limit" ]; then exec timeout "$limit" "$tuner" $args
	                  else exec "$tuner" $args; fi) >"$scratch/$tuner.log" 2>&1 &
	pid=$!
	while kill -0 "$pid" 2>/dev/null; do
		sleep 1
		keep
	done
	if ! wait "$pid"; then
		# cut off by its budget, or failed: what it finished before is kept
		echo "    $tuner stopped early (log: $(tail -n 1 "$scratch/$tuner.log"))" >&2
	fi
	pid=""
	keep
done
echo "$kept tuning files written to $out ($(( $(date +%s) - start )) s); Stembridge applies them when it next opens $id."
[ "$kept" -gt 0 ]
