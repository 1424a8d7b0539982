#!/usr/bin/env python3
"""stembridge-convert as a user runs it, on checkpoints made by torch in the released Demucs
files' layout (tests/convert/fixtures, made by make_fixtures.py; no torch needed here):
every tensor's name, dtype, shape and bytes and every metadata string as expected.json says;
the file's layout valid safetensors; bags of models; and every bad input (a truncated or
corrupt zip, a malformed pickle, a class other than HTDemucs, a file that is no checkpoint)
refused with one line on stderr, exit status 1, and no file left behind.

usage: test_convert.py CONVERTER FIXTURES [--golden DIR] [--cli STEMBRIDGE]
"""
import argparse
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import zipfile

DTYPE_SIZE = {"F64": 8, "F32": 4, "F16": 2, "BF16": 2, "I64": 8, "I32": 4, "I16": 2, "I8": 1,
              "U8": 1, "BOOL": 1}
failures = []


def check(cond, msg):
    if not cond:
        failures.append(msg)
        print("FAIL: " + msg, file=sys.stderr)
    return cond


def run(exe, args, env=None):
    e = dict(os.environ)
    e.update(env or {})
    return subprocess.run([exe] + args, capture_output=True, text=True, env=e, timeout=300)


def read_safetensors(path):
    """(metadata, {name: (dtype, shape, bytes)}), checking the layout as safetensors does:
    header length a multiple of 8 here, offsets in bounds, no holes and no overlaps."""
    with open(path, "rb") as f:
        blob = f.read()
    (n,) = struct.unpack("<Q", blob[:8])
    check(n % 8 == 0, "%s: header length %d is not a multiple of 8" % (path, n))
    header = json.loads(blob[8:8 + n].decode("utf-8"))
    data = blob[8 + n:]
    meta = header.pop("__metadata__", {})
    check(all(isinstance(v, str) for v in meta.values()), "%s: metadata not all strings" % path)
    spans, tensors = [], {}
    for name, t in header.items():
        a, b = t["data_offsets"]
        size = DTYPE_SIZE[t["dtype"]]
        count = 1
        for d in t["shape"]:
            count *= d
        check(b - a == count * size, "%s: %s: %d bytes for shape %s" % (path, name, b - a,
                                                                       t["shape"]))
        check(a % size == 0, "%s: %s starts at %d, not aligned to %d" % (path, name, a, size))
        spans.append((a, b))
        tensors[name] = (t["dtype"], t["shape"], data[a:b])
    spans.sort()
    end = 0
    for a, b in spans:
        check(a == end, "%s: hole or overlap at %d" % (path, a))
        end = b
    check(end == len(data), "%s: %d data bytes, the tensors cover %d" % (path, len(data), end))
    return meta, tensors


def expected_for(case, expected):
    meta = dict(case["metadata"])
    tensors = {}
    bag = len(case["inputs"]) > 1
    for k, name in enumerate(case["inputs"]):
        prefix = "%d." % k if bag else ""
        ck = expected["checkpoints"][name]
        meta.update({prefix + key: v for key, v in ck["metadata"].items()})
        for t, rec in ck["tensors"].items():
            tensors[prefix + t] = (rec["dtype"], rec["shape"], bytes.fromhex(rec["hex"]))
    return meta, tensors


def compare(label, path, meta_want, tensors_want):
    meta, tensors = read_safetensors(path)
    for k in sorted(set(meta) | set(meta_want)):
        check(meta.get(k) == meta_want.get(k), "%s: metadata %s is %r, expected %r" % (
            label, k, meta.get(k), meta_want.get(k)))
    check(set(tensors) == set(tensors_want), "%s: tensors differ: extra %s, missing %s" % (
        label, sorted(set(tensors) - set(tensors_want))[:5],
        sorted(set(tensors_want) - set(tensors))[:5]))
    for name, want in tensors_want.items():
        got = tensors.get(name)
        if got is None:
            continue
        check(got[0] == want[0], "%s: %s dtype %s, expected %s" % (label, name, got[0], want[0]))
        check(list(got[1]) == list(want[1]), "%s: %s shape %s, expected %s" % (
            label, name, got[1], want[1]))
        check(got[2] == want[2], "%s: %s bytes differ" % (label, name))


def leftovers(d, keep=()):
    return sorted(f for f in os.listdir(d) if f not in keep)


def refuse(exe, args, want, tmp, label, code=1):
    """Exit status code, exactly one line on stderr holding want, and nothing written."""
    out = os.path.join(tmp, "refused.safetensors")
    p = run(exe, args + ["-o", out])
    lines = p.stderr.strip().splitlines()
    check(p.returncode == code, "%s: exit %d, expected %d (%s)" % (label, p.returncode, code,
                                                                 p.stderr.strip()))
    check(len(lines) == 1 and lines[0].startswith("stembridge-convert: error: ") and
          want in lines[0], "%s: stderr %r should be one error line with %r" % (
              label, p.stderr, want))
    check(not os.path.exists(out), "%s: an output file was left" % label)
    check(not [f for f in os.listdir(tmp) if f.startswith(".refused")],
          "%s: a temporary file was left" % label)
    return lines[0] if lines else ""


def rezip(src, dst, replace=None, compression=zipfile.ZIP_STORED):
    """Copy a checkpoint's zip, entries replaced by replace(name, bytes) -> bytes."""
    with zipfile.ZipFile(src) as zi, zipfile.ZipFile(dst, "w", compression) as zo:
        for info in zi.infolist():
            data = zi.read(info.filename)
            if replace:
                data = replace(info.filename, data)
            if data is not None:
                zo.writestr(info.filename, data)


def test_cases(exe, fixtures, expected, tmp):
    for case in expected["cases"]:
        d = tempfile.mkdtemp(dir=tmp)
        out = os.path.join(d, case["output"])
        marker = case.get("must_not_exist")
        if marker and os.path.exists(marker):
            os.unlink(marker)
        p = run(exe, [os.path.join(fixtures, f) for f in case["inputs"]] + ["-o", out] +
                case["options"])
        if not check(p.returncode == 0, "%s: exit %d: %s" % (case["name"], p.returncode,
                                                            p.stderr.strip())):
            continue
        check(p.stderr == "", "%s: unexpected stderr %r" % (case["name"], p.stderr))
        check(leftovers(d) == [case["output"]], "%s: files left: %s" % (case["name"],
                                                                       leftovers(d)))
        meta, tensors = expected_for(case, expected)
        compare(case["name"], out, meta, tensors)
        if marker:
            check(not os.path.exists(marker), "%s: the pickle's os.system call ran" % case["name"])
    print("cases: %d conversions checked" % len(expected["cases"]))


def test_refusals(exe, fixtures, expected, tmp):
    for r in expected["refusals"]:
        refuse(exe, [os.path.join(fixtures, f) for f in r["inputs"]] + r.get("options", []),
               r["stderr"], tmp, "refuse %s" % " ".join(r["inputs"] + r.get("options", [])))
    print("refusals from the fixtures: %d" % len(expected["refusals"]))


def test_damaged(exe, fixtures, expected, tmp):
    """Inputs damaged here, with Python's zipfile: no torch needed."""
    good = os.path.join(fixtures, "htdemucs-f16.th")
    blob = open(good, "rb").read()
    n = 0

    def write(name, data):
        path = os.path.join(tmp, name)
        with open(path, "wb") as f:
            f.write(data)
        return path

    for frac in (0.1, 0.5, 0.9):
        cut = write("cut.th", blob[:int(len(blob) * frac)])
        refuse(exe, [cut], "damaged zip archive", tmp, "truncated to %d%%" % (frac * 100))
        n += 1
    # cut inside the end records: the central directory no longer fits
    for back in (1, 30, 120):
        refuse(exe, [write("cut.th", blob[:-back])], "zip", tmp, "last %d bytes cut" % back)
        n += 1
    # a flipped byte in a tensor's storage: the CRC catches it
    with zipfile.ZipFile(good) as z:
        info = next(i for i in z.infolist() if "/data/" in i.filename)
    local = blob[info.header_offset:info.header_offset + 30]
    start = info.header_offset + 30 + struct.unpack("<H", local[26:28])[0] + \
        struct.unpack("<H", local[28:30])[0]
    flipped = bytearray(blob)
    flipped[start] ^= 0xFF
    refuse(exe, [write("crc.th", bytes(flipped))], "is corrupt (CRC-32", tmp, "flipped byte")
    # files that are no checkpoint
    refuse(exe, [write("notes.th", b"just some text\n" * 10)],
           "not a PyTorch checkpoint (not a zip archive)", tmp, "text file")
    refuse(exe, [write("empty.th", b"")], "empty file", tmp, "empty file")
    refuse(exe, [tmp], "not a regular file", tmp, "a folder")
    refuse(exe, [os.path.join(tmp, "missing.th")], "cannot open", tmp, "missing file")
    wav = b"RIFF" + struct.pack("<I", 36) + b"WAVEfmt " + bytes(28)
    refuse(exe, [write("audio.wav", wav)], "not a PyTorch checkpoint", tmp, "a wav file")
    other_zip = os.path.join(tmp, "other.zip")
    with zipfile.ZipFile(other_zip, "w") as z:
        z.writestr("readme.txt", "hello")
    refuse(exe, [other_zip], "no <folder>/data.pkl", tmp, "a zip that is no checkpoint")
    n += 7
    # malformed pickles inside an otherwise good archive
    with zipfile.ZipFile(good) as z:
        pkl_name = next(i.filename for i in z.infolist() if i.filename.endswith("/data.pkl"))
        pkl = z.read(pkl_name)
    bad_pickles = {
        "truncated pickle": (pkl[:len(pkl) // 2], "malformed pickle"),
        "no STOP": (pkl[:-1], "ends without STOP"),
        "unknown opcode": (b"\x80\x02\xff.", "unknown opcode"),
        "nested too deep": (b"\x80\x02" + b"(" * 5000 + b".", "nested deeper than"),
        "memo never set": (b"\x80\x02h\x07.", "memo index 7 was never set"),
        "SETITEMS onto a tuple": (b"\x80\x02)(K\x01K\x02u.", "SETITEMS onto a tuple"),
        "extension registry": (b"\x80\x02\x82\x01.", "extension registry"),
        "huge string length": (b"\x80\x02X\xff\xff\xff\x7f.", "runs past the end"),
        "protocol 9": (b"\x80\x09N.", "unsupported pickle protocol 9"),
        "two values left": (b"\x80\x02NN.", "expected one value"),
        "not a dict": (b"\x80\x02K\x05.", "not a Demucs model (it holds int 5"),
    }
    for label, (data, want) in bad_pickles.items():
        path = os.path.join(tmp, "badpickle.th")
        rezip(good, path, lambda name, b, data=data: data if name == pkl_name else b)
        refuse(exe, [path], want, tmp, label)
        n += 1
    # a storage shorter than its tensor needs
    path = os.path.join(tmp, "short.th")
    rezip(good, path, lambda name, b: b[:-2] if name.endswith("/data/0") else b)
    refuse(exe, [path], "bytes, but its record says", tmp, "short storage")
    path = os.path.join(tmp, "nostorage.th")
    rezip(good, path, lambda name, b: None if name.endswith("/data/0") else b)
    refuse(exe, [path], "is missing from the archive", tmp, "missing storage")
    n += 2
    # deflated entries (torch stores; other zip tools may not): the same tensors come out
    path = os.path.join(tmp, "deflated.th")
    rezip(good, path, compression=zipfile.ZIP_DEFLATED)
    out = os.path.join(tmp, "deflated.safetensors")
    p = run(exe, [path, "-o", out, "--name", "htdemucs-f16"])
    if check(p.returncode == 0, "deflated: exit %d: %s" % (p.returncode, p.stderr.strip())):
        case = dict(expected["cases"][0], inputs=["htdemucs-f16.th"])
        meta, tensors = expected_for(case, expected)
        meta["checkpoint"] = "deflated.th"
        compare("deflated", out, meta, tensors)
        os.unlink(out)
    print("damaged inputs: %d refused, a deflated copy converted" % n)


def test_cli(exe, fixtures, tmp):
    f16 = os.path.join(fixtures, "htdemucs-f16.th")
    for args, want in [([], "no checkpoint given"), ([f16], "no output file given"),
                       ([f16, "--bogus"], "unknown option '--bogus'"),
                       ([f16, "-o"], "-o needs a value"),
                       ([f16, "-o", "x.safetensors", "--bag-weights", "1"],
                        "--bag-weights needs several checkpoints")]:
        p = run(exe, args)
        check(p.returncode == 2 and want in p.stderr, "usage %s: exit %d, %r" % (
            args, p.returncode, p.stderr))
    p = run(exe, ["--help"])
    check(p.returncode == 0 and "usage: stembridge-convert" in p.stdout, "--help")
    # never overwrite without --overwrite; replace with it
    d = tempfile.mkdtemp(dir=tmp)
    out = os.path.join(d, "m.safetensors")
    with open(out, "wb") as f:
        f.write(b"the user's file")
    refuse_out = run(exe, [f16, "-o", out])
    check(refuse_out.returncode == 1 and "exists (use --overwrite" in refuse_out.stderr,
          "existing output: %r" % refuse_out.stderr)
    check(open(out, "rb").read() == b"the user's file", "existing output was changed")
    p = run(exe, [f16, "-o", out, "--overwrite", "-q"])
    check(p.returncode == 0 and p.stdout == "" and p.stderr == "", "--overwrite -q: %d %r %r" % (
        p.returncode, p.stdout, p.stderr))
    check(leftovers(d) == ["m.safetensors"], "files left: %s" % leftovers(d))
    check(open(out, "rb").read(8) != b"the user", "--overwrite did not replace the file")
    mode = os.stat(out).st_mode & 0o777
    check(mode & 0o044 == 0o044 or os.umask(0o022) & 0o044, "output mode %o" % mode)
    # --dry-run writes nothing
    dry = os.path.join(d, "dry.safetensors")
    p = run(exe, [f16, "-o", dry, "--dry-run"])
    check(p.returncode == 0 and not os.path.exists(dry) and "not written" in p.stdout,
          "--dry-run: %d %r" % (p.returncode, p.stdout))
    # an output folder that does not exist
    p = run(exe, [f16, "-o", os.path.join(d, "no", "such", "m.safetensors")])
    check(p.returncode == 1 and len(p.stderr.strip().splitlines()) == 1 and
          "cannot create a file in" in p.stderr, "missing folder: %r" % p.stderr)
    print("command line: usage errors, --overwrite, --dry-run, a missing folder")


def test_shapes(exe, fixtures, expected, golden, tmp):
    """--check-shapes: against a shapes file in released-shapes.json's form made for the tiny
    fixture (so the check applies), one with a shape changed, and the real file (not applied:
    the fixture's settings are not a released model's)."""
    f16 = os.path.join(fixtures, "htdemucs-f16.th")
    ck = expected["checkpoints"]["htdemucs-f16.th"]
    tensors = {k: v["shape"] for k, v in ck["tensors"].items()}
    kwargs = {"channels": 8, "bottom_channels": 32, "t_layers": 2, "dconv_mode": 3,
              "sources": ["drums", "bass", "other", "vocals"], "samplerate": 44100,
              "segment": "39/5", "audio_channels": 2}

    def shapes_file(tensors):
        path = os.path.join(tmp, "shapes.json")
        with open(path, "w") as f:
            json.dump({"tiny": {"kwargs": kwargs, "tensors": tensors, "params": 0},
                       "note": "a test file"}, f)
        return path

    out = os.path.join(tmp, "shapes.safetensors")
    p = run(exe, [f16, "-o", out, "--check-shapes", shapes_file(tensors)])
    check(p.returncode == 0 and "names and shapes match the released tiny" in p.stdout,
          "check-shapes match: %d %r %r" % (p.returncode, p.stdout, p.stderr))
    if os.path.exists(out):
        os.unlink(out)
    wrong = dict(tensors, **{"encoder.0.conv.bias": [9]})
    refuse(exe, [f16, "--check-shapes", shapes_file(wrong)],
           "tensor 'encoder.0.conv.bias' has shape [8], the released tiny has [9]", tmp,
           "check-shapes mismatch")
    more = dict(tensors, **{"decoder.0.conv_tr.weight": [8, 4, 8, 1]})
    refuse(exe, [f16, "--check-shapes", shapes_file(more)],
           "tensor 'decoder.0.conv_tr.weight' [8, 4, 8, 1] of the released tiny is missing", tmp,
           "check-shapes missing tensor")
    fewer = {k: v for k, v in tensors.items() if k != "fixture.scalar"}
    refuse(exe, [f16, "--check-shapes", shapes_file(fewer)],
           "tensor 'fixture.scalar' [] is not in the released tiny", tmp,
           "check-shapes extra tensor")
    refuse(exe, [f16, "--check-shapes", os.path.join(tmp, "nope.json")], "nope.json", tmp,
           "check-shapes missing file")
    released = os.path.join(golden or "", "released-shapes.json")
    if golden and os.path.exists(released):
        p = run(exe, [f16, "--dry-run", "--check-shapes", released])
        check(p.returncode == 0 and "shapes not checked" in p.stdout and
              "not htdemucs (bottom_channels is 32, not 512)" in p.stdout,
              "check-shapes against released-shapes.json: %r" % p.stdout)
    print("--check-shapes: match, a wrong shape, a missing and an extra tensor")


def test_models_command(cli, exe, fixtures, tmp):
    """stembridge models: every model of the catalogue with its stems and size, installed (with
    the file's settings) or not (with the command that installs it), converted files that the
    catalogue does not know, and what 'auto' stands for."""
    home = tempfile.mkdtemp(dir=tmp)
    models = os.path.join(home, "data", "stembridge", "models")
    env = {"XDG_DATA_HOME": os.path.join(home, "data"), "HOME": home,
           "XDG_DATA_DIRS": os.path.join(home, "sys")}
    p = run(cli, ["models"], env)
    check(p.returncode == 0, "models: exit %d" % p.returncode)
    for want in ["auto: builtin", "builtin: built in, no download",
                 "htdemucs: not installed", "install: stembridge models install htdemucs\n",
                 "htdemucs_ft: not installed", "install: stembridge models install htdemucs_ft",
                 "htdemucs_6s: not installed",
                 "stems: vocals, drums, bass, other, guitar, piano; about 55 MB download",
                 "stems: vocals, drums, bass, other; 84 MB download",
                 "Model folders searched, in order:\n  %s" % models,
                 "downloads from https://dl.fbaipublicfiles.com/demucs/",
                 "stembridge-convert FILE..."]:
        check(want in p.stdout, "models (none installed): missing %r in\n%s" % (want, p.stdout))
    os.makedirs(models)
    ft = ["f7e0c4bc-tiny.th", "d12395a8-tiny.th", "92cfc3b6-tiny.th", "04573f0d-tiny.th"]
    r1 = run(exe, [os.path.join(fixtures, "htdemucs-f16.th"), "-o",
                   os.path.join(models, "htdemucs.safetensors")])
    r2 = run(exe, [os.path.join(fixtures, f) for f in ft] +
             ["-o", os.path.join(models, "htdemucs_ft.safetensors")])
    r3 = run(exe, [os.path.join(fixtures, "htdemucs-f16.th"), "-o",
                   os.path.join(models, "mine.safetensors")])
    check(r1.returncode == 0 and r2.returncode == 0 and r3.returncode == 0,
          "models: conversions failed")
    with open(os.path.join(models, "broken.safetensors"), "wb") as f:
        f.write(b"\x10\x00\x00\x00\x00\x00\x00\x00{not json}      ")
    p = run(cli, ["models"], env)
    check(p.returncode == 0, "models: exit %d" % p.returncode)
    for want in ["auto: htdemucs", "htdemucs: installed",
                 "file: %s/htdemucs.safetensors" % models,
                 "demucs.htdemucs.HTDemucs, 4 stems (drums,bass,other,vocals), 44100 Hz, "
                 "segment 39/5 s, channels 8, bottom_channels 32, t_layers 2, dconv_mode 3; "
                 "11 tensors F16",
                 "htdemucs_ft: installed", "a bag of 4 models, demucs.htdemucs.HTDemucs",
                 "mine: installed (not in the catalogue)",
                 "broken: installed (not in the catalogue)",
                 "unreadable: not a safetensors file (bad header)",
                 "htdemucs_6s: not installed", "install: stembridge models install htdemucs_6s"]:
        check(want in p.stdout, "models: missing %r in\n%s" % (want, p.stdout))
    check("install: stembridge models install htdemucs\n" not in p.stdout,
          "models: asks to install an installed model\n%s" % p.stdout)
    print("stembridge models: none installed, three installed and a broken file")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("converter")
    ap.add_argument("fixtures")
    ap.add_argument("--golden")
    ap.add_argument("--cli")
    a = ap.parse_args()
    exe, fixtures = os.path.abspath(a.converter), os.path.abspath(a.fixtures)
    with open(os.path.join(fixtures, "expected.json")) as f:
        expected = json.load(f)
    tmp = tempfile.mkdtemp(prefix="sb-convert-")
    try:
        test_cases(exe, fixtures, expected, tmp)
        test_refusals(exe, fixtures, expected, tmp)
        test_damaged(exe, fixtures, expected, tmp)
        test_cli(exe, fixtures, tmp)
        test_shapes(exe, fixtures, expected, a.golden, tmp)
        if a.cli:
            test_models_command(os.path.abspath(a.cli), exe, fixtures, tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    if failures:
        print("%d checks failed" % len(failures), file=sys.stderr)
        return 1
    print("all converter checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
