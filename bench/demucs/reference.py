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
      [--device cpu|cuda] [--tf32 off|default] [--amp bf16]

On CUDA the timings wait for the device (torch.cuda.synchronize) and the JSON adds the GPU's
name and peak memory. --tf32 off (the default) keeps every product in float32 as the issue's
comparison asks; --tf32 default leaves PyTorch's own choice (TF32 tensor cores for
convolutions through cuDNN), reported for reference; --amp bf16 runs under autocast to bf16,
the reference for Stembridge's --precision bf16 (NVIDIA's tensor cores through inline PTX).
"""
import argparse
import contextlib
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


def separate(model, wav, device="cpu"):
    """demucs.separate's normalisation around apply_model (shifts 0, overlap 0.25)."""
    import torch
    from demucs.apply import apply_model
    ref = wav.mean(0)
    x = (wav - ref.mean()) / ref.std()
    with torch.no_grad():
        out = apply_model(model, x[None], shifts=0, split=True, overlap=0.25,
                          device=device)[0]
    return out * ref.std() + ref.mean()


def sync(device):
    import torch
    if device == "cuda":
        torch.cuda.synchronize()


def cpu_seconds():
    """CPU seconds of the process, all threads: steadier than the wall clock on a shared
    machine."""
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


def rel_l2(a, b):
    return float(((a - b) ** 2).sum().sqrt() / (b ** 2).sum().sqrt())


def cmd_check(args):
    """The tiny model's output and pipeline, or (where the 52 MB tiny-io file was not brought
    along, as on the GPU machine) the mid model's output."""
    import os
    import torch
    if os.path.exists(f"{args.golden}/htdemucs-tiny-io.safetensors"):
        model = build_model(f"{args.golden}/htdemucs-tiny.safetensors")
        io, _ = load_safetensors(f"{args.golden}/htdemucs-tiny-io.safetensors")
    else:
        model = build_model(f"{args.golden}/htdemucs-mid.safetensors")
        io, _ = load_safetensors(f"{args.golden}/htdemucs-mid-io.safetensors")
    with torch.no_grad():
        out = model(io["input"][None])[0]
    e1 = rel_l2(out, io["output"])
    if "pipeline.input" not in io:
        print(f"reference vs golden (mid): output {e1:.2e}")
        return 0 if e1 < 1e-5 else 1
    e2 = rel_l2(separate(model, io["pipeline.input"]), io["pipeline.output"])
    print(f"reference vs golden: output {e1:.2e}, pipeline.output {e2:.2e}")
    return 0 if e1 < 1e-5 and e2 < 2e-3 else 1


def cmd_bench(args):
    import torch
    torch.set_num_threads(args.threads)
    dev = args.device
    if dev == "cuda":
        tf32 = args.tf32 == "default"
        if not tf32:
            torch.backends.cuda.matmul.allow_tf32 = False
            torch.backends.cudnn.allow_tf32 = False
    t0 = time.perf_counter()
    model = build_model(args.model).to(dev)
    sync(dev)
    load_s = time.perf_counter() - t0
    seg = int(model.segment * model.samplerate)
    g = torch.Generator().manual_seed(1)
    x = (0.1 * torch.randn(2, seg, generator=g)).to(dev)
    # --amp bf16: PyTorch's autocast, the reference for Stembridge's --precision bf16 (its
    # products in bf16 with fp32 sums, everything else fp32)
    amp = (torch.autocast(dev, dtype=torch.bfloat16) if args.amp == "bf16"
           else contextlib.nullcontext())
    with torch.no_grad(), amp:
        model(x[None])  # warm-up: first-call allocations, cuDNN's choices
        model(x[None])
        sync(dev)
        t0, c0 = time.perf_counter(), cpu_seconds()
        for _ in range(args.repeat):
            model(x[None])
        sync(dev)
        seg_s = (time.perf_counter() - t0) / args.repeat
        seg_cpu = (cpu_seconds() - c0) / args.repeat
    n = int(args.seconds * model.samplerate)
    t = torch.arange(n, dtype=torch.float32) / model.samplerate
    song = torch.stack([0.3 * torch.sin(2 * math.pi * 220 * t), 0.3 * torch.sin(2 * math.pi * 330 * t)])
    song += 0.05 * torch.randn(2, n, generator=g)
    song = song.to(dev)
    sync(dev)
    t0, c0 = time.perf_counter(), cpu_seconds()
    with amp:
        out = separate(model, song, dev)
    sync(dev)
    song_s = time.perf_counter() - t0
    song_cpu = cpu_seconds() - c0
    del out
    rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    res = {"impl": "pytorch", "torch": torch.__version__, "device": dev,
           "threads": args.threads, "load_s": load_s, "segment_s": seg_s,
           "segment_cpu_s": seg_cpu, "song_s": song_s, "song_cpu_s": song_cpu,
           "song_seconds": args.seconds, "amp": args.amp, "peak_rss_mb": rss_mb}
    if dev == "cuda":
        res["gpu"] = torch.cuda.get_device_name()
        res["tf32"] = args.tf32
        res["peak_gpu_mb"] = torch.cuda.max_memory_allocated() / 2**20
    print(json.dumps(res))
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
    b.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    b.add_argument("--tf32", choices=["off", "default"], default="off")
    b.add_argument("--amp", choices=["off", "bf16"], default="off")
    args = p.parse_args()
    sys.path[:0] = [args.shims, args.ref]
    return cmd_check(args) if args.cmd == "check" else cmd_bench(args)


if __name__ == "__main__":
    sys.exit(main())
