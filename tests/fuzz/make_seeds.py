#!/usr/bin/env python3
"""Writes the fuzz targets' seed corpora into corpus/<target>/ (committed; rerun to remake).
Each seed is small (a few KB) and reaches deep into its parser: well-formed files of each kind
the parser takes, and the damaged ones that tests found (a short header length, a truncated
file). Needs sox for the audio seeds; the checkpoint seeds are tests/convert's fixtures.

usage: make_seeds.py
"""
import json
import math
import os
import pickle
import shutil
import struct
import subprocess
import zipfile
from collections import OrderedDict

HERE = os.path.dirname(os.path.abspath(__file__))
CORPUS = os.path.join(HERE, "corpus")
FIXTURES = os.path.join(HERE, "..", "convert", "fixtures")


def out(target, name, data):
    d = os.path.join(CORPUS, target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def safetensors(tensors, meta=None, pad=0, declared=None):
    """tensors: list of (name, dtype, shape, raw bytes)."""
    header, at, body = OrderedDict(), 0, b""
    if meta is not None:
        header["__metadata__"] = meta
    for name, dtype, shape, raw in tensors:
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [at, at + len(raw)]}
        at += len(raw)
        body += raw
    h = json.dumps(header, separators=(",", ":")).encode() + b" " * pad
    return struct.pack("<Q", len(h) if declared is None else declared) + h + body


def f32(vals):
    return struct.pack(f"<{len(vals)}f", *vals)


def seeds_safetensors():
    cfg = {"sources": "drums,bass,other,vocals", "channels": "8", "bottom_channels": "32",
           "t_layers": "2", "t_heads": "4", "dconv_mode": "3", "samplerate": "44100",
           "segment": "39/5", "audio_channels": "2", "klass": "demucs.htdemucs.HTDemucs"}
    w = [math.sin(i) for i in range(48)]
    t = [("encoder.0.conv.weight", "F32", [6, 8], f32(w)),
         ("encoder.0.conv.bias", "F16", [4], struct.pack("<4H", 0x3c00, 0, 0x7c00, 0x0001)),
         ("freq_emb.embedding.weight", "BF16", [2, 2], struct.pack("<4H", 0x3f80, 0, 1, 0xff80)),
         ("scalar", "F32", [], f32([1.5])), ("ints", "I64", [2], struct.pack("<2q", 1, -1))]
    out("safetensors", "model-fragment.safetensors", safetensors(t, cfg, pad=5))
    out("safetensors", "short-header.safetensors", safetensors(t, cfg, pad=5,
        declared=len(json.dumps(OrderedDict([("__metadata__", cfg)] + [
            (n, {"dtype": d, "shape": s, "data_offsets": [0, 0]}) for n, d, s, _ in t]),
            separators=(",", ":"))) - 1))
    bag = dict(cfg, bag="2", bag_weights="1,1,1,1;0,1,0,1")
    bag.update({"0.channels": "8", "1.channels": "8"})
    out("safetensors", "bag.safetensors", safetensors(
        [("0." + n, d, s, r) for n, d, s, r in t[:2]] + [("1." + n, d, s, r) for n, d, s, r in t[:2]],
        bag))
    out("safetensors", "empty.safetensors", safetensors([], {}))
    out("safetensors", "truncated.safetensors", safetensors(t, cfg)[:-7])


def seeds_checkpoints():
    for name in ("hdemucs.th", "htdemucs-f16.th", "legacy-format.th", "state-not-tensor.th",
                 "hostile-training-args.th", "bare-state-dict.th"):
        raw = open(os.path.join(FIXTURES, name), "rb").read()
        out("checkpoint", name, raw)
        out("zip", name, raw)
        try:
            with zipfile.ZipFile(os.path.join(FIXTURES, name)) as z:
                pk = [n for n in z.namelist() if n.endswith("data.pkl")]
                if pk:
                    out("pickle", name.replace(".th", ".pkl"), z.read(pk[0]))
        except zipfile.BadZipFile:
            pass
    # a zip with a deflated entry and one with a wrong CRC
    path = os.path.join(CORPUS, "zip", "deflated.zip")
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        for name, data in (("archive/data.pkl", pickle.dumps({"a": [1, 2, 3]}, protocol=2) * 4),
                           ("archive/data/0", b"\0" * 256)):
            info = zipfile.ZipInfo(name, date_time=(2026, 1, 1, 0, 0, 0))  # the same bytes each run
            info.compress_type = zipfile.ZIP_DEFLATED
            z.writestr(info, data)
    raw = bytearray(open(path, "rb").read())
    raw[-30] ^= 0x55
    out("zip", "damaged-directory.zip", bytes(raw))


def seeds_pickle():
    value = OrderedDict([("klass", "x"), ("kwargs", {"sources": ["drums", "bass"], "n": 3,
                         "f": 0.25, "big": 2 ** 70, "neg": -5, "t": (1, None, True)}),
                         ("bytes", b"\x00\x01"), ("set", {1, 2}), ("nested", [[[[]]]])])
    for proto in range(0, 6):
        out("pickle", f"plain-protocol{proto}.pkl", pickle.dumps(value, protocol=proto))


def sox(args, path):
    subprocess.run(["sox", "-D", "-n"] + args + [path, "synth", "0.05", "sine", "440", "vol", "0.5"],
                   check=True, capture_output=True)


def seeds_audio():
    if not shutil.which("sox"):
        print("no sox: audio seeds not made")
        return
    d = os.path.join(CORPUS, "audio")
    os.makedirs(d, exist_ok=True)
    for name, args in (("s16.wav", ["-r", "8000", "-c", "2", "-b", "16"]),
                       ("u8.wav", ["-r", "8000", "-c", "1", "-b", "8"]),
                       ("s24.aiff", ["-r", "11025", "-c", "1", "-b", "24"]),
                       ("f32.wav", ["-r", "8000", "-c", "1", "-e", "floating-point", "-b", "32"]),
                       ("x.flac", ["-r", "8000", "-c", "1", "-b", "16"]),
                       ("x.ogg", ["-r", "8000", "-c", "1"]),
                       ("six.wav", ["-r", "8000", "-c", "6", "-b", "16"])):
        sox(args, os.path.join(d, name))
    raw = open(os.path.join(d, "s16.wav"), "rb").read()
    out("audio", "truncated.wav", raw[:len(raw) // 2])
    f = bytearray(open(os.path.join(d, "f32.wav"), "rb").read())
    f[-8:-4] = struct.pack("<f", float("nan"))
    out("audio", "nan.wav", bytes(f))


def seeds_catalog():
    shipped = open(os.path.join(HERE, "..", "..", "engine", "models", "catalog.json"), "rb").read()
    out("catalog", "shipped.json", shipped)
    small = {"catalog_version": 1, "base_url": "http://127.0.0.1:8000/good/", "models": [
        {"name": "htdemucs", "stems": ["vocals", "drums", "bass", "other"], "auto": 1,
         "files": [{"path": "hybrid_transformer/955717e8-f7e4610f.th", "bytes": 750000}]},
        {"name": "x6", "stems": ["vocals", "guitar", "piano", "other"], "bag_weights": "1;1",
         "files": [{"path": "a/1-0123456789abcdef.th", "sha256": "0123456789abcdef" * 4},
                   {"path": "a/2-abcdef01.bin", "approximate": True, "bytes": 1}]}]}
    out("catalog", "small.json", json.dumps(small).encode())
    out("catalog", "bad-path.json", json.dumps(dict(small, models=[dict(
        small["models"][0], files=[{"path": "../x-01234567.th"}])])).encode())


def rec(key, typ, value):
    return bytes([key, typ, len(value)]) + value


def seeds_state():
    # keys and types as fuzz_state.c numbers them
    K = dict(deviceKey=0, deviceName=1, devicePort=2, mode=3, model=4, stemMask=5,
             maxMinutes=6, trackName=7, manifest=8, outputDir=9, modelFile=10, unknown=11)
    T = dict(String=0, Path=1, Int=2, Float=3, Long=4, Bool=5, Double=6, URID=7, Chunk=8)
    good = (rec(K["deviceKey"], T["String"], b"opencl|Portable Computing Language|pthread|cpu|0\0") +
            rec(K["deviceName"], T["String"], b"pthread-cpu\0") +
            rec(K["devicePort"], T["Int"], struct.pack("<i", 2)) +
            rec(K["mode"], T["Int"], struct.pack("<i", 1)) +
            rec(K["model"], T["Int"], struct.pack("<i", 0)) +
            rec(K["stemMask"], T["Int"], struct.pack("<i", 15)) +
            rec(K["maxMinutes"], T["Float"], struct.pack("<f", 30.0)) +
            rec(K["trackName"], T["String"], b"Vocals\0") +
            rec(K["outputDir"], T["Path"], b"stems\0") +
            rec(K["modelFile"], T["Path"], b"/models/htdemucs.safetensors\0"))
    out("state", "good", good)
    out("state", "damaged", rec(K["deviceKey"], T["String"], b"opencl|x") +
        rec(K["devicePort"], T["Float"], b"\0\0") + rec(K["maxMinutes"], T["Float"],
        struct.pack("<f", float("nan"))) + rec(K["modelFile"], T["Path"], b"rel.safetensors\0"))
    out("state", "empty", b"")


if __name__ == "__main__":
    shutil.rmtree(CORPUS, ignore_errors=True)
    seeds_safetensors()
    seeds_checkpoints()
    seeds_pickle()
    seeds_audio()
    seeds_state()
    seeds_catalog()
    for t in sorted(os.listdir(CORPUS)):
        files = os.listdir(os.path.join(CORPUS, t))
        size = sum(os.path.getsize(os.path.join(CORPUS, t, f)) for f in files)
        print(f"{t}: {len(files)} seeds, {size} bytes")
