#!/usr/bin/env bash
# Runs the fuzz targets (tests/fuzz) under libFuzzer, ASan and UBSan for as long as asked, and
# prints one line per target: inputs run, speed, coverage (edges), corpus size, crashes.
#
#   tools/fuzz.sh [SECONDS] [TARGET...]     default: 600 s each, every target; two at a time
#
# Needs clang and libFuzzer (Debian: clang, libclang-rt-14-dev). Builds build-fuzz the first
# time. Each target's new inputs and any crash go to build-fuzz/fuzz-long/<target>/; a crash
# is reproduced with `build-fuzz/tests/fuzz/fuzz_<target> <file>`.
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-600}
shift || true
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(safetensors zip pickle checkpoint audio state)
if [ ! -d build-fuzz ]; then
	CC=clang meson setup build-fuzz -Dfuzz=true -Db_sanitize=address,undefined -Db_lundef=false \
		-Dgui=disabled -Dtests=false -Dbuildtype=debugoptimized >/dev/null
fi
ninja -C build-fuzz >/dev/null
out=build-fuzz/fuzz-long
mkdir -p "$out"
run_one() {
	local t=$1
	rm -rf "${out:?}/$t"
	tests/fuzz/run_fuzz.sh "build-fuzz/tests/fuzz/fuzz_$t" "tests/fuzz/corpus/$t" "$out/$t" \
		-max_total_time="$secs" >"$out/$t.log" 2>&1 || true
}
running=0
for t in "${targets[@]}"; do
	run_one "$t" &
	running=$((running + 1))
	if [ $running -ge 2 ]; then
		wait -n
		running=$((running - 1))
	fi
done
wait
printf "%-12s %10s %8s %6s %8s %8s\n" target inputs exec/s edges corpus crashes
for t in "${targets[@]}"; do
	log="$out/$t.log"
	runs=$(grep -o 'stat::number_of_executed_units: [0-9]*' "$log" | tail -1 | awk '{print $2}')
	speed=$(grep -o 'stat::average_exec_per_sec: *[0-9]*' "$log" | tail -1 | awk '{print $2}')
	cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1 | awk '{print $2}')
	corp=$(find "$out/$t/corpus" -type f | wc -l)
	crashes=$(find "$out/$t" -maxdepth 1 -type f \( -name 'crash-*' -o -name 'leak-*' -o -name 'timeout-*' -o -name 'oom-*' \) | wc -l)
	printf "%-12s %10s %8s %6s %8s %8s\n" "$t" "${runs:-?}" "${speed:-?}" "${cov:-?}" "$corp" "$crashes"
done
