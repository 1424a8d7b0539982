#!/usr/bin/env python3
"""'auto' by published figures, each stem on one test set, with a catalogue of stand-in models
(the tiny fixtures of tests/fixtures, converted and installed under the names of the models they
stand for; the catalogue gives them the figures their models publish):

  sw       BS-RoFormer, six stems (bs-tiny-6): the SW model's Multisong figures
  scnet    SCNet, four stems (scnet-tiny): SCNet XL IHF's Multisong and MUSDB18-HQ figures
  voc      BS-RoFormer, vocals and the rest (bs-tiny): a vocals model below SW on Multisong
           (as every public one is); in a second catalogue 0.6 dB above it
  bassmu   MDX23C, vocals and the rest renamed bass and other (mdx23c-tiny): a bass figure on
           MUSDB18-HQ only, far above every Multisong figure (a set that must not compare)
  kit      SCNet (scnet-tiny) with its sources named kick, snare, toms and cymbals: DrumSep
           figures
  kit2     the same with lower DrumSep figures

  1. `models` names the set of each figure, and --json prints the figures as published
  2. auto without --stems: sw (the best mean over the four stems, each on Multisong); for six
     stems sw alone
  3. --stems bass: sw (Multisong), not bassmu's higher MUSDB18-HQ figure
  4. --stems vocals,kick: vocals from sw, kick from kit (DrumSep, the only set with kick); the
     kick stem written and named in the manifest
  5. the second catalogue, voc above SW for vocals: --stems vocals,drums takes vocals from voc
     and drums from sw, the manifest naming each stem's model

usage: test_auto_figures.py STEMBRIDGE STEMBRIDGE_CONVERT FIXTURES_DIR
"""
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [os.path.join(HERE, "..", "cli")]
import wavio  # noqa: E402

CLI, CONVERT, FIX = (os.path.abspath(a) for a in sys.argv[1:4])
failures = 0


def check(cond, msg):
    global failures
    print(("ok    " if cond else "FAIL  ") + msg.splitlines()[0][:200])
    if not cond:
        failures += 1
        print("      " + msg[:2000].replace("\n", "\n      "))


def run(args, exe=None):
    return subprocess.run([exe or CLI] + args, capture_output=True, text=True, timeout=300)


def figures(set_, **sdr):
    return {"set": set_, "source": "stand-in", "sdr": sdr}


STAND_INS = {
    # name: (fixture, family, stems, figures, yaml edit)
    "sw": ("roformer/bs-tiny-6", "bs_roformer",
           ["vocals", "drums", "bass", "other", "guitar", "piano"],
           [figures("multisong", vocals="11.27", drums="14.05", bass="14.57", other="8.66",
                    guitar="9.00", piano="7.79")], None),
    "scnet": ("scnet/scnet-tiny", "scnet", ["vocals", "drums", "bass", "other"],
              [figures("multisong", vocals="9.68", drums="11.58", bass="11.94", other="6.48"),
               figures("musdb18hq", vocals="11.42", drums="11.81", bass="9.23", other="7.88")],
              None),
    "voc": ("roformer/bs-tiny", "bs_roformer", ["vocals", "other"],
            [figures("multisong", vocals="10.98")], None),
    "bassmu": ("mdx23c/mdx23c-tiny", "mdx23c", ["bass", "other"],
               [figures("musdb18hq", bass="20.00")], ("  - vocals\n  - other", "  - bass\n  - other")),
    "kit": ("scnet/scnet-tiny", "scnet", ["kick", "snare", "toms", "cymbals"],
            [figures("drumsep", kick="16.66", snare="11.53", toms="12.33", cymbals="6.36")],
            "kit"),
    "kit2": ("scnet/scnet-tiny", "scnet", ["kick", "snare", "toms", "cymbals"],
             [figures("drumsep", kick="14.54", snare="9.79", toms="10.63", cymbals="6.08")],
             "kit"),
}


def config(src, edit, dst):
    text = open(src).read()
    if edit == "kit":  # SCNet's four sources renamed a drum kit's pieces, in both lists
        for old, new in (("drums", "kick"), ("bass", "snare"), ("other", "toms"),
                         ("vocals", "cymbals")):
            text = text.replace("- " + old + "\n", "- " + new + "\n")
    elif edit:
        text = text.replace(edit[0], edit[1])
    open(dst, "w").write(text)


def main(tmp):
    home = os.path.join(tmp, "home")
    models = os.path.join(home, "data", "stembridge", "models")
    os.makedirs(models)
    cat = {"catalog_version": 1, "base_url": "http://127.0.0.1:9/", "models": []}
    for name, (fix, family, stems, figs, edit) in STAND_INS.items():
        yaml = os.path.join(tmp, name + ".yaml")
        config(os.path.join(FIX, fix + ".yaml"), edit, yaml)
        c = run([os.path.join(FIX, fix + ".ckpt"), "--config", yaml, "-o",
                 os.path.join(models, name + ".safetensors"), "--name", name, "-q"], exe=CONVERT)
        check(c.returncode == 0, f"the stand-in {name} converts: {c.stderr}")
        cat["models"].append({
            "name": name, "family": family, "stems": stems, "figures": figs, "files": [
                {"path": name + ".ckpt", "bytes": 1, "unverified": True},
                {"path": name + ".yaml", "role": "config", "unverified": True}]})
    catalog = os.path.join(tmp, "catalog.json")
    json.dump(cat, open(catalog, "w"))
    os.environ.update({"STEMBRIDGE_CATALOG": catalog, "HOME": home,
                       "XDG_DATA_HOME": os.path.join(home, "data"),
                       "XDG_DATA_DIRS": os.path.join(home, "none")})

    # 1. the set beside each figure, the figures as published
    p = run(["models"])
    check("SDR on MVSEP Multisong: vocals 11.27, drums 14.05, bass 14.57, other 8.66, "
          "guitar 9.00, piano 7.79 dB" in p.stdout and
          "SDR on MUSDB18-HQ test: bass 20.00 dB" in p.stdout and
          "SDR on drumsep: kick 16.66" in p.stdout,
          f"models shows each figure with its test set:\n{p.stdout}")
    p = run(["models", "--json"])
    j = json.loads(p.stdout) if p.returncode == 0 else {}
    sw = next((m for m in j.get("models", []) if m["name"] == "sw"), {})
    check('"vocals": 11.27' in p.stdout and "11.27000" not in p.stdout and
          sw.get("figures", [{}])[0].get("set") == "multisong" and
          sw["figures"][0]["sdr"]["bass"] == 14.57,
          f"models --json: the set beside the figures, 11.27 printed as 11.27: {sw}")

    # 2. auto: sw for the four stems and for six
    check(j.get("auto") == "sw", f"auto is sw (the best Multisong mean of the four stems): "
          f"{j.get('auto')}")
    clip = os.path.join(tmp, "clip.wav")
    wavio.write_wav(clip, wavio.test_signal(30000, 2, 44100), 2, 44100, bits=32, fmt="float")

    def separate(stems, tag):
        out = os.path.join(tmp, tag)
        args = ["separate", clip, "-o", out, "-q", "--device", "cpu"]
        p = run(args + (["--stems", stems] if stems else []))
        m = json.load(open(os.path.join(out, "clip", "manifest.json"))) if p.returncode == 0 \
            else {}
        return p, m, out

    p, m, _ = separate("vocals,drums,bass,other,guitar,piano", "six")
    check(p.returncode == 0 and m["model"]["name"] == "sw" and m["model"]["requested"] == "auto",
          f"auto for six stems runs sw alone: {p.stderr} {m.get('model')}")

    # 3. figures of another set do not compare
    p, m, _ = separate("bass", "bass")
    check(p.returncode == 0 and m["model"]["name"] == "sw",
          f"--stems bass: sw's Multisong 14.57, not bassmu's MUSDB18-HQ 20.00: {p.stderr} "
          f"{m.get('model')}")

    # 4. a stem beyond the six, from the only set that has it
    p, m, out = separate("vocals,kick", "vk")
    by = {st["stem"]: st["model"] for st in m.get("stems", [])}
    kick = os.path.join(out, "clip", "kick.wav")
    check(p.returncode == 0 and by == {"vocals": "sw", "kick": "kit"} and os.path.exists(kick)
          and len(wavio.read_wav(kick)[0]) == len(wavio.read_wav(clip)[0]),
          f"--stems vocals,kick: vocals from sw, kick from kit (DrumSep 16.66 over 14.54), "
          f"written and named: {p.stderr} {by}")

    # 5. each stem from its best model on its set: voc's vocals above sw's
    for e in cat["models"]:
        if e["name"] == "voc":
            e["figures"] = [figures("multisong", vocals="11.89")]
    json.dump(cat, open(catalog, "w"))
    p, m, _ = separate("vocals,drums", "vd")
    by = {st["stem"]: st["model"] for st in m.get("stems", [])}
    check(p.returncode == 0 and by == {"vocals": "voc", "drums": "sw"} and
          m["model"]["name"] == "voc+sw",
          f"--stems vocals,drums: vocals from voc (11.89), drums from sw (14.05): {p.stderr} "
          f"{by}")


if __name__ == "__main__":
    with tempfile.TemporaryDirectory() as tmp:
        main(tmp)
    print(f"{failures} failure(s)")
    sys.exit(1 if failures else 0)
