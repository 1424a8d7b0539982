#!/usr/bin/env python3
"""Stembridge in Carla 2.5.10, headless (libcarla_standalone2 through carla_backend.py, Dummy
driver), after ../../../shared/carla/headless_test.py.

Carla deletes its own makePath folder (<cwd>/<client>.tmp/...) when a plugin is removed or a
project loads (../shared/HOSTS.md), so the plugin must not put stems there: this checks that the
stems of a take recorded in Carla land in the user-visible default folder, survive removing the
plugin, and that the device choice and the plugin's state come back with the project. Then the
output folder is chosen the way Carla's generic UI offers it (its one file slot, "file" custom
data of path type: a file picked inside the folder) and the next take's stems land there; and
the plugin leaves nothing in Carla's makePath folder.
Usage: CARLA_SRC=<built Carla tree> LV2_PATH=<build>/lv2:/usr/lib/lv2 carla_test.py WORKDIR
Exit 77 (skipped) without CARLA_SRC."""
import glob, math, os, struct, sys, time, wave

CARLA_SRC = os.environ.get("CARLA_SRC")
if not CARLA_SRC or not os.path.isfile(os.path.join(CARLA_SRC, "bin", "libcarla_standalone2.so")):
    print("CARLA_SRC not set to a built Carla tree: skipped")
    sys.exit(77)
sys.path.insert(0, os.path.join(CARLA_SRC, "source", "frontend"))
from carla_backend import *  # noqa: E402,F403

WORK = os.path.abspath(sys.argv[1])
os.system("rm -rf '%s'" % WORK)
os.makedirs(os.path.join(WORK, "proj"))
os.environ["XDG_DATA_HOME"] = os.path.join(WORK, "data")
PROJ = os.path.join(WORK, "proj", "sb.carxp")
WAV = os.path.join(WORK, "in.wav")
URI = "https://stembridge.org/lv2/stembridge#stereo"
fails = []

def check(cond, what):
    print(("PASS " if cond else "FAIL ") + what, flush=True)
    if not cond:
        fails.append(what)

def idle(secs):
    end = time.time() + secs
    while time.time() < end:
        host.engine_idle()
        time.sleep(0.02)

with wave.open(WAV, "wb") as w:
    w.setnchannels(2); w.setsampwidth(2); w.setframerate(48000)
    w.writeframes(b"".join(struct.pack("<hh", int(12000 * math.sin(i * 0.05)), int(9000 * math.sin(i * 0.013)))
                           for i in range(48000 * 4)))
os.chdir(WORK)

host = CarlaHostDLL(os.path.join(CARLA_SRC, "bin", "libcarla_standalone2.so"), False)
host.set_engine_option(ENGINE_OPTION_PROCESS_MODE, ENGINE_PROCESS_MODE_CONTINUOUS_RACK, "")
host.set_engine_option(ENGINE_OPTION_TRANSPORT_MODE, ENGINE_TRANSPORT_MODE_INTERNAL, "")
host.set_engine_option(ENGINE_OPTION_AUDIO_BUFFER_SIZE, 512, "")
host.set_engine_option(ENGINE_OPTION_AUDIO_SAMPLE_RATE, 48000, "")
host.set_engine_option(ENGINE_OPTION_PATH_BINARIES, 0, os.path.join(CARLA_SRC, "bin"))
host.set_engine_option(ENGINE_OPTION_PATH_RESOURCES, 0, os.path.join(CARLA_SRC, "bin", "resources"))
host.set_engine_option(ENGINE_OPTION_PLUGIN_PATH, PLUGIN_LV2, os.environ.get("LV2_PATH", "/usr/lib/lv2"))
if not host.engine_init("Dummy", "Carla"):
    print("engine_init failed:", host.get_last_error())
    sys.exit(1)

def param(pid, symbol):
    for i in range(host.get_parameter_count(pid)):
        if host.get_parameter_info(pid, i)["symbol"] == symbol:
            return i
    return -1

try:
    check(host.add_plugin(BINARY_NATIVE, PLUGIN_INTERNAL, "", "", "audiofile", 0, None, 0), "audiofile")
    host.set_custom_data(0, "http://kxstudio.sf.net/ns/carla/path", "file", WAV)
    host.set_parameter_value(0, 1, 0.0)  # Host Sync off
    check(host.add_plugin(BINARY_NATIVE, PLUGIN_LV2, "", "", URI, 0, None, 0),
          "add Stembridge (%s)" % host.get_last_error())
    sb = 1
    P = {s: param(sb, s) for s in ("record", "device", "state", "jobs_done", "fallback")}
    print("parameters", P, flush=True)
    check(all(v >= 0 for v in P.values()), "Stembridge's ports appear as parameters")
    host.set_parameter_value(sb, P["device"], 1.0)  # CPU
    host.set_parameter_value(sb, P["record"], 1.0)
    host.transport_relocate(48000 * 2)
    idle(0.3)
    host.transport_play()
    idle(2.5)
    check(host.get_current_parameter_value(sb, P["state"]) == 1.0, "recording while Carla's transport rolls")
    host.transport_pause()
    idle(0.3)
    host.set_parameter_value(sb, P["record"], 0.0)
    end = time.time() + 300
    while time.time() < end and host.get_current_parameter_value(sb, P["jobs_done"]) < 1:
        idle(0.1)
    check(host.get_current_parameter_value(sb, P["jobs_done"]) >= 1, "the take was separated")
    stems = glob.glob(os.path.join(WORK, "data", "stembridge", "stems", "*", "*.wav"))
    print("stems:", stems, flush=True)
    check(len(stems) == 4, "4 stems in the default folder under XDG_DATA_HOME")
    check(not glob.glob(os.path.join(WORK, "Carla.tmp", "**", "*.wav"), recursive=True),
          "no stems in Carla's makePath folder")

    # the output folder through Carla's one file slot: a file picked in the folder wanted
    CHOSEN = os.path.join(WORK, "my stems")
    os.makedirs(CHOSEN)
    open(os.path.join(CHOSEN, "notes.txt"), "w").write("the folder the user chose\n")
    host.set_custom_data(sb, "http://kxstudio.sf.net/ns/carla/path", "file",
                         os.path.join(CHOSEN, "notes.txt"))
    idle(0.3)
    host.set_parameter_value(sb, P["record"], 1.0)
    host.transport_relocate(48000 * 2)
    idle(0.3)
    host.transport_play()
    idle(2.0)
    host.transport_pause()
    idle(0.3)
    host.set_parameter_value(sb, P["record"], 0.0)
    end = time.time() + 300
    while time.time() < end and host.get_current_parameter_value(sb, P["jobs_done"]) < 2:
        idle(0.1)
    chosen = glob.glob(os.path.join(CHOSEN, "*", "*.wav"))
    print("stems in the chosen folder:", chosen, flush=True)
    check(len(chosen) == 4, "the next take's 4 stems in the folder chosen through Carla's file slot")
    leftovers = [p for p in glob.glob(os.path.join(WORK, "*.tmp", "**"), recursive=True)
                 if "stembridge" in p.lower() or p.endswith("takes")]
    print("in Carla's makePath folders:", leftovers, flush=True)
    check(not leftovers, "nothing of Stembridge's in Carla's makePath folder while it runs")
    check(host.save_project(PROJ), "save_project")
    xml = open(PROJ).read()
    check("deviceKey" in xml and ">cpu<" in xml, "device key saved in the project")
    check(host.remove_all_plugins(), "remove_all_plugins")
    idle(0.5)
    check(all(os.path.isfile(s) for s in stems), "stems survive removing the plugin")
    check(host.load_project(PROJ), "load_project")
    idle(1.0)
    sb = -1
    for i in range(host.get_current_plugin_count()):
        if host.get_plugin_info(i)["label"] == URI:
            sb = i
    check(sb >= 0, "Stembridge back after load_project")
    if sb >= 0:
        check(host.get_current_parameter_value(sb, param(sb, "device")) == 1.0, "device choice restored")
        # the restored state saves again unchanged: key, name and the last manifest came back
        PROJ2 = os.path.join(WORK, "proj", "again.carxp")
        check(host.save_project(PROJ2), "save_project after reload")
        again = open(PROJ2).read()
        for key in ("deviceKey", "deviceName", "#manifest"):
            a = xml[xml.find(key):][:400].split("</Value>")[0]
            b = again[again.find(key):][:400].split("</Value>")[0]
            check(key in again and a == b, "%s restored from Carla's CustomData" % key)
finally:
    host.engine_close()
left = glob.glob(os.path.join(WORK, "*.tmp", "**"), recursive=True)
print("left in Carla's makePath folders after closing:", left, flush=True)
check(not left and not glob.glob(os.path.join(WORK, "*.tmp")),
      "nothing left in Carla's makePath folder (<cwd>/Carla.tmp) after closing")
print("%d failed" % len(fails))
sys.exit(1 if fails else 0)
