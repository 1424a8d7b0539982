#!/usr/bin/env python3
"""The converter against checkpoints torch makes now (Debian's python3-torch), not only the
committed ones: the fixtures are made afresh and every check of test_convert.py runs on them;
a checkpoint holding a golden model's weights (the repository's htdemucs-mini, and
shared/golden's htdemucs-tiny when given) converts to the golden file's tensors and metadata
strings; and full-size htdemucs and htdemucs_6s checkpoints (every tensor of
released-shapes.json, F16 like the release) convert and pass --check-shapes.

Exits 77 (meson's SKIP) when no python with torch is found.

usage: test_torch.py CONVERTER [--golden DIR] [--golden-model NAME] [--more-golden DIR NAME]
"""
import os
import sys

try:
    import torch
except ImportError:
    # Debian's torch lives in the system python's dist-packages; a python3 earlier on PATH
    # (pyenv, a venv) does not see it
    system = "/usr/bin/python3"
    if (os.environ.get("SB_TORCH_REEXEC") != "1" and os.path.exists(system) and
            os.path.realpath(system) != os.path.realpath(sys.executable)):
        os.environ["SB_TORCH_REEXEC"] = "1"
        os.execv(system, [system] + sys.argv)
    print("SKIP: no torch (Debian: apt-get install python3-torch)")
    sys.exit(77)

import argparse  # noqa: E402
import fractions  # noqa: E402
import json  # noqa: E402
import shutil  # noqa: E402
import struct  # noqa: E402
import subprocess  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import make_fixtures as mf  # noqa: E402
import test_convert as tc  # noqa: E402

SF_DTYPES = {"F32": torch.float32, "F16": torch.float16}


def read_golden(path):
    with open(path, "rb") as f:
        blob = f.read()
    (n,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8:8 + n])
    meta = header.pop("__metadata__")
    data = blob[8 + n:]
    state = {}
    for name, t in header.items():
        a, b = t["data_offsets"]
        flat = torch.frombuffer(bytearray(data[a:b]), dtype=SF_DTYPES[t["dtype"]])
        state[name] = flat.reshape(t["shape"])
    return meta, state


def settings_from_strings(meta):
    """The golden metadata's settings back as the Python values demucs would pickle."""
    kw = dict(mf.HTDEMUCS_CONFIG)
    for k, v in meta.items():
        if k in ("reference", "seed"):
            continue
        if k == "sources":
            kw[k] = v.split(",")
        elif k == "segment":
            kw[k] = fractions.Fraction(v)
        else:
            kw[k] = int(v)
    return kw


def test_fresh_fixtures(exe, golden, tmp):
    d = os.path.join(tmp, "fixtures")
    expected = mf.build(d)
    with open(os.path.join(HERE, "fixtures", "expected.json")) as f:
        committed = json.load(f)
    tc.check(json.loads(json.dumps(expected)) == committed,
             "fixtures/expected.json is out of date: rerun tests/convert/make_fixtures.py")
    differ = [n for n in sorted(os.listdir(d)) if n.endswith(".th") and n != "legacy-format.th"
              and open(os.path.join(d, n), "rb").read() !=
              open(os.path.join(HERE, "fixtures", n), "rb").read()]
    if differ:
        print("note: torch %s writes other bytes than the committed fixtures for %s (checked "
              "below on its own files)" % (torch.__version__, ", ".join(differ)))
    work = os.path.join(tmp, "work")
    os.makedirs(work)
    tc.test_cases(exe, d, expected, work)
    tc.test_refusals(exe, d, expected, work)
    tc.test_damaged(exe, d, expected, work)
    print("fresh fixtures from torch %s: converted and refused as the committed ones" %
          torch.__version__)


def test_golden_tiny(exe, golden, tmp, model="htdemucs-tiny"):
    path = os.path.join(golden, model + ".safetensors")
    if not tc.check(os.path.exists(path), "no golden model %s" % path):
        return
    meta, state = read_golden(path)
    kw = settings_from_strings(meta)
    ckpt = os.path.join(tmp, "golden-%s.th" % model)
    mf.save(mf.package(mf.HTDemucs, kw, state, mf.training_config()), ckpt,
            fraction_as_str=True)
    out = os.path.join(tmp, "golden-%s.safetensors" % model)
    p = tc.run(exe, [ckpt, "-o", out])
    if not tc.check(p.returncode == 0, "golden tiny: %s" % p.stderr.strip()):
        return
    got_meta, tensors = tc.read_safetensors(out)
    for k, v in meta.items():
        if k not in ("reference", "seed"):
            tc.check(got_meta.get(k) == v, "golden tiny: metadata %s is %r, the golden file "
                     "has %r" % (k, got_meta.get(k), v))
    tc.check(set(tensors) == set(state), "golden tiny: tensor names differ")
    blob = open(path, "rb").read()
    (n,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8:8 + n])
    for name, t in header.items():
        if name == "__metadata__" or name not in tensors:
            continue
        a, b = t["data_offsets"]
        tc.check(tensors[name] == (t["dtype"], t["shape"], blob[8 + n + a:8 + n + b]),
                 "golden tiny: %s differs from the golden file" % name)
    print("golden %s: %d tensors and the metadata strings as in the golden file" %
          (model, len(state)))


def test_full_size(exe, golden, tmp):
    path = os.path.join(golden, "released-shapes.json")
    if not os.path.exists(path):
        print("note: %s not found, full-size check skipped" % path)
        return
    with open(path) as f:
        released = json.load(f)
    for model in ("htdemucs", "htdemucs_6s"):
        spec = released[model]
        kw = dict(mf.HTDEMUCS_CONFIG)
        kw.update(spec["kwargs"])
        kw["segment"] = fractions.Fraction(spec["kwargs"]["segment"])
        state, total = {}, 0
        for name, shape in spec["tensors"].items():
            numel = 1
            for d in shape:
                numel *= d
            # distinct, exactly representable values, so that misplaced bytes show
            state[name] = ((torch.arange(numel) + total) % 2039).to(torch.float16).reshape(shape)
            total += numel
        tc.check(total == spec["params"], "%s: %d parameters, the json says %d" % (
            model, total, spec["params"]))
        ckpt = os.path.join(tmp, model + ".th")
        mf.save(mf.package(mf.HTDemucs, kw, state, {"epochs": 360}), ckpt)
        out = os.path.join(tmp, model + ".safetensors")
        t0 = time.time()
        p = tc.run(exe, [ckpt, "-o", out, "--check-shapes", path])
        secs = time.time() - t0
        if not tc.check(p.returncode == 0 and
                        "names and shapes match the released %s" % model in p.stdout,
                        "%s full size: %d %r %r" % (model, p.returncode, p.stdout, p.stderr)):
            continue
        meta, tensors = tc.read_safetensors(out)
        bad = [n for n, t in state.items()
               if tensors[n] != ("F16", list(t.shape), t.contiguous().view(torch.int16)
                                 .numpy().tobytes())]
        tc.check(not bad, "%s full size: tensors differ: %s" % (model, bad[:3]))
        tc.check(meta.get("sources") == ",".join(spec["kwargs"]["sources"]) and
                 meta.get("segment") == "39/5" and meta.get("dconv_mode") == "3",
                 "%s full size: metadata %r" % (model, meta))
        print("full-size %s: %d tensors, %d parameters, %.0f MB, converted and checked in "
              "%.2f s" % (model, len(tensors), total, os.path.getsize(out) / 1e6, secs))
        os.unlink(ckpt)
        os.unlink(out)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("converter")
    ap.add_argument("--golden", default="")
    ap.add_argument("--golden-model", default="htdemucs-tiny")
    ap.add_argument("--more-golden", nargs=2, default=None)
    a = ap.parse_args()
    exe = os.path.abspath(a.converter)
    tmp = tempfile.mkdtemp(prefix="sb-convert-torch-")
    try:
        test_fresh_fixtures(exe, a.golden, tmp)
        if a.golden:
            test_golden_tiny(exe, a.golden, tmp, a.golden_model)
            test_full_size(exe, a.golden, tmp)
        if a.more_golden:
            test_golden_tiny(exe, a.more_golden[0], tmp, a.more_golden[1])
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    if tc.failures:
        print("%d checks failed" % len(tc.failures), file=sys.stderr)
        return 1
    print("all torch-side converter checks passed (torch %s)" % torch.__version__)
    return 0


if __name__ == "__main__":
    sys.exit(main())
