#!/bin/bash
# The split action in the real Ardour GUI under Xvfb (after ../shared/ardour/region-split):
# two source tracks (one region trimmed, the other at region gain 0.5) get their regions
# selected and split by the assembled action, unattended (the action's factory choices), then a
# headless check of the saved session.
#   split:  three runs: the split; again with replace=1 (the same four stem tracks, their regions
#           replaced, no modal dialog); again with replace=0 (a second set of four). Every set
#           right after its source, at the region's position and length, grouped, adding back to
#           the region as it sounds; the sources muted; nothing new in the session folder but the
#           imported stems, the peaks and Ardour's own state files.
#   cancel: a slowed separation of two 30 s regions; the progress window's Cancel is clicked with
#           xdotool: no track added, no file left, the stembridge process gone.
#   dialog: no choices given: the dialog comes up with the defaults of the Stembridge insert on
#           the first track, OK is clicked, the stems it chose land, and the choice is kept.
#   shot:   one split, and the screenshot of the README (doc/images/ardour-split.png).
# usage: gui_split_test.sh split|cancel|dialog|shot WORKDIR ACTION.lua STEMBRIDGE [SCREENSHOT.png]
# Needs ardour (7.3: ardour7-lua and the GUI), xvfb-run, xdotool, imagemagick (import), sox.
# Another Ardour: ARDOUR_LUA and ARDOUR_GUI (commands) and ARDOUR_MAJOR (its config folder's
# number), as in Debian 13's root (tools/ardour/trixie.sh).
set -u
MODE=$1; W=$2; CLI=$(cd "$(dirname "$4")" && pwd)/$(basename "$4"); SHOT=${5:-}
ACTION=$(cd "$(dirname "$3")" && pwd)/$(basename "$3"); R=$(cd "$(dirname "$0")" && pwd)
PORT=$((20000 + $$ % 20000))
LUA=${ARDOUR_LUA:-ardour7-lua}; GUI=${ARDOUR_GUI:-ardour}
rm -rf "$W"; mkdir -p "$W"; cd "$W" || exit 1
export XDG_CONFIG_HOME="$W/cfg"
fail() { echo "FAIL: $*"; rc=1; }
rc=0
secs=4; secs2=3
[ "$MODE" = cancel ] && { secs=30; secs2=30; }
sox -n -r 48000 -c 2 -b 24 guitar_src.wav synth $secs pinknoise vol 0.2 synth $secs sine mix 220 vol 0.5
sox -n -r 48000 -c 2 -b 24 keys_src.wav synth $secs2 sine 440 sine 660 vol 0.3
$LUA "$R/gui_split_setup.lua" "$W/sess" sess > setup.log 2>&1 || { cat setup.log; exit 1; }
sh "$R/gui_config.sh" "$W/cfg" "$R/gui_split_hook.lua" "$PORT" "Normal Speed" "Silence"
# what a run leaves when Ardour dies under it: its command gone; the next run removes it
mkdir -p sess/.stembridge-split/run-1-1/in
echo 999999 > sess/.stembridge-split/run-1-1/pid
: > sess/.stembridge-split/run-1-1/in/r1.wav
export SB_SPLIT_SRC="Guitar=$W/guitar_src.wav@96000,Keys=$W/keys_src.wav@240000"
export SB_SPLIT_TRIM=24000 SB_SPLIT_GAIN=0.5 SB_SPLIT_ACTION="$ACTION" SB_LOG="$W/hook.log"
export SB_OSC_PORT=$PORT
base="cli=$CLI;model=builtin;device=cpu;mute=1"
if [ "$MODE" = cancel ]; then
	export SB_SPLIT_RUNS="$base" SB_FAULT_INJECT=job:slow:400
elif [ "$MODE" = shot ]; then
	export SB_SPLIT_RUNS="$base"
elif [ "$MODE" = dialog ]; then
	# as a user runs it: no choices given, the dialog asks; stembridge found on the PATH; the
	# defaults come from the Stembridge insert on Guitar (CPU, built-in, no drums, bf16)
	export SB_SPLIT_RUNS="ask=1" SB_SPLIT_PLUGIN=1 PATH="$(dirname "$CLI"):$PATH"
	export XDG_DATA_HOME="$W/data" # no installed model: auto is the built-in one
else
	export SB_SPLIT_RUNS="$base|$base;replace=1|$base;replace=0"
fi
disp=$((90 + $$ % 400))
Xvfb :$disp -screen 0 1600x1000x24 -nolisten tcp > xvfb.log 2>&1 & XPID=$!
sleep 1
DISPLAY=:$disp $GUI -n -a "$W/sess/sess.ardour" > ardour.log 2>&1 & APID=$!
listed=0; clicked=0; shot=0; end=$(( $(date +%s) + 240 ))
while kill -0 $APID 2>/dev/null && [ "$(date +%s)" -lt $end ]; do
	if [ $listed = 0 ] && grep -q "SOURCES READY" hook.log 2>/dev/null; then
		(cd sess && find . -type f | sort) > before.txt
		listed=1
	fi
	if [ "$MODE" = cancel ] && [ $clicked = 0 ] && grep -q "running " hook.log 2>/dev/null; then
		sleep 2
		wid=$(DISPLAY=:$disp xdotool search --name "separating stems" | head -1)
		[ -n "$SHOT" ] && DISPLAY=:$disp import -window root "${SHOT%.png}-progress.png"
		if [ -n "$wid" ]; then
			eval "$(DISPLAY=:$disp xdotool getwindowgeometry --shell "$wid")"
			DISPLAY=:$disp xdotool mousemove $((X + WIDTH - 45)) $((Y + HEIGHT - 22)) click 1
			echo "$(cut -d' ' -f1 /proc/uptime) xdotool clicked Cancel" >> hook.log
		else
			fail "no progress window to cancel"
		fi
		clicked=1
	fi
	if [ "$MODE" = dialog ] && [ $clicked = 0 ] &&
		wid=$(DISPLAY=:$disp xdotool search --name "Split into Stems" 2>/dev/null | head -1) &&
		[ -n "$wid" ]; then
		sleep 1
		[ -n "$SHOT" ] && DISPLAY=:$disp import -window root "${SHOT%.png}-dialog.png"
		eval "$(DISPLAY=:$disp xdotool getwindowgeometry --shell "$wid")"
		# OK: the dialog's right button, bottom right
		DISPLAY=:$disp xdotool mousemove $((X + WIDTH - 58)) $((Y + HEIGHT - 30)) click 1
		echo "xdotool clicked OK" >> hook.log
		clicked=1
	fi
	if [ $shot = 0 ] && grep -q READY_FOR_SCREENSHOT hook.log 2>/dev/null; then
		sleep 1
		[ -n "$SHOT" ] && [ "$MODE" != cancel ] && DISPLAY=:$disp import -window root "$SHOT"
		shot=1
	fi
	sleep 0.2
done
if kill -0 $APID 2>/dev/null; then
	fail "Ardour did not finish within 240 s (a modal dialog?)"
	DISPLAY=:$disp import -window root "$W/timeout.png"
	kill $APID; sleep 2; kill -9 $APID 2>/dev/null
fi
wait $APID
kill $XPID 2>/dev/null; wait $XPID 2>/dev/null
cat hook.log
grep -q "ACTION DONE" hook.log || fail "the action did not complete"
(cd sess && find . -type f | sort) > after.txt
left=$(comm -13 before.txt after.txt | grep -v -E '^\./(interchange/sess/audiofiles/[^/]+\.wav|peaks/.*|sess\.(ardour|bak|history|history\.bak|pending)|instant\.xml|plugins/[0-9]+/state[0-9]+/[^/]+)$')
[ -z "$left" ] || fail "new files in the session folder that are not imported stems: $left"
[ ! -e sess/.stembridge-split ] || fail "the action's temporary folder is left: $(ls -R sess/.stembridge-split)"
pgrep -af "stembridge separate .*$W" && fail "a stembridge process is still running"
if [ "$MODE" = cancel ]; then
	grep -q "cancel: SIGTERM to" hook.log || fail "the action did not stop stembridge"
	grep -q "stembridge exit 143" hook.log || fail "stembridge did not end as cancelled (143)"
	new=$(comm -13 before.txt after.txt | grep -c 'audiofiles')
	[ "$new" = 0 ] || fail "$new audio files imported after Cancel"
	$LUA "$R/gui_split_verify.lua" "$W/sess" sess "" 0 0 2>&1 | grep -E "^track=|FAIL|VERIFY" > verify.txt
	cat verify.txt
	n=$(grep -c '^track=' verify.txt)
	[ "$n" = 2 ] || fail "$n track regions after Cancel, want the 2 sources"
	grep -q "muted=true" verify.txt && fail "a source region was muted after Cancel"
else
	sets=2 stems=vocals,drums,bass,other
	[ "$MODE" = shot ] && sets=1
	if [ "$MODE" = dialog ]; then
		sets=1 stems=vocals,bass,other
		grep -q "xdotool clicked OK" hook.log || fail "no dialog came up"
		grep -q "choices model=builtin stems=vocals,bass,other device=cpu precision=bf16 mute=1" hook.log ||
			fail "the dialog's defaults were not the insert's"
		conf=$(cat cfg/stembridge/ardour-split.conf 2>/dev/null | tr '\n' ' ')
		[ "$conf" = "model=builtin stems=vocals,bass,other device=cpu precision=bf16 mute=1 " ] ||
			fail "the last choice was not kept: '$conf'"
	fi
	$LUA "$R/gui_split_verify.lua" "$W/sess" sess "Guitar@120000:168000,Keys@240000:144000" 1 $sets $stems 2>&1 |
		grep -E "^track=|FAIL|VERIFY|set [0-9]" | tee verify.txt
	grep -q "VERIFY OK" verify.txt || fail "the split session does not verify"
	n=$(grep -c "GUI timer ticks" hook.log)
	want=3
	[ "$MODE" = shot ] || [ "$MODE" = dialog ] && want=1
	[ "$n" = $want ] || fail "$n of $want runs returned"
fi
[ $rc = 0 ] && echo "GUI SPLIT $MODE OK"
exit $rc
