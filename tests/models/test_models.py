#!/usr/bin/env python3
"""`stembridge models install` against a loopback HTTP server started here, serving checkpoints
that Debian's python3-torch writes in the released files' layout (made from the compact golden
weights in tests/fixtures/htdemucs), named as the release names them (<signature>-<first hex of
their SHA-256>.th), with a catalogue of our own (STEMBRIDGE_CATALOG). No test reaches beyond
this machine.

Shows: installed, listed and used (by name and by 'auto', stems equal to converting the same
checkpoints by hand, byte for byte); a bag of four files; six stems; a connection cut halfway
resumed; a server that ignores ranges; a wrong checksum refused; offline, HTTP error, stall,
full disk (download folder and model folder) and unwritable folder each one clear line; a proxy
from http_proxy; SIGTERM and SIGKILL mid-download leave nothing installed and the next run
resumes; remove; progress as a bar on a terminal and as plain lines otherwise.

And through the plugin (tests/plugin's lilv host, `test_plugin modelinstall`): a model installed
from the plugin's UI while a take waits for it, and a failed install failing its waiting take.

usage: test_models.py STEMBRIDGE STEMBRIDGE_CONVERT [TEST_PLUGIN]   (exits 77 without torch)
"""
import os
import sys

try:
    import torch  # noqa: F401
except ImportError:
    # Debian's torch is in the system python's dist-packages (a pyenv or venv python3 earlier
    # on PATH does not see it)
    system = "/usr/bin/python3"
    if (os.environ.get("SB_TORCH_REEXEC") != "1" and os.path.exists(system) and
            os.path.realpath(system) != os.path.realpath(sys.executable)):
        os.environ["SB_TORCH_REEXEC"] = "1"
        os.execv(system, [system] + sys.argv)
    print("SKIP: needs torch to write the checkpoints (Debian: apt-get install python3-torch)")
    sys.exit(77)

import hashlib  # noqa: E402
import http.server  # noqa: E402
import json  # noqa: E402
import pty  # noqa: E402
import shutil  # noqa: E402
import signal  # noqa: E402
import socket  # noqa: E402
import subprocess  # noqa: E402
import tempfile  # noqa: E402
import threading  # noqa: E402
import time  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [os.path.join(HERE, "..", "convert"), os.path.join(HERE, "..", "cli")]
import make_fixtures as mf  # noqa: E402
import test_torch as tt  # noqa: E402
import wavio  # noqa: E402

CLI = os.path.abspath(sys.argv[1])
CONVERT = os.path.abspath(sys.argv[2])
TEST_PLUGIN = os.path.abspath(sys.argv[3]) if len(sys.argv) > 3 else None
FIXTURES = os.path.join(HERE, "..", "fixtures", "htdemucs")
failures = []


def check(cond, msg):
    if not cond:
        failures.append(msg)
        print("FAIL: " + msg, file=sys.stderr)
    return cond


# ---- the server ----

FILES = {}      # URL path below the mode ("hybrid_transformer/x.th") -> bytes
REQUESTS = []   # (mode, path, Range header or None)
CUT_ONCE = set()


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):
        pass

    def do_GET(self):
        path = self.path
        if path.startswith("http://"):  # through a proxy: an absolute URI
            path = "/" + path.split("/", 3)[3]
        parts = path.lstrip("/").split("/", 1)
        mode, rel = parts[0], parts[1] if len(parts) > 1 else ""
        rng = self.headers.get("Range")
        REQUESTS.append((mode, rel, rng, self.path))
        data = FILES.get(rel)
        if mode == "404" or data is None:
            self.send_error(404)
            return
        if mode == "wrong":
            data = bytes((b + 1) % 256 for b in data)
        start = 0
        if rng and mode != "norange" and rng.startswith("bytes="):
            start = int(rng[6:].split("-")[0])
            if start >= len(data):
                self.send_response(416)
                self.send_header("Content-Range", f"bytes */{len(data)}")
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
        body = data[start:]
        self.send_response(206 if start else 200)
        if start:
            self.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Accept-Ranges", "none" if mode == "norange" else "bytes")
        self.end_headers()
        cut = mode == "alwayscut" or (mode == "cut" and rel not in CUT_ONCE)
        if cut:
            CUT_ONCE.add(rel)
            self.wfile.write(body[:len(body) // 2])
            self.wfile.flush()
            self.connection.shutdown(socket.SHUT_RDWR)
            self.close_connection = True
            return
        if mode == "stall":
            self.wfile.write(body[:100])
            self.wfile.flush()
            time.sleep(30)
            return
        if mode == "slow":
            for i in range(0, len(body), 32768):
                self.wfile.write(body[i:i + 32768])
                self.wfile.flush()
                time.sleep(0.1)
            return
        if mode == "norange" and rng:
            # says 200 and sends the whole file, as a server without ranges does
            pass
        self.wfile.write(body)


class Server(http.server.ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request, client_address):
        pass  # a client that hangs up mid-file is part of these tests


# ---- helpers ----

def run(args, env=None, timeout=300, exe=None):
    e = dict(os.environ)
    e.update(env or {})
    return subprocess.run([exe or CLI] + args, capture_output=True, text=True, env=e,
                          timeout=timeout)


def files_under(d):
    out = []
    for root, _, names in os.walk(d):
        out += [os.path.join(root, n) for n in names]
    return sorted(out)


def sha(b):
    return hashlib.sha256(b).hexdigest()


def checkpoint(golden_name, path):
    """The golden model's weights saved by torch as a released checkpoint."""
    meta, state = tt.read_golden(os.path.join(FIXTURES, golden_name + ".safetensors"))
    kw = tt.settings_from_strings(meta)
    mf.save(mf.package(mf.HTDemucs, kw, state, mf.training_config()), path)
    return open(path, "rb").read()


def one_error(p, what, needle=None):
    errs = [l for l in p.stderr.splitlines() if "error" in l]
    check(p.returncode != 0, f"{what}: exit 0")
    check(len(errs) == 1, f"{what}: {len(errs)} error lines: {p.stderr!r}")
    if needle and errs:
        check(needle.lower() in errs[0].lower(), f"{what}: '{needle}' not in {errs[0]!r}")
    return errs[0] if errs else ""


def nothing_installed(models, what, name="htdemucs"):
    got = files_under(models) if os.path.isdir(models) else []
    check(not [f for f in got if os.path.basename(f) == name + ".safetensors"],
          f"{what}: {name} was installed: {got}")
    check(not [f for f in got if ".part-" in f], f"{what}: temporary files left: {got}")


def can_mount():
    if os.geteuid() != 0:
        return False
    d = tempfile.mkdtemp()
    ok = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", d],
                        capture_output=True).returncode == 0
    if ok:
        subprocess.run(["umount", d])
    os.rmdir(d)
    return ok


def main(tmp):
    srv = Server(("127.0.0.1", 0), Handler)
    port = srv.server_address[1]
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{port}"

    # checkpoints in the release's layout and names, and a catalogue of them
    work = os.path.join(tmp, "ckpt")
    os.makedirs(work)
    four = checkpoint("htdemucs-mini", os.path.join(work, "four.th"))
    six = checkpoint("htdemucs_6s-mini", os.path.join(work, "six.th"))
    names = {}
    for sig, data in (("955717e8", four), ("f7e0c4bc", four), ("d12395a8", four),
                      ("92cfc3b6", four), ("04573f0d", four), ("5c90dfd2", six)):
        name = f"{sig}-{sha(data)[:8]}.th"
        FILES["hybrid_transformer/" + name] = data
        names[sig] = name
        open(os.path.join(work, name), "wb").write(data)
    four_stems = ["vocals", "drums", "bass", "other"]
    cat = {"catalog_version": 1, "base_url": url + "/good/", "models": [
        {"name": "htdemucs", "stems": four_stems, "auto": 1,
         "files": [{"path": "hybrid_transformer/" + names["955717e8"], "bytes": len(four)}]},
        {"name": "htdemucs_ft", "stems": four_stems, "auto": 2,
         "bag_weights": "1,0,0,0;0,1,0,0;0,0,1,0;0,0,0,1",
         "files": [{"path": "hybrid_transformer/" + names[s]}
                   for s in ("f7e0c4bc", "d12395a8", "92cfc3b6", "04573f0d")]},
        {"name": "htdemucs_6s", "stems": four_stems + ["guitar", "piano"], "auto": 3,
         "files": [{"path": "hybrid_transformer/" + names["5c90dfd2"], "bytes": len(six)}]},
    ]}
    catalog = os.path.join(tmp, "catalog.json")
    json.dump(cat, open(catalog, "w"))
    home = os.path.join(tmp, "home")
    models = os.path.join(home, "data", "stembridge", "models")
    cache = os.path.join(home, "cache", "stembridge", "downloads")
    os.environ.update({"STEMBRIDGE_CATALOG": catalog, "HOME": home,
                       "XDG_DATA_HOME": os.path.join(home, "data"),
                       "XDG_DATA_DIRS": os.path.join(home, "none"),
                       "XDG_CACHE_HOME": os.path.join(home, "cache")})
    for v in ("http_proxy", "https_proxy", "HTTPS_PROXY", "ALL_PROXY", "all_proxy", "no_proxy"):
        os.environ.pop(v, None)

    # 1. nothing installed: 'models' says how to install each one; auto is the built-in model
    p = run(["models"])
    check(p.returncode == 0 and "auto: builtin" in p.stdout and
          "install: stembridge models install htdemucs\n" in p.stdout and
          "install: stembridge models install htdemucs_6s" in p.stdout,
          f"models, none installed: {p.stdout}")

    # 2. install htdemucs: listed, equal to converting the checkpoint by hand, used by the CLI
    p = run(["models", "install", "htdemucs"])
    check(p.returncode == 0, f"install htdemucs: {p.returncode} {p.stderr}")
    installed = os.path.join(models, "htdemucs.safetensors")
    ref = os.path.join(tmp, "ref", "htdemucs.safetensors")
    os.makedirs(os.path.dirname(ref))
    c = run([os.path.join(work, names["955717e8"]), "-o", ref, "-q"], exe=CONVERT)
    check(c.returncode == 0, f"stembridge-convert by hand: {c.stderr}")
    check(os.path.exists(installed) and open(installed, "rb").read() == open(ref, "rb").read(),
          "the installed model is not the converter's output byte for byte")
    check(not os.listdir(cache), f"downloads left in the cache: {os.listdir(cache)}")
    p = run(["models"])
    check("htdemucs: installed" in p.stdout and "auto: htdemucs" in p.stdout and
          installed in p.stdout, f"models after install: {p.stdout}")
    j = json.loads(run(["models", "--json"]).stdout)
    check(j["auto"] == "htdemucs" and any(m["name"] == "htdemucs" and m["installed"]
                                           for m in j["models"]), f"models --json: {j}")
    p = run(["models", "install", "htdemucs"])
    check(p.returncode == 0 and "already installed" in p.stdout + p.stderr,
          f"installing again: {p.returncode} {p.stdout} {p.stderr}")
    clip = os.path.join(tmp, "clip.wav")
    wavio.write_wav(clip, wavio.test_signal(44100 * 2, 2, 44100), 2, 44100)
    for args, tag in ((["--model", "htdemucs"], "named"), ([], "auto")):
        out = os.path.join(tmp, "sep-" + tag)
        p = run(["separate", clip, "-o", out, "-q", "--device", "cpu"] + args)
        check(p.returncode == 0, f"separate with the installed model ({tag}): {p.stderr}")
        m = json.load(open(os.path.join(out, "clip", "manifest.json")))
        check(m["model"]["name"] == "htdemucs" and
              m["model"]["requested"] == ("htdemucs" if tag == "named" else "auto"),
              f"manifest model ({tag}): {m['model']}")
    ref_out = os.path.join(tmp, "sep-ref")
    p = run(["separate", clip, "-o", ref_out, "-q", "--device", "cpu", "--model", ref])
    for s in four_stems:
        a = open(os.path.join(tmp, "sep-named", "clip", s + ".wav"), "rb").read()
        b = open(os.path.join(ref_out, "clip", s + ".wav"), "rb").read()
        check(a == b, f"{s}: the installed model's stem differs from the converted one's")

    # 3. a bag of four files, and six stems
    p = run(["models", "install", "htdemucs_ft", "htdemucs_6s", "-q"])
    check(p.returncode == 0 and p.stdout == "" and p.stderr == "",
          f"install htdemucs_ft and htdemucs_6s quietly: {p.returncode} {p.stdout} {p.stderr}")
    ft_ref = os.path.join(tmp, "ref", "htdemucs_ft.safetensors")
    run([os.path.join(work, names[s]) for s in ("f7e0c4bc", "d12395a8", "92cfc3b6", "04573f0d")]
        + ["-o", ft_ref, "-q"], exe=CONVERT)
    check(open(os.path.join(models, "htdemucs_ft.safetensors"), "rb").read() ==
          open(ft_ref, "rb").read(), "htdemucs_ft differs from the converter's bag")
    out6 = os.path.join(tmp, "sep-six")
    p = run(["separate", clip, "-o", out6, "--model", "htdemucs_6s", "-q"])
    six_stems = four_stems + ["guitar", "piano"]
    check(p.returncode == 0 and all(os.path.exists(os.path.join(out6, "clip", s + ".wav"))
                                    for s in six_stems), f"six stems: {p.stderr}")
    m = json.load(open(os.path.join(out6, "clip", "manifest.json")))
    check([s["stem"] for s in m["stems"]] == ["vocals", "drums", "bass", "other", "guitar",
                                              "piano"], f"manifest stems {m['stems']}")
    txt = open(os.path.join(out6, "clip", "stems.txt")).read().split()
    check(len([l for l in txt if l.endswith(".wav")]) == 6, f"stems.txt: {txt}")
    x, _, _, _, _ = wavio.read_wav(clip)
    tot = [0.0] * len(x)
    for s in six_stems:
        y, _, _, _, _ = wavio.read_wav(os.path.join(out6, "clip", s + ".wav"))
        for i, v in enumerate(y):
            tot[i] += v
    err = sum((a - b) ** 2 for a, b in zip(tot, x)) ** 0.5 / sum(a * a for a in x) ** 0.5
    check(err < 1e-4, f"six stems add back to the input with relative error {err}")
    p = run(["separate", clip, "-o", os.path.join(tmp, "g"), "--model", "htdemucs_6s",
             "--stems", "guitar,piano", "-q"])
    check(p.returncode == 0 and sorted(os.listdir(os.path.join(tmp, "g", "clip"))) ==
          ["guitar.wav", "manifest.json", "piano.wav", "stems.txt"], f"--stems guitar,piano: {p.stderr}")
    p = run(["separate", clip, "-o", os.path.join(tmp, "h"), "--model", "htdemucs",
             "--stems", "vocals,guitar"])
    e = one_error(p, "a 4-stem model asked for guitar", "no guitar stem")
    check("vocals, drums, bass, other" in e, f"the refusal lists the model's stems: {e}")

    # 4. remove
    p = run(["models", "remove", "htdemucs_ft"])
    check(p.returncode == 0 and not os.path.exists(os.path.join(models, "htdemucs_ft.safetensors")),
          f"remove: {p.returncode} {p.stderr}")
    one_error(run(["models", "remove", "htdemucs_ft"]), "remove a missing model", "not installed")

    # 5. a connection cut halfway: resumed in the same run from where it broke
    REQUESTS.clear()
    p = run(["models", "install", "htdemucs", "--force", "--base-url", url + "/cut/"])
    ranges = [r for m, _, r, _ in REQUESTS if m == "cut"]
    check(p.returncode == 0 and len(ranges) == 2 and ranges[0] is None and
          ranges[1] == f"bytes={len(four) // 2}-", f"cut once: {p.returncode} {ranges} {p.stderr}")
    check(open(installed, "rb").read() == open(ref, "rb").read(), "resumed install differs")
    # a connection that always breaks: three tries, a clear line, the partial kept; the next
    # run against a good server resumes it
    os.unlink(installed)
    p = run(["models", "install", "htdemucs", "--base-url", url + "/alwayscut/"])
    one_error(p, "a connection that always breaks", "3 times")
    nothing_installed(models, "always cut")
    partials = [f for f in os.listdir(cache) if f.endswith(".partial")]
    check(partials, "the partial download is kept for a resume")
    REQUESTS.clear()
    p = run(["models", "install", "htdemucs"])
    check(p.returncode == 0 and any(r for m, _, r, _ in REQUESTS if m == "good"),
          f"resume in a later run: {p.returncode} {REQUESTS} {p.stderr}")
    check("resuming" in p.stderr, f"the resume is said: {p.stderr!r}")
    # a server without ranges: the partial file starts again, and the result is right
    os.unlink(installed)
    p = run(["models", "install", "htdemucs", "--base-url", url + "/alwayscut/"])
    p = run(["models", "install", "htdemucs", "--base-url", url + "/norange/"])
    check(p.returncode == 0 and open(installed, "rb").read() == open(ref, "rb").read(),
          f"no ranges: {p.returncode} {p.stderr}")

    # 6. refusals, each one line, nothing installed
    os.unlink(installed)
    one_error(run(["models", "install", "htdemucs", "--base-url", url + "/wrong/"]),
              "wrong bytes", "checksum")
    nothing_installed(models, "wrong checksum")
    check(not os.listdir(cache), f"a file that failed its checksum stays: {os.listdir(cache)}")
    one_error(run(["models", "install", "htdemucs", "--base-url", url + "/404/"]), "HTTP 404", "404")
    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))
    dead = closed.getsockname()[1]
    closed.close()
    one_error(run(["models", "install", "htdemucs", "--base-url", f"http://127.0.0.1:{dead}/"]),
              "offline", "cannot reach")
    one_error(run(["models", "install", "htdemucs", "--base-url", url + "/stall/",
                   "--timeout", "1"], timeout=120), "a stalled transfer", "stalled")
    nothing_installed(models, "refusals")
    one_error(run(["models", "install", "htdemucs", "--model-dir", "/dev/null/models"]),
              "unwritable model folder", "/dev/null/models")
    p = run(["models", "install", "nosuch"])
    check(p.returncode == 2 and "htdemucs_6s" in p.stderr, f"unknown name: {p.returncode} {p.stderr}")
    bad_cat = os.path.join(tmp, "bad.json")
    open(bad_cat, "w").write('{"catalog_version": 1, "base_url": "ftp://x/", "models": []}')
    one_error(run(["models", "install", "htdemucs"], env={"STEMBRIDGE_CATALOG": bad_cat}),
              "a damaged catalogue", "base_url")
    # the base URL from the environment, and a proxy from http_proxy
    REQUESTS.clear()
    p = run(["models", "install", "htdemucs"], env={"STEMBRIDGE_MODEL_URL": url + "/cut/"})
    check(p.returncode == 0 and any(m == "cut" for m, _, _, _ in REQUESTS),
          f"STEMBRIDGE_MODEL_URL: {p.returncode} {p.stderr}")
    os.unlink(installed)
    REQUESTS.clear()
    p = run(["models", "install", "htdemucs", "--base-url", "http://models.invalid/good/"],
            env={"http_proxy": url})
    check(p.returncode == 0 and any(full.startswith("http://models.invalid/")
                                    for _, _, _, full in REQUESTS),
          f"through http_proxy: {p.returncode} {REQUESTS} {p.stderr}")

    # 7. a full disk: the download folder, then the model folder (small tmpfs, root only)
    if can_mount():
        os.unlink(installed)
        for which, size in (("cache", "64k"), ("models", "256k")):
            mnt = os.path.join(tmp, "mnt-" + which)
            os.makedirs(mnt)
            subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", mnt], check=True)
            try:
                extra = ["--cache-dir", mnt] if which == "cache" else ["--model-dir", mnt]
                p = run(["models", "install", "htdemucs"] + extra)
                one_error(p, f"full {which} folder", "no space")
                nothing_installed(mnt if which == "models" else models, f"full {which}")
                check(not [f for f in os.listdir(mnt) if ".part-" in f],
                      f"full {which}: temporary files {os.listdir(mnt)}")
            finally:
                subprocess.run(["umount", mnt], check=True)
    else:
        print("SKIP part: a full disk needs a tmpfs mount (root)")

    # 8. SIGTERM and SIGKILL mid-download: nothing installed, and the next run resumes
    if os.path.exists(installed):
        os.unlink(installed)
    for f in os.listdir(cache):
        os.unlink(os.path.join(cache, f))
    for sig in (signal.SIGTERM, signal.SIGKILL):
        proc = subprocess.Popen([CLI, "models", "install", "htdemucs", "--base-url",
                                 url + "/slow/"], stderr=subprocess.PIPE, text=True)
        t0 = time.time()
        while time.time() - t0 < 30 and not [f for f in os.listdir(cache)
                                             if f.endswith(".partial") and
                                             os.path.getsize(os.path.join(cache, f)) > 0]:
            time.sleep(0.02)
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=60)
        if sig == signal.SIGTERM:
            check(proc.returncode == 143 and "SIGTERM" in err and "resumes" in err,
                  f"SIGTERM: {proc.returncode} {err!r}")
        nothing_installed(models, f"signal {sig}")
        check("htdemucs: not installed" in run(["models"]).stdout, "listed as installed after a kill")
    p = run(["models", "install", "htdemucs"])
    check(p.returncode == 0 and "resuming" in p.stderr and
          open(installed, "rb").read() == open(ref, "rb").read(), f"after the kill: {p.stderr}")

    # 9. progress: plain lines when not a terminal, a bar with speed and time left on one
    os.unlink(installed)
    p = run(["models", "install", "htdemucs", "--base-url", url + "/slow/"])
    check("downloading " + names["955717e8"] in p.stderr and "%" in p.stderr and
          "\r" not in p.stderr, f"plain progress: {p.stderr!r}")
    os.unlink(installed)
    pid, fd = pty.fork()
    if pid == 0:
        os.execv(CLI, [CLI, "models", "install", "htdemucs", "--base-url", url + "/slow/"])
    seen = b""
    while True:
        try:
            chunk = os.read(fd, 4096)
        except OSError:
            break
        if not chunk:
            break
        seen += chunk
    _, status = os.waitpid(pid, 0)
    text = seen.decode(errors="replace")
    check(os.waitstatus_to_exitcode(status) == 0 and "\r" in text and "MB/s" in text and
          "left" in text and "[#" in text, f"terminal progress bar: {text!r}")

    # 10. the plugin installs a model from its UI while a take waits for it
    if TEST_PLUGIN:
        # paths below the server's modes: htdemucs arrives slowly, htdemucs_6s never does
        pcat = dict(cat, base_url=url + "/")
        slow = dict(cat["models"][0])
        slow["files"] = [dict(f, path="slow/" + f["path"]) for f in slow["files"]]
        broken = dict(cat["models"][2])
        broken["files"] = [dict(f, path="alwayscut/" + f["path"]) for f in broken["files"]]
        pcat["models"] = [slow, broken]
        plugin_cat = os.path.join(tmp, "plugin-catalog.json")
        json.dump(pcat, open(plugin_cat, "w"))
        p = subprocess.run([TEST_PLUGIN, "modelinstall"], capture_output=True, text=True,
                           env=dict(os.environ, STEMBRIDGE_CATALOG=plugin_cat), timeout=300)
        check(p.returncode == 0, f"the plugin's install: {p.returncode}\n{p.stderr[-3000:]}")
    srv.shutdown()


with tempfile.TemporaryDirectory(prefix="sb-models-") as tmp:
    main(tmp)
print(f"models: {len(failures)} failure(s)")
sys.exit(1 if failures else 0)
