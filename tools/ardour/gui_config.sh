#!/bin/sh
# An Ardour configuration folder (7, or $ARDOUR_MAJOR) that starts the GUI unattended (after the
# tested pattern in ../shared/ardour/gui-import): no first-run wizard (.aN), the Dummy backend shown and
# remembered as the engine to start (else Ardour falls back to ALSA behind two modal dialogs),
# OSC on PORT (the hook asks Ardour to quit through it), and ui_scripts registering HOOK.lua.
# usage: gui_config.sh CONFIG_HOME HOOK.lua PORT DRIVER DEVICE
set -e
CFG="$1"; HOOK="$2"; PORT="$3"; DRIVER="$4"; DEVICE="$5"; V=${ARDOUR_MAJOR:-7}
rm -rf "$CFG/ardour$V"; mkdir -p "$CFG/ardour$V"
touch "$CFG/ardour$V/.a$V"
# no warning about the locked-memory limit (Ardour 8 shows it in a modal dialog)
printf '<?xml version="1.0" encoding="UTF-8"?>\n<instant>\n  <no-memory-warning/>\n</instant>\n' \
	> "$CFG/ardour$V/instant.xml"
cat > "$CFG/ardour$V/config" <<XML
<?xml version="1.0" encoding="UTF-8"?>
<Ardour>
  <Config>
    <Option name="hide-dummy-backend" value="0"/>
    <Option name="try-autostart-engine" value="1"/>
    <Option name="osc-port" value="$PORT"/>
  </Config>
  <Extra>
    <AudioMIDISetup>
      <EngineStates>
        <State backend="None (Dummy)" driver="$DRIVER" device="$DEVICE" input-device="" output-device="" sample-rate="48000" buffer-size="1024" n-periods="0" input-latency="0" output-latency="0" lm-input="" lm-output="" active="1" use-buffered-io="0" midi-option="" lru="$(date +%s)">
          <MIDIDevices/>
        </State>
      </EngineStates>
    </AudioMIDISetup>
  </Extra>
  <ControlProtocols>
    <Protocol name="Open Sound Control (OSC)" active="1"/>
  </ControlProtocols>
</Ardour>
XML
python3 "$(dirname "$0")/gui_ui_scripts.py" "$HOOK" "$CFG/ardour$V/ui_scripts"
