#!/bin/sh
# Makes the classic quality bench's songs: four short stereo 44.1 kHz songs (three more with
# --held-out) whose stems are known because each is rendered on its own. Instruments come from
# the MIDI parts that make_midi.py writes, played by FluidSynth with a General MIDI soundfont;
# the voice is espeak-ng singing one word per note (pitched with -p, the rest of the way with
# sox), centred; drums, bass and other are panned as each song's song.sh says. Every stem is
# levelled to an RMS in dBFS and written as 32-bit float. bench_quality mixes the stems itself;
# mix.wav is for listening.
#
# Usage: make_songs.sh [--held-out] OUTDIR  -> OUTDIR/<song>/{vocals,drums,bass,other,mix}.wav
#        (--held-out: the three songs kept out of the tuning, see make_midi.py)
# Needs: python3, fluidsynth, fluid-soundfont-gm (or SF2=/path/to/a/GM.sf2), espeak-ng, sox.
set -eu

SET=
if [ "${1:-}" = --held-out ]; then
	SET=--held-out
	shift
fi
OUT=${1:?usage: make_songs.sh [--held-out] OUTDIR}
HERE=$(cd "$(dirname "$0")" && pwd)
SF2=${SF2:-/usr/share/sounds/sf2/FluidR3_GM.sf2}
RATE=44100

for tool in python3 fluidsynth espeak-ng sox awk; do
	command -v "$tool" >/dev/null 2>&1 || { echo "make_songs.sh: $tool not found (see bench/classic/README.md)" >&2; exit 1; }
done
[ -r "$SF2" ] || { echo "make_songs.sh: no soundfont at $SF2 (apt-get install fluid-soundfont-gm, or set SF2)" >&2; exit 1; }

mkdir -p "$OUT"
songs=$(python3 "$HERE/make_midi.py" $SET "$OUT")

# rms FILE: RMS amplitude over all samples of all channels
rms() {
	sox "$1" -n stat 2>&1 | awk '/^RMS +amplitude/ { print $3 }'
}

# peak FILE: the largest absolute sample
peak() {
	sox "$1" -n stat 2>&1 | awk '/^Maximum amplitude/ { m = $3 } /^Minimum amplitude/ { n = -$3 } END { print (m > n ? m : n) }'
}

# level IN OUT DB [EFFECTS...]: OUT = IN scaled to DB dBFS RMS, 32-bit float, then EFFECTS
level() {
	in=$1 out=$2 db=$3
	shift 3
	r=$(rms "$in")
	g=$(awk -v r="$r" -v db="$db" 'BEGIN { printf "%.6f", (r > 0 ? 10 ^ (db / 20) / r : 1) }')
	sox -V1 "$in" -e floating-point -b 32 "$out" vol "$g" "$@"
}

# pan_gains PAN: left and right gains of a constant-power balance, PAN in [-1, 1]
pan_gains() {
	awk -v p="$1" 'BEGIN { a = (p + 1) * atan2(1, 1); printf "%.6f %.6f", cos(a) * sqrt(2), sin(a) * sqrt(2) }'
}

# espeak-ng's voice pitch is about F50 * 2^((p - 50) / 84) Hz (measured at the loudest frame of
# a sung word for these voices).
f50() {
	case "$1" in
	*+m*) echo 103 ;;
	*+f5) echo 202 ;;
	*) echo 206 ;;
	esac
}

for song in $songs; do
	d="$OUT/$song"
	tmp="$d/tmp"
	rm -rf "$tmp"
	mkdir -p "$tmp"
	# shellcheck disable=SC1091
	. "$d/song.sh"
	echo "$song: ${LEN}s" >&2

	for stem in drums bass other; do
		fluidsynth -ni -q -g 0.5 -r $RATE -O float -T wav -F "$tmp/$stem.raw.wav" "$SF2" "$d/$stem.mid" >/dev/null
		case $stem in
		drums) pan=$PAN_DRUMS lvl=$LEVEL_DRUMS ;;
		bass) pan=$PAN_BASS lvl=$LEVEL_BASS ;;
		*) pan=$PAN_OTHER lvl=$LEVEL_OTHER ;;
		esac
		# shellcheck disable=SC2046 # two numbers, split on purpose
		set -- $(pan_gains "$pan")
		sox -V1 "$tmp/$stem.raw.wav" -e floating-point -b 32 "$tmp/$stem.cut.wav" \
			remix 1v"$1" 2v"$2" trim 0 "$LEN" pad 0 "$LEN" trim 0 "$LEN"
		level "$tmp/$stem.cut.wav" "$d/$stem.wav" "$lvl"
	done

	# The voice: one espeak-ng word per note, trimmed to the note and faded, mixed at its onset.
	F50=$(f50 "$VOICE")
	n=0
	inputs=""
	while read -r onset dur midi word; do
		n=$((n + 1))
		# shellcheck disable=SC2046 # two numbers, split on purpose
		set -- $(awk -v m="$midi" -v f50="$F50" 'BEGIN {
			f = 440 * 2 ^ ((m - 69) / 12); p = int(50 + 84 * log(f / f50) / log(2) + 0.5)
			if (p < 0) p = 0; if (p > 99) p = 99
			printf "%d %.1f", p, 1200 * log(f / (f50 * 2 ^ ((p - 50) / 84))) / log(2) }')
		espeak-ng -v "$VOICE" -s 90 -p "$1" -w "$tmp/w$n.wav" "$word"
		sox -V1 "$tmp/w$n.wav" -r $RATE -e floating-point -b 32 "$tmp/n$n.wav" \
			silence 1 0.005 1% pitch "$2" rate $RATE trim 0 "$dur" fade t 0.015 "$dur" 0.08 pad "$onset"
		inputs="$inputs -v 1 $tmp/n$n.wav"
	done <"$d/voice.txt"
	# shellcheck disable=SC2086
	sox -V1 -m $inputs -e floating-point -b 32 "$tmp/voice.mono.wav" pad 0 "$LEN" trim 0 "$LEN"
	sox -V1 "$tmp/voice.mono.wav" "$tmp/voice.wav" remix 1 1
	level "$tmp/voice.wav" "$d/vocals.wav" "$LEVEL_VOCALS"

	sox -V1 -m -v 1 "$d/vocals.wav" -v 1 "$d/drums.wav" -v 1 "$d/bass.wav" -v 1 "$d/other.wav" \
		-e floating-point -b 32 "$d/mix.wav"
	# sox works in fixed point inside, so a stem or a mix at full scale has clipped
	for f in vocals drums bass other mix; do
		awk -v p="$(peak "$d/$f.wav")" 'BEGIN { exit !(p >= 0.999) }' &&
			echo "make_songs.sh: $song/$f.wav reaches full scale (clipped): lower its level in make_midi.py" >&2
	done
	rm -rf "$tmp"
done
