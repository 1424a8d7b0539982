#!/usr/bin/python3
"""A full-size model of MSST's (a RoFormer, SCNet, MDX23C) with random weights, in the released
layout: NAME.ckpt (torch.save of
the model's plain state_dict, float32, as MSST's train.py stored model_bs_roformer_ep_317_
sdr_12.9755.ckpt) beside NAME.yaml (the public config itself, from MSST's configs/), for the
speed and memory benchmark (bench/msst/README.md). Nothing is written into the repository.

  make_model.py ep317|kim [--scale KEY=VALUE[,KEY=VALUE]] [--out DIR] [--ref REF] [--seed N]

  ep317  viperx BS-RoFormer ep_317 (configs/viperx/model_bs_roformer_ep_317_sdr_12.9755.yaml):
         dim 512, depth 12, 62 bands, hop 441, chunk 352800, 1 stem (vocals); 159,758,796 values
  kim    KimberleyJensen Mel-Band RoFormer vocals (configs/KimberleyJensen/
         config_vocals_mel_band_roformer_kj.yaml): dim 384, depth 6, 60 mel bands
  --scale  overrides scalar keys of the config's model: section, e.g. depth=2 (a quick
         variant with the same per-layer widths, chunk and memory per layer); the name gets
         the overrides appended: ep317-depth2
  scnet  SCNet (configs/config_musdb18_scnet.yaml): dims 4/32/64/128, 6 dual-path layers,
         chunk 485100; scnet_large the large config's widths
  mdx23c MDX23C vocals (configs/config_vocals_mdx23c.yaml): n_fft 8192, 128 channels growing by
         128 over 5 scales, chunk 261120
  --out  default /tmp/sb-roformer-bench; prints the two paths written

Weights: PyTorch's default initialisation under torch.manual_seed(seed), every RMSNorm gamma
drawn from [0.5, 1.5], the rotary frequencies as the model makes them: what the golden script
(tests/fixtures/make_roformer_golden.py) does; activations stay in range (reference.py prints
the output's RMS against the input's). The file is then read back through MSST's
load_start_checkpoint (strict), as inference.py would.
"""
import argparse
import os
import re
import sys
import time

import msst

ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
ap.add_argument("config", choices=sorted(msst.CONFIGS))
ap.add_argument("--scale", default="", help="KEY=VALUE[,KEY=VALUE] for the model: section")
ap.add_argument("--out", default="/tmp/sb-roformer-bench")
ap.add_argument("--ref", default="/tmp/roformer-ref")
ap.add_argument("--seed", type=int, default=317)
a = ap.parse_args()

kind, rel = msst.CONFIGS[a.config]
root = msst.setup(a.ref)
text = open(os.path.join(root, rel)).read()
name = a.config
lines = text.split("\n")
top = lines.index("model:")
for kv in filter(None, a.scale.split(",")):
    k, _, v = kv.partition("=")
    if not re.fullmatch(r"[a-z_]+", k) or not re.fullmatch(r"[0-9.]+|true|false", v):
        sys.exit(f"--scale: '{kv}' is not KEY=NUMBER")
    # the key's line inside model: (two spaces, a scalar on the same line)
    for i in range(top + 1, len(lines)):
        if lines[i] and not lines[i].startswith(" "):
            sys.exit(f"--scale: no scalar '{k}' in the model: section of {rel}")
        m = re.fullmatch(r"(  " + k + r": *)([^# ]+)(.*)", lines[i])
        if m:
            lines[i] = m.group(1) + v + m.group(3)
            break
    else:
        sys.exit(f"--scale: no scalar '{k}' in the model: section of {rel}")
    name += f"-{k}{v}"
text = "\n".join(lines)
os.makedirs(a.out, exist_ok=True)
ypath, cpath = (os.path.join(a.out, name + e) for e in (".yaml", ".ckpt"))
with open(ypath, "w") as f:
    f.write(text if text.endswith("\n") else text + "\n")

import torch  # noqa: E402
from utils.model_utils import load_start_checkpoint  # noqa: E402
from utils.settings import load_config  # noqa: E402

t0 = time.time()
config = load_config(kind, ypath)
torch.manual_seed(a.seed)
model = msst.build(kind, config)
torch.manual_seed(a.seed + 1)
with torch.no_grad():
    for k, p in model.named_parameters():
        if k.endswith("gamma"):
            p.uniform_(0.5, 1.5)
state = model.state_dict()
torch.save(state, cpath)
# read back as inference.py does (strict)
check = msst.build(kind, config)
load_start_checkpoint(argparse.Namespace(start_check_point=cpath, model_type=kind,
                                    lora_checkpoint_loralib=""), check,
                      torch.load(cpath, map_location="cpu"), type_="inference")
params = sum(p.numel() for p in check.parameters())
print(f"{name}: {kind}, {len(state)} tensors, {params:,} parameters, "
      f"{os.path.getsize(cpath):,} bytes, {time.time() - t0:.1f} s", file=sys.stderr)
print(cpath)
print(ypath)
