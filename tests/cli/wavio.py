"""Tiny WAV reader/writer for the tests (stdlib only): PCM 8/16/24/32 and float32, and the
Broadcast-WAV time reference."""
import array
import math
import struct


def write_wav(path, frames, channels, rate, bits=16, fmt="pcm"):
    """frames: flat list of floats, interleaved. fmt 'pcm' or 'float'."""
    if fmt == "float":
        data = array.array("f", frames).tobytes()
        tag, bits = 3, 32
    else:
        tag = 1
        scale = (1 << (bits - 1)) - 1
        out = bytearray()
        for v in frames:
            v = max(-1.0, min(1.0, v))
            i = int(round(v * scale))
            if bits == 8:
                out += struct.pack("<B", i + 128)
            elif bits == 16:
                out += struct.pack("<h", i)
            elif bits == 24:
                out += struct.pack("<i", i)[:3]
            else:
                out += struct.pack("<i", i)
        data = bytes(out)
    block = channels * bits // 8
    fmt_chunk = struct.pack("<HHIIHH", tag, channels, rate, rate * block, block, bits)
    with open(path, "wb") as f:
        f.write(b"RIFF" + struct.pack("<I", 4 + 8 + len(fmt_chunk) + 8 + len(data)) + b"WAVE")
        f.write(b"fmt " + struct.pack("<I", len(fmt_chunk)) + fmt_chunk)
        f.write(b"data" + struct.pack("<I", len(data)) + data)


def chunks(path):
    with open(path, "rb") as f:
        raw = f.read()
    assert raw[:4] == b"RIFF" and raw[8:12] == b"WAVE", path + ": not a WAV file"
    at, out = 12, {}
    while at + 8 <= len(raw):
        cid, size = raw[at:at + 4], struct.unpack("<I", raw[at + 4:at + 8])[0]
        out[cid] = raw[at + 8:at + 8 + size]
        at += 8 + size + (size & 1)
    return out


def read_wav(path):
    """Returns (samples as a flat list of floats, channels, rate, bits, is_float)."""
    c = chunks(path)
    tag, channels, rate, _, _, bits = struct.unpack("<HHIIHH", c[b"fmt "][:16])
    if tag == 0xFFFE:
        tag = struct.unpack("<H", c[b"fmt "][24:26])[0]
    d = c[b"data"]
    if tag == 3:
        a = array.array("f")
        a.frombytes(d[: len(d) // 4 * 4])
        return list(a), channels, rate, 32, True
    if bits == 16:
        a = array.array("h")
        a.frombytes(d)
        return [v / 32768.0 for v in a], channels, rate, 16, False
    if bits == 24:
        vals = [int.from_bytes(d[i:i + 3], "little", signed=True) / 8388608.0
                for i in range(0, len(d) - 2, 3)]
        return vals, channels, rate, 24, False
    if bits == 32:
        a = array.array("i")
        a.frombytes(d)
        return [v / 2147483648.0 for v in a], channels, rate, 32, False
    return [(b - 128) / 128.0 for b in d], channels, rate, 8, False


def time_reference(path):
    """The bext chunk's TimeReference (samples since midnight, here the region start)."""
    c = chunks(path)
    if b"bext" not in c:
        return None
    lo, hi = struct.unpack("<II", c[b"bext"][338:346])
    return lo | (hi << 32)


def test_signal(frames, channels, rate, seed=1):
    """A mix with a bass tone, a centred voice-band tone, clicks and noise."""
    import random
    rnd = random.Random(seed)
    out = []
    for i in range(frames):
        t = i / rate
        bass = 0.3 * math.sin(2 * math.pi * 82 * t)
        lead = 0.2 * math.sin(2 * math.pi * 440 * t + 3 * math.sin(2 * math.pi * 5 * t))
        click = 0.5 * rnd.uniform(-1, 1) if (i % int(rate / 2)) < 200 else 0.0
        for c in range(channels):
            pan = 0.2 * rnd.uniform(-1, 1) * (1 if c == 0 else 0.3)
            out.append(bass + lead + click + pan * 0.1)
    return out
