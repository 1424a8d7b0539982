#!/usr/bin/env bash
# Makes a 12-second stereo 44.1 kHz demo clip with sox alone: a kick/hat loop, a bass line,
# a centred lead tone and a pad panned left, so the demo needs no download.
set -euo pipefail
out=${1:-clip.wav}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
r=44100
# drums: a kick every half second (falling sine) and a hi-hat between (filtered noise)
sox -V1 -n -r $r -c 1 "$tmp/kick.wav" synth 0.12 sine 120-45 fade 0 0.12 0.1 pad 0 0.38
sox -V1 -n -r $r -c 1 "$tmp/hat.wav" synth 0.04 whitenoise highpass 7000 fade 0 0.04 0.03 pad 0.25 0.21 vol 0.4
sox -V1 -m "$tmp/kick.wav" "$tmp/hat.wav" "$tmp/beat.wav"
sox -V1 "$tmp/beat.wav" "$tmp/drums.wav" repeat 23
# bass: two notes a bar
sox -V1 -n -r $r -c 1 "$tmp/bass.wav" synth 1 sawtooth 55 synth 1 sawtooth 73.4 lowpass 300 \
	repeat 5 vol 0.5
# lead: a vibrato tone in the voice band
sox -V1 -n -r $r -c 1 "$tmp/lead.wav" synth 12 sine 440 sine mix 445 tremolo 5 30 \
	lowpass 3000 vol 0.3
# pad: a chord, panned left
sox -V1 -n -r $r -c 1 "$tmp/pad.wav" synth 12 triangle 261.6 triangle 329.6 triangle 392 vol 0.15
sox -V1 "$tmp/drums.wav" -c 2 "$tmp/drums2.wav" trim 0 12
sox -V1 "$tmp/bass.wav" -c 2 "$tmp/bass2.wav" trim 0 12
sox -V1 "$tmp/lead.wav" -c 2 "$tmp/lead2.wav" trim 0 12
sox -V1 "$tmp/pad.wav" -c 2 "$tmp/pad2.wav" remix 1v0.9 1v0.2 trim 0 12
sox -V1 -m "$tmp/drums2.wav" "$tmp/bass2.wav" "$tmp/lead2.wav" "$tmp/pad2.wav" -b 24 "$out" norm -3
echo "demo clip: $out"
