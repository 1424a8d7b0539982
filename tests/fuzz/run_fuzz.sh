#!/bin/sh
# Runs one libFuzzer target from its seed corpus: run_fuzz.sh EXE CORPUS WORKDIR [libFuzzer
# options...]. New inputs go to WORKDIR/corpus (the seeds in the repository stay as they are);
# a crash, a leak or a hang is saved in WORKDIR and fails the run with exit status 1 (libFuzzer's
# own default, 77, would read as "skipped" to meson). The last lines say how many inputs ran and
# the coverage reached.
set -eu
exe=$1 corpus=$2 work=$3
shift 3
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$work/corpus"
export LSAN_OPTIONS="suppressions=$here/lsan.supp${LSAN_OPTIONS:+:$LSAN_OPTIONS}"
export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1${UBSAN_OPTIONS:+:$UBSAN_OPTIONS}"
exec "$exe" -seed=1 -print_final_stats=1 -error_exitcode=1 -timeout_exitcode=1 \
	-artifact_prefix="$work/" -rss_limit_mb=2048 -malloc_limit_mb=1024 -timeout=25 \
	"$@" "$work/corpus" "$corpus"
