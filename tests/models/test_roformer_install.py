#!/usr/bin/env python3
"""`stembridge models install` of RoFormers from a loopback mirror holding checkpoints and
configs written by the reference code in the released layout (tests/fixtures/roformer: bs-tiny
as the 2-stem vocals model, bs-tiny-4 as the 4-stem one, bs-tiny-6 as the 6-stem one in the
order of BS-Roformer SW), then separations with them.

  1. install: the computed SHA-256 is printed (no digest is published), the model is listed as
     installed with its published SDR, and equals the converter's output byte for byte
  2. separate with it: vocals + other add back to the input; the manifest names the model;
     the plugin (through the lilv test host) separates a take with the installed file
  3. auto with --stems: vocals from the model with the best published vocals SDR, drums from
     the 4-stem model, and both at once from the two models (each stem as its model alone
     makes it, other the rest, the manifest naming each stem's model); --stems vocals,drums of the 2-stem model refused with what it makes
  4. six stems: `models` lists the 6-stem model's stems; a separation writes bass, drums,
     other, vocals, guitar and piano, which add back to the input, and a manifest listing the
     six; --stems guitar,piano writes those two as the full run made them; auto with --stems
     guitar runs it; guitar of the 4-stem model refused; the plugin writes its six stems
  5. refusals, nothing installed: a download of the wrong size, a config that is not the
     checkpoint's (the tensor named), a damaged config (the key named)

usage: test_roformer_install.py STEMBRIDGE STEMBRIDGE_CONVERT FIXTURES_DIR [TEST_PLUGIN]
"""
import hashlib
import http.server
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [os.path.join(HERE, "..", "cli")]
import wavio  # noqa: E402

CLI, CONVERT, FIX = (os.path.abspath(a) for a in sys.argv[1:4])
TEST_PLUGIN = os.path.abspath(sys.argv[4]) if len(sys.argv) > 4 else None
failures = 0


def check(cond, msg):
    global failures
    print(("ok    " if cond else "FAIL  ") + msg.splitlines()[0][:200])
    if not cond:
        failures += 1
        print("      " + msg[:2000].replace("\n", "\n      "))


def run(args, exe=None, env=None):
    e = dict(os.environ)
    e.update(env or {})
    return subprocess.run([exe or CLI] + args, capture_output=True, text=True, env=e,
                          timeout=300)


class Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *a):
        pass


def main(tmp):
    mirror = os.path.join(tmp, "mirror")
    os.makedirs(os.path.join(mirror, "roformer"))
    srv = http.server.ThreadingHTTPServer(
        ("127.0.0.1", 0), lambda *a, **k: Quiet(*a, directory=mirror, **k))
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{srv.server_address[1]}/"

    def put(src, name):
        dst = os.path.join(mirror, "roformer", name)
        shutil.copy(os.path.join(FIX, src), dst)
        return os.path.getsize(dst), hashlib.sha256(open(dst, "rb").read()).hexdigest()

    two_bytes, two_sha = put("bs-tiny.ckpt", "two.ckpt")
    put("bs-tiny.yaml", "two.yaml")
    four_bytes, _ = put("bs-tiny-4.ckpt", "four.ckpt")
    put("bs-tiny-4.yaml", "four.yaml")
    six_bytes, _ = put("bs-tiny-6.ckpt", "six.ckpt")
    put("bs-tiny-6.yaml", "six.yaml")
    # a config with a key the reference does not know
    text = open(os.path.join(FIX, "bs-tiny.yaml")).read().replace("model:\n",
                                                                  "model:\n  dim_hyper: 2\n", 1)
    open(os.path.join(mirror, "roformer", "damaged.yaml"), "w").write(text)

    def entry(name, ckpt, cfg, stems, sdr, size):
        # "url" is where a publisher would serve it: unreachable here, the mirror serves "path"
        figures = [{"set": "multisong", "source": "test",
                    "sdr": {k: f"{v:.2f}" for k, v in sdr.items()}}] if sdr else []
        return {"name": name, "family": "bs_roformer", "stems": stems, "figures": figures,
                "files": [
                    {"path": "roformer/" + ckpt, "url": "http://127.0.0.1:9/" + ckpt,
                     "bytes": size, "unverified": True},
                    {"path": "roformer/" + cfg, "url": "http://127.0.0.1:9/" + cfg,
                     "role": "config", "unverified": True}]}

    cat = {"catalog_version": 1, "base_url": "http://127.0.0.1:9/", "models": [
        entry("rof_two", "two.ckpt", "two.yaml", ["vocals", "other"],
              {"vocals": 12.0, "other": 16.0}, two_bytes),
        entry("rof_four", "four.ckpt", "four.yaml", ["vocals", "drums", "bass", "other"],
              {"vocals": 11.0, "drums": 11.5, "bass": 8.5, "other": 7.4}, four_bytes),
        # below rof_two and rof_four for each of their stems: 'auto' above does not change
        entry("rof_six", "six.ckpt", "six.yaml",
              ["bass", "drums", "other", "vocals", "guitar", "piano"],
              {"vocals": 10.0, "drums": 11.0, "bass": 8.0, "other": 7.0, "guitar": 8.5,
               "piano": 7.5}, six_bytes),
        entry("rof_badsize", "two.ckpt", "two.yaml", ["vocals", "other"], {}, two_bytes + 1),
        entry("rof_mismatch", "two.ckpt", "four.yaml", ["vocals", "other"], {}, two_bytes),
        entry("rof_damaged", "two.ckpt", "damaged.yaml", ["vocals", "other"], {}, two_bytes),
    ]}
    catalog = os.path.join(tmp, "catalog.json")
    json.dump(cat, open(catalog, "w"))
    home = os.path.join(tmp, "home")
    models = os.path.join(home, "data", "stembridge", "models")
    os.environ.update({"STEMBRIDGE_CATALOG": catalog, "HOME": home,
                       "STEMBRIDGE_MODEL_URL": url,
                       "XDG_DATA_HOME": os.path.join(home, "data"),
                       "XDG_DATA_DIRS": os.path.join(home, "none"),
                       "XDG_CACHE_HOME": os.path.join(home, "cache")})
    for v in ("http_proxy", "https_proxy", "HTTPS_PROXY", "ALL_PROXY", "all_proxy"):
        os.environ.pop(v, None)

    # 1. install
    p = run(["models", "install", "rof_two", "rof_four"])
    check(p.returncode == 0 and two_sha in p.stdout + p.stderr,
          f"install two RoFormers from the mirror, the computed SHA-256 printed: "
          f"{p.returncode}\n{p.stdout}{p.stderr}")
    p = run(["models"])
    check("rof_two: installed" in p.stdout and "SDR on MVSEP Multisong: vocals 12.00, other "
          "16.00 dB (test)" in p.stdout, f"models lists it with its published SDR and its test "
          f"set:\n{p.stdout}")
    ref = os.path.join(tmp, "ref.safetensors")
    c = run([os.path.join(mirror, "roformer", "two.ckpt"), "--config",
             os.path.join(mirror, "roformer", "two.yaml"),
             "-o", ref, "--name", "rof_two", "-q"], exe=CONVERT)
    check(c.returncode == 0 and open(ref, "rb").read() ==
          open(os.path.join(models, "rof_two.safetensors"), "rb").read(),
          f"the installed model is the converter's output byte for byte: {c.stderr}")

    # 2. separate with it
    clip = os.path.join(tmp, "clip.wav")
    wavio.write_wav(clip, wavio.test_signal(44100, 2, 44100), 2, 44100, bits=32, fmt="float")
    out = os.path.join(tmp, "sep-two")
    p = run(["separate", clip, "-o", out, "-q", "--device", "cpu", "--model", "rof_two"])
    check(p.returncode == 0, f"separate with rof_two: {p.stderr}")
    if p.returncode == 0:
        x = wavio.read_wav(clip)[0]
        v = wavio.read_wav(os.path.join(out, "clip", "vocals.wav"))[0]
        o = wavio.read_wav(os.path.join(out, "clip", "other.wav"))[0]
        err = max(abs(a - b - c) for a, b, c in zip(x, v, o))
        check(len(v) == len(x) == len(o) and err < 1e-5,
              f"vocals + other = the input (max difference {err:.1e})")
        m = json.load(open(os.path.join(out, "clip", "manifest.json")))
        check(m["model"]["name"] == "rof_two", f"manifest model {m['model']}")

    # the plugin, pointed at the installed file
    if TEST_PLUGIN:
        p = subprocess.run([TEST_PLUGIN, "roformerfile", os.path.join(models, "rof_two.safetensors")],
                           capture_output=True, text=True, timeout=300,
                           env=dict(os.environ, SB_TEST_TMP=os.path.join(tmp, "plugin")))
        check(p.returncode == 0, f"the plugin separates a take with it:\n{p.stderr[-1500:]}")

    # 3. auto by stems
    for stems, want in (("vocals", "rof_two"), ("drums", "rof_four")):
        out = os.path.join(tmp, "auto-" + stems)
        p = run(["separate", clip, "-o", out, "-q", "--device", "cpu", "--stems", stems])
        ok = p.returncode == 0
        m = json.load(open(os.path.join(out, "clip", "manifest.json"))) if ok else {}
        check(ok and m["model"]["name"] == want and m["model"]["requested"] == "auto",
              f"auto with --stems {stems} runs {want}: {p.stderr} {m.get('model')}")
    # each stem from its best model: vocals from rof_two (12.0 dB), drums from rof_four (11.5),
    # other the rest; each stem the same bytes as its model alone gives it
    out = os.path.join(tmp, "auto-parts")
    p = run(["separate", clip, "-o", out, "-q", "--device", "cpu", "--stems",
             "vocals,drums,other"])
    ok = p.returncode == 0
    m = json.load(open(os.path.join(out, "clip", "manifest.json"))) if ok else {}
    by = {st["stem"]: st["model"] for st in m.get("stems", [])}
    check(ok and by == {"vocals": "rof_two", "drums": "rof_four", "other": "residual"} and
          m["model"]["requested"] == "auto" and m["model"]["name"] == "rof_two+rof_four",
          f"auto with --stems vocals,drums,other takes each stem from its best model: "
          f"{p.stderr} {m.get('model')} {by}")
    if ok:
        for stem, model in (("vocals", "rof_two"), ("drums", "rof_four")):
            alone = os.path.join(tmp, "alone-" + stem)
            q = run(["separate", clip, "-o", alone, "-q", "--device", "cpu", "--model", model,
                     "--stems", stem])
            same = q.returncode == 0 and (wavio.read_wav(os.path.join(alone, "clip", stem + ".wav"))[0]
                                          == wavio.read_wav(os.path.join(out, "clip", stem + ".wav"))[0])
            check(same, f"the {stem} stem is what {model} alone makes: {q.stderr}")
        x = wavio.read_wav(clip)[0]
        parts = [wavio.read_wav(os.path.join(out, "clip", n + ".wav"))[0]
                 for n in ("vocals", "drums", "other")]
        err = max(abs(a - b - c - d) for a, b, c, d in zip(x, *parts))
        check(err < 1e-5, f"vocals + drums + other = the input (max difference {err:.1e})")
    p = run(["separate", clip, "-o", os.path.join(tmp, "refused"), "-q", "--device", "cpu",
             "--model", "rof_two", "--stems", "vocals,drums"])
    check(p.returncode != 0 and "vocals, other" in p.stderr,
          f"--stems vocals,drums of a 2-stem model refused with what it makes: {p.stderr}")

    # 4. six stems
    six = ["bass", "drums", "other", "vocals", "guitar", "piano"]
    p = run(["models", "install", "rof_six"])
    check(p.returncode == 0, f"install the 6-stem RoFormer: {p.returncode}\n{p.stdout}{p.stderr}")
    p = run(["models"])
    block = p.stdout.split("rof_six: ", 1)[-1].split("\n", 6)
    listed = "\n".join(block[:6])
    check(p.stdout.count("rof_six: installed") == 1 and
          "stems: vocals, drums, bass, other, guitar, piano;" in listed and
          "bs_roformer, 6 stems (bass,drums,other,vocals,guitar,piano)" in listed,
          f"models lists rof_six installed with its six stems, the file's in its order:\n{listed}")
    out = os.path.join(tmp, "sep-six")
    p = run(["separate", clip, "-o", out, "-q", "--device", "cpu", "--model", "rof_six"])
    check(p.returncode == 0, f"separate with rof_six: {p.stderr}")
    full = {}
    if p.returncode == 0:
        d = os.path.join(out, "clip")
        wavs = sorted(f for f in os.listdir(d) if f.endswith(".wav"))
        check(wavs == sorted(n + ".wav" for n in six), f"six stem files: {wavs}")
        x = wavio.read_wav(clip)[0]
        full = {n: wavio.read_wav(os.path.join(d, n + ".wav"))[0] for n in six
                if os.path.exists(os.path.join(d, n + ".wav"))}
        if len(full) == 6:
            peaks = {n: max(abs(v) for v in full[n]) for n in six}
            check(all(len(full[n]) == len(x) for n in six) and min(peaks.values()) > 1e-4 and
                  full["guitar"] != full["piano"],
                  f"each stem the input's length, none silent, guitar not piano: {peaks}")
            err = max(abs(a - sum(t)) for a, t in zip(x, zip(*full.values())))
            check(err < 1e-5, f"the six stems add back to the input (max difference {err:.1e})")
        m = json.load(open(os.path.join(d, "manifest.json")))
        names = sorted(st["stem"] for st in m.get("stems", []))
        check(m["model"]["name"] == "rof_six" and names == sorted(six) and
              all(os.path.basename(st["path"]) == st["stem"] + ".wav" for st in m["stems"]),
              f"the manifest lists six stems of rof_six: {m['model']} {names}")
    out = os.path.join(tmp, "sep-six-gp")
    p = run(["separate", clip, "-o", out, "-q", "--device", "cpu", "--model", "rof_six",
             "--stems", "guitar,piano"])
    ok = p.returncode == 0
    d = os.path.join(out, "clip")
    wavs = sorted(f for f in os.listdir(d) if f.endswith(".wav")) if ok else []
    m = json.load(open(os.path.join(d, "manifest.json"))) if ok else {}
    check(ok and wavs == ["guitar.wav", "piano.wav"] and
          sorted(st["stem"] for st in m["stems"]) == ["guitar", "piano"],
          f"--stems guitar,piano writes those two and lists them: {p.stderr} {wavs}")
    if ok and full:
        same = all(wavio.read_wav(os.path.join(d, n + ".wav"))[0] == full[n]
                   for n in ("guitar", "piano"))
        check(same, "guitar and piano as the full run made them")
    out = os.path.join(tmp, "auto-guitar")
    p = run(["separate", clip, "-o", out, "-q", "--device", "cpu", "--stems", "guitar"])
    ok = p.returncode == 0
    m = json.load(open(os.path.join(out, "clip", "manifest.json"))) if ok else {}
    check(ok and m["model"]["name"] == "rof_six",
          f"auto with --stems guitar runs rof_six: {p.stderr} {m.get('model')}")
    p = run(["separate", clip, "-o", os.path.join(tmp, "refused-four"), "-q", "--device", "cpu",
             "--model", "rof_four", "--stems", "guitar"])
    check(p.returncode != 0 and "vocals, drums, bass, other" in p.stderr,
          f"--stems guitar of the 4-stem model refused with what it makes: {p.stderr}")
    if TEST_PLUGIN:
        p = subprocess.run([TEST_PLUGIN, "roformerfile",
                            os.path.join(models, "rof_six.safetensors"), ",".join(six)],
                           capture_output=True, text=True, timeout=300,
                           env=dict(os.environ, SB_TEST_TMP=os.path.join(tmp, "plugin-six")))
        check(p.returncode == 0,
              f"the plugin separates a take into its six stems:\n{p.stderr[-1500:]}")

    # 5. refusals: one clear line, nothing installed
    for name, needle in (("rof_badsize", "bytes where the catalogue expects"),
                         ("rof_mismatch", "tensor '"), ("rof_damaged", "model.dim_hyper")):
        p = run(["models", "install", name])
        errs = [ln for ln in p.stderr.splitlines() if "error" in ln]
        check(p.returncode != 0 and len(errs) == 1 and needle in errs[0] and
              not os.path.exists(os.path.join(models, name + ".safetensors")),
              f"{name}: refused in one line ({needle}), nothing installed: {p.stderr}")
    left = [f for f in os.listdir(models) if f not in ("rof_two.safetensors",
                                                        "rof_four.safetensors",
                                                        "rof_six.safetensors")]
    check(not left, f"nothing else in the model folder: {left}")


if __name__ == "__main__":
    with tempfile.TemporaryDirectory() as tmp:
        main(tmp)
    print(f"{failures} failure(s)")
    sys.exit(1 if failures else 0)
