#!/usr/bin/python3
"""The reference PyTorch HTDemucs on the same model files as Stembridge's engine.

The reference code is the public facebookresearch/demucs source, kept outside the repository
(`--ref DIR`, a folder holding its `demucs/` package). Debian 12 packages torch but not einops,
julius, openunmix, omegaconf, dora or tqdm, which demucs imports; `--shims DIR` points at small
stand-ins for those (run_bench.sh writes them): einops.rearrange is re-implemented for the
patterns htdemucs.py uses, the others are never called on HTDemucs's inference path. `check`
proves the stand-ins right: the reference must reproduce the golden output.

  reference.py check GOLDEN_DIR                 the golden tiny output, from the reference
  reference.py bench MODEL.safetensors SECONDS  time one segment and a whole song (JSON line)
"""
import argparse
import fractions
import json
import math
import resource
import struct
import sys
import time


def load_safetensors(path):
    import numpy as np
    import torch
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    meta = header.pop("__metadata__", {})
    dt = {"F32": np.float32, "F16": np.float16}
    tensors = {}
    for name, info in header.items():
        a, b = info["data_offsets"]
        arr = np.frombuffer(data[a:b], dtype=dt[info["dtype"]]).reshape(info["shape"])
        tensors[name] = torch.from_numpy(arr.astype(np.float32))
    return tensors, meta


def build_model(path):
    from demucs.htdemucs import HTDemucs
    tensors, meta = load_safetensors(path)
    kw = {k: int(meta[k]) for k in ("channels", "bottom_channels", "t_layers", "t_heads",
                                    "dconv_mode", "samplerate", "audio_channels") if k in meta}
    kw["sources"] = meta["sources"].split(",")
    kw["segment"] = fractions.Fraction(meta.get("segment", "10"))
    model = HTDemucs(**kw)
    model.load_state_dict(tensors, strict=True)
    model.eval()
    return model


def separate(model, wav):
    """demucs.separate's normalisation around apply_model (shifts 0, overlap 0.25)."""
    import torch
    from demucs.apply import apply_model
    ref = wav.mean(0)
    x = (wav - ref.mean()) / ref.std()
    with torch.no_grad():
        out = apply_model(model, x[None], shifts=0, split=True, overlap=0.25)[0]
    return out * ref.std() + ref.mean()


def cpu_seconds():
    """CPU seconds of the process, all threads: steadier than the wall clock on a shared
    machine."""
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


def rel_l2(a, b):
    return float(((a - b) ** 2).sum().sqrt() / (b ** 2).sum().sqrt())


def cmd_check(args):
    import torch
    model = build_model(f"{args.golden}/htdemucs-tiny.safetensors")
    io, _ = load_safetensors(f"{args.golden}/htdemucs-tiny-io.safetensors")
    with torch.no_grad():
        out = model(io["input"][None])[0]
    e1 = rel_l2(out, io["output"])
    e2 = rel_l2(separate(model, io["pipeline.input"]), io["pipeline.output"])
    print(f"reference vs golden: output {e1:.2e}, pipeline.output {e2:.2e}")
    return 0 if e1 < 1e-5 and e2 < 2e-3 else 1


def cmd_bench(args):
    import torch
    torch.set_num_threads(args.threads)
    t0 = time.perf_counter()
    model = build_model(args.model)
    load_s = time.perf_counter() - t0
    seg = int(model.segment * model.samplerate)
    g = torch.Generator().manual_seed(1)
    x = 0.1 * torch.randn(2, seg, generator=g)
    with torch.no_grad():
        model(x[None])  # warm-up: first-call allocations
        t0, c0 = time.perf_counter(), cpu_seconds()
        for _ in range(args.repeat):
            model(x[None])
        seg_s = (time.perf_counter() - t0) / args.repeat
        seg_cpu = (cpu_seconds() - c0) / args.repeat
    n = int(args.seconds * model.samplerate)
    t = torch.arange(n, dtype=torch.float32) / model.samplerate
    song = torch.stack([0.3 * torch.sin(2 * math.pi * 220 * t), 0.3 * torch.sin(2 * math.pi * 330 * t)])
    song += 0.05 * torch.randn(2, n, generator=g)
    t0, c0 = time.perf_counter(), cpu_seconds()
    separate(model, song)
    song_s = time.perf_counter() - t0
    song_cpu = cpu_seconds() - c0
    rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps({"impl": "pytorch", "torch": torch.__version__, "threads": args.threads,
                      "load_s": load_s, "segment_s": seg_s, "segment_cpu_s": seg_cpu,
                      "song_s": song_s, "song_cpu_s": song_cpu,
                      "song_seconds": args.seconds, "peak_rss_mb": rss_mb}))
    return 0


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--ref", required=True, help="folder holding the reference demucs/ package")
    p.add_argument("--shims", required=True, help="folder of stand-ins for missing modules")
    sub = p.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("check")
    c.add_argument("golden")
    b = sub.add_parser("bench")
    b.add_argument("model")
    b.add_argument("seconds", type=float)
    b.add_argument("--threads", type=int, default=2)
    b.add_argument("--repeat", type=int, default=1)
    args = p.parse_args()
    sys.path[:0] = [args.shims, args.ref]
    return cmd_check(args) if args.cmd == "check" else cmd_bench(args)


if __name__ == "__main__":
    sys.exit(main())
