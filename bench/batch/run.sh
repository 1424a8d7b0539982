#!/bin/bash
# Songs per hour through `stembridge batch` on this machine, and what the batch layer costs.
#   bench/batch/run.sh [BUILD] [SONGS] [SECONDS] [SHAPES_JSON]
# For the built-in model and for a released-size HTDemucs (random weights from SHAPES_JSON,
# default tests/fixtures/htdemucs/released-shapes.json): one task with every core, then two
# tasks (--shard 0/2 and 1/2, half the cores each) at once on the same machine; then a re-run of
# the finished batch (what a resubmitted array costs per song that is already done). The batch
# layer's cost per song: the task's wall time less the jobs' own seconds, over the songs.
set -eu
B=${1:-build}; N=${2:-8}; S=${3:-30}
SHAPES=${4:-tests/fixtures/htdemucs/released-shapes.json}
CLI=$B/tools/cli/stembridge
W=$(mktemp -d /tmp/sb-bench-batch-XXXXXX)
trap 'rm -rf "$W"' EXIT
cores=$(nproc)
half=$(( cores > 1 ? cores / 2 : 1 ))
mkdir -p "$W/in"
for i in $(seq 1 "$N"); do
	sox -n -r 44100 -c 2 -b 16 "$W/in/song$i.wav" synth "$S" pinknoise sine $((100 * i)) vol 0.3
done
ls "$W"/in/*.wav > "$W/list.txt"
"$B"/bench/demucs/bench_demucs "$SHAPES" --write-model "$W/htdemucs-random.safetensors" \
	--seconds 1 --repeat 1 --threads "$cores" >/dev/null 2>&1
export XDG_DATA_HOME=$W/xdg  # the machine's models stay out

# prints: wall seconds
timed() { local t0 t1; t0=$(date +%s.%N); "$@"; t1=$(date +%s.%N); echo "$t0 $t1" | awk '{printf "%.2f", $2-$1}'; }

row() { # name model
	local name=$1 model=$2 w1 w2 w3
	w1=$(timed "$CLI" batch "$W/list.txt" -o "$W/out-$name-1" --model "$model" -q --threads "$cores")
	w2=$(timed bash -c "'$CLI' batch '$W/list.txt' -o '$W/out-$name-2' --model '$model' -q \
		--threads $half --shard 0/2 & '$CLI' batch '$W/list.txt' -o '$W/out-$name-2' \
		--model '$model' -q --threads $half --shard 1/2; wait")
	w3=$(timed "$CLI" batch "$W/list.txt" -o "$W/out-$name-1" --model "$model" -q)
	python3 - "$name" "$N" "$S" "$w1" "$w2" "$w3" "$W/out-$name-1" <<'PY'
import glob, json, sys
name, n, s, w1, w2, w3, out = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), *map(float, sys.argv[4:7]), sys.argv[7]
lines = [json.loads(l) for f in glob.glob(out + "/logs/*.jsonl") for l in open(f)]
done = [l for l in lines if l.get("status") == "done"]
jobs = sum(l["seconds"] for l in done)
loads = []
for l in done:
    m = json.load(open(l["manifest"]))
    loads.append(m["timings"]["load_s"])
print("| %s | %d x %.0f s | %.0f | %.0f | %.2f | %.3f | %.3f | %.4f |" % (
    name, n, s, n * 3600 / w1, n * 3600 / w2, n * s / w1, (w1 - jobs) / n,
    sum(loads) / len(loads), w3 / n))
PY
}
echo "$(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
echo "| model | songs | songs/hour, 1 task | songs/hour, 2 tasks | x real time, 1 task | batch layer s/song | load s/song | re-run s/song |"
echo "|---|---|---:|---:|---:|---:|---:|---:|"
row builtin builtin
row htdemucs "$W/htdemucs-random.safetensors"
