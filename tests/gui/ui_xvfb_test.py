#!/usr/bin/env python3
"""The plugin and its UI in a real host window under Xvfb (ui_host: lilv + suil, the way Ardour,
Carla and jalv embed an X11 UI). xdotool clicks the device button as a person would; the test
checks what the UI wrote, that the plugin ran its next job on the device chosen, that a saved
state carries the choice (its port value and the plugin's stable key), that the UI follows a
change the host makes, and that ui:scaleFactor scales both the drawing and the click targets.
Screenshots (PNG) go to OUT_DIR as the test's artifacts.

Usage: ui_xvfb_test.py UI_HOST OUT_DIR      (LV2_PATH must point at the build's lv2 folder)
Exit 0 pass, 1 fail, 77 skipped (Xvfb, xdotool, import or sordi missing).
"""
import os
import queue
import re
import shutil
import subprocess
import sys
import threading
import time

HOST, OUT = sys.argv[1], os.path.abspath(sys.argv[2])
TOOLS = ["Xvfb", "xdotool", "import", "sordi"]
missing = [t for t in TOOLS if not shutil.which(t)]
if missing:
    print("skipped: missing " + ", ".join(missing))
    sys.exit(77)
shutil.rmtree(OUT, ignore_errors=True)
os.makedirs(OUT)

# Layout of gui/stembridge_ui.c in unscaled units: the device button spans x 78..506, y 44..72
# of a 540 x 440 window.
BASE_W, BASE_H = 540, 440
DEVICE_BUTTON = (200, 58)
PORT_RECORD, PORT_DEVICE, PORT_MODEL = 2, 3, 5
PORT_PRECISION = 24  # the stereo plugin's Precision control (ttl: symbol "precision")
PORT_KEEP_TAKE = 25  # its Keep take audio control (ttl: symbol "keep_take")
# the row under the device: Record, Parallel, FP32, Keep take (each x 122 wide, 8 apart)
PRECISION_BUTTON = (335, 116)
KEEP_TAKE_BUTTON = (465, 116)
# the Model button, below the device row and the two lines of a fallback with its reason
MODEL_BUTTON = (300, 168)
fails = []


def check(cond, what):
    print(("PASS " if cond else "FAIL ") + what, flush=True)
    if not cond:
        fails.append(what)
    return cond


def answers(display):
    return subprocess.run(["xdotool", "getdisplaygeometry"], env=dict(os.environ, DISPLAY=display),
                          capture_output=True).returncode == 0


def start_xvfb():
    """A private Xvfb on a free display, used only once it answers. The display number is
    chosen here: Xvfb's -displayfd sometimes fails under meson ("Cannot write display number to
    fd"), and a server that reports its number may not yet accept connections."""
    xlog = open(os.path.join(OUT, "xvfb.log"), "w")
    start = 50 + os.getpid() % 400
    for n in range(start, start + 40):
        if os.path.exists("/tmp/.X%d-lock" % n) or os.path.exists("/tmp/.X11-unix/X%d" % n):
            continue
        display = ":%d" % n
        xvfb = subprocess.Popen(["Xvfb", display, "-screen", "0", "1280x900x24", "-nolisten", "tcp"],
                                stderr=xlog)
        end = time.time() + 15
        while xvfb.poll() is None and time.time() < end:
            if answers(display):
                return xvfb, display
            time.sleep(0.1)
        print("Xvfb on %s did not answer (exit %s); trying another; its log: %s" %
              (display, xvfb.poll(), xlog.name), flush=True)
        xvfb.kill()
        xvfb.wait()
    sys.exit("Xvfb did not start")


class Host:
    """ui_host with its stdout read on a thread, so the test can wait for a line."""

    def __init__(self, env, scale):
        self.p = subprocess.Popen([HOST, str(scale)], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, env=env, text=True, bufsize=1)
        self.lines = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.p.stdout:
            self.lines.put(line.rstrip("\n"))
        self.lines.put(None)

    def send(self, cmd):
        self.p.stdin.write(cmd + "\n")
        self.p.stdin.flush()

    def expect(self, pattern, timeout=10.0):
        end = time.time() + timeout
        while time.time() < end:
            try:
                line = self.lines.get(timeout=max(0.01, end - time.time()))
            except queue.Empty:
                break
            if line is None:
                break
            m = re.match(pattern, line)
            if m:
                return m
        return None

    def ask(self, cmd, pattern, timeout=10.0):
        self.send(cmd)
        return self.expect(pattern, timeout)

    def status(self):
        m = self.ask("status", r"STATUS device (\S+) state (\S+) jobs (\S+) device_out (\S+) "
                               r"fallback (\S+) devices (-?\d+)")
        keys = ("device", "state", "jobs", "device_out", "fallback")
        return dict({k: float(m.group(i + 1)) for i, k in enumerate(keys)},
                    devices=int(m.group(6))) if m else None

    def close(self):
        try:
            self.send("quit")
            return self.p.wait(timeout=20)
        except (BrokenPipeError, subprocess.TimeoutExpired):
            self.p.kill()
            return -1


def xdo(env, *args):
    subprocess.run(["xdotool", *args], env=env, check=True)


def click(env, geo, scale, button=1, where=DEVICE_BUTTON):
    x, y = geo[0] + int(where[0] * scale), geo[1] + int(where[1] * scale)
    xdo(env, "mousemove", str(x), str(y))
    time.sleep(0.1)
    xdo(env, "click", str(button))


def screenshot(env, geo, name):
    path = os.path.join(OUT, name)
    subprocess.run(["import", "-window", "root", "-crop",
                    "%dx%d+%d+%d" % (geo[2], geo[3], geo[0], geo[1]), "+repage", path],
                   env=env, check=True)
    print("screenshot", path, flush=True)
    return path


def saved_state(host, name):
    """Saves the running instance's state; returns (device port value, deviceKey)."""
    d = os.path.join(OUT, name)
    os.makedirs(d, exist_ok=True)
    if not host.ask("save " + d, r"SAVED (.*)"):
        return None, None
    nt = subprocess.run(["sordi", "-i", "turtle", "-o", "ntriples",
                         os.path.join(d, "state.ttl"), "file://" + d + "/"],
                        capture_output=True, text=True).stdout
    key = re.search(r'<https://stembridge.org/lv2/stembridge#deviceKey> "([^"]*)"', nt)
    node = re.search(r'(_:\S+) <http://lv2plug.in/ns/lv2core#symbol> "device" \.', nt)
    value = None
    if node:
        v = re.search(re.escape(node.group(1)) +
                      r' <http://lv2plug.in/ns/ext/presets#value> "([^"]+)"', nt)
        value = float(v.group(1)) if v else None
    return value, key.group(1) if key else None


def wait_write(host, port, timeout=5.0):
    m = host.expect(r"UI_WRITE %d (\S+)" % port, timeout)
    return float(m.group(1)) if m else None


def run_scale_1(env):
    h = Host(env, 1.0)
    try:
        if not check(h.expect("READY", 30) is not None, "the host embedded the UI"):
            return
        geo = tuple(int(v) for v in h.ask("geometry", r"GEOMETRY (\S+) (\S+) (\S+) (\S+)").groups())
        check(geo[2:] == (BASE_W, BASE_H), "UI size %dx%d at scale 1" % geo[2:])
        end = time.time() + 30
        st = h.status()
        while st and st["devices"] < 0 and time.time() < end:
            time.sleep(0.1)
            st = h.status()
        n = st["devices"] if st else -1
        check(n >= 0, "the plugin sent its device list (%d OpenCL devices)" % n)
        time.sleep(0.3)
        screenshot(env, geo, "ui-scale1-initial.png")

        # the Precision button: FP32 -> BF16 and back, as the plugin's control (saved by the host)
        click(env, geo, 1.0, where=PRECISION_BUTTON)
        check(wait_write(h, PORT_PRECISION) == 1.0, "a click on FP32 asks for bf16 products")
        time.sleep(0.3)
        screenshot(env, geo, "ui-scale1-bf16.png")
        click(env, geo, 1.0, where=PRECISION_BUTTON)
        check(wait_write(h, PORT_PRECISION) == 0.0, "a second click goes back to fp32")

        # the Keep take button: each take's recording stays beside its stems, and back
        click(env, geo, 1.0, where=KEEP_TAKE_BUTTON)
        check(wait_write(h, PORT_KEEP_TAKE) == 1.0, "a click on Keep take keeps take recordings")
        time.sleep(0.3)
        screenshot(env, geo, "ui-scale1-keep-take.png")
        click(env, geo, 1.0, where=KEEP_TAKE_BUTTON)
        check(wait_write(h, PORT_KEEP_TAKE) == 0.0, "a second click removes them after the commit")

        click(env, geo, 1.0)
        check(wait_write(h, PORT_DEVICE) == 1.0, "a click moves Auto -> CPU")
        click(env, geo, 1.0)
        want = 2.0 if n > 0 else 0.0
        check(wait_write(h, PORT_DEVICE) == want, "the next click gives %g (%s)" %
              (want, "first OpenCL device" if n > 0 else "back to Auto: no devices"))
        click(env, geo, 1.0, button=3)
        check(wait_write(h, PORT_DEVICE) == 1.0, "right-click steps back to CPU")
        click(env, geo, 1.0, button=4)
        check(wait_write(h, PORT_DEVICE) == 0.0, "scrolling up steps back to Auto")

        # the host moves the port (automation, generic UI, preset): the UI follows it
        h.ask("set %d 1" % PORT_DEVICE, r"SET")
        time.sleep(0.3)
        click(env, geo, 1.0)
        want = 2.0 if n > 0 else 0.0
        check(wait_write(h, PORT_DEVICE) == want, "after the host chose CPU, a click goes on from CPU")
        click(env, geo, 1.0, button=3)
        check(wait_write(h, PORT_DEVICE) == 1.0, "back to CPU")
        st = h.status()
        check(st and st["device"] == 1.0, "the plugin's device port holds CPU (%s)" % st)

        value, key = saved_state(h, "state-cpu")
        check(value == 1.0, "the saved state's device port is CPU (%s)" % value)
        check(key == "cpu", "the plugin saved the stable key 'cpu' (%s)" % key)

        # the plugin runs its next job on what was clicked
        h.ask("set %d 1" % PORT_RECORD, r"SET")
        time.sleep(0.1)
        h.ask("roll 2", r"ROLLING")
        xdo(env, "mousemove", str(geo[0] + geo[2] - 5), str(geo[1] + geo[3] - 5))
        time.sleep(1.3)
        screenshot(env, geo, "ui-scale1-recording.png")
        end = time.time() + 120
        st = h.status()
        while st and st["jobs"] < 1 and st["state"] != 5 and time.time() < end:
            time.sleep(0.2)
            st = h.status()
        check(st and st["jobs"] >= 1, "a take recorded through the window was separated (%s)" % st)
        check(st and st["device_out"] == 1.0 and st["fallback"] == 0,
              "it ran on the CPU chosen in the UI (%s)" % st)
        h.ask("set %d 0" % PORT_RECORD, r"SET")
        time.sleep(0.5)
        screenshot(env, geo, "ui-scale1-done.png")
        # hovering shows the chosen device's details
        xdo(env, "mousemove", str(geo[0] + 300), str(geo[1] + 60))
        time.sleep(0.5)
        screenshot(env, geo, "ui-scale1-tooltip.png")

        if n > 0:
            click(env, geo, 1.0)
            check(wait_write(h, PORT_DEVICE) == 2.0, "a click chooses the first OpenCL device")
            time.sleep(0.3)
            value, key = saved_state(h, "state-device1")
            check(value == 2.0, "the saved state's device port is Device 1 (%s)" % value)
            check(key is not None and key.startswith("opencl|"),
                  "the plugin saved a stable OpenCL key, not an index (%s)" % key)
            xdo(env, "mousemove", str(geo[0] + 300), str(geo[1] + 60))
            time.sleep(0.5)
            screenshot(env, geo, "ui-scale1-device1-tooltip.png")

        # a device this machine lacks (a session from another one): the job falls back to the
        # CPU, and the UI shows it in the warning colour with the reason
        h.ask("set %d 9" % PORT_DEVICE, r"SET")
        h.ask("set %d 1" % PORT_RECORD, r"SET")
        time.sleep(0.1)
        h.ask("roll 1", r"ROLLING")
        end = time.time() + 120
        st = h.status()
        while st and st["jobs"] < 2 and st["state"] != 5 and time.time() < end:
            time.sleep(0.2)
            st = h.status()
        check(st and st["jobs"] >= 2 and st["fallback"] == 1 and st["device_out"] == 1.0,
              "Device 8, missing here, ran on the CPU as a fallback (%s)" % st)
        h.ask("set %d 0" % PORT_RECORD, r"SET")
        xdo(env, "mousemove", str(geo[0] + geo[2] - 5), str(geo[1] + geo[3] - 5))
        time.sleep(0.5)
        screenshot(env, geo, "ui-scale1-fallback.png")

        # the Model button steps Auto -> Built-in -> HTDemucs; HTDemucs is not installed here:
        # the button says so and an Install button appears beside it (screenshot)
        click(env, geo, 1.0, where=MODEL_BUTTON)
        check(wait_write(h, PORT_MODEL) == 0.0, "the Model button steps from Auto to Built-in")
        click(env, geo, 1.0, where=MODEL_BUTTON)
        check(wait_write(h, PORT_MODEL) == 1.0, "and from Built-in to HTDemucs")
        xdo(env, "mousemove", str(geo[0] + geo[2] - 5), str(geo[1] + geo[3] - 5))
        time.sleep(1.0)
        screenshot(env, geo, "ui-scale1-model-missing.png")
        h.ask("set %d 4" % PORT_MODEL, r"SET")

        # the host makes the window larger: the UI follows, and its button grows with it
        check(h.ask("resize 760 460", r"RESIZED 760 460") is not None,
              "the host resized its window and the UI window it embeds")
        time.sleep(0.5)
        geo = tuple(int(v) for v in h.ask("geometry", r"GEOMETRY (\S+) (\S+) (\S+) (\S+)").groups())
        check(geo[2:] == (760, 460), "host window %dx%d" % geo[2:])
        h.ask("set %d 0" % PORT_DEVICE, r"SET")
        time.sleep(0.3)
        click(env, geo, 1.0, where=(700, 58))  # beyond the 540-wide layout's button
        check(wait_write(h, PORT_DEVICE) == 1.0, "the widened device button takes a click at x=700")
        xdo(env, "mousemove", str(geo[0] + geo[2] - 5), str(geo[1] + geo[3] - 5))
        time.sleep(0.5)
        screenshot(env, geo, "ui-scale1-resized.png")
    finally:
        check(h.close() == 0, "the host closed the UI and the plugin cleanly")


def run_scale_2(env):
    h = Host(env, 2.0)
    try:
        if not check(h.expect("READY", 30) is not None, "the host embedded the UI at scale 2"):
            return
        geo = tuple(int(v) for v in h.ask("geometry", r"GEOMETRY (\S+) (\S+) (\S+) (\S+)").groups())
        check(geo[2:] == (2 * BASE_W, 2 * BASE_H), "UI size %dx%d at ui:scaleFactor 2" % geo[2:])
        time.sleep(0.8)
        screenshot(env, geo, "ui-scale2.png")
        # the click targets scale with the drawing: the device button's scaled centre
        click(env, geo, 2.0)
        check(wait_write(h, PORT_DEVICE) == 1.0, "a click on the scaled device button works")
        # where the button would be unscaled (inside 78..506 x 44..72) is now the title
        click(env, geo, 1.0, where=(100, 60))
        check(wait_write(h, PORT_DEVICE, 1.0) is None, "a click outside the scaled button does not change the device")
    finally:
        check(h.close() == 0, "the host closed cleanly at scale 2")


xvfb, display = start_xvfb()
env = dict(os.environ, DISPLAY=display)
try:
    t0 = time.time()
    run_scale_1(env)
    run_scale_2(env)
    print("%.1f s" % (time.time() - t0))
finally:
    xvfb.terminate()
    xvfb.wait()
print("%d failed" % len(fails))
sys.exit(1 if fails else 0)
