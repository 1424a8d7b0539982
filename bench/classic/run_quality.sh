#!/bin/sh
# The built-in separator's quality bench, end to end: builds bench_quality, makes the songs
# (make_songs.sh) in the build dir and prints SDR per stem for builtin, the ideal ratio mask
# and mix/4, with the goal check (mean builtin SDR >= half the IRM's).
#
# Usage: bench/classic/run_quality.sh [--held-out] [BUILDDIR]   (default BUILDDIR: build-bench)
#        --held-out also scores the three songs kept out of the tuning (no goal on them).
# Exit status: bench_quality's on the bench songs (0 goal met, 1 missed, 2 error).
set -eu

HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
HELD=0
if [ "${1:-}" = --held-out ]; then
	HELD=1
	shift
fi
BUILD=${1:-$ROOT/build-bench}

[ -f "$BUILD/build.ninja" ] || meson setup "$BUILD" "$ROOT"
ninja -C "$BUILD" bench/classic/bench_quality
SONGS="$BUILD/bench/classic/songs"
# Songs are made once; delete the folder to make them again.
[ -f "$SONGS/.done" ] || { "$HERE/make_songs.sh" "$SONGS" && touch "$SONGS/.done"; }

set +e
"$BUILD/bench/classic/bench_quality" "$SONGS"/song*/
rc=$?
set -e
if [ $HELD = 1 ]; then
	HSONGS="$BUILD/bench/classic/held_out"
	[ -f "$HSONGS/.done" ] || { "$HERE/make_songs.sh" --held-out "$HSONGS" && touch "$HSONGS/.done"; }
	echo
	echo "held out (not used for tuning; the goal line is for information only):"
	"$BUILD/bench/classic/bench_quality" "$HSONGS"/held*/ || true
fi
exit $rc
