#!/usr/bin/env python3
"""The stembridge CLI as a user runs it: a file in, four stems out at the input's own rate,
length and channel count, adding back to the input; devices listed by name; every bad input
refused with one clear line on stderr, a non-zero exit, and nothing half-written left behind.

usage: test_cli.py STEMBRIDGE GROUP [GOLDEN_DIR]
GROUP: separate, formats, bad, devices, fallback, demucs, share, damaged, signals, commit,
       repeat, batch, progress
"""
import json
import math
import os
import resource
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import wavio  # noqa: E402

EXE = os.path.abspath(sys.argv[1])
GROUP = sys.argv[2]
# the compact golden models in the repository (tests/fixtures/htdemucs)
FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fixtures", "htdemucs")
SOX = shutil.which("sox")
failures = []
STEMS = ["vocals", "drums", "bass", "other"]


def check(cond, msg):
    if not cond:
        failures.append(msg)
        print("FAIL: " + msg, file=sys.stderr)
    return cond


def run(args, env=None, preexec=None):
    e = dict(os.environ)
    e.update(env or {})
    p = subprocess.run([EXE] + args, capture_output=True, text=True, env=e, preexec_fn=preexec,
                       timeout=600)
    return p


def files_under(d):
    out = []
    for root, _, names in os.walk(d):
        out += [os.path.join(root, n) for n in names]
    return sorted(out)


def sum_check(inp, stem_paths, tol=1e-4):
    x, ch, rate, _, _ = wavio.read_wav(inp)
    total = [0.0] * len(x)
    for p in stem_paths:
        s, sch, srate, bits, is_float = wavio.read_wav(p)
        check(sch == ch and srate == rate and len(s) == len(x),
              f"{p}: {len(s)//max(sch,1)} frames x {sch} at {srate} Hz; input "
              f"{len(x)//ch} x {ch} at {rate}")
        if len(s) != len(x):
            return None
        for i, v in enumerate(s):
            total[i] += v
    err = math.sqrt(sum((a - b) ** 2 for a, b in zip(total, x)))
    ref = math.sqrt(sum(a * a for a in x))
    return err / ref


def group_separate(tmp):
    rate, ch, frames = 48000, 2, 48000 * 3 + 123
    inp = os.path.join(tmp, "song.wav")
    wavio.write_wav(inp, wavio.test_signal(frames, ch, rate), ch, rate, bits=24)
    out = os.path.join(tmp, "out")
    p = run(["separate", inp, "-o", out, "--device", "cpu", "--timeline-start", "123456"])
    check(p.returncode == 0, f"separate exited {p.returncode}: {p.stderr}")
    paths = [os.path.join(out, "song", s + ".wav") for s in STEMS]
    for s in paths:
        check(os.path.exists(s), f"no stem {s}")
    if failures:
        return
    rel = sum_check(inp, paths)
    check(rel is not None and rel < 1e-4, f"stems add back to the input with relative error {rel}")
    for s in paths:
        _, _, _, bits, is_float = wavio.read_wav(s)
        check(is_float and bits == 32, f"{s}: default stems are 32-bit float")
        check(wavio.time_reference(s) == 123456, f"{s}: BWF time reference "
              f"{wavio.time_reference(s)}, expected the region start 123456")
    m = json.load(open(os.path.join(out, "song", "manifest.json")))
    check(m["status"] == "ok", "manifest status")
    check(m["input"]["frames"] == frames and m["input"]["rate"] == rate and
          m["input"]["channels"] == ch, f"manifest input {m['input']}")
    check(m["timeline_start"] == 123456, "manifest timeline_start")
    check(m["model"]["name"] == "builtin", "manifest model")
    check(m["device"]["requested"] == "cpu" and m["device"]["used"] == "cpu" and
          not m["device"]["fell_back"], f"manifest device {m['device']}")
    check([s["stem"] for s in m["stems"]] == STEMS, "manifest stems in order")
    for s in m["stems"]:
        check(os.path.isabs(s["path"]) and os.path.exists(s["path"]), f"stem path {s['path']}")
        check(0 < s["rms"] <= s["peak"] < 4, f"stem {s['stem']} peak {s['peak']} rms {s['rms']}")
    check(m["timings"]["total_s"] > 0, "timings")
    check(m["input"]["silent"] is False and isinstance(m["input"]["peak_dbfs"], float) and
          -20 < m["input"]["peak_dbfs"] <= 0, f"manifest input peak {m['input']}")
    txt = open(os.path.join(out, "song", "stems.txt")).read().splitlines()
    check(txt[0] == "timeline_start 123456" and len(txt) == 5, f"stems.txt: {txt}")
    # a silent input (a DAW track fed silence, a muted bounce): separated, but the manifest and
    # the log say its stems are silent, so nobody takes them for a separation
    for name, level in (("zeros", 0.0), ("hiss", 2e-5)):
        quiet = os.path.join(tmp, name + ".wav")
        wavio.write_wav(quiet, [level * ((i % 7) - 3) / 3 for i in range(48000 * ch)], ch, rate,
                        fmt="float")
        outq = os.path.join(tmp, "out-" + name)
        p = run(["separate", quiet, "-o", outq, "--device", "cpu"])
        check(p.returncode == 0 and "silent" in p.stderr,
              f"{name}: exit {p.returncode}, stderr {p.stderr!r}")
        mq = json.load(open(os.path.join(outq, name, "manifest.json")))
        check(mq["input"]["silent"] is True, f"{name}: manifest input {mq['input']}")
        check(any("silent" in e for e in mq["events"]), f"{name}: events {mq['events']}")
    check(not [f for f in files_under(out) if ".part" in f], "temporary files left behind")
    # a chosen subset, 16-bit, a template with folders
    out2 = os.path.join(tmp, "out2")
    p = run(["separate", inp, "-o", out2, "--stems", "vocals,bass", "--bits", "16",
             "--template", "{model}/{track}-{stem}.{ext}", "-q"])
    check(p.returncode == 0 and p.stderr == "", f"subset run: {p.returncode} {p.stderr}")
    got = sorted(os.path.relpath(f, out2) for f in files_under(out2))
    check(got == ["builtin/song-bass.wav", "builtin/song-vocals.wav", "song/manifest.json",
                  "song/stems.txt"], f"subset files {got}")
    if os.path.exists(os.path.join(out2, "builtin/song-bass.wav")):
        _, _, _, bits, is_float = wavio.read_wav(os.path.join(out2, "builtin/song-bass.wav"))
        check(bits == 16 and not is_float, "--bits 16 writes 16-bit PCM")


def group_formats(tmp):
    """Every format libsndfile reads; stems at the input's rate, length and channels."""
    if not check(SOX is not None, "sox is needed for this test"):
        return
    cases = [("mono8k.wav", ["-r", "8000", "-c", "1", "-b", "16"]),
             ("six96k.wav", ["-r", "96000", "-c", "6", "-b", "24"]),
             ("s192.flac", ["-r", "192000", "-c", "2", "-b", "24"]),
             ("x.aiff", ["-r", "44100", "-c", "2", "-b", "16"]),
             ("f32.wav", ["-r", "22050", "-c", "2", "-e", "floating-point", "-b", "32"]),
             ("u8.wav", ["-r", "11025", "-c", "1", "-b", "8"]),
             ("v.ogg", ["-r", "44100", "-c", "2"])]
    for name, opts in cases:
        inp = os.path.join(tmp, name)
        subprocess.run([SOX, "-n"] + opts + [inp, "synth", "1.3", "sine", "300", "sine", "60",
                                             "vol", "0.5"], check=True, capture_output=True)
        out = os.path.join(tmp, "out-" + name.replace(".", "_"))
        p = run(["separate", inp, "-o", out, "--device", "cpu", "-q"])
        check(p.returncode == 0, f"{name}: exit {p.returncode}: {p.stderr}")
        info = subprocess.run(["soxi", "-s", inp], capture_output=True, text=True).stdout.strip()
        rate = subprocess.run(["soxi", "-r", inp], capture_output=True, text=True).stdout.strip()
        chans = subprocess.run(["soxi", "-c", inp], capture_output=True, text=True).stdout.strip()
        track = os.path.splitext(name)[0]
        for s in STEMS:
            sp = os.path.join(out, track, s + ".wav")
            if not check(os.path.exists(sp), f"{name}: no {s} stem"):
                continue
            x, c, r, _, _ = wavio.read_wav(sp)
            check(str(r) == rate and str(c) == chans and str(len(x) // c) == info,
                  f"{name}: {s} stem {len(x)//c} frames x {c} at {r}, input {info} x {chans} "
                  f"at {rate}")
    # FLAC out keeps the rate
    inp = os.path.join(tmp, "s192.flac")
    out = os.path.join(tmp, "flacout")
    p = run(["separate", inp, "-o", out, "--format", "flac", "-q"])
    check(p.returncode == 0, f"flac out: {p.stderr}")
    fl = os.path.join(out, "s192", "vocals.flac")
    if check(os.path.exists(fl), "no FLAC stem"):
        r = subprocess.run(["soxi", "-r", fl], capture_output=True, text=True).stdout.strip()
        b = subprocess.run(["soxi", "-b", fl], capture_output=True, text=True).stdout.strip()
        check(r == "192000" and b == "24", f"FLAC stem at {r} Hz {b}-bit")


def expect_refusal(args, what, out, env=None, preexec=None, needle=None):
    before = files_under(out) if os.path.isdir(out) else []
    p = run(args, env=env, preexec=preexec)
    lines = [l for l in p.stderr.splitlines() if l.strip()]
    errors = [l for l in lines if "error" in l]
    check(p.returncode != 0, f"{what}: exit status 0")
    check(len(errors) == 1, f"{what}: {len(errors)} error lines on stderr: {p.stderr!r}")
    if needle and errors:
        check(needle.lower() in errors[0].lower(), f"{what}: '{needle}' not in {errors[0]!r}")
    after = files_under(out) if os.path.isdir(out) else []
    check(after == before, f"{what}: left files behind: {sorted(set(after) - set(before))}")
    return p


def group_bad(tmp):
    out = os.path.join(tmp, "out")
    os.makedirs(out)
    rate = 44100
    good = os.path.join(tmp, "good.wav")
    wavio.write_wav(good, wavio.test_signal(rate * 2, 2, rate), 2, rate)
    expect_refusal(["separate", os.path.join(tmp, "missing.wav"), "-o", out], "missing file",
                   out, needle="missing.wav")
    txt = os.path.join(tmp, "notes.wav")
    open(txt, "w").write("these are my notes, not audio\n" * 50)
    expect_refusal(["separate", txt, "-o", out], "non-audio file", out, needle="not an audio")
    trunc = os.path.join(tmp, "trunc.wav")
    raw = open(good, "rb").read()
    open(trunc, "wb").write(raw[: len(raw) // 2])
    expect_refusal(["separate", trunc, "-o", out], "truncated WAV", out, needle="truncated")
    empty = os.path.join(tmp, "empty.wav")
    wavio.write_wav(empty, [], 2, rate)
    expect_refusal(["separate", empty, "-o", out], "zero-length audio", out, needle="no audio")
    for bad, name in ((float("nan"), "nan"), (float("inf"), "inf")):
        x = wavio.test_signal(rate * 2, 2, rate)
        x[2 * 70000 + 1] = bad
        f = os.path.join(tmp, name + ".wav")
        wavio.write_wav(f, x, 2, rate, fmt="float")
        expect_refusal(["separate", f, "-o", out], f"{name} samples", out,
                       needle="NaN" if name == "nan" else "infinite")
    expect_refusal(["separate", good, "-o", "/dev/null/stems"], "unwritable output folder",
                   out, needle="/dev/null/stems")
    # a full disk: a file size limit makes every write past 200 kB fail with EFBIG

    def small_limit():
        resource.setrlimit(resource.RLIMIT_FSIZE, (200000, 200000))
    full = os.path.join(tmp, "full")
    os.makedirs(full)
    expect_refusal(["separate", good, "-o", full], "full disk (RLIMIT_FSIZE)", full,
                   preexec=small_limit, needle="space")
    expect_refusal(["separate", good, "-o", out, "--device", "gpu0"], "unknown device name", out,
                   needle="gpu0")
    expect_refusal(["separate", good, "-o", out, "--model", "nosuchmodel"], "unknown model", out,
                   needle="nosuchmodel")
    # never overwrite a stem the user has
    keep = os.path.join(tmp, "keep")
    os.makedirs(os.path.join(keep, "good"))
    mine = os.path.join(keep, "good", "drums.wav")
    open(mine, "w").write("my own drums")
    p = expect_refusal(["separate", good, "-o", keep], "existing stem", keep, needle="drums.wav")
    check("--overwrite" in p.stderr, f"the refusal names the option --overwrite: {p.stderr!r}")
    check(open(mine).read() == "my own drums", "an existing stem was overwritten")
    # a folder given as input is named as one; no progress line comes before an error
    p = expect_refusal(["separate", tmp, "-o", out], "a folder as input", out, needle="folder")
    check("progress" not in p.stderr, f"a progress line before the error: {p.stderr!r}")
    p = expect_refusal(["separate", trunc, "-o", out], "truncated WAV, progress", out)
    check("progress" not in p.stderr, f"a progress line before the error: {p.stderr!r}")
    p = run(["separate", good, "-o", keep, "--overwrite", "-q"])
    check(p.returncode == 0 and open(mine, "rb").read(4) == b"RIFF", "--overwrite replaces")
    # one bad file among good ones: the good ones still separate, the exit says failure
    out3 = os.path.join(tmp, "out3")
    p = run(["separate", good, trunc, "-o", out3, "-q"])
    check(p.returncode == 1, f"mixed good and bad inputs: exit {p.returncode}")
    check(os.path.exists(os.path.join(out3, "good", "other.wav")), "good file not separated")
    check(not os.path.exists(os.path.join(out3, "trunc")), "bad file left a folder")


def group_devices(tmp):
    p = run(["devices"], env={"POCL_DEVICES": "pthread pthread"})
    check(p.returncode == 0, f"devices exit {p.returncode}")
    lines = p.stdout.splitlines()
    check(lines and lines[0].startswith("Available devices (3):"), f"devices header: {lines[:1]}")
    check(any(l.startswith("  cpu: CPU (") for l in lines), "no cpu line")
    check(any(l.startswith("  opencl:0: ") and "Portable Computing Language" in l and "GiB" in l
              for l in lines), "opencl:0 line not by name with platform and memory")
    check(any(l.startswith("  opencl:1: ") for l in lines), "no opencl:1 line")
    p2 = run(["--list-devices"], env={"POCL_DEVICES": "pthread pthread"})
    check(p2.stdout == p.stdout, "--list-devices differs from devices")
    j = run(["devices", "--json"], env={"POCL_DEVICES": "pthread pthread"})
    d = json.loads(j.stdout)
    check([x["id"] for x in d] == ["cpu", "opencl:0", "opencl:1"], f"json ids {[x['id'] for x in d]}")
    check(d[1]["key"] != d[2]["key"] and d[1]["key"].endswith("|0") and d[2]["key"].endswith("|1"),
          "identical devices get distinct stable keys")
    check(d[1]["type"] == "OpenCL CPU" and d[1]["global_mem"] > 0 and d[1]["compute_units"] > 0,
          "device details")
    check([x["auto"] for x in d] == [True, False, False],
          "auto must prefer the native CPU over an OpenCL CPU driver")
    # the ICD's numbering, which CLBlast's tuners take (tools/clblast_tune.sh)
    check(d[1]["platform_index"] == d[2]["platform_index"] >= 0 and
          [d[1]["device_index"], d[2]["device_index"]] == [0, 1],
          f"OpenCL indices {[(x.get('platform_index'), x.get('device_index')) for x in d]}")
    check("platform_index" not in d[0], "the native CPU has no OpenCL indices")
    tune = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools",
                        "clblast_tune.sh")
    env = dict(os.environ, POCL_DEVICES="pthread pthread", STEMBRIDGE=EXE,
               XDG_DATA_HOME=os.path.join(tmp, "data"))
    t = subprocess.run(["sh", tune, "opencl:1", "--dry-run"], env=env, capture_output=True,
                       text=True)
    want = f"-platform {d[2]['platform_index']} -device 1 -precision 32"
    check(t.returncode == 0 and f"clblast_tuner_xgemm {want}" in t.stdout and
          os.path.join(tmp, "data", "stembridge", "clblast") in t.stdout,
          f"clblast_tune.sh --dry-run: {t.returncode} {t.stdout} {t.stderr}")
    t = subprocess.run(["sh", tune, "opencl:9", "--dry-run"], env=env, capture_output=True,
                       text=True)
    check(t.returncode != 0 and "no OpenCL device 'opencl:9'" in t.stderr,
          f"clblast_tune.sh on a missing device: {t.returncode} {t.stderr}")
    # a budget cuts a tuner off and keeps what it finished; so does stopping the script. Stand-in
    # tuners: xgemm writes its first phase's file and hangs, copy_fast writes one and exits.
    fake = os.path.join(tmp, "tuners")
    os.makedirs(fake, exist_ok=True)
    for name, body in (("clblast_tuner_xgemm", 'echo \'{"kernel_family": "xgemm_1"}\' > '
                        'clblast_xgemm_1_32.json; sleep 600'),
                       ("clblast_tuner_copy_fast", 'echo \'{"kernel_family": "copy"}\' > '
                        'clblast_copy_32.json')):
        with open(os.path.join(fake, name), "w") as f:
            f.write("#!/bin/sh\n" + body + "\n")
        os.chmod(os.path.join(fake, name), 0o755)
    fenv = dict(env, PATH=fake + os.pathsep + os.environ["PATH"])
    kept = os.path.join(tmp, "tuned")
    t0 = time.time()
    t = subprocess.run(["sh", tune, "opencl:1", "--only", "xgemm,copy_fast", "--budget", "4",
                        "--out", kept], env=fenv, capture_output=True, text=True, timeout=120)
    files = sorted(os.listdir(kept)) if os.path.isdir(kept) else []
    check(t.returncode == 0 and files == ["clblast_copy_32.json", "clblast_xgemm_1_32.json"]
          and "stopped early" in t.stderr and time.time() - t0 < 60,
          f"clblast_tune.sh --budget: {t.returncode} {files} {time.time() - t0:.1f} s {t.stderr}")
    kept2 = os.path.join(tmp, "tuned2")
    proc = subprocess.Popen(["sh", tune, "opencl:1", "--only", "xgemm", "--out", kept2],
                            env=fenv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 60
    while time.time() < deadline and not os.path.exists(
            os.path.join(kept2, "clblast_xgemm_1_32.json")):
        time.sleep(0.5)
    proc.terminate()
    proc.communicate(timeout=60)
    files = sorted(os.listdir(kept2)) if os.path.isdir(kept2) else []
    check(files == ["clblast_xgemm_1_32.json"],
          f"clblast_tune.sh stopped mid-tuner keeps the finished phase: {files}")
    p3 = run(["devices"], env={"OCL_ICD_VENDORS": os.path.join(tmp, "none")})
    check(p3.returncode == 0 and "Available devices (1):" in p3.stdout,
          f"no OpenCL driver: {p3.stdout} {p3.stderr}")


def group_fallback(tmp):
    rate = 44100
    inp = os.path.join(tmp, "a.wav")
    wavio.write_wav(inp, wavio.test_signal(rate, 2, rate), 2, rate)
    out = os.path.join(tmp, "out")
    p = run(["separate", inp, "-o", out, "--device", "opencl:5"],
            env={"POCL_DEVICES": "pthread pthread"})
    check(p.returncode == 0, f"missing device must fall back, exit {p.returncode}: {p.stderr}")
    check("opencl:5" in p.stderr and "warning" in p.stderr,
          f"the fallback must be named on stderr: {p.stderr!r}")
    m = json.load(open(os.path.join(out, "a", "manifest.json")))
    check(m["device"]["requested"] == "opencl:5" and m["device"]["used"] == "cpu" and
          m["device"]["fell_back"] and "opencl:5" in m["device"]["reason"],
          f"manifest device {m['device']}")


def group_demucs(tmp):
    """HTDemucs through the CLI at a rate it does not run at: stems at the input's own rate and
    exact length, seeded shifts repeat exactly and change the result."""
    golden = FIXTURES
    if not check(os.path.exists(os.path.join(golden, "htdemucs-mini.safetensors")),
                 f"no fixture model in {golden}"):
        return
    rate, frames = 48000, 48000 * 3 + 11
    inp = os.path.join(tmp, "take.wav")
    wavio.write_wav(inp, wavio.test_signal(frames, 2, rate), 2, rate, bits=24)
    outs = []
    for name, extra in (("a", []), ("b", ["--shifts", "2"]), ("c", ["--shifts", "2"]),
                        ("d", ["--model-other"])):
        out = os.path.join(tmp, name)
        p = run(["separate", inp, "-o", out, "--model", "htdemucs-mini", "--model-path", golden,
                 "--device", "cpu", "-q"] + extra)
        check(p.returncode == 0, f"htdemucs-mini {extra}: exit {p.returncode}: {p.stderr}")
        outs.append(out)
    stems = {}
    for out in outs:
        stems[out] = {}
        for s in STEMS:
            path = os.path.join(out, "take", s + ".wav")
            if not check(os.path.exists(path), f"no {path}"):
                return
            x, c, r, _, _ = wavio.read_wav(path)
            check(r == rate and c == 2 and len(x) // 2 == frames,
                  f"{path}: {len(x)//2} frames x {c} at {r} Hz, input {frames} x 2 at {rate}")
            check(all(math.isfinite(v) for v in x), f"{path}: non-finite samples")
            stems[out][s] = x
    m = json.load(open(os.path.join(outs[0], "take", "manifest.json")))
    check(m["model"]["name"] == "htdemucs-mini" and m["input"]["rate"] == rate,
          f"manifest model {m['model']} rate {m['input']['rate']}")
    check(any("44100" in e for e in m["events"]), f"the rate conversion is not recorded: {m['events']}")
    mb = json.load(open(os.path.join(outs[1], "take", "manifest.json")))
    check(mb["model"]["shifts"] == 2, f"manifest shifts {mb['model']}")
    check(stems[outs[1]]["vocals"] == stems[outs[2]]["vocals"], "seeded shifts do not repeat")
    check(stems[outs[0]]["vocals"] != stems[outs[1]]["vocals"], "--shifts changed nothing")
    # the four stems add back to the input by default; the model's own "other" does not
    x, _, _, _, _ = wavio.read_wav(inp)
    ref = math.sqrt(sum(v * v for v in x))

    def sum_error(out):
        tot = [0.0] * len(x)
        for s in STEMS:
            for i, v in enumerate(stems[out][s]):
                tot[i] += v
        return math.sqrt(sum((a - b) ** 2 for a, b in zip(tot, x))) / ref
    e_default, e_model = sum_error(outs[0]), sum_error(outs[3])
    check(e_default < 1e-4, f"stems add back to the input with relative error {e_default}")
    check(e_model > 1e-3, f"--model-other kept nothing of the model's own other ({e_model})")
    check(stems[outs[0]]["vocals"] == stems[outs[3]]["vocals"], "--model-other changed vocals")
    check(any("add back" in e for e in m["events"]), f"the residual is not recorded: {m['events']}")

    # Two tracks on two OpenCL devices at once (two workers, CLBlast on both): each lands on
    # its own device, none falls back, and the stems are the CPU's within 1e-4.
    inp2 = os.path.join(tmp, "take2.wav")
    wavio.write_wav(inp2, wavio.test_signal(frames, 2, rate, seed=7), 2, rate, bits=24)
    cpu2 = os.path.join(tmp, "cpu2")
    p = run(["separate", inp2, "-o", cpu2, "--model", "htdemucs-mini", "--model-path", golden,
             "--device", "cpu", "-q"])
    check(p.returncode == 0, f"htdemucs-mini take2 on the CPU: {p.stderr}")
    par = os.path.join(tmp, "par")
    p = run(["separate", inp, inp2, "-o", par, "--model", "htdemucs-mini", "--model-path", golden,
             "--device", "opencl:0,opencl:1", "--parallel", "-q"],
            env={"POCL_DEVICES": "pthread pthread"})
    check(p.returncode == 0, f"two takes on two OpenCL devices: exit {p.returncode}: {p.stderr}")
    used = set()
    for name, cpu_dir in (("take", outs[0]), ("take2", cpu2)):
        mf = os.path.join(par, name, "manifest.json")
        if not check(os.path.exists(mf), f"no {mf}"):
            return
        dev = json.load(open(mf))["device"]
        check(not dev["fell_back"] and dev["used_id"].startswith("opencl:"),
              f"{name} did not run on its OpenCL device: {dev}")
        used.add(dev["used_id"])
        for s in STEMS:
            got, _, _, _, _ = wavio.read_wav(os.path.join(par, name, s + ".wav"))
            want, _, _, _, _ = wavio.read_wav(os.path.join(cpu_dir, name, s + ".wav"))
            err = math.sqrt(sum((a - b) ** 2 for a, b in zip(got, want)))
            norm = math.sqrt(sum(b * b for b in want)) or 1.0
            check(len(got) == len(want) and err / norm < 1e-4,
                  f"{name} {s}: OpenCL vs CPU relative error {err / norm:.2e}")
    check(used == {"opencl:0", "opencl:1"}, f"the two takes ran on {used}, not one per device")


def rel_diff(a, b):
    if len(a) != len(b):
        return float("inf")
    err = math.fsum((x - y) ** 2 for x, y in zip(a, b))
    ref = math.fsum(y * y for y in b) or 1.0
    return math.sqrt(err / ref)


def run_on_terminal(args, env):
    """Runs the CLI with stderr on a pseudo-terminal (as a person at a shell sees it)."""
    import pty
    master, slave = pty.openpty()
    e = dict(os.environ)
    e.update(env)
    p = subprocess.Popen([EXE] + args, stdout=subprocess.DEVNULL, stderr=slave, env=e)
    os.close(slave)
    out = b""
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:
            break
        if not chunk:
            break
        out += chunk
    os.close(master)
    return p.wait(timeout=600), out.decode("utf-8", "replace")


def group_share(tmp):
    """One 60 s file on the CPU and two OpenCL devices at once (PoCL): the manifest says how
    many segments each did and for how long, the stems equal the one-device stems within 1e-4
    relative, and a terminal shows a bar with the percent, the time left and each device's
    segments."""
    model = fixture_model()
    rate, frames = 44100, 44100 * 60
    inp = os.path.join(tmp, "song.wav")
    wavio.write_wav(inp, wavio.test_signal(frames, 2, rate, seed=3), 2, rate, fmt="float")
    env = {"POCL_DEVICES": "pthread pthread"}
    one, three = os.path.join(tmp, "one"), os.path.join(tmp, "three")
    p = run(["separate", inp, "-o", one, "--model", model, "--device", "cpu", "-q"], env=env)
    check(p.returncode == 0, f"one device: exit {p.returncode}: {p.stderr}")
    code, term = run_on_terminal(["separate", inp, "-o", three, "--model", model, "--device",
                                  "cpu,opencl:0,opencl:1"], env)
    check(code == 0, f"three devices: exit {code}: {term[-2000:]}")
    frames_drawn = term.split("\r")
    check(any("%" in f and " left" in f and "files" in f for f in frames_drawn),
          f"the bar never showed a percent and the time left: {term[-1500:]!r}")
    check(any(all(f" {d} " in f + " " for d in ("cpu", "opencl:0", "opencl:1"))
              for f in frames_drawn),
          f"the bar never showed each device's segments: {term[-1500:]!r}")
    m1 = json.load(open(os.path.join(one, "song", "manifest.json")))
    m3 = json.load(open(os.path.join(three, "song", "manifest.json")))
    total = sum(d["segments"] for d in m1["device"]["devices"])
    devs = m3["device"]["devices"]
    check([d["id"] for d in devs] == ["cpu", "opencl:0", "opencl:1"],
          f"manifest devices {[d['id'] for d in devs]}")
    # the native CPU is the fastest here: the PoCL devices (on the same two cores) get only
    # what makes the song faster (sharing never loses), maybe nothing
    check(devs[0]["segments"] > 0 and not any(d["dropped"] for d in devs),
          f"the CPU must do some of the song and no device be dropped: {devs}")
    check(sum(d["segments"] for d in devs) == total > 0,
          f"segments {[d['segments'] for d in devs]} against {total} on one device")
    check(m3["device"]["requested"] == "cpu,opencl:0,opencl:1" and not m3["device"]["fell_back"],
          f"manifest device {m3['device']}")
    for s in STEMS:
        a, _, _, _, _ = wavio.read_wav(os.path.join(three, "song", s + ".wav"))
        b, _, _, _, _ = wavio.read_wav(os.path.join(one, "song", s + ".wav"))
        e = rel_diff(a, b)
        check(e < 1e-4, f"{s}: three devices differ from one by {e:.2e} relative")
    # plain lines when stderr is not a terminal: the time left, never a bare 0 %
    pl = run(["separate", inp, "-o", os.path.join(tmp, "plain"), "--model", model, "--device",
              "cpu,opencl:0,opencl:1", "--batch", "2"], env=env)
    check(pl.returncode == 0 and "progress: 100% (1/1 files)" in pl.stderr and
          " left" in pl.stderr and "\r" not in pl.stderr, f"plain progress: {pl.stderr!r}")
    # PoCL computes on the CPU's own cores: the user is told that sharing gains nothing here
    check("runs on the same processor as the CPU device" in pl.stderr,
          f"no word that PoCL and the CPU share a processor: {pl.stderr!r}")
    mb = json.load(open(os.path.join(tmp, "plain", "song", "manifest.json")))
    check(sum(d["segments"] for d in mb["device"]["devices"]) == total,
          f"--batch 2: segments {mb['device']['devices']}")
    bad = run(["separate", inp, "-o", os.path.join(tmp, "bad"), "--batch", "0"])
    check(bad.returncode == 2 and "--batch" in bad.stderr, f"--batch 0: {bad.stderr}")


def group_share_slow(tmp):
    """A fast device and a very slow one (opencl:0, every kernel launch held back by the fault
    injector) sharing a file is never slower than the fast one alone: the slow device's first
    segment is run again by the fast one when it runs out of work, the first result wins, and
    the slow run is stopped rather than waited for. The stems are the fast device's, and the
    manifest says the slow device contributed nothing."""
    model = fixture_model()
    rate, frames = 44100, 44100 * 40
    inp = os.path.join(tmp, "song.wav")
    wavio.write_wav(inp, wavio.test_signal(frames, 2, rate, seed=5), 2, rate, fmt="float")
    # the devices' paces kept in a file of the test's own, empty at first
    paces = os.path.join(tmp, "paces.txt")
    env = {"POCL_DEVICES": "pthread pthread", "SB_PACE_FILE": paces}
    alone, both = os.path.join(tmp, "alone"), os.path.join(tmp, "both")
    t0 = time.monotonic()
    p = run(["separate", inp, "-o", alone, "--model", model, "--device", "cpu", "-q"], env=env)
    t_alone = time.monotonic() - t0
    check(p.returncode == 0, f"cpu alone: exit {p.returncode}: {p.stderr}")
    # 100 ms before every kernel launch: one segment on opencl:0 takes 25 s or more, where the
    # CPU does the whole song in about 6 s here (at 40 ms it was 14 s: the margin is wider now
    # against a slower or busier machine, where the CPU must still win that segment's race)
    slow = dict(env, SB_FAULT_INJECT="opencl:0:slow:100")
    t0 = time.monotonic()
    p = run(["separate", inp, "-o", both, "--model", model, "--device", "cpu,opencl:0"],
            env=slow)
    t_both = time.monotonic() - t0
    check(p.returncode == 0, f"cpu + slow opencl:0: exit {p.returncode}: {p.stderr}")
    print(f"cpu alone {t_alone:.1f} s, cpu + a slow device {t_both:.1f} s")
    # one segment on the slowed device takes about 35 s (590 s for 17 on its own): waiting
    # for it would show in both bounds, which are generous against a loaded machine
    check(t_both < 2 * t_alone + 6,
          f"sharing with a slow device took {t_both:.1f} s against {t_alone:.1f} s alone")
    if p.returncode == 0:
        m = json.load(open(os.path.join(both, "song", "manifest.json")))
        devs = {d["id"]: d for d in m["device"]["devices"]}
        busy = devs.get("cpu", {}).get("seconds", 0)
        check(m["timings"]["separate_s"] < busy + 5,
              f"separation took {m['timings']['separate_s']:.1f} s, the CPU worked {busy:.1f} s: "
              "it waited for the slow device")
        check(devs.get("opencl:0", {}).get("segments") == 0 and devs.get("cpu", {}).get(
              "segments", 0) > 0, f"segments per device {m['device']['devices']}")
        for s in STEMS:
            a = wavio.read_wav(os.path.join(both, "song", s + ".wav"))[0]
            b = wavio.read_wav(os.path.join(alone, "song", s + ".wav"))[0]
            check(a == b, f"{s}: the shared run's stems are not the fast device's")
    # the next job knows both paces from this one: the slow device takes no part (not even a
    # first segment to measure itself, which slows a fast GPU's whole song on a real machine),
    # and the manifest says why
    kept = open(paces).read() if os.path.exists(paces) else ""
    check("\topencl|" in kept and "\tcpu" in kept, f"no pace kept for each device: {kept!r}")
    again = os.path.join(tmp, "again")
    p = run(["separate", inp, "-o", again, "--model", model, "--device", "cpu,opencl:0", "-q"],
            env=slow)
    if check(p.returncode == 0, f"cpu + slow opencl:0 again: exit {p.returncode}: {p.stderr}"):
        m = json.load(open(os.path.join(again, "song", "manifest.json")))
        devs = {d["id"]: d for d in m["device"]["devices"]}
        check(devs.get("opencl:0", {}).get("segments") == 0,
              f"segments per device with the paces kept {m['device']['devices']}")
        check(any("took no part" in e and "pthread" in e for e in m["events"]),
              f"no event says the slow device took no part: {m['events']}")
        for s in STEMS:
            a = wavio.read_wav(os.path.join(again, "song", s + ".wav"))[0]
            b = wavio.read_wav(os.path.join(alone, "song", s + ".wav"))[0]
            check(a == b, f"{s}: the second shared run's stems are not the fast device's")
    # a damaged paces file is no pace known: the job runs as the first did and rewrites it
    with open(paces, "w") as f:
        f.write("garbage\n-1 0 x\ty\nnan 0 htdemucs-mini\tCPU (2 threads)\n12 0 trunc")
    p = run(["separate", inp, "-o", os.path.join(tmp, "damaged"), "--model", model, "--device",
             "cpu,opencl:0", "-q"], env=slow)
    check(p.returncode == 0, f"with a damaged paces file: exit {p.returncode}: {p.stderr}")
    kept = open(paces).read()
    check("garbage" not in kept and "\topencl|" in kept, f"the damaged file stayed: {kept!r}")


def group_share_held(tmp):
    """A slow GPU as the host sees one: its pass is enqueued at once and then sits in the
    device's queue (opencl:0's queue held 30 s a pass by the fault injector). When the CPU
    runs the held segment again and wins, the separation ends without waiting for the pass
    nobody wants any more, and a cancel ends a held pass at once: the job's time is the CPU's,
    not the held queue's."""
    model = fixture_model()
    rate, frames = 44100, 44100 * 30
    inp = os.path.join(tmp, "song.wav")
    wavio.write_wav(inp, wavio.test_signal(frames, 2, rate, seed=6), 2, rate, fmt="float")
    env = {"POCL_DEVICES": "pthread pthread", "SB_FAULT_INJECT": "opencl:0:hold:30000"}
    both = os.path.join(tmp, "both")
    t0 = time.monotonic()
    p = run(["separate", inp, "-o", both, "--model", model, "--device", "cpu,opencl:0", "-q"],
            env=env)
    wall = time.monotonic() - t0
    if not check(p.returncode == 0, f"cpu + held opencl:0: exit {p.returncode}: {p.stderr}"):
        return
    m = json.load(open(os.path.join(both, "song", "manifest.json")))
    devs = {d["id"]: d for d in m["device"]["devices"]}
    busy = devs.get("cpu", {}).get("seconds", 0)
    sep = m["timings"]["separate_s"]
    print(f"separation {sep:.1f} s, the CPU busy {busy:.1f} s, the command {wall:.1f} s")
    check(devs.get("opencl:0", {}).get("segments") == 0 and devs.get("cpu", {}).get(
          "segments", 0) > 0, f"segments per device {m['device']['devices']}")
    # the held pass would have ended 30 s after it began: waiting for it shows
    check(sep < busy + 5,
          f"the separation took {sep:.1f} s with the CPU busy {busy:.1f} s: it waited for the "
          "held pass")
    # a cancel (SIGINT) while opencl:0 alone holds a segment: the command ends at once
    env1 = dict(env, SB_FAULT_INJECT="opencl:0:hold:60000")
    e = dict(os.environ)
    e.update(env1)
    out = os.path.join(tmp, "cancelled")
    proc = subprocess.Popen([EXE, "separate", inp, "-o", out, "--model", model, "--device",
                             "opencl:0"], env=e, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    # the cancel comes once the device holds a pass (the injector says so on stderr)
    held = ""
    while "holds a pass" not in held:
        line = proc.stderr.readline()
        if not line:
            break
        held += line
    check("holds a pass" in held, f"no pass was held before the cancel: {held}")
    time.sleep(1)  # the pass is all enqueued by then: the host waits for the device
    t0 = time.monotonic()
    proc.send_signal(signal.SIGINT)
    try:
        _, err = proc.communicate(timeout=50)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        check(False, "a cancel during a held pass did not end the command in 50 s")
        return
    took = time.monotonic() - t0
    print(f"cancelled during a held pass: exit {proc.returncode} after {took:.1f} s")
    check(proc.returncode != 0, "a cancelled separation exited 0")
    check(took < 20, f"a cancel during a held pass took {took:.1f} s to end the command "
          "(the hold is 60 s)")
    check(not os.path.exists(os.path.join(out, "song", "vocals.wav")),
          "a cancelled separation left a stem")


def group_toy(tmp):
    """A third backend (the CPU registered again as "toy", built with -Dtoy_backend=true): listed
    by name, chosen by its id, by device:N and by its key, sharing a song with the CPU, and the
    built-in model it lacks run on the CPU with the reason said."""
    env = {"POCL_DEVICES": "pthread pthread"}
    d = json.loads(run(["devices", "--json"], env=env).stdout)
    toy = [x for x in d if x["backend"] == "toy"]
    if not check(len(toy) == 1 and toy[0]["id"] == "toy:0" and toy[0]["key"] == "toy|toy|stembridge|Toy accelerator|0",
                 f"the toy device is not listed: {[x['id'] for x in d]}"):
        return
    accel = [x for x in d if x["id"] != "cpu"]
    n = accel.index(toy[0])
    model = fixture_model()
    inp = os.path.join(tmp, "t.wav")
    wavio.write_wav(inp, wavio.test_signal(44100 * 12, 2, 44100, seed=9), 2, 44100, fmt="float")
    ref = os.path.join(tmp, "cpu")
    p = run(["separate", inp, "-o", ref, "--model", model, "--device", "cpu", "-q"], env=env)
    check(p.returncode == 0, f"cpu: {p.stderr}")
    for name, dev in (("id", "toy:0"), ("n", f"device:{n}"), ("key", "toy|toy|stembridge|Toy accelerator|0"),
                      ("share", "cpu,toy:0")):
        out = os.path.join(tmp, name)
        p = run(["separate", inp, "-o", out, "--model", model, "--device", dev, "-q"], env=env)
        check(p.returncode == 0, f"--device {dev}: exit {p.returncode}: {p.stderr}")
        if p.returncode:
            continue
        m = json.load(open(os.path.join(out, "t", "manifest.json")))
        used = [x["id"] for x in m["device"].get("devices", [])] or [m["device"]["used_id"]]
        check("toy:0" in used and not m["device"]["fell_back"],
              f"--device {dev}: ran on {used}, fell back {m['device']['fell_back']}")
        for s in STEMS:
            a = wavio.read_wav(os.path.join(out, "t", s + ".wav"))[0]
            b = wavio.read_wav(os.path.join(ref, "t", s + ".wav"))[0]
            check(rel_diff(a, b) < 1e-6, f"--device {dev}: {s} differs from the CPU's")
    out = os.path.join(tmp, "builtin")
    p = run(["separate", inp, "-o", out, "--model", "builtin", "--device", "toy:0"], env=env)
    check(p.returncode == 0 and "has no operations for this model" in p.stderr,
          f"the built-in model on the toy: exit {p.returncode}: {p.stderr!r}")
    if p.returncode == 0:
        m = json.load(open(os.path.join(out, "t", "manifest.json")))
        check(m["device"]["used"] == "cpu" and m["device"]["fell_back"],
              f"the built-in model on the toy must run on the CPU: {m['device']}")
    bad = run(["separate", inp, "-o", os.path.join(tmp, "x"), "--device", "nosuch:0"], env=env)
    check(bad.returncode == 2 and "toy:N" in bad.stderr and "opencl:N" in bad.stderr,
          f"the unknown-device message must list every backend: {bad.stderr!r}")


def group_toy_family(tmp):
    """A model family added by one registration line (engine/models/toy, -Dtoy_family=true),
    whose models need an optional operation group only the CPU backend has (toy_mix): a toy
    file opened by name and by path, its stems as the family defines them, and on an OpenCL
    device the model placed on the CPU, with the reason in the log and the manifest."""
    env = {"POCL_DEVICES": "pthread pthread"}
    models = os.path.join(tmp, "models")
    os.makedirs(models)
    toy = os.path.join(models, "toy.safetensors")
    st_write(toy, {"family": "toy", "sources": "vocals,other"}, [])
    inp = os.path.join(tmp, "t.wav")
    sig = wavio.test_signal(44100 * 3, 2, 44100, seed=5)
    wavio.write_wav(inp, sig, 2, 44100, fmt="float")
    x = wavio.read_wav(inp)[0]
    for name, model, dev in (("name", "toy", "cpu"), ("path", toy, "cpu"),
                             ("opencl", "toy", "opencl:0")):
        out = os.path.join(tmp, name)
        p = run(["separate", inp, "-o", out, "--model", model, "--model-path", models,
                 "--device", dev], env=env)
        if not check(p.returncode == 0, f"toy by {name}: exit {p.returncode}: {p.stderr}"):
            continue
        m = json.load(open(os.path.join(out, "t", "manifest.json")))
        check(m["model"]["name"] == "toy" and sorted(s["stem"] for s in m["stems"]) ==
              ["other", "vocals"], f"toy by {name}: manifest {m['model']} {m['stems']}")
        v = wavio.read_wav(os.path.join(out, "t", "vocals.wav"))[0]
        o = wavio.read_wav(os.path.join(out, "t", "other.wav"))[0]
        check(max(abs(a - 0.5 * b) for a, b in zip(v, x)) < 1e-7 and
              max(abs(a + c - b) for a, b, c in zip(v, x, o)) < 1e-7,
              f"toy by {name}: vocals is not half the input, or the stems do not add up")
        if dev != "cpu":
            check(m["device"]["used"] == "cpu" and m["device"]["fell_back"] and
                  "has no operations for this model (toy needs the toy group)" in p.stderr and
                  "has no operations for this model" in (m["device"]["reason"] or ""),
                  f"the toy model on {dev} must run on the CPU and say why: {m['device']} "
                  f"{p.stderr!r}")


def temp_files(d):
    """Files of the engine's temporary naming (.<name>.part-<pid>-XXXXXX) under d."""
    return [f for f in files_under(d) if ".part-" in os.path.basename(f)]


def st_read(path):
    """A safetensors file as (metadata, [(name, dtype, shape, bytes)...]) in file order."""
    raw = open(path, "rb").read()
    n = struct.unpack("<Q", raw[:8])[0]
    header = json.loads(raw[8:8 + n])
    meta = header.pop("__metadata__", {})
    data = raw[8 + n:]
    items = sorted(header.items(), key=lambda kv: kv[1]["data_offsets"][0])
    return meta, [(k, v["dtype"], v["shape"], data[v["data_offsets"][0]:v["data_offsets"][1]])
                  for k, v in items]


def st_write(path, meta, tensors, declared=None, pad=0):
    """Writes a safetensors file; 'declared' overrides the header length field, 'pad' adds
    trailing spaces to the header (the format allows them)."""
    header, at, body = {"__metadata__": meta}, 0, b""
    for name, dtype, shape, raw in tensors:
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [at, at + len(raw)]}
        at += len(raw)
        body += raw
    h = json.dumps(header, separators=(",", ":")).encode() + b" " * pad
    n = len(h) if declared is None else declared
    open(path, "wb").write(struct.pack("<Q", n) + h + body)


def as_floats(dtype, raw):
    if dtype == "F32":
        return list(struct.unpack(f"<{len(raw) // 4}f", raw))
    return list(struct.unpack(f"<{len(raw) // 2}e", raw))


def fixture_model(name="htdemucs-mini"):
    path = os.path.join(FIXTURES, name + ".safetensors")
    check(os.path.exists(path), f"no fixture model at {path}")
    return path


def group_damaged(tmp):
    """Damaged model files never give a false success: a header length one byte short, a NaN
    weight, trailing bytes, and weights that overflow to NaN output are each refused with one
    line, exit 1, and no stems."""
    good = fixture_model()
    if failures:
        return
    meta, tensors = st_read(good)
    models = os.path.join(tmp, "models")
    os.makedirs(models)
    # 1. The header length one byte short of a header that ends in a padding space: the JSON
    #    still parses, and every tensor would be read one byte off (all-NaN stems).
    plain = os.path.join(tmp, "plain.safetensors")
    st_write(plain, meta, tensors)
    hlen = struct.unpack("<Q", open(plain, "rb").read(8))[0]
    st_write(os.path.join(models, "short.safetensors"), meta, tensors, declared=hlen + 7, pad=8)
    # 2. One weight is NaN.
    name, dtype, shape, raw = next(t for t in tensors if len(t[2]) >= 2)
    vals = as_floats(dtype, raw)
    vals[5] = float("nan")
    bad = [(n, d, sh, struct.pack(f"<{len(vals)}f", *vals) if n == name else r)
           for n, d, sh, r in tensors]
    bad = [(n, "F32" if n == name else d, sh, r) for n, d, sh, r in bad]
    st_write(os.path.join(models, "nanweight.safetensors"), meta, bad)
    # 3. Finite weights so large that the network overflows: NaN stems from a model that loads.
    big = []
    for n, d, sh, r in tensors:
        if n in ("encoder.0.conv.weight", "tencoder.0.conv.weight"):
            v = [x * 3e37 for x in as_floats(d, r)]
            big.append((n, "F32", sh, struct.pack(f"<{len(v)}f", *v)))
        else:
            big.append((n, d, sh, r))
    st_write(os.path.join(models, "overflow.safetensors"), meta, big)
    # 4. Trailing bytes the header does not declare.
    tail = list(tensors)
    st_write(os.path.join(models, "trailing.safetensors"), meta, tail)
    with open(os.path.join(models, "trailing.safetensors"), "ab") as f:
        f.write(b"\0" * 16)
    rate = 44100
    inp = os.path.join(tmp, "take.wav")
    wavio.write_wav(inp, wavio.test_signal(rate * 3, 2, rate), 2, rate)
    for model, needle in (("short", "header"), ("nanweight", name), ("trailing", "header"),
                          ("overflow", "NaN or infinite samples")):
        out = os.path.join(tmp, "out-" + model)
        os.makedirs(out)
        p = expect_refusal(["separate", inp, "-o", out, "--model", model, "--model-path", models,
                            "--device", "cpu"], f"damaged model '{model}'", out, needle=needle)
        check(p.returncode == 1, f"{model}: exit {p.returncode}, expected 1")
        check(files_under(out) == [], f"{model}: files left: {files_under(out)}")
        if model == "overflow":
            check("overflow" in p.stderr and "stem" in p.stderr,
                  f"the NaN message names the model and the stem: {p.stderr!r}")
    # the untouched model still separates (the checks refuse damage, not the model)
    out = os.path.join(tmp, "out-good")
    p = run(["separate", inp, "-o", out, "--model", "htdemucs-mini", "--model-path", FIXTURES,
             "--device", "cpu", "-q"])
    check(p.returncode == 0, f"good model: exit {p.returncode}: {p.stderr}")


def long_input(tmp, seconds=300):
    """A stereo clip long enough that a job is still running when a test signals it."""
    rate = 44100
    path = os.path.join(tmp, "long.wav")
    if not os.path.exists(path):
        seed = os.path.join(tmp, "seed5s.wav")
        wavio.write_wav(seed, wavio.test_signal(rate * 5, 2, rate), 2, rate)
        data = wavio.chunks(seed)[b"data"] * (seconds // 5)
        fmt = struct.pack("<HHIIHH", 1, 2, rate, rate * 4, 4, 16)
        with open(path, "wb") as f:
            f.write(b"RIFF" + struct.pack("<I", 4 + 8 + len(fmt) + 8 + len(data)) + b"WAVE")
            f.write(b"fmt " + struct.pack("<I", len(fmt)) + fmt)
            f.write(b"data" + struct.pack("<I", len(data)) + data)
    return path


def start_job(args):
    e = dict(os.environ)
    return subprocess.Popen([EXE] + args, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=e)


def wait_for_temp(d, proc, timeout=60, within=""):
    """Waits until the job writes its temporary files (it is mid-job); False if it ended.
    within: only a temporary file whose path has it counts (one input of several)."""
    t0 = time.time()
    while time.time() - t0 < timeout:
        if proc.poll() is not None:
            return False
        if os.path.isdir(d) and [f for f in temp_files(d) if within in f]:
            time.sleep(0.2)
            return proc.poll() is None
        time.sleep(0.02)
    return False


def group_signals(tmp):
    """SIGTERM and SIGINT cancel: exit 143 / 130, one line saying what was not written, nothing
    left behind. After SIGKILL, the same command removes the dead run's temporary files (and
    says so) and completes. A live concurrent writer's temporary files are never touched."""
    inp = long_input(tmp)
    for sig, code, word in ((signal.SIGTERM, 143, "SIGTERM"), (signal.SIGINT, 130, "SIGINT")):
        out = os.path.join(tmp, "out-" + word)
        p = start_job(["separate", inp, "-o", out, "--threads", "1"])
        if not check(wait_for_temp(out, p), f"{word}: the job ended before it could be signalled"):
            p.kill()
            continue
        p.send_signal(sig)
        _, err = p.communicate(timeout=120)
        check(p.returncode == code, f"{word}: exit {p.returncode}, expected {code}")
        lines = [l for l in err.splitlines() if l.startswith("stembridge:")]
        check(len(lines) == 1 and word in lines[0] and "long.wav" in lines[0] and
              "no stems written" in lines[0], f"{word}: one line naming what was not written: {err!r}")
        check(not os.path.exists(out) or files_under(out) == [],
              f"{word}: left {files_under(out) if os.path.exists(out) else ''}")
    # SIGKILL leaves temporary files; the same command then cleans them up and completes
    out = os.path.join(tmp, "out-kill")
    p = start_job(["separate", inp, "-o", out, "--threads", "1"])
    if check(wait_for_temp(out, p), "SIGKILL: the job ended before it could be killed"):
        p.kill()
        p.wait()
        left = temp_files(out)
        check(left, "a killed job leaves temporary files (the test needs some)")
        q = run(["separate", inp, "-o", out, "--threads", "1"])
        check(q.returncode == 0, f"after SIGKILL: exit {q.returncode}: {q.stderr}")
        check(f"removed {len(left)} temporary files" in q.stderr,
              f"the clean-up is said in one line: {q.stderr!r}")
        check(temp_files(out) == [], f"temporary files after the re-run: {temp_files(out)}")
        check(all(os.path.exists(os.path.join(out, "long", s + ".wav")) for s in STEMS),
              "the re-run wrote every stem")
    # a live writer in the same folder: a second job there must not touch its files
    shared = os.path.join(tmp, "shared")
    tmpl = ["--template", "{stem}-{track}.{ext}"]
    a = start_job(["separate", inp, "-o", shared, "--threads", "1"] + tmpl)
    if check(wait_for_temp(shared, a), "concurrent: the first job ended too soon"):
        before = set(temp_files(shared))
        small = os.path.join(tmp, "small.wav")
        wavio.write_wav(small, wavio.test_signal(44100, 2, 44100), 2, 44100)
        q = run(["separate", small, "-o", shared, "-q"] + tmpl)
        check(q.returncode == 0, f"concurrent: second job exit {q.returncode}: {q.stderr}")
        check(a.poll() is None and before <= set(temp_files(shared)),
              "the second job removed the running job's temporary files")
        _, err = a.communicate(timeout=600)
        check(a.returncode == 0, f"concurrent: the first job failed: {err}")
        check(all(os.path.exists(os.path.join(shared, f"{s}-long.wav")) for s in STEMS),
              "concurrent: the first job's stems are all there")
        check(temp_files(shared) == [], f"concurrent: temporary files left {temp_files(shared)}")
    else:
        a.kill()


def all_or_nothing(out, p, what, expect=6):
    """exit 0 with every file (4 stems, manifest, stems.txt), or non-zero with none."""
    got = files_under(out) if os.path.isdir(out) else []
    if p.returncode == 0:
        return check(len(got) == expect and not temp_files(out),
                     f"{what}: exit 0 with {len(got)} files: {got}")
    return check(got == [], f"{what}: exit {p.returncode} but files left: {got}")


def group_commit(tmp):
    """A disk that fills at any byte gives exit 0 with every file or non-zero with none: a
    small tmpfs swept across the size of the output (root only), a file size limit swept across
    a stem's size, and injected failures of each rename and of the folder sync. With
    --overwrite, a failed commit gives back the stems it was replacing."""
    rate = 44100
    inp = os.path.join(tmp, "clip.wav")
    wavio.write_wav(inp, wavio.test_signal(rate, 2, rate), 2, rate)
    ref = os.path.join(tmp, "ref")
    p = run(["separate", inp, "-o", ref, "-q"])
    check(p.returncode == 0, f"reference run: {p.stderr}")
    sizes = {os.path.basename(f): os.path.getsize(f) for f in files_under(ref)}
    stem_bytes = sizes.get("vocals.wav", 0)
    total = sum(sizes.values())
    # a small tmpfs, swept from a little room to more than enough
    mnt = os.path.join(tmp, "mnt")
    os.makedirs(mnt)
    can_mount = os.geteuid() == 0 and subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", mnt], capture_output=True).returncode == 0
    if can_mount:
        subprocess.run(["umount", mnt])
        kib = list(range(4, total // 1024 + 64, 64)) + \
            list(range(max(4, (total - 4 * stem_bytes // 3) // 1024), total // 1024 + 48, 4))
        ok_runs = fail_runs = 0
        for k in sorted(set(kib)):
            subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={k}k", "tmpfs", mnt], check=True)
            try:
                out = os.path.join(mnt, "o")
                p = run(["separate", inp, "-o", out, "-q"])
                all_or_nothing(out, p, f"tmpfs of {k} KiB")
                if p.returncode == 0:
                    ok_runs += 1
                else:
                    fail_runs += 1
                    check("space" in p.stderr, f"tmpfs of {k} KiB: the error says why: {p.stderr!r}")
            finally:
                subprocess.run(["umount", mnt], check=True)
        check(ok_runs and fail_runs, f"the sweep saw both outcomes ({ok_runs} ok, {fail_runs} failed)")
        print(f"tmpfs sweep: {ok_runs} complete, {fail_runs} refused, nothing partial")
    else:
        print("SKIP part: mounting a tmpfs needs root (the RLIMIT_FSIZE sweep still runs)")
    # a file size limit around a stem's size, byte by byte at the edge
    for lim in [stem_bytes // 2, stem_bytes - 2, stem_bytes - 1, stem_bytes, stem_bytes + 1,
                stem_bytes * 2]:
        out = os.path.join(tmp, f"fsize{lim}")

        def limit(lim=lim):
            resource.setrlimit(resource.RLIMIT_FSIZE, (lim, lim))
        p = run(["separate", inp, "-o", out, "-q"], preexec=limit)
        all_or_nothing(out, p, f"RLIMIT_FSIZE {lim}")
        check((p.returncode == 0) == (lim >= stem_bytes), f"RLIMIT_FSIZE {lim}: exit {p.returncode}")
    # each rename of the commit, and the folder sync, failing in turn
    for fault in [f"io:rename:{k}" for k in range(1, 7)] + ["io:dirsync:1"]:
        out = os.path.join(tmp, "f-" + fault.replace(":", "_"))
        p = run(["separate", inp, "-o", out], env={"SB_FAULT_INJECT": fault})
        check(p.returncode == 1, f"{fault}: exit {p.returncode}")
        all_or_nothing(out, p, fault)
    # --overwrite whose commit fails: the old stems come back unchanged
    keep = os.path.join(tmp, "keep")
    p = run(["separate", inp, "-o", keep, "-q", "--bits", "16"])
    before = {f: open(f, "rb").read() for f in files_under(keep)}
    p = run(["separate", inp, "-o", keep, "-q", "--overwrite"], env={"SB_FAULT_INJECT": "io:rename:5"})
    check(p.returncode == 1, f"overwrite with a failing rename: exit {p.returncode}")
    after = {f: open(f, "rb").read() for f in files_under(keep)}
    check(after == before, "a failed --overwrite commit changed or lost the files it replaced: "
          f"{sorted(set(before) ^ set(after))}")


def group_repeat(tmp):
    """Output bytes depend only on input and options: two runs give byte-identical stems, and
    common readers take every WAV we write without a warning."""
    rate = 48000
    inp = os.path.join(tmp, "in.wav")
    wavio.write_wav(inp, wavio.test_signal(rate * 2, 2, rate), 2, rate, bits=24)
    for extra in ([], ["--bits", "16"], ["--bits", "24"], ["--timeline-start", "96000"],
                  ["--format", "flac"]):
        runs = []
        for k in range(2):
            out = os.path.join(tmp, f"r{k}-" + "_".join(extra))
            p = run(["separate", inp, "-o", out, "-q"] + extra)
            check(p.returncode == 0, f"{extra}: {p.stderr}")
            runs.append(out)
        ext = "flac" if "flac" in extra else "wav"
        for s in STEMS:
            a = open(os.path.join(runs[0], "in", f"{s}.{ext}"), "rb").read()
            b = open(os.path.join(runs[1], "in", f"{s}.{ext}"), "rb").read()
            check(a == b, f"{extra}: {s} differs between two identical runs")
        if SOX and ext == "wav":
            w = subprocess.run([SOX, os.path.join(runs[0], "in", "vocals.wav"), "-n"],
                               capture_output=True, text=True)
            check(w.returncode == 0 and "WARN" not in w.stderr and "FAIL" not in w.stderr,
                  f"sox on our {extra or 'float'} WAV: {w.stderr!r}")
        if "--timeline-start" in extra:
            check(wavio.time_reference(os.path.join(runs[0], "in", "vocals.wav")) == 96000,
                  "float WAV time reference")


def batch_lines(out):
    lines = []
    logs = os.path.join(out, "logs")
    for f in sorted(os.listdir(logs)) if os.path.isdir(logs) else []:
        with open(os.path.join(logs, f)) as fh:
            lines += [json.loads(l) for l in fh]
    return lines


def group_batch(tmp):
    """stembridge batch without a scheduler: a folder walked (OUT inside it left out), a list
    with repeats sharded 3 ways (disjoint, complete, the same on every run), a re-run that
    separates nothing and touches no stem, a changed input done again, a bad input logged while
    the batch goes on (exit 1), another's stem never overwritten, --skip-failed, SIGTERM
    mid-batch (nothing partial, the re-run completes), --report, Slurm's array variables."""
    src = os.path.join(tmp, "music")
    paths = []
    for d in ("alpha", "beta/live", "gamma"):
        os.makedirs(os.path.join(src, d))
        for k in range(3):
            p = os.path.join(src, d, f"t{k}.wav")
            wavio.write_wav(p, wavio.test_signal(44100 * 2, 2, 44100, seed=len(paths) + 1), 2,
                            44100)
            paths.append(p)
    os.makedirs(os.path.join(src, ".hidden"))
    wavio.write_wav(os.path.join(src, ".hidden", "x.wav"), wavio.test_signal(4410, 2, 44100), 2,
                    44100)
    with open(os.path.join(src, "notes.txt"), "w") as f:
        f.write("not audio")
    out = os.path.join(src, "stems")  # inside the walked folder: never taken as input
    b = ["batch", "--model", "builtin"]
    p = run(b + [src, "-o", out])
    check(p.returncode == 0, f"batch of a folder: exit {p.returncode}: {p.stderr}")
    lines = batch_lines(out)
    done = sorted(l["path"] for l in lines if l.get("status") == "done")
    check(done == sorted(paths), f"the folder's 9 files done once each: {done}")
    for l in lines:
        if l.get("status") == "done":
            check(l["realtime_factor"] > 0 and l["audio_s"] == 2.0 and l["device"] == "cpu" and
                  l["seconds"] > 0 and l["size"] == os.path.getsize(l["path"]),
                  f"a JSON line's numbers: {l}")
    summ = [l for l in lines if l.get("summary")]
    check(len(summ) == 1 and summ[0]["done"] == 9 and summ[0]["failed"] == 0 and
          abs(summ[0]["audio_hours"] - 18 / 3600) < 1e-9, f"the summary line: {summ}")
    check("9 done, 0 skipped, 0 failed" in p.stdout, f"the summary for a person: {p.stdout!r}")
    stem_dir = os.path.join(out, "beta", "live", "t1")
    check(sorted(os.listdir(stem_dir)) == sorted([s + ".wav" for s in STEMS] +
                                                 ["manifest.json", "stems.txt"]),
          f"the stems of beta/live/t1.wav under OUT/beta/live/t1: {os.listdir(stem_dir)}")
    sum_check(paths[4], [os.path.join(stem_dir, s + ".wav") for s in STEMS])
    stamps = {f: os.stat(f).st_mtime_ns for f in files_under(out) if "/logs/" not in f}

    # on two devices at once: the inputs go to the engine's pool, each to a free device
    outd = os.path.join(tmp, "two-devices")
    nine = os.path.join(tmp, "nine.txt")
    with open(nine, "w") as f:
        f.write("\n".join(paths) + "\n")
    p = run(b + [nine, "-o", outd, "--device", "opencl:0,opencl:1"],
            env={"POCL_DEVICES": "pthread pthread"})
    dl = [l for l in batch_lines(outd) if not l.get("summary")]
    check(p.returncode == 0 and sorted(l["path"] for l in dl if l["status"] == "done") ==
          sorted(paths) and all(l.get("device") in ("opencl:0", "opencl:1") for l in dl),
          f"batch on two devices: exit {p.returncode}, "
          f"{[(l.get('status'), l.get('device')) for l in dl]} {p.stderr}")
    sum_check(paths[4], [os.path.join(outd, "beta", "live", "t1", s + ".wav") for s in STEMS])

    # on one OpenCL device (PoCL standing in for a GPU): two inputs in flight, one writing or
    # reading while the other separates (#50); logged in the list's order, the stems the bytes
    # of separate runs on that device
    outg = os.path.join(tmp, "one-gpu")
    three = os.path.join(tmp, "three.txt")
    with open(three, "w") as f:
        f.write("\n".join(paths[:3]) + "\n")
    p = run(b + [three, "-o", outg, "--device", "opencl:0"], env={"POCL_DEVICES": "pthread"})
    gl = [l for l in batch_lines(outg) if not l.get("summary")]
    check(p.returncode == 0 and [l["path"] for l in gl] == paths[:3] and
          all(l["status"] == "done" and l.get("device") == "opencl:0" for l in gl),
          f"batch on one OpenCL device: exit {p.returncode}, "
          f"{[(l.get('path'), l.get('status'), l.get('device')) for l in gl]} {p.stderr}")
    for k in range(3):
        own = os.path.join(tmp, f"one-gpu-own-{k}")
        q = run(["separate", paths[k], "-o", own, "--model", "builtin", "--device", "opencl:0"],
                env={"POCL_DEVICES": "pthread"})
        track = os.path.splitext(os.path.basename(paths[k]))[0]
        same = q.returncode == 0
        for s_ in STEMS:  # the three share a folder: the batch's root
            a = os.path.join(outg, track, s_ + ".wav")
            b_ = os.path.join(own, track, s_ + ".wav")
            same = same and os.path.exists(a) and os.path.exists(b_) and \
                open(a, "rb").read() == open(b_, "rb").read()
        check(same, f"input {k} of a batch on one OpenCL device: the bytes of a run of its own "
              f"({q.returncode}: {q.stderr})")

    # a re-run separates nothing and touches no stem
    t0 = time.time()
    p = run(b + [src, "-o", out])
    again = batch_lines(out)[len(lines):]
    check(p.returncode == 0 and sorted(l["status"] for l in again if not l.get("summary")) ==
          ["skipped"] * 9, f"re-run: exit {p.returncode}, {[l.get('status') for l in again]}")
    check(all(os.stat(f).st_mtime_ns == t for f, t in stamps.items()),
          "a re-run rewrote a stem")
    print(f"batch: re-run of 9 finished inputs in {time.time() - t0:.2f} s")

    # a changed input is done again, its own stems replaced; the rest skipped
    wavio.write_wav(paths[0], wavio.test_signal(44100 * 3, 2, 44100, seed=99), 2, 44100)
    n = len(batch_lines(out))
    p = run(b + [src, "-o", out])
    new = batch_lines(out)[n:]
    st = {l["path"]: l["status"] for l in new if not l.get("summary")}
    check(p.returncode == 0 and st[paths[0]] == "done" and
          sorted(st.values()).count("skipped") == 8, f"changed input: {st} {p.stderr}")
    with open(os.path.join(out, "alpha", "t0", "manifest.json")) as f:
        check(json.load(f)["input"]["frames"] == 44100 * 3, "the changed input's new stems")

    # a list with a comment, a repeat, a bad file and a path that is not there; 3 shards
    bad = os.path.join(src, "gamma", "broken.wav")
    with open(bad, "wb") as f:
        f.write(b"RIFF\x10\x00\x00\x00WAVEfmt ")
    lst = os.path.join(tmp, "list.txt")
    listed = paths + [paths[2], bad, os.path.join(src, "missing.wav")]
    with open(lst, "w") as f:
        f.write("# catalogue\n\n" + "\n".join(listed) + "\n")
    uniq = paths + [bad, os.path.join(src, "missing.wav")]
    out2 = os.path.join(tmp, "out2")
    codes = []
    for i in range(3):
        codes.append(run(b + [lst, "-o", out2, "--shard", f"{i}/3"]).returncode)
    lines = batch_lines(out2)
    for i in range(3):
        took = [l["path"] for l in lines if l.get("shard") == f"{i}/3" and not l.get("summary")]
        check(took == uniq[i::3], f"shard {i}/3 took {took}, not {uniq[i::3]}")
    check(sorted(codes) == [0, 1, 1], f"exit 1 for the shards with a bad input: {codes}")
    failed = {l["path"]: l for l in lines if l.get("status") == "failed"}
    check(sorted(failed) == sorted(uniq[-2:]) and all(l.get("error") for l in failed.values()),
          f"the bad inputs logged with their error: {failed}")
    check(os.path.exists(os.path.join(out2, "alpha", "t0", "vocals.wav")) and
          not os.path.exists(os.path.join(out2, "gamma", "broken")),
          "paths under OUT relative to the list's common folder, nothing for a bad input")
    # the same shard again: the same inputs, the good ones skipped, the bad one retried
    def shard0_lines():
        return [l for l in batch_lines(out2) if l.get("shard") == "0/3"]
    n = len(shard0_lines())
    p = run(b + [lst, "-o", out2, "--shard", "0/3"])
    again = [l for l in shard0_lines()[n:] if not l.get("summary")]
    check([l["path"] for l in again] == uniq[0::3] and p.returncode == 1 and
          [l["status"] for l in again] == ["skipped"] * 3 + ["failed"],
          f"shard 0/3 again: {[(l['path'], l['status']) for l in again]}")
    n = len(shard0_lines())
    p = run(b + [lst, "-o", out2, "--shard", "0/3", "--skip-failed"])
    again = [l for l in shard0_lines()[n:] if not l.get("summary")]
    check(p.returncode == 0 and all(l["status"] == "skipped" for l in again),
          f"--skip-failed: exit {p.returncode}, {[l['status'] for l in again]}")
    r = run(["batch", "--report", out2, "--json"])
    rep = json.loads(r.stdout) if r.stdout.startswith("{") else {}
    check(r.returncode == 1 and rep.get("inputs") == 11 and rep.get("complete") == 9 and
          rep.get("failed") == 2 and rep.get("separations") == 9 and
          abs(rep.get("audio_hours", 0) - 19 / 3600) < 1e-9,
          f"--report: exit {r.returncode}, {r.stdout}")
    r = run(["batch", "--report", out2])
    check("11 inputs" in r.stdout and "9 complete, 2 failed" in r.stdout and
          "broken.wav" in r.stdout, f"the report for a person: {r.stdout!r}")

    # a stem that is someone else's is never overwritten
    out3 = os.path.join(tmp, "out3")
    mine = os.path.join(out3, "alpha", "t1", "vocals.wav")
    os.makedirs(os.path.dirname(mine))
    with open(mine, "wb") as f:
        f.write(b"the user's own file")
    p = run(b + [os.path.join(src, "alpha"), "-o", out3, "--root", src])
    check(p.returncode == 1 and "vocals.wav" in p.stderr, f"another's stem: {p.stderr}")
    with open(mine, "rb") as f:
        check(f.read() == b"the user's own file", "another's stem was overwritten")
    check(os.path.exists(os.path.join(out3, "alpha", "t2", "vocals.wav")),
          "the batch went on past the refused input")

    # Slurm's array variables pick the shard; nonsense is refused
    out4 = os.path.join(tmp, "out4")
    os.makedirs(os.path.join(tmp, "xdg-empty", ".hidden"))
    env = {"SLURM_ARRAY_TASK_ID": "6", "SLURM_ARRAY_TASK_MIN": "2", "SLURM_ARRAY_TASK_STEP": "2",
           "SLURM_ARRAY_TASK_COUNT": "3", "SLURM_ARRAY_JOB_ID": "77"}
    p = run(b + [lst, "-o", out4], env=env)
    lines = batch_lines(out4)
    check(os.path.exists(os.path.join(out4, "logs", "batch-2-of-3.jsonl")) and
          [l["path"] for l in lines if not l.get("summary")] == uniq[2::3] and
          all(l.get("slurm_job") == "77" for l in lines), f"array task 6 of 2-6:2: {lines}")
    for args, what in (([lst, "-o", out4, "--shard", "3/3"], "--shard 3/3"),
                       ([lst, "-o", out4, "--shard", "x"], "--shard x"),
                       ([os.path.join(src, "beta"), "-o", out4, "--model", "nonesuch"],
                        "an unknown model"),
                       ([os.path.join(tmp, "xdg-empty"), "-o", out4], "a folder with no audio"),
                       ([lst], "no -o")):
        p = run(b + args)
        check(p.returncode == 2 and p.stderr.startswith("stembridge: error:"),
              f"{what}: exit {p.returncode}: {p.stderr!r}")
    p = run(b + ["-", "-o", out4], env={"SLURM_ARRAY_TASK_ID": "9", "SLURM_ARRAY_TASK_MIN": "0",
                                        "SLURM_ARRAY_TASK_COUNT": "4"})
    check(p.returncode == 2, f"a task outside its array's count: exit {p.returncode}")

    # SIGTERM in the middle of a batch: exit 143, nothing partial, the summary says so; the
    # next run does only what is missing
    longf = long_input(tmp, 120)
    lst2 = os.path.join(tmp, "list2.txt")
    with open(lst2, "w") as f:
        f.write("\n".join([paths[1], longf, paths[2]]) + "\n")
    out5 = os.path.join(tmp, "out5")
    proc = start_job(b + [lst2, "-o", out5, "--threads", "1"])
    # the long input's own temporary files: the first input's may still be there when its
    # job ends, and a signal then would stop the batch before the long one starts
    if check(wait_for_temp(os.path.join(out5), proc, within="long"),
             "SIGTERM: the batch ended too soon"):
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=120)
        check(proc.returncode == 143, f"SIGTERM: exit {proc.returncode}")
        check(temp_files(out5) == [], f"SIGTERM left {temp_files(out5)}")
        lines = batch_lines(out5)
        check([l.get("status") for l in lines] == ["done", "cancelled", None] and
              lines[-1].get("stopped_by") == "SIGTERM" and lines[-1].get("cancelled") == 2,
              f"SIGTERM's lines: {lines}")
        p = run(b + [lst2, "-o", out5])
        st = [l["status"] for l in batch_lines(out5)[len(lines):] if not l.get("summary")]
        check(p.returncode == 0 and st == ["skipped", "done", "done"], f"after SIGTERM: {st}")
    else:
        proc.kill()


def stem_files(out, track):
    return [os.path.join(out, track, s + ".wav") for s in STEMS]


def precision_input(tmp, device):
    """a 2 s input and the CLI's model arguments (the mini HTDemucs on DEVICE)"""
    rate = 44100
    inp = os.path.join(tmp, "p.wav")
    wavio.write_wav(inp, wavio.test_signal(2 * rate, 2, rate), 2, rate)
    return inp, ["--model", "htdemucs-mini", "--model-path", FIXTURES, "--device", device]


def precision_run(tmp, inp, model, name, extra, env=None):
    """separate INP with MODEL (its CLI arguments) into tmp/NAME: (folder, process, the
    manifest's precision)"""
    out = os.path.join(tmp, name)
    r = run(["separate", inp, "-o", out] + model + extra, env=env)
    check(r.returncode == 0, f"{name}: exit {r.returncode}: {r.stderr}")
    m = json.load(open(os.path.join(out, "p", "manifest.json"))) if r.returncode == 0 else {}
    return out, r, m.get("precision", {})


def check_reduced_stems(inp, b16, f32, what):
    """reduced-precision stems (folder b16: bf16, tf32) near the fp32 ones (f32) but not the
    same, adding back to INP"""
    worst, same = 0.0, 0
    for a, b in zip(stem_files(b16, "p"), stem_files(f32, "p")):
        d = rel_diff(wavio.read_wav(a)[0], wavio.read_wav(b)[0])
        worst = max(worst, d)
        same += d == 0
    print(f"{what} stems against fp32: worst relative L2 {worst:.3g}")
    check(same < len(STEMS) and worst < 2e-2,
          f"{what} stems against fp32: worst relative L2 {worst:.3g}, {same} identical")
    err = sum_check(inp, stem_files(b16, "p"))
    check(err is not None and err < 1e-4, f"{what} stems add back to the input: {err}")


def same_stems(a, b):
    return all(open(x, "rb").read() == open(y, "rb").read()
               for x, y in zip(stem_files(a, "p"), stem_files(b, "p")))


def group_precision(tmp):
    """The CPU's products as a user meets them: `devices` says which instructions and which
    product path the CPU uses, and a forced OpenBLAS fallback core changes neither; --precision
    bf16 runs bf16 where the CPU has AVX512_BF16 (stems near fp32's, still adding back to the
    input, the manifest saying so) and, where it has not, says so once and runs fp32."""
    p = run(["devices"])
    cpu = [l for l in p.stdout.splitlines() if "instructions " in l and "products: fp32 " in l]
    check(p.returncode == 0 and len(cpu) == 1 and "instructions " in cpu[0],
          f"devices: the CPU's instructions and products: {p.stdout}")
    forced = run(["devices"], env={"OPENBLAS_CORETYPE": "Prescott"})
    check(forced.stdout == p.stdout,
          f"a forced OpenBLAS core changed the products: {p.stdout!r} / {forced.stdout!r}")
    j = json.loads(run(["devices", "--json"]).stdout)
    check("products: fp32" in j[0].get("details", ""), f"devices --json details: {j[0]}")
    has_bf16 = cpu and "bf16 not available" not in cpu[0]
    inp, model = precision_input(tmp, "cpu")

    def separate(name, extra, env=None):
        return precision_run(tmp, inp, model, name, extra, env)

    f32, _, pf = separate("fp32", [])
    check(pf.get("requested") == "fp32" and pf.get("used") == "fp32" and pf.get("products"),
          f"fp32 manifest precision {pf}")
    b16, r, pb = separate("bf16", ["--precision", "bf16"])
    if has_bf16:
        check(pb.get("requested") == "bf16" and pb.get("used") == "bf16" and
              "bf16" in pb.get("products", ""), f"bf16 manifest precision {pb}")
        check_reduced_stems(inp, b16, f32, "bf16")
    else:
        print("this CPU has no AVX512_BF16: bf16 checked as the fallback only")
    # a CPU without the instructions (capped here): one warning, fp32, the fp32 stems exactly
    cap = {"SB_CPU_ISA": "avx2"}
    c32, _, _ = separate("cap-fp32", [], env=cap)
    c16, r, pc = separate("cap-bf16", ["--precision", "bf16"], env=cap)
    check(r.stderr.count("bf16 products need AVX512_BF16") == 1 and "running fp32" in r.stderr,
          f"bf16 without the instructions must say so once: {r.stderr!r}")
    check(pc.get("requested") == "bf16" and pc.get("used") == "fp32",
          f"bf16 without the instructions: manifest {pc}")
    check(same_stems(c16, c32), "bf16 without the instructions must give the fp32 stems")
    expect_refusal(["separate", inp, "-o", os.path.join(tmp, "x"), "--precision", "fp16"],
                   "an unknown precision", os.path.join(tmp, "x"), needle="fp16")


def group_precision_opencl(tmp):
    """--precision bf16 on an OpenCL device, as a user meets it: on a device without tensor
    cores (PoCL here) one warning, fp32, the fp32 stems exactly, the manifest saying bf16 was
    asked and fp32 ran; with the tensor-core kernel (its instruction emulated here, the same
    arithmetic as an NVIDIA GPU's: inputs rounded to bf16, fp32 sums) stems near fp32's that
    still add back to the input, and the manifest naming the kernel; a kernel that computes
    something else refused before its first product. The same for tf32 as the product path
    (SB_CL_GEMM=tf32)."""
    # `devices` says it before a job: an OpenCL device's products and whether it has bf16
    j = json.loads(run(["devices", "--json"]).stdout)
    cl = [d for d in j if d["id"] == "opencl:0"]
    if not cl:
        print("SKIP: no OpenCL device here (PoCL is not installed: a package build's chroot)")
        sys.exit(77)
    check(cl and "products: fp32 " in cl[0].get("details", "") and
          "bf16 not available (runs fp32)" in cl[0].get("details", ""),
          f"devices: opencl:0's products and bf16: {cl}")
    inp, model = precision_input(tmp, "opencl:0")

    def separate(name, extra, env=None):
        return precision_run(tmp, inp, model, name, extra, env)

    f32, _, pf = separate("fp32", [])
    check(pf.get("requested") == "fp32" and pf.get("used") == "fp32",
          f"fp32 manifest precision {pf}")
    n16, r, pn = separate("no-tensor", ["--precision", "bf16"])
    check(r.stderr.count("bf16 products on OpenCL need an NVIDIA GPU") == 1 and
          "running fp32" in r.stderr, f"bf16 without tensor cores must say so once: {r.stderr!r}")
    check(pn.get("requested") == "bf16" and pn.get("used") == "fp32",
          f"bf16 without tensor cores: manifest {pn}")
    check(same_stems(n16, f32), "bf16 without tensor cores must give the fp32 stems")
    b16, r, pb = separate("mma", ["--precision", "bf16"], env={"SB_CL_MMA": "emulate"})
    check(pb.get("requested") == "bf16" and pb.get("used") == "bf16" and
          "tensor cores" in pb.get("products", ""), f"bf16 manifest precision {pb}")
    check_reduced_stems(inp, b16, f32, "bf16 (tensor-core kernel, emulated)")
    # a kernel that computes something else (the fault injector swaps two of a fragment's
    # registers, as a driver running the instruction otherwise would): refused by its check
    # before the first product, said, and the job runs fp32, the fp32 stems byte for byte
    w16, r, pw = separate("mma-wrong", ["--precision", "bf16"],
                          env={"SB_CL_MMA": "emulate", "SB_FAULT_INJECT": "opencl:0:mma"})
    check("tensor-core product (bf16) is wrong on" in r.stderr and "running fp32" in r.stderr,
          f"a wrong tensor-core kernel must be refused and said: {r.stderr!r}")
    check(pw.get("requested") == "bf16" and pw.get("used") == "fp32",
          f"a wrong tensor-core kernel: manifest {pw}")
    check(same_stems(w16, f32), "a wrong tensor-core kernel must leave the fp32 stems")
    # tf32 as the fp32 product path (SB_CL_GEMM=tf32, the candidate default on NVIDIA): on a
    # device without tensor cores the own kernel, said; with them (emulated) tf32 stems, closer
    # to fp32 than bf16's
    o32, r, po = separate("tf32-none", [], env={"SB_CL_GEMM": "tf32"})
    check("SB_CL_GEMM=tf32 needs an NVIDIA GPU" in r.stderr and po.get("used") == "fp32" and
          po.get("products") == "own kernel", f"tf32 without tensor cores: {po} {r.stderr!r}")
    t32, _, pt = separate("tf32", [], env={"SB_CL_GEMM": "tf32", "SB_CL_MMA": "emulate"})
    check(pt.get("requested") == "fp32" and pt.get("used") == "tf32" and
          "tensor cores, tf32" in pt.get("products", ""), f"tf32 manifest precision {pt}")
    check_reduced_stems(inp, t32, f32, "tf32 (tensor-core kernel, emulated)")


def json_lines(text, what):
    """Every line of standard output as JSON (--progress json); a line that is not fails."""
    events = []
    for line in text.splitlines():
        try:
            events.append(json.loads(line))
        except ValueError:
            check(False, f"{what}: a line of stdout is not JSON: {line!r}")
    return events


def group_progress(tmp):
    """--progress json, what a front end (the Ardour split action) reads: the pid first, each
    file's fraction and time left, each file's stems, and the exit status with its message last;
    --timeline-start with one position per input. Cancelled, refused and failed runs say so the
    same way."""
    rate = 48000
    a, b = os.path.join(tmp, "a.wav"), os.path.join(tmp, "b.wav")
    wavio.write_wav(a, wavio.test_signal(rate * 2, 2, rate), 2, rate)
    wavio.write_wav(b, wavio.test_signal(rate * 3, 1, rate), 1, rate)
    out = os.path.join(tmp, "two")
    proc = subprocess.Popen([EXE, "separate", a, b, "-o", out, "--device", "cpu", "--progress",
                             "json", "--timeline-start", "120000,240000"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    so, se = proc.communicate(timeout=300)
    ev = json_lines(so, "two inputs")
    check(proc.returncode == 0, f"two inputs: exit {proc.returncode}: {se}")
    check(ev and ev[0] == {"event": "start", "pid": proc.pid, "inputs": 2},
          f"the first line is the start with the pid {proc.pid}: {ev[:1]}")
    check(ev and ev[-1].get("event") == "end" and ev[-1].get("exit") == 0 and
          ev[-1].get("message") == "2 files separated", f"the last line is the end: {ev[-1:]}")
    done = {e["input"]: e for e in ev if e.get("event") == "done"}
    check(sorted(done) == [0, 1], f"a done event per input: {sorted(done)}")
    for i, (inp, start) in enumerate(((a, 120000), (b, 240000))):
        d = done.get(i)
        if not d:
            continue
        check(d["file"] == inp and [s["stem"] for s in d["stems"]] == STEMS,
              f"input {i}: done {d}")
        check(all(os.path.isfile(s["path"]) for s in d["stems"]), f"input {i}: stems {d['stems']}")
        txt = open(d["stems_txt"]).read().splitlines()
        check(txt[0] == f"timeline_start {start}" and txt[1:] == [s["path"] for s in d["stems"]],
              f"input {i}: stems.txt {txt}")
        m = json.load(open(d["manifest"]))
        check(m["timeline_start"] == start, f"input {i}: manifest timeline_start "
              f"{m['timeline_start']}, expected {start}")
        check(wavio.time_reference(d["stems"][0]["path"]) == start, f"input {i}: BWF time "
              f"reference {wavio.time_reference(d['stems'][0]['path'])}, expected {start}")
    # a slow job: progress lines in between, a fraction that only grows, a time left
    slow = os.path.join(tmp, "slow.wav")
    wavio.write_wav(slow, wavio.test_signal(rate * 20, 2, rate), 2, rate)
    p = run(["separate", slow, "-o", os.path.join(tmp, "slow"), "--device", "cpu", "--progress",
             "json"], env={"SB_FAULT_INJECT": "job:slow:100"})
    ev = json_lines(p.stdout, "slow")
    prog = [e for e in ev if e.get("event") == "progress"]
    check(p.returncode == 0 and len(prog) >= 5, f"slow: exit {p.returncode}, {len(prog)} "
          f"progress lines: {p.stderr}")
    fr = [e["fraction"] for e in prog]
    check(all(0 <= x <= 1 for x in fr) and fr == sorted(fr), f"slow: fractions {fr}")
    check(all(e["file"] == slow and e["input"] == 0 for e in prog), "slow: the file named")
    check(any(e["eta_s"] > 0 for e in prog) and all(e["eta_s"] == -1 or e["eta_s"] >= 0
                                                    for e in prog), f"slow: time left {prog}")
    # cancelled by SIGTERM (the action's Cancel): the end says so, nothing is left
    outc = os.path.join(tmp, "cancel")
    e = dict(os.environ, SB_FAULT_INJECT="job:slow:100")
    proc = subprocess.Popen([EXE, "separate", slow, "-o", outc, "--device", "cpu", "--progress",
                             "json"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=e)
    first = proc.stdout.readline()
    check(json.loads(first).get("pid") == proc.pid, f"cancel: the pid first: {first!r}")
    line = proc.stdout.readline()  # its first progress: the job runs
    proc.send_signal(signal.SIGTERM)
    rest, _ = proc.communicate(timeout=120)
    ev = json_lines(line + rest, "cancel")
    check(proc.returncode == 143, f"cancel: exit {proc.returncode}")
    check(ev and ev[-1].get("event") == "end" and ev[-1].get("exit") == 143 and
          "cancelled" in ev[-1].get("message", ""), f"cancel: end {ev[-1:]}")
    check(any(x.get("event") == "failed" and x.get("input") == 0 for x in ev),
          "cancel: the file's failed event")
    check(not os.path.exists(outc) or files_under(outc) == [],
          f"cancel: left {files_under(outc) if os.path.exists(outc) else ''}")
    # refused: a position list that does not fit the inputs
    p = run(["separate", a, b, "-o", os.path.join(tmp, "refused"), "--progress", "json",
             "--timeline-start", "1,2,3"])
    ev = json_lines(p.stdout, "refused")
    check(p.returncode == 2 and ev[-1:] and ev[-1]["exit"] == 2 and
          "--timeline-start" in ev[-1]["message"], f"3 positions for 2 inputs: {p.returncode} {ev}")
    check("3 values for 2 inputs" in p.stderr, f"refused: {p.stderr!r}")
    check(not os.path.exists(os.path.join(tmp, "refused")), "refused: wrote something")
    for bad_list in ("12,x", "-5", "1,,2", "3,"):
        p = run(["separate", a, "-o", os.path.join(tmp, "refused"), "--timeline-start", bad_list])
        check(p.returncode == 2 and "--timeline-start" in p.stderr,
              f"--timeline-start {bad_list!r}: exit {p.returncode} {p.stderr!r}")
    # one input missing among two: its failed event, the other's stems, exit 1
    gone = os.path.join(tmp, "gone.wav")
    p = run(["separate", gone, a, "-o", os.path.join(tmp, "part"), "--device", "cpu",
             "--progress", "json"])
    ev = json_lines(p.stdout, "part")
    kinds = [(x["event"], x.get("input")) for x in ev if x["event"] in ("done", "failed")]
    check(p.returncode == 1 and sorted(kinds) == [("done", 1), ("failed", 0)],
          f"part: exit {p.returncode}, {kinds}")
    check(ev[-1:] and ev[-1]["exit"] == 1 and "gone.wav" in ev[-1]["message"] and
          "1 of 2 files failed" in ev[-1]["message"], f"part: end {ev[-1:]}")


GROUPS = {"toy": group_toy, "toy_family": group_toy_family, "share_slow": group_share_slow, "share_held": group_share_held, "precision": group_precision, "precision_opencl": group_precision_opencl, "batch": group_batch, "damaged": group_damaged, "signals": group_signals, "commit": group_commit,
          "repeat": group_repeat, "demucs": group_demucs, "separate": group_separate, "formats": group_formats, "bad": group_bad,
          "devices": group_devices, "fallback": group_fallback, "share": group_share,
          "progress": group_progress}

with tempfile.TemporaryDirectory(prefix="sb-cli-") as tmp:
    # the machine's installed models and catalogue stay out: 'auto' is the built-in model here
    os.environ["XDG_DATA_HOME"] = os.path.join(tmp, "xdg-data")
    os.environ["XDG_DATA_DIRS"] = os.path.join(tmp, "xdg-sys")
    os.environ.pop("STEMBRIDGE_CATALOG", None)
    # the devices' kept paces (models/pace_cache.h) start empty in every group and every run:
    # one group's slow device must not leave another's out
    os.environ["SB_PACE_FILE"] = os.path.join(tmp, "paces-group.txt")
    GROUPS[GROUP](tmp)
print(f"{GROUP}: {len(failures)} failure(s)")
sys.exit(1 if failures else 0)
