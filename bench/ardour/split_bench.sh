#!/bin/bash
# The split action on one long stereo region in the real Ardour 7.3 GUI under Xvfb, timed as a
# user lives it: the render, the separation inside the action against the same command run
# alone on the same file, the import, the click-to-stem-tracks time, and the longest time the
# GUI handled no events, measured twice: by the action (between two of its progress window's
# event loops) and from outside by xping (a _NET_WM_PING every 10 ms to each Ardour window, the
# longest wait for an answer while the action runs).
# usage: bench/ardour/split_bench.sh BUILD_DIR [SECONDS=180] [MODEL=auto] [DEVICE=auto]
# Needs what tests/plugin's GUI tests need (ardour, xvfb, xdotool, sox) and libx11-dev.
set -eu
B=$(cd "$1" && pwd); SECS=${2:-180}; MODEL=${3:-auto}; DEVICE=${4:-auto}
R=$(cd "$(dirname "$0")/../../tools/ardour" && pwd)
W=$(mktemp -d "${TMPDIR:-/tmp}/sb-split-bench.XXXXXX")
trap 'kill $XP $XV $AP 2>/dev/null || true; rm -rf "$W"' EXIT
XP=; XV=; AP=
cc -O2 -o "$W/xping" "$(dirname "$0")/xping.c" -lX11
cd "$W"
# a song-like stereo source: drums-ish noise bursts, a bass line, a chord
sox -n -r 48000 -c 2 -b 24 song.wav synth "$SECS" pinknoise vol 0.15 tremolo 2 90 \
	synth "$SECS" sine mix 55-110 synth "$SECS" square mix 220 vol 0.5 2>/dev/null
export XDG_CONFIG_HOME="$W/cfg" PORT=$((20000 + $$ % 20000))
ardour7-lua "$R/gui_split_setup.lua" "$W/sess" sess > setup.log 2>&1
sh "$R/gui_config.sh" "$W/cfg" "$R/gui_split_hook.lua" "$PORT" "Normal Speed" "Silence"
export SB_SPLIT_SRC="Song=$W/song.wav@48000" SB_SPLIT_TRIM=0 SB_SPLIT_GAIN=1
export SB_SPLIT_ACTION="$B/tools/ardour/stembridge_split.lua" SB_LOG="$W/hook.log" SB_OSC_PORT=$PORT
export SB_SPLIT_RUNS="cli=$B/tools/cli/stembridge;model=$MODEL;device=$DEVICE;mute=1;keep=1"
disp=$((90 + $$ % 400))
Xvfb :$disp -screen 0 1600x1000x24 -nolisten tcp > xvfb.log 2>&1 & XV=$!
sleep 1
DISPLAY=:$disp "$W/xping" -l "$W/pings.txt" > xping.txt & XP=$!
DISPLAY=:$disp ardour -n -a "$W/sess/sess.ardour" > ardour.log 2>&1 & AP=$!
end=$(( $(date +%s) + 3600 ))
while kill -0 $AP 2>/dev/null && [ "$(date +%s)" -lt $end ]; do sleep 1; done
kill $XP; wait $XP || true
grep -q "ACTION DONE" hook.log || { cat hook.log; echo "the action did not complete"; exit 1; }
t_begin=$(awk '/SEPARATING/ {print $1; exit}' hook.log)
t_end=$(awk '/action returned/ {print $1; exit}' hook.log)
in=$(sed -n "s/.*running .* separate '\([^']*\)'.*/\1/p" hook.log | head -1)
# the same command on the same rendered file, alone
t0=$(date +%s.%N)
"$B/tools/cli/stembridge" separate "$in" -o "$W/alone" --model "$MODEL" --device "$DEVICE" -q
alone=$(echo "$(date +%s.%N) - $t0" | bc)
freeze=$(awk -v a="$t_begin" -v b="$t_end" '$1 >= a && $1 <= b && $3 > m {m = $3; at = $1 - a} END {printf "%.3f s (%.1f s into the action)", m, at}' pings.txt)
npings=$(awk -v a="$t_begin" -v b="$t_end" '$1 >= a && $1 <= b' pings.txt | wc -l)
echo "== split action: one ${SECS} s stereo region, model $MODEL, device $DEVICE ($(nproc) cores)"
grep -E "rendered|stembridge exit|placed|imported" hook.log | sed 's/^[0-9.]* /  /'
echo "  the same stembridge command alone on the rendered file: ${alone} s"
echo "  longest GUI freeze while the action ran (xping, $npings pings): $freeze"
