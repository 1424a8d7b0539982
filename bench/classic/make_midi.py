#!/usr/bin/env python3
"""The scores of the classic quality bench's songs, written as Standard MIDI Files.

For each song this writes, into OUTDIR/<song>/:
  drums.mid  bass.mid  other.mid   one format-0 file per stem (drums on channel 10), so that
                                   FluidSynth renders every stem on its own and the stems are
                                   known exactly;
  voice.txt                        the sung line, one note a line: onset_s dur_s midi_note word
                                   (make_songs.sh sings it with espeak-ng);
  song.sh                          length, voice, pans and levels, sourced by make_songs.sh.

SONGS are the bench's songs (the goal is measured on them and the parameters were tuned on
them); HELD_OUT are three more, never used for tuning, to see whether the tuning carries over.

Standard library only. Deterministic: the same files every run.
Usage: make_midi.py [--held-out] OUTDIR
"""
import os
import struct
import sys

TPQ = 480  # ticks per quarter note
DRUM_CH = 9  # channel 10


def vlq(n):
    out = [n & 0x7F]
    n >>= 7
    while n:
        out.append(0x80 | (n & 0x7F))
        n >>= 7
    return bytes(reversed(out))


class Part:
    """One stem's events: (tick, order, bytes); note-offs sort before note-ons at a tick."""

    def __init__(self, bpm):
        self.events = [(0, 0, b"\xff\x51\x03" + struct.pack(">I", int(60e6 / bpm))[1:])]

    def program(self, ch, prog):
        self.events.append((0, 1, bytes([0xC0 | ch, prog])))

    def cc(self, ch, num, val):
        self.events.append((0, 1, bytes([0xB0 | ch, num, val])))

    def note(self, ch, beat, beats, pitch, vel):
        on = int(round(beat * TPQ))
        off = max(on + 1, int(round((beat + beats) * TPQ)) - 10)
        self.events.append((on, 3, bytes([0x90 | ch, pitch, max(1, min(127, vel))])))
        self.events.append((off, 2, bytes([0x80 | ch, pitch, 0])))

    def write(self, path):
        track = bytearray()
        last = 0
        for tick, _, data in sorted(self.events, key=lambda e: (e[0], e[1])):
            track += vlq(tick - last) + data
            last = tick
        track += vlq(0) + b"\xff\x2f\x00"
        with open(path, "wb") as f:
            f.write(b"MThd" + struct.pack(">IHHH", 6, 0, 1, TPQ))
            f.write(b"MTrk" + struct.pack(">I", len(track)) + track)


NOTE = {"C": 0, "C#": 1, "Db": 1, "D": 2, "Eb": 3, "E": 4, "F": 5, "F#": 6, "G": 7, "Ab": 8,
        "A": 9, "Bb": 10, "B": 11}
QUALITY = {"": (0, 4, 7), "m": (0, 3, 7), "7": (0, 4, 7, 10), "m7": (0, 3, 7, 10),
           "maj7": (0, 4, 7, 11), "5": (0, 7, 12)}


def chord(name):
    """'Am' -> (root pitch class, intervals)."""
    root = name[:2] if len(name) > 1 and name[1] in "#b" else name[:1]
    return NOTE[root], QUALITY[name[len(root):]]


def voicing(name, low):
    """The chord's notes in the octave from 'low' up (closed position)."""
    pc, ivs = chord(name)
    out = []
    for iv in ivs:
        p = low + (pc + iv - low) % 12
        if iv >= 12:
            p += 12
        out.append(p)
    return sorted(out)


def near(pc_set, target, lo, hi):
    """The pitch nearest 'target' with a pitch class in pc_set, within [lo, hi]."""
    cands = [p for p in range(lo, hi + 1) if p % 12 in pc_set]
    return min(cands, key=lambda p: (abs(p - target), p))


# Drum kit (General MIDI percussion keys)
KICK, RIM, SNARE, CLAP, HAT, HAT_PEDAL, HAT_OPEN, TOM_LO, TOM_MID, TOM_HI, CRASH, RIDE = (
    36, 37, 38, 39, 42, 44, 46, 45, 47, 50, 49, 51)

WORDS = ["love", "day", "oh", "night", "you", "home", "free", "light", "sky", "go", "away", "me",
         "rain", "stay", "more", "time", "so", "blue", "feel", "low"]

SONGS = [
    {   # bright pop: piano and strings, fingered bass, straight rock beat
        "name": "song1_pop", "bpm": 100, "bars": 10, "progression": ["C", "G", "Am", "F"],
        "drums": "rock", "bass": ("eighths", 33), "other": [("block", 0), ("pad", 48)],
        "voice": "en+f3", "melody_lo": 57, "melody_hi": 69, "rhythm": "pop",
        "pan": {"drums": 0.15, "bass": -0.1, "other": -0.45},
        "level": {"vocals": -27, "drums": -28, "bass": -29, "other": -29},
    },
    {   # slow ballad: nylon guitar arpeggios and electric piano, acoustic bass, brushes
        "name": "song2_ballad", "bpm": 76, "bars": 8, "progression": ["Am", "F", "C", "G"],
        "drums": "ballad", "bass": ("halves", 32), "other": [("arp", 24), ("pad", 4)],
        "voice": "en+f5", "melody_lo": 55, "melody_hi": 67, "rhythm": "ballad",
        "pan": {"drums": -0.1, "bass": 0.1, "other": 0.5},
        "level": {"vocals": -26, "drums": -31, "bass": -29, "other": -28},
    },
    {   # rock: overdriven power chords, picked bass, crashes and a tom fill
        "name": "song3_rock", "bpm": 128, "bars": 13, "progression": ["Em", "C", "G", "D"],
        "drums": "hard", "bass": ("eighths", 34), "other": [("power", 29), ("pad", 19)],
        "voice": "en+m3", "melody_lo": 45, "melody_hi": 57, "rhythm": "rock",
        "pan": {"drums": 0.05, "bass": 0.0, "other": 0.55},
        "level": {"vocals": -27, "drums": -27, "bass": -29, "other": -28},
    },
    {   # funk: clean guitar chops and brass stabs, slap bass, sixteenth hats
        "name": "song4_funk", "bpm": 104, "bars": 11, "progression": ["Dm7", "G7", "Dm7", "Bb7"],
        "drums": "funk", "bass": ("funk", 36), "other": [("chops", 27), ("stabs", 61)],
        "voice": "en+f3", "melody_lo": 57, "melody_hi": 69, "rhythm": "funk",
        "pan": {"drums": -0.15, "bass": 0.1, "other": -0.5},
        "level": {"vocals": -27, "drums": -28, "bass": -28, "other": -29},
    },
]

HELD_OUT = [
    {   # pop-funk: piano arpeggios and strings, fingered bass, sixteenth hats; little panning
        "name": "held1_funkpop", "bpm": 90, "bars": 9, "progression": ["G", "D", "Em", "C"],
        "drums": "funk", "bass": ("halves", 33), "other": [("arp", 0), ("pad", 48)],
        "voice": "en+f5", "melody_lo": 55, "melody_hi": 67, "rhythm": "ballad",
        "pan": {"drums": 0.0, "bass": 0.0, "other": 0.3},
        "level": {"vocals": -26, "drums": -27, "bass": -28, "other": -28},
    },
    {   # fast rock: distorted guitar and brass, picked bass, loud drums
        "name": "held2_fastrock", "bpm": 140, "bars": 14, "progression": ["Am", "G", "F", "E"],
        "drums": "hard", "bass": ("eighths", 34), "other": [("power", 30), ("stabs", 61)],
        "voice": "en+m3", "melody_lo": 45, "melody_hi": 57, "rhythm": "rock",
        "pan": {"drums": 0.0, "bass": 0.0, "other": -0.35},
        "level": {"vocals": -27, "drums": -26, "bass": -28, "other": -27},
    },
    {   # slow: electric piano and acoustic guitar chops, synth bass, brushes
        "name": "held3_ep", "bpm": 84, "bars": 9, "progression": ["F", "Dm", "Bb", "C"],
        "drums": "ballad", "bass": ("funk", 37), "other": [("block", 4), ("chops", 25)],
        "voice": "en+f3", "melody_lo": 57, "melody_hi": 69, "rhythm": "pop",
        "pan": {"drums": 0.1, "bass": 0.0, "other": 0.25},
        "level": {"vocals": -25, "drums": -29, "bass": -29, "other": -28},
    },
]


def write_drums(song, part):
    bars = song["bars"]
    style = song["drums"]
    ch = DRUM_CH
    for bar in range(bars):
        b = bar * 4
        last = bar == bars - 1
        fill = bar % 4 == 3 and style in ("hard", "rock") and not last
        if bar % 4 == 0 and style != "ballad":
            part.note(ch, b, 1, CRASH, 100)
        if style == "rock":
            for k in (0, 2, 2.5):
                part.note(ch, b + k, 0.5, KICK, 110)
            for k in (1, 3):
                part.note(ch, b + k, 0.5, SNARE, 105)
            for i in range(8):
                if not (bar % 4 == 0 and i == 0):
                    part.note(ch, b + i / 2, 0.5, HAT, 70 + 15 * (i % 2 == 0))
        elif style == "ballad":
            for k in (0, 2.5):
                part.note(ch, b + k, 0.5, KICK, 85)
            for k in (1, 3):
                part.note(ch, b + k, 0.5, RIM, 80)
            for i in range(8):
                part.note(ch, b + i / 2, 0.5, RIDE, 55 + 12 * (i % 2 == 0))
            if bar % 4 == 0:
                part.note(ch, b, 1, CRASH, 70)
        elif style == "hard":
            for k in (0, 1.5, 2, 3.5):
                part.note(ch, b + k, 0.5, KICK, 115)
            for k in ((1, 3) if not fill else (1,)):
                part.note(ch, b + k, 0.5, SNARE, 115)
            for i in range(8):
                part.note(ch, b + i / 2, 0.5, RIDE if bar >= 8 else HAT_OPEN if i % 2 else HAT,
                          80 + 10 * (i % 2 == 0))
            if fill:
                for i, tom in enumerate((TOM_HI, TOM_HI, TOM_MID, TOM_MID, TOM_LO, TOM_LO)):
                    part.note(ch, b + 2 + i / 3, 0.33, tom, 100)
        elif style == "funk":
            for k in (0, 0.75, 2.5, 3.25):
                part.note(ch, b + k, 0.25, KICK, 110)
            for k in (1, 3):
                part.note(ch, b + k, 0.5, SNARE, 110)
            for k in (1.75, 2.25, 3.75):
                part.note(ch, b + k, 0.25, SNARE, 40)  # ghost notes
            for i in range(16):
                part.note(ch, b + i / 4, 0.25, HAT_OPEN if i == 14 else HAT,
                          60 + 25 * (i % 4 == 0) + 10 * (i % 2 == 0))
    part.note(ch, bars * 4, 2, CRASH, 90)


def write_bass(song, part):
    style, prog = song["bass"]
    part.program(0, prog)
    pr = song["progression"]
    for bar in range(song["bars"] + 1):
        b = bar * 4
        name = pr[bar % len(pr)]
        pc, ivs = chord(name)
        root = 28 + (pc - 28) % 12  # E1..D#2
        if bar == song["bars"]:
            part.note(0, b, 2, root, 100)
            break
        if style == "eighths":
            for i in range(8):
                p = root + 12 if i == 6 else root + ivs[2] if i == 7 else root
                part.note(0, b + i / 2, 0.5, p, 95 + 10 * (i % 2 == 0))
        elif style == "halves":
            part.note(0, b, 2, root, 95)
            part.note(0, b + 2, 1.5, root + ivs[2] - 12 if root + ivs[2] - 12 >= 28 else root + ivs[2], 85)
            part.note(0, b + 3.5, 0.5, root + ivs[1], 80)
        elif style == "funk":
            pat = [(0, 0.5, 0), (0.75, 0.25, 12), (1.5, 0.25, 0), (2, 0.5, 7), (2.75, 0.25, 12),
                   (3.25, 0.25, 10), (3.5, 0.5, 0)]
            for k, d, iv in pat:
                part.note(0, b + k, d, root + iv, 110 if iv == 0 else 90)


def write_other(song, part):
    pr = song["progression"]
    for ch, (style, prog) in enumerate(song["other"]):
        part.program(ch, prog)
        part.cc(ch, 7, 100 if style not in ("pad", "stabs") else 70)
        for bar in range(song["bars"] + 1):
            b = bar * 4
            name = pr[bar % len(pr)]
            last = bar == song["bars"]
            if style == "block":
                notes = voicing(name, 60)
                for k in ((0,) if last else (0, 1, 2, 3, 3.5)):
                    for p in notes:
                        part.note(ch, b + k, 2 if last else 0.5 if k == 3.5 else 0.9, p, 80)
            elif style == "pad":
                for p in voicing(name, 55 if prog != 19 else 48):
                    part.note(ch, b, 2 if last else 4, p, 70)
            elif style == "arp":
                notes = voicing(name, 52) + voicing(name, 64)[:2]
                order = [0, 1, 2, 3, 4, 3, 2, 1]
                for i in range(1 if last else 8):
                    part.note(ch, b + i / 2, 2 if last else 1, notes[order[i]], 75 + 10 * (i == 0))
            elif style == "power":
                pc, _ = chord(name)
                root = 40 + (pc - 40) % 12
                for i in range(1 if last else 8):
                    for p in (root, root + 7, root + 12):
                        part.note(ch, b + i / 2, 2 if last else 0.45, p, 100 - 10 * (i % 2))
            elif style == "chops":
                notes = voicing(name, 62)
                for k in ((0,) if last else (0.5, 1.5, 1.75, 2.5, 3.5)):
                    for p in notes:
                        part.note(ch, b + k, 1 if last else 0.2, p, 95)
            elif style == "stabs":
                if bar % 2 == 1 or last:
                    for p in voicing(name, 60)[:3]:
                        part.note(ch, b + (0 if last else 3.5), 1 if last else 0.4, p, 90)


RHYTHMS = {  # beat offsets and lengths of one sung bar (in beats)
    "pop": [(0, 1), (1, 1), (2, 1.5), (3.5, 0.5)],
    "ballad": [(0, 1.5), (1.5, 0.5), (2, 2)],
    "rock": [(0, 0.5), (0.5, 0.5), (1, 1), (2, 1), (3, 1)],
    "funk": [(0.5, 0.5), (1, 1), (2.5, 0.5), (3, 1)],
}


def write_voice(song, path):
    """A melody on the chord tones: sings three bars, breathes for one, after a bar of intro."""
    pr = song["progression"]
    spb = 60.0 / song["bpm"]
    lo, hi = song["melody_lo"], song["melody_hi"]
    cur = (lo + hi) // 2
    word = 0
    lines = []
    steps = [2, -1, 1, 3, -2, -1, 2, -3]
    for bar in range(1, song["bars"]):
        if bar % 4 == 0:
            continue  # a breath
        pc, ivs = chord(pr[bar % len(pr)])
        pcs = {(pc + iv) % 12 for iv in ivs}
        for i, (k, d) in enumerate(RHYTHMS[song["rhythm"]]):
            target = cur + steps[(bar * 5 + i) % len(steps)]
            cur = near(pcs, target, lo, hi)
            lines.append("%.4f %.4f %d %s" % ((bar * 4 + k) * spb, d * spb * 0.92, cur,
                                              WORDS[word % len(WORDS)]))
            word += 1
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")


def main():
    args = sys.argv[1:]
    held_out = args[:1] == ["--held-out"]
    if held_out:
        args = args[1:]
    if len(args) != 1:
        sys.exit("usage: make_midi.py [--held-out] OUTDIR")
    for song in HELD_OUT if held_out else SONGS:
        d = os.path.join(args[0], song["name"])
        os.makedirs(d, exist_ok=True)
        for stem, fn in (("drums", write_drums), ("bass", write_bass), ("other", write_other)):
            part = Part(song["bpm"])
            fn(song, part)
            part.write(os.path.join(d, stem + ".mid"))
        write_voice(song, os.path.join(d, "voice.txt"))
        length = (song["bars"] * 4 + 2) * 60.0 / song["bpm"]  # the last chord rings 2 beats
        with open(os.path.join(d, "song.sh"), "w") as f:
            f.write("LEN=%.3f\nVOICE=%s\n" % (length, song["voice"]))
            for stem, pan in song["pan"].items():
                f.write("PAN_%s=%s\n" % (stem.upper(), pan))
            for stem, lvl in song["level"].items():
                f.write("LEVEL_%s=%s\n" % (stem.upper(), lvl))
        print(song["name"])


if __name__ == "__main__":
    main()
