#!/bin/sh
# End to end through the real Ardour GUI under Xvfb: a session with a recorded region on
# "Guitar", a take's stems and stems.txt as the plugin writes them, the shipped importer
# (stembridge_import.lua) run unattended by an EditorHook, then a headless check.
# usage: gui_import_test.sh WORKDIR IMPORTER.lua (the assembled script, from the build)
# Needs: ardour, xvfb (xvfb-run), sox, python3. After ../shared/ardour/gui-import/run_test.sh.
set -e
W="$1"; SCRIPT=$(cd "$(dirname "$2")" && pwd)/$(basename "$2"); R=$(cd "$(dirname "$0")" && pwd)
PORT=$((20000 + $$ % 20000))
rm -rf "$W"; mkdir -p "$W"; cd "$W"
export XDG_CONFIG_HOME="$W/cfg"
ardour7-lua "$R/gui_setup.lua" "$W/sess" sess 2>&1 | grep -E "REGION|rror" || true
sed -i 's|<Protocol name="Open Sound Control (OSC)" active="0"/>|<Protocol name="Open Sound Control (OSC)" active="1"/>|' sess/sess.ardour
mkdir -p take
START=48000
printf 'timeline_start %s\n' "$START" > take/Guitar-take1-stems.txt
# six stems, as htdemucs_6s writes them: the importer makes one track per stem
for s in vocals drums bass other guitar piano; do
	sox -n -r 48000 -c 2 -b 24 "take/Guitar-take1-$s.wav" synth 2 sine 330 vol 0.2
	printf '%s\n' "$W/take/Guitar-take1-$s.wav" >> take/Guitar-take1-stems.txt
done
# the session was recorded from the Dummy's generator: the GUI must open the same device, or a
# modal "Engine I/O device has changed" dialog waits for a click
sh "$R/gui_config.sh" "$W/cfg" "$R/gui_hook.lua" "$PORT" "10x Speed" "Sine Wave 1K, 1/3 Oct"
rc=0
SB_ACTION_SCRIPT="$SCRIPT" SB_STEMS_TXT="$W/take/Guitar-take1-stems.txt" \
SB_SOURCE=Guitar SB_LOG="$W/hook.log" SB_OSC_PORT=$PORT \
	timeout 120 xvfb-run -a -s "-screen 0 1920x1080x24 -nolisten tcp" \
	ardour -n -a "$W/sess/sess.ardour" > "$W/ardour.log" 2>&1 || rc=$?
cat "$W/hook.log" || true
grep -q "import done" "$W/hook.log"
ardour7-lua "$R/gui_verify.lua" "$W/sess" sess "$START" 2>&1 | grep -E "track=|FAIL|VERIFY"
ardour7-lua "$R/gui_verify.lua" "$W/sess" sess "$START" 2>&1 | grep -q "VERIFY OK"
