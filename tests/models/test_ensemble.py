#!/usr/bin/env python3
"""Ensembles with two stand-in models (the tiny RoFormers of tests/fixtures/roformer: bs-tiny
as "bs", mel-tiny as "mel", both vocals and the rest):

  1. --ensemble bs,mel: each stem the mean of the two single runs' (within float rounding);
     the manifest names both models in every stem
  2. --ensemble-weights 3,1: the weighted mean
  3. --ensemble-mode max_spec of a model with itself gives that model's stems back (the STFT
     there and back); min_spec of the two is quieter than either
  4. memory: the ensemble's peak within the larger single run's plus one stem buffer (a 60 s
     input, whose stem alone would be 21 MB: the members' stems go to temporary files)
  5. --quality best with a catalogue that publishes the ensemble's figure above both models:
     auto runs the ensemble; without --quality best the single best

usage: test_ensemble.py STEMBRIDGE STEMBRIDGE_CONVERT FIXTURES_DIR
"""
import json
import math
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [os.path.join(HERE, "..", "cli")]
import wavio  # noqa: E402

CLI, CONVERT, FIX = (os.path.abspath(a) for a in sys.argv[1:4])
failures = 0
MEASURE = ("import resource, subprocess, sys; r = subprocess.run(sys.argv[1:]); "
           "print(r.returncode, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)")


def check(cond, msg):
    global failures
    print(("ok    " if cond else "FAIL  ") + msg.splitlines()[0][:200])
    if not cond:
        failures += 1
        print("      " + msg[:2000].replace("\n", "\n      "))


def run(args, exe=None):
    return subprocess.run([exe or CLI] + args, capture_output=True, text=True, timeout=600)


def peak_kb(args):
    """the peak RSS (KB) of one CLI run, measured in a child of its own"""
    p = subprocess.run([sys.executable, "-c", MEASURE, CLI] + args, capture_output=True,
                       text=True, timeout=600)
    rc, kb = p.stdout.split()[-2:]
    return int(rc), int(kb)


def main(tmp):
    home = os.path.join(tmp, "home")
    models = os.path.join(home, "data", "stembridge", "models")
    os.makedirs(models)
    for name, fix in (("bs", "bs-tiny"), ("mel", "mel-tiny")):
        c = run([os.path.join(FIX, fix + ".ckpt"), "--config", os.path.join(FIX, fix + ".yaml"),
                 "-o", os.path.join(models, name + ".safetensors"), "--name", name, "-q"],
                exe=CONVERT)
        check(c.returncode == 0, f"the stand-in {name} converts: {c.stderr}")
    cat = {"catalog_version": 1, "base_url": "http://127.0.0.1:9/", "models": [
        {"name": name, "family": fam, "stems": ["vocals", "other"],
         "figures": [{"set": "multisong", "source": "stand-in", "sdr": {"vocals": v}}],
         "files": [{"path": name + ".ckpt", "bytes": 1, "unverified": True},
                   {"path": name + ".yaml", "role": "config", "unverified": True}]}
        for name, fam, v in (("bs", "bs_roformer", "10.87"), ("mel", "mel_band_roformer",
                                                             "10.98"))],
        "ensembles": [{"models": ["bs", "mel"], "combine": "avg_wave",
                       "figures": [{"set": "multisong", "source": "stand-in",
                                    "sdr": {"vocals": "11.20"}}]}]}
    catalog = os.path.join(tmp, "catalog.json")
    json.dump(cat, open(catalog, "w"))
    os.environ.update({"STEMBRIDGE_CATALOG": catalog, "HOME": home,
                       "XDG_DATA_HOME": os.path.join(home, "data"),
                       "XDG_DATA_DIRS": os.path.join(home, "none")})
    clip = os.path.join(tmp, "clip.wav")
    wavio.write_wav(clip, wavio.test_signal(40000, 2, 44100), 2, 44100, bits=32, fmt="float")

    def sep(tag, *args):
        out = os.path.join(tmp, tag)
        p = run(["separate", clip, "-o", out, "-q", "--device", "cpu"] + list(args))
        stems = {}
        m = {}
        if p.returncode == 0:
            m = json.load(open(os.path.join(out, "clip", "manifest.json")))
            for s in ("vocals", "other"):
                f = os.path.join(out, "clip", s + ".wav")
                if os.path.exists(f):
                    stems[s] = wavio.read_wav(f)[0]
        return p, stems, m

    _, bs, _ = sep("bs", "--model", "bs")
    _, mel, _ = sep("mel", "--model", "mel")

    # 1. the mean of the single runs
    p, ens, m = sep("ens", "--ensemble", "bs,mel")
    worst = max((abs((a + b) / 2 - e) for s in ("vocals", "other")
                 for a, b, e in zip(bs.get(s, []), mel.get(s, []), ens.get(s, [1]))),
                default=1)
    check(p.returncode == 0 and len(ens["vocals"]) == len(bs["vocals"]) and worst < 1e-6,
          f"--ensemble bs,mel: each stem the mean of the single runs (max {worst:.1e}): "
          f"{p.stderr}")
    by = {st["stem"]: st["model"] for st in m.get("stems", [])}
    check(by == {"vocals": "bs, mel", "other": "bs, mel"} and m["model"]["name"] == "bs,mel",
          f"the manifest names every model in a stem: {by} {m.get('model')}")

    # 2. weights
    p, ew, _ = sep("ew", "--ensemble", "bs,mel", "--ensemble-weights", "3,1")
    worst = max((abs((3 * a + b) / 4 - e) for a, b, e in zip(bs["vocals"], mel["vocals"],
                                                                ew.get("vocals", [1]))), default=1)
    check(p.returncode == 0 and worst < 1e-6,
          f"--ensemble-weights 3,1: the weighted mean (max {worst:.1e}): {p.stderr}")

    # 3. spectral combinations
    p, mx, _ = sep("mx", "--ensemble", "bs,bs", "--ensemble-mode", "max_spec")
    peak = max(abs(a) for a in bs["vocals"])
    worst = max((abs(a - e) for a, e in zip(bs["vocals"], mx.get("vocals", [1]))), default=1)
    check(p.returncode == 0 and worst < 1e-5 * peak + 1e-7,
          f"max_spec of a model with itself: its stems back (max {worst:.1e} of {peak:.2f}): "
          f"{p.stderr}")
    p, mn, _ = sep("mn", "--ensemble", "bs,mel", "--ensemble-mode", "min_spec")

    def rms(x):
        return math.sqrt(sum(v * v for v in x) / max(len(x), 1))
    check(p.returncode == 0 and rms(mn["vocals"]) < min(rms(bs["vocals"]), rms(mel["vocals"])),
          f"min_spec of the two is quieter than either: {rms(mn.get('vocals', [])):.4f} "
          f"{rms(bs['vocals']):.4f} {rms(mel['vocals']):.4f} {p.stderr}")

    # 4. memory flat: the members' stems on disk, not in memory
    long_clip = os.path.join(tmp, "long.wav")
    wavio.write_wav(long_clip, wavio.test_signal(60 * 44100, 2, 44100), 2, 44100, bits=32,
                    fmt="float")
    peaks = {}
    for tag, args in (("bs", ["--model", "bs"]), ("mel", ["--model", "mel"]),
                      ("ens", ["--ensemble", "bs,mel"])):
        rc, kb = peak_kb(["separate", long_clip, "-o", os.path.join(tmp, "long-" + tag), "-q",
                          "--device", "cpu", "--threads", "1"] + args)
        peaks[tag] = kb if rc == 0 else None
    stem_mb = 60 * 44100 * 2 * 4 / 1e6
    bound = max(peaks["bs"] or 0, peaks["mel"] or 0) / 1e3 + 8
    check(None not in peaks.values() and peaks["ens"] / 1e3 <= bound,
          f"the ensemble's peak {peaks['ens'] / 1e3 if peaks['ens'] else 0:.0f} MB within the "
          f"single runs' ({(peaks['bs'] or 0) / 1e3:.0f}, {(peaks['mel'] or 0) / 1e3:.0f} MB) "
          f"plus one stem buffer and 8 MB (a stem held whole: {stem_mb:.0f} MB)")

    # 5. quality best: the published ensemble
    p, _, m = sep("auto-best", "--stems", "vocals", "--quality", "best")
    check(p.returncode == 0 and m["model"]["name"] == "bs,mel",
          f"auto --quality best runs the published ensemble (11.20 over 10.98): {p.stderr} "
          f"{m.get('model')}")
    p, _, m = sep("auto-single", "--stems", "vocals")
    check(p.returncode == 0 and m["model"]["name"] == "mel",
          f"auto alone runs the single best, mel: {p.stderr} {m.get('model')}")


if __name__ == "__main__":
    with tempfile.TemporaryDirectory() as tmp:
        main(tmp)
    print(f"{failures} failure(s)")
    sys.exit(1 if failures else 0)
