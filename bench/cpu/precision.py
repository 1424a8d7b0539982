#!/usr/bin/env python3
"""How far bf16 products move the stems from fp32 ones: each model separates each input twice
through the CLI (--precision fp32, then bf16, same device and threads), and for every stem this
prints the relative L2 distance ||bf16 - fp32|| / ||fp32|| and the SDR of the bf16 stem with the
fp32 stem as reference, 10 log10(||fp32||^2 / ||bf16 - fp32||^2) (the issue's aim: above 40 dB).

usage: precision.py STEMBRIDGE MODEL.safetensors[,...] INPUT.wav[,...] [--threads N] [--device D]
                    [--tf32]

--device (default cpu) runs both on another device: opencl:0 on an NVIDIA GPU runs bf16 on its
tensor cores (bench/gpu's check step), and with SB_CL_MMA=emulate any OpenCL device runs the
same kernel with the instruction emulated (PoCL: the GPU's arithmetic, slowly). --tf32 compares
fp32 with the tensor cores' tf32 instead (SB_CL_GEMM=tf32 on an OpenCL device, --precision fp32):
the candidate for an fp32 default on NVIDIA GPUs.

bench/cpu/run.sh runs it on the repository's golden models (tests/fixtures/htdemucs), a
released-size HTDemucs and the demo clip (tools/make_demo_clip.sh), and prints the table.
"""
import json
import math
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests",
                                "core"))
import wavio  # noqa: E402


def separate(exe, model, inp, out, precision, threads, device, env=None):
    p = subprocess.run([exe, "separate", inp, "-o", out, "--model", model, "--device", device,
                        "--precision", precision, "--threads", str(threads), "-q", "--overwrite"],
                       capture_output=True, text=True, env=dict(os.environ, **(env or {})))
    if p.returncode != 0:
        sys.exit(f"precision.py: {model} {precision}: {p.stderr.strip()}")
    track = os.path.splitext(os.path.basename(inp))[0]
    m = json.load(open(os.path.join(out, track, "manifest.json")))
    return m, {s["stem"]: s["path"] for s in m["stems"]}


def main():
    if len(sys.argv) < 4:
        sys.exit(__doc__)
    exe, models, inputs = sys.argv[1], sys.argv[2].split(","), sys.argv[3].split(",")
    threads = int(sys.argv[sys.argv.index("--threads") + 1]) if "--threads" in sys.argv else 2
    device = sys.argv[sys.argv.index("--device") + 1] if "--device" in sys.argv else "cpu"
    # the reduced precision compared with fp32: bf16 (--precision), or the tensor cores' tf32
    low = "tf32" if "--tf32" in sys.argv else "bf16"
    env = {"SB_CL_GEMM": "tf32"} if low == "tf32" else None
    print(f"| model | input | products ({low}) | stem | relative L2 | SDR vs fp32, dB |")
    print("|---|---|---|---|---:|---:|")
    worst_sdr = math.inf
    with tempfile.TemporaryDirectory(prefix="sb-precision-") as tmp:
        for model in models:
            for inp in inputs:
                m32, s32 = separate(exe, model, inp, os.path.join(tmp, "f"), "fp32", threads,
                                    device)
                m16, s16 = separate(exe, model, inp, os.path.join(tmp, "b"),
                                    "fp32" if env else "bf16", threads, device, env)
                if m16["precision"]["used"] != low:
                    sys.exit(f"precision.py: {low} did not run on {device} "
                             f"({m16['precision']}): a CPU needs AVX512_BF16, an OpenCL device "
                             "an NVIDIA GPU's tensor cores (or SB_CL_MMA=emulate)")
                for stem in s32:
                    a = wavio.read_wav(s32[stem])[0]
                    b = wavio.read_wav(s16[stem])[0]
                    num = math.fsum((x - y) ** 2 for x, y in zip(b, a))
                    den = math.fsum(x * x for x in a)
                    rel = math.sqrt(num / den) if den > 0 else 0.0
                    sdr = 10 * math.log10(den / num) if num > 0 else math.inf
                    worst_sdr = min(worst_sdr, sdr)
                    print(f"| {os.path.basename(model)} | {os.path.basename(inp)} | "
                          f"{m16['precision']['products']} | {stem} | {rel:.2e} | {sdr:.1f} |")
    print(f"\nworst SDR of a {low} stem against its fp32 stem: {worst_sdr:.1f} dB")


main()
