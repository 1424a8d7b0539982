#!/usr/bin/env python3
"""stembridge batch under a real Slurm (single node, started here as root): an array of 4 tasks
over 16 files with the built-in model gives every input's stems exactly once; a re-run of the
finished batch separates nothing; a task cancelled with scancel while it runs, then the array
submitted again, ends with every stem complete, nothing that was done done again (the JSON
lines say skipped) and no partial file anywhere.

usage: test_slurm.py STEMBRIDGE SBATCH_SCRIPT START_SCRIPT STOP_SCRIPT WORKDIR
Skips (77) with its reason where it cannot run as root or Slurm cannot start.
"""
import glob
import json
import os
import shutil
import subprocess
import sys
import time

SKIP = 77
STEMS = ("vocals", "drums", "bass", "other")


def fail(msg):
    print("FAIL:", msg)
    sys.exit(1)


def run(cmd, **kw):
    return subprocess.run(cmd, capture_output=True, text=True, **kw)


def make_inputs(folder):
    """16 files: the ones task 1 of 4 takes (1, 5, 9, 13) long enough to be caught running."""
    os.makedirs(folder)
    paths = []
    for i in range(16):
        sub = os.path.join(folder, "disc%d" % (i // 8))
        os.makedirs(sub, exist_ok=True)
        p = os.path.join(sub, "song%02d.wav" % i)
        secs = 150 if i % 4 == 1 else 4
        r = run(["sox", "-n", "-r", "44100", "-c", "2", "-b", "16", p, "synth", str(secs),
                 "pinknoise", "sine", str(110 * (i + 1)), "vol", "0.3"])
        if r.returncode:
            fail("sox: " + r.stderr)
        paths.append(p)
    return paths


def submit(script, env, outdir, extra=()):
    r = run(["sbatch", "--parsable", "--array=0-3", "--cpus-per-task=1", "--mem=1G",
             "--output=%s/%%A_%%a.out" % outdir] + list(extra) + [script], env=env)
    if r.returncode:
        fail("sbatch: " + r.stderr)
    return r.stdout.strip().split(";")[0]


def tasks_left(job):
    r = run(["squeue", "-h", "-r", "-j", job, "-o", "%i %t"])
    return [l.split() for l in r.stdout.splitlines() if l.strip()]


def wait_job(job, timeout=300):
    t0 = time.time()
    while tasks_left(job):
        if time.time() - t0 > timeout:
            fail("array %s still running after %d s: %s" % (job, timeout, tasks_left(job)))
        time.sleep(0.3)


def log_lines(out):
    lines = []
    for f in sorted(glob.glob(os.path.join(out, "logs", "*.jsonl"))):
        with open(f) as fh:
            for l in fh:
                lines.append(json.loads(l))
    return lines


def check_complete(out, inputs, root):
    """Every input: its manifest ok, naming it, with each stem there and as long as the input;
    no other file than the stems, the manifest and stems.txt; no temporary anywhere."""
    expected = set()
    for p in inputs:
        rel = os.path.relpath(os.path.dirname(p), root)
        track = os.path.splitext(os.path.basename(p))[0]
        d = os.path.join(out, rel, track)
        m = os.path.join(d, "manifest.json")
        if not os.path.exists(m):
            fail("no manifest for %s (%s)" % (p, m))
        with open(m) as fh:
            man = json.load(fh)
        if man["status"] != "ok" or man["input"]["path"] != os.path.abspath(p):
            fail("%s: manifest %s" % (m, man["status"]))
        got = sorted(s["stem"] for s in man["stems"])
        if got != sorted(STEMS):
            fail("%s: stems %s" % (m, got))
        for s in man["stems"]:
            if s["frames"] != man["input"]["frames"] or not os.path.isfile(s["path"]):
                fail("%s: %s has %s frames of %s" % (m, s["path"], s["frames"],
                                                      man["input"]["frames"]))
            expected.add(os.path.realpath(s["path"]))
        expected.add(os.path.realpath(m))
        expected.add(os.path.realpath(os.path.join(d, "stems.txt")))
    found = set()
    for dirpath, _, files in os.walk(out):
        if os.path.basename(dirpath) == "logs":
            continue
        for f in files:
            found.add(os.path.realpath(os.path.join(dirpath, f)))
    extra = found - expected
    if extra:
        fail("files that are no input's stems (partial or twice): %s" % sorted(extra)[:5])
    if expected - found:
        fail("missing: %s" % sorted(expected - found)[:5])


def main():
    cli, script, start, stop, work = sys.argv[1:6]
    if os.geteuid() != 0:
        print("SKIP: the Slurm test starts slurmctld, slurmd and munged, which needs root")
        return SKIP
    if not shutil.which("sox"):
        print("SKIP: sox is not installed (it makes the test's inputs)")
        return SKIP
    r = run(["bash", start])
    if r.returncode:
        print("SKIP: Slurm cannot start here: " + (r.stderr.strip() or r.stdout.strip()))
        return SKIP
    started = "started" in r.stdout
    try:
        return test(os.path.abspath(cli), os.path.abspath(script), work)
    finally:
        if started:
            run(["bash", stop])


def test(cli, script, work):
    shutil.rmtree(work, ignore_errors=True)
    inputs_dir = os.path.join(work, "in")
    inputs = make_inputs(inputs_dir)
    lst = os.path.join(work, "list.txt")
    with open(lst, "w") as fh:
        fh.write("# the catalogue\n" + "\n".join(inputs) + "\n")
    slurm_out = os.path.join(work, "slurm")
    os.makedirs(slurm_out)
    base_env = dict(os.environ, LIST=lst, MODEL="builtin", STEMBRIDGE=cli)

    # 1. the array of 4 over 16 files: every input's stems exactly once
    out_a = os.path.join(work, "stems-a")
    env = dict(base_env, OUT=out_a)
    t0 = time.time()
    job = submit(script, env, slurm_out)
    wait_job(job)
    print("array %s: 4 tasks, 16 inputs in %.1f s" % (job, time.time() - t0))
    check_complete(out_a, inputs, inputs_dir)
    lines = log_lines(out_a)
    done = [l["path"] for l in lines if l.get("status") == "done"]
    if sorted(done) != sorted(os.path.abspath(p) for p in inputs):
        fail("each input done once expected; done lines: %d" % len(done))
    summaries = [l for l in lines if l.get("summary")]
    shards = sorted(s["shard"] for s in summaries)
    if shards != ["0/4", "1/4", "2/4", "3/4"]:
        fail("one summary per task expected: %s" % shards)
    for s in summaries:
        i = int(s["shard"].split("/")[0])
        mine = [os.path.abspath(p) for p in inputs[i::4]]
        theirs = sorted(l["path"] for l in lines if l.get("shard") == s["shard"]
                        and not l.get("summary"))
        if theirs != sorted(mine):
            fail("task %d took %s, not its shard %s" % (i, theirs, mine))
        if "CUDA_VISIBLE_DEVICES" not in s:
            fail("task %d: Slurm granted no GPU binding (CUDA_VISIBLE_DEVICES)" % i)
    for l in lines:
        if l.get("status") == "done" and not (l.get("realtime_factor", 0) > 0
                                              and l.get("device") and l.get("seconds") > 0):
            fail("a JSON line without its numbers: %s" % l)
    print("  each input done once, by its own shard; GPUs bound: %s" %
          sorted(s["CUDA_VISIBLE_DEVICES"] for s in summaries))

    # 2. the same array again: nothing is separated, every input skipped
    t0 = time.time()
    job = submit(script, env, slurm_out)
    wait_job(job)
    again = [l for l in log_lines(out_a) if l.get("slurm_job") == job]
    statuses = sorted(l["status"] for l in again if not l.get("summary"))
    if statuses != ["skipped"] * 16:
        fail("a finished batch re-run: %s" % statuses)
    print("  re-run of the finished batch: 16 skipped, 0 separated, in %.1f s" %
          (time.time() - t0))
    r = run([cli, "batch", "--report", out_a, "--json"])
    rep = json.loads(r.stdout)
    if r.returncode or rep["complete"] != 16 or rep["failed"] or rep["separations"] != 16:
        fail("report: %s" % r.stdout)

    # 3. task 1 cancelled while it runs, then the array submitted again
    out_b = os.path.join(work, "stems-b")
    env = dict(base_env, OUT=out_b)
    job = submit(script, env, slurm_out)
    log1 = os.path.join(out_b, "logs", "batch-1-of-4.jsonl")
    t0 = time.time()
    caught = False
    while time.time() - t0 < 120:
        # running, with one song done: the next is under way
        running = [t for t in tasks_left(job) if t[0] == job + "_1" and t[1] == "R"]
        if running and os.path.exists(log1):
            with open(log1) as fh:
                if any('"done"' in l for l in fh):
                    r = run(["scancel", job + "_1"])
                    if r.returncode:
                        fail("scancel: " + r.stderr)
                    caught = True
                    break
        if not any(t[0] == job + "_1" for t in tasks_left(job)) and os.path.exists(log1):
            break
        time.sleep(0.05)
    if not caught:
        fail("task 1 was never seen running with a song done")
    wait_job(job)
    first = log_lines(out_b)
    t1 = [l for l in first if l.get("shard") == "1/4"]
    t1_done = [l["path"] for l in t1 if l.get("status") == "done"]
    t1_summary = [l for l in t1 if l.get("summary")]
    if len(t1_done) >= 4:
        fail("the cancelled task finished its shard anyway")
    if not t1_summary or t1_summary[0].get("stopped_by") != "SIGTERM":
        fail("the cancelled task did not log its stop: %s" % t1_summary)
    # nothing half-written: no temporary, no stem without its manifest
    for dirpath, _, files in os.walk(out_b):
        for f in files:
            if ".part-" in f:
                fail("a partial file was left: %s" % os.path.join(dirpath, f))
        if "manifest.json" not in files and any(f.endswith(".wav") for f in files):
            fail("stems without a manifest in %s: %s" % (dirpath, files))
    done_before = {l["path"] for l in first if l.get("status") == "done"}
    print("  task 1 cancelled after %d of 4 songs (a cancelled line: %s); %d inputs done" %
          (len(t1_done), any(l.get("status") == "cancelled" for l in t1), len(done_before)))
    job = submit(script, env, slurm_out)
    wait_job(job)
    check_complete(out_b, inputs, inputs_dir)
    second = [l for l in log_lines(out_b) if l.get("slurm_job") == job]
    for l in second:
        if l.get("summary"):
            continue
        want = "skipped" if l["path"] in done_before else "done"
        if l["status"] != want:
            fail("%s: %s on the resubmission, %s expected" % (l["path"], l["status"], want))
    every_done = [l["path"] for l in log_lines(out_b) if l.get("status") == "done"]
    if sorted(every_done) != sorted(os.path.abspath(p) for p in inputs):
        fail("an input done twice or never: %d done lines for 16 inputs" % len(every_done))
    print("  resubmitted: %d done, %d skipped; every input done exactly once" %
          (sum(l.get("status") == "done" for l in second),
           sum(l.get("status") == "skipped" for l in second)))
    r = run([cli, "batch", "--report", out_b])
    print(r.stdout.strip())
    if r.returncode:
        fail("report after the resubmission: %s" % r.stdout)
    shutil.rmtree(work, ignore_errors=True)
    print("OK")
    return 0


if __name__ == "__main__":
    sys.exit(main())
