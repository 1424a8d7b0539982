#!/usr/bin/python3
"""The reference RoFormer (MSST's BSRoformer / MelBandRoformer, Debian's python3-torch 1.13,
CPU, eval, no_grad, flash_attn false) timed on the checkpoint make_model.py wrote, on the
threads given: one chunk, or MSST's demix on a song. Prints one JSON line.

  reference.py MODEL.ckpt MODEL.yaml chunk [--threads N] [--warmup W] [--repeat R]
               [--input IN.f32] [--compare OUT.f32]
  reference.py MODEL.ckpt MODEL.yaml song SECONDS [--threads N] [--batch B]

chunk: model(x) on one chunk [1, channels, chunk_size]; seconds per chunk (wall and CPU) after
  W warm-up runs, mean of R. --input reads the chunk (raw float32 [channels][chunk_size], as
  bench_msst --dump writes it) instead of the signal below; --compare reads Stembridge's
  output for it ([stems][channels][chunk_size]) and prints the relative L2 difference.
song: utils.model_utils.demix(config, model, mix, 'cpu', model_type) as inference.py calls it
  (the config's chunk, overlap and inference.batch_size, or --batch B) on SECONDS of the
  signal below; seconds, real-time factor.
Both: the process's peak RSS (getrusage ru_maxrss) and its RSS once the model is loaded.

The signal (bench_msst.c computes the same): 16 sines at 40 Hz x 1.5^k, amplitude
0.1 x 1.5^(-k/2) (a 1/f spectrum), plus 0.02 white noise from a hash of (frame, channel).

Threads: OMP_NUM_THREADS and OPENBLAS_NUM_THREADS are set to N before torch loads (torch's
float32 products go to the system BLAS, Debian's OpenBLAS, which keeps its own thread pool),
then torch.set_num_threads(N). OPENBLAS_CORETYPE, when set, is passed through (and reported).
"""
import argparse
import json
import os
import resource
import sys
import time

import numpy as np

ap = argparse.ArgumentParser()
ap.add_argument("ckpt")
ap.add_argument("yaml")
ap.add_argument("mode", choices=("chunk", "song"))
ap.add_argument("seconds", nargs="?", type=float, default=0)
ap.add_argument("--threads", type=int, default=2)
ap.add_argument("--warmup", type=int, default=1)
ap.add_argument("--repeat", type=int, default=1)
ap.add_argument("--batch", type=int, default=0)
ap.add_argument("--input")
ap.add_argument("--compare")
ap.add_argument("--ref", default="/tmp/roformer-ref")
ap.add_argument("--device", default="cpu", help="cpu, or cuda on a GPU machine (bench/gpu)")
a = ap.parse_args()
os.environ["OMP_NUM_THREADS"] = os.environ["OPENBLAS_NUM_THREADS"] = str(a.threads)

import msst  # noqa: E402

msst.setup(a.ref)
import torch  # noqa: E402
from utils.model_utils import demix, load_start_checkpoint  # noqa: E402
from utils.settings import load_config  # noqa: E402

torch.set_num_threads(a.threads)
RATE = 44100


def cpu_s():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def rss_mb(now=False):
    if now:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def signal(frames, channels, start=0):
    """[channels, frames] float32: see the docstring (bench_msst.c's test_signal)."""
    i = np.arange(start, start + frames, dtype=np.float64)
    out = np.empty((channels, frames), np.float32)
    for c in range(channels):
        x = np.zeros(frames)
        for k in range(16):
            x += 0.1 * 1.5 ** (-k / 2) * np.sin(2 * np.pi * 40 * 1.5 ** k * i / RATE
                                                 + 1.3 * k + 0.7 * c)
        # splitmix64 of frame * 2 + channel -> [-1, 1)
        with np.errstate(over="ignore"):
            z = (i.astype(np.uint64) * np.uint64(2) + np.uint64(c)) \
                + np.uint64(0x9E3779B97F4A7C15)
            z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
            z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
            z = z ^ (z >> np.uint64(31))
        x += 0.02 * ((z >> np.uint64(40)).astype(np.float64) / (1 << 23) - 1.0)
        out[c] = x
    return out


kind = msst.model_type(a.yaml)
config = load_config(kind, a.yaml)
model = msst.build(kind, config)
load_start_checkpoint(argparse.Namespace(start_check_point=a.ckpt, model_type=kind,
                                         lora_checkpoint_loralib=""), model,
                      torch.load(a.ckpt, map_location="cpu"), type_="inference")
model.eval()
dev = torch.device(a.device)
model.to(dev)


def sync():
    if dev.type == "cuda":
        torch.cuda.synchronize()


channels = (2 if config.model.stereo else 1) if "stereo" in config.model \
    else config.audio.get("num_channels", 2)
L = config.inference.get("chunk_size", config.audio.chunk_size)
r = {"impl": "pytorch", "torch": torch.__version__, "threads": torch.get_num_threads(),
     "device": a.device,
     "openblas_coretype": os.environ.get("OPENBLAS_CORETYPE", ""), "model": a.ckpt,
     "rss_loaded_mb": round(rss_mb(now=True), 1)}
sys.stdout.flush()

if a.mode == "chunk":
    if a.input:
        x = np.fromfile(a.input, np.float32).reshape(channels, L)
    else:
        x = signal(L, channels)
    xt = torch.from_numpy(x)[None].to(dev)
    with torch.no_grad():
        for _ in range(a.warmup):
            y = model(xt)
        sync()
        t0, c0 = time.time(), cpu_s()
        for _ in range(a.repeat):
            y = model(xt)
        sync()
        r["chunk_s"] = (time.time() - t0) / a.repeat
        r["chunk_cpu_s"] = (cpu_s() - c0) / a.repeat
    y = y.reshape(-1, channels, L).cpu().numpy()
    r["chunk_seconds"] = L / RATE
    r["out_rms_over_in_rms"] = float(np.sqrt((y ** 2).mean() / (x ** 2).mean()))
    if a.compare:
        z = np.fromfile(a.compare, np.float32).reshape(y.shape)
        r["rel_l2_vs_stembridge"] = float(np.sqrt(((z.astype(np.float64) - y) ** 2).sum()
                                                  / (y.astype(np.float64) ** 2).sum()))
else:
    if a.batch:
        config.inference.batch_size = a.batch
    mix = signal(int(a.seconds * RATE), channels)
    t0, c0 = time.time(), cpu_s()
    with torch.no_grad():
        out = demix(config, model, mix, dev, kind, pbar=False)
        sync()
    r["song_s"] = time.time() - t0
    r["song_cpu_s"] = cpu_s() - c0
    r["song_seconds"] = a.seconds
    r["rtf"] = r["song_s"] / a.seconds
    r["batch"] = config.inference.batch_size
    r["stems"] = sorted(out)
r["peak_rss_mb"] = round(rss_mb(), 1)
print(json.dumps(r))
