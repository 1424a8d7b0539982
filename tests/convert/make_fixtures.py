#!/usr/bin/env python3
"""Makes the converter's test checkpoints with torch (Debian's python3-torch), in the layout of
the released Demucs files, and what converting them must give.

The released .th files are written by facebookresearch/demucs `demucs/states.py`:
`save_with_checksum(serialize_model(model, training_args, half=True), path)`, that is
torch.save into a BytesIO (so the zip's folder is "archive") of
    {'klass': demucs.htdemucs.HTDemucs, 'args': (), 'kwargs': {...settings...},
     'state': {name: half-precision tensor}, 'training_args': the training config}.
Here the class is a stand-in registered as demucs.htdemucs.HTDemucs (only its name is
pickled), the tensors carry real HTDemucs names with tiny shapes, and the training config is an
object of a custom class (an OmegaConf DictConfig look-alike), so the pickle holds classes the
converter must skip without running anything.

    python3 tests/convert/make_fixtures.py [DIR]     (default: tests/convert/fixtures)

writes the .th files and expected.json. The values are fixed (seeded), so a rerun with the
same torch writes the same bytes; expected.json depends on the values only, not on torch.
"""
import fractions
import io
import json
import os
import sys
import types

import torch

HERE = os.path.dirname(os.path.abspath(__file__))

# The htdemucs section of demucs's conf/config.yaml: what every released model's kwargs hold,
# plus the dataset settings train.get_model adds (sources, audio_channels, samplerate, segment).
HTDEMUCS_CONFIG = {
    "channels": 48, "channels_time": None, "growth": 2, "nfft": 4096, "wiener_iters": 0,
    "end_iters": 0, "wiener_residual": False, "cac": True, "depth": 4, "rewrite": True,
    "multi_freqs": [], "multi_freqs_depth": 3, "freq_emb": 0.2, "emb_scale": 10,
    "emb_smooth": True, "kernel_size": 8, "stride": 4, "time_stride": 2, "context": 1,
    "context_enc": 0, "norm_starts": 4, "norm_groups": 4, "dconv_mode": 1, "dconv_depth": 2,
    "dconv_comp": 8, "dconv_init": 1e-3, "bottom_channels": 0, "t_layers": 5,
    "t_hidden_scale": 4.0, "t_heads": 8, "t_dropout": 0.0, "t_layer_scale": True,
    "t_gelu": True, "t_emb": "sin", "t_max_positions": 10000, "t_max_period": 10000.0,
    "t_weight_pos_embed": 1.0, "t_cape_mean_normalize": True, "t_cape_augment": True,
    "t_cape_glob_loc_scale": [5000.0, 1.0, 1.4], "t_sin_random_shift": 0, "t_norm_in": True,
    "t_norm_in_group": False, "t_group_norm": False, "t_norm_first": True, "t_norm_out": True,
    "t_weight_decay": 0.0, "t_lr": None, "t_sparse_self_attn": False,
    "t_sparse_cross_attn": False, "t_mask_type": "diag", "t_mask_random_seed": 42,
    "t_sparse_attn_window": 400, "t_global_window": 100, "t_sparsity": 0.95,
    "t_auto_sparsity": False, "t_cross_first": False, "rescale": 0.1,
}
FOUR = ["drums", "bass", "other", "vocals"]
SIX = FOUR + ["guitar", "piano"]
FT_SIGNATURES = ["f7e0c4bc", "d12395a8", "92cfc3b6", "04573f0d"]


# ---- stand-ins for the classes the released pickles name ------------------------------------
def _module(name):
    m = sys.modules.get(name) or types.ModuleType(name)
    sys.modules[name] = m
    parent, _, child = name.rpartition(".")
    if parent:
        setattr(_module(parent), child, m)
    return m


def _class(module, name, body=None):
    cls = type(name, (), dict(body or {}))
    cls.__module__ = module
    cls.__qualname__ = name
    setattr(_module(module), name, cls)
    return cls


HTDemucs = _class("demucs.htdemucs", "HTDemucs")
HDemucs = _class("demucs.hdemucs", "HDemucs")


class _Node:
    """omegaconf.nodes.AnyNode: pickled as NEWOBJ + BUILD of its __dict__."""

    def __init__(self, value):
        self._val = value
        self._metadata = None


class _DictConfig:
    """omegaconf.dictconfig.DictConfig: NEWOBJ + BUILD with a state of nested nodes."""

    def __init__(self, content):
        self.__dict__["_content"] = {k: _Node(v) for k, v in content.items()}
        self.__dict__["_metadata"] = _Meta()
        self.__dict__["_parent"] = None


class _Meta:
    def __init__(self):
        self.ref_type = object
        self.flags = {"readonly": False}


class _Items(dict):
    """A dict subclass: pickled as REDUCE then SETITEMS onto the object (not a dict)."""

    def __reduce__(self):
        return (type(self), (), {"note": "state"}, None, iter(self.items()))


for cls, mod, name in [(_Node, "omegaconf.nodes", "AnyNode"),
                       (_DictConfig, "omegaconf.dictconfig", "DictConfig"),
                       (_Meta, "omegaconf.base", "ContainerMetadata"),
                       (_Items, "omegaconf.listconfig", "ItemsConfig")]:
    cls.__module__ = mod
    cls.__qualname__ = name
    cls.__name__ = name
    setattr(_module(mod), name, cls)


def training_config():
    return _DictConfig({"epochs": 360, "batch_size": 32, "seed": 42,
                        "optim": _Items(lr=3e-4, beta2=0.999),
                        "dset": {"name": "musdb44", "sources": FOUR}})


class _Evil:
    """What a hostile file might hold: unpickling calls os.system. The converter must skip it."""

    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (os.system, ("touch " + self.marker,))


# ---- checkpoints ------------------------------------------------------------------------------
def _values(gen, shape, dtype):
    return (torch.randn(shape, generator=gen) * 0.5).to(dtype)


def tiny_state(seed, dtype, n_sources):
    """Tensors named as in the released htdemucs, with tiny shapes, and the layouts torch.save
    can produce: contiguous, a transposed (strided) view, two views of one storage at
    different offsets, and a 0-d tensor."""
    g = torch.Generator().manual_seed(seed)
    s = {}
    s["encoder.0.conv.weight"] = _values(g, (8, 4, 8, 1), dtype)
    s["encoder.0.conv.bias"] = _values(g, (8,), dtype)
    s["encoder.0.dconv.layers.0.0.weight"] = _values(g, (2, 8, 3), dtype)
    s["encoder.0.dconv.layers.0.6.scale"] = _values(g, (8,), dtype)
    s["freq_emb.embedding.weight"] = _values(g, (16, 8), dtype)
    # a transposed view: torch.save keeps its stride, the converter must gather it
    s["crosstransformer.layers.0.linear1.weight"] = _values(g, (4, 6), dtype).t()
    # two views of one storage, the second at an offset
    packed = _values(g, (12,), dtype)
    s["crosstransformer.layers.0.norm1.weight"] = packed[:6]
    s["crosstransformer.layers.0.norm1.bias"] = packed[6:]
    s["channel_upsampler.weight"] = _values(g, (6, 4, 1), dtype)
    s["tdecoder.3.conv_tr.weight"] = _values(g, (8, 2 * n_sources, 8), dtype)
    s["fixture.scalar"] = _values(g, (), dtype)
    return s


def kwargs_for(sources, **changes):
    kw = {"sources": list(sources), "audio_channels": 2, "samplerate": 44100,
          "segment": fractions.Fraction(39, 5)}
    kw.update(HTDEMUCS_CONFIG)
    kw.update(channels=8, bottom_channels=32, t_layers=2, t_heads=4, dconv_mode=3)
    kw.update(changes)
    return kw


def save(obj, path, buffer=True, legacy=False, fraction_as_str=False):
    """torch.save as demucs does: into a buffer (the zip folder is "archive"), then the bytes.
    fraction_as_str: pickle Fraction as Python < 3.12 did, Fraction('39/5')."""
    saved = fractions.Fraction.__reduce__
    if fraction_as_str:
        fractions.Fraction.__reduce__ = lambda self: (type(self), (str(self),))
    try:
        if legacy:
            torch.save(obj, path, _use_new_zipfile_serialization=False)
        elif buffer:
            buf = io.BytesIO()
            torch.save(obj, buf)
            with open(path, "wb") as f:
                f.write(buf.getvalue())
        else:
            torch.save(obj, path)
    finally:
        fractions.Fraction.__reduce__ = saved


def package(klass, kwargs, state, training_args):
    return {"klass": klass, "args": (), "kwargs": kwargs, "state": state,
            "training_args": training_args}


# ---- what the converter must write (the metadata rules, independently of the C code) ----------
def meta_str(v):
    if v is None:
        return "none"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, fractions.Fraction)):
        return str(v)
    if isinstance(v, float):
        return repr(v)
    if isinstance(v, str):
        return v
    if isinstance(v, (list, tuple)):
        return ",".join(meta_str(x) for x in v)
    raise TypeError(v)


def tensor_record(t):
    t = t.contiguous()
    dtype = {torch.float16: "F16", torch.float32: "F32", torch.bfloat16: "BF16"}[t.dtype]
    raw = t.view(torch.int16 if t.element_size() == 2 else torch.int32).numpy().tobytes()
    return {"dtype": dtype, "shape": list(t.shape), "hex": raw.hex()}


def model_expect(kwargs, state, checkpoint):
    meta = {k: meta_str(v) for k, v in kwargs.items()}
    meta["klass"] = "demucs.htdemucs.HTDemucs"
    meta["checkpoint"] = checkpoint
    return {"metadata": meta, "tensors": {k: tensor_record(v) for k, v in state.items()}}


def build(outdir, evil_marker="/tmp/stembridge-convert-evil-ran"):
    """Writes the fixtures into outdir; returns the expected results: per checkpoint, its
    settings as metadata and its tensors; per case, the inputs and the file-level metadata
    (one model: its metadata is the checkpoint's plus these; a bag of K: model k's under "k.")."""
    os.makedirs(outdir, exist_ok=True)
    checkpoints, cases, refusals = {}, [], []

    def checkpoint(name, klass, kwargs, state, training_args, **how):
        save(package(klass, kwargs, state, training_args), os.path.join(outdir, name), **how)
        checkpoints[name] = model_expect(kwargs, state, name)
        return name

    # htdemucs layout: F16, buffer-saved, Fraction('39/5'), a DictConfig-like training config
    kw = kwargs_for(FOUR)
    f16 = checkpoint("htdemucs-f16.th", HTDemucs, kw, tiny_state(1, torch.float16, 4),
                     training_config(), fraction_as_str=True)
    cases.append({"name": "single F16", "inputs": [f16], "options": [],
                  "output": "htdemucs-f16.safetensors", "metadata": {"name": "htdemucs-f16"}})
    cases.append({"name": "single F16 with --name", "inputs": [f16],
                  "options": ["--name", "my-model"], "output": "other.safetensors",
                  "metadata": {"name": "my-model"}})

    # six sources, F32 (saved with half=False), saved to a path (folder named after the file),
    # Fraction pickled as (39, 5), the training config as a plain dict (OmegaConf.to_container)
    six = checkpoint("htdemucs_6s-f32.th", HTDemucs, kwargs_for(SIX, channels=4, t_layers=1),
                     tiny_state(2, torch.float32, 6), {"epochs": 360, "dset": {"sources": SIX}},
                     buffer=False)
    cases.append({"name": "single F32, 6 sources", "inputs": [six], "options": [],
                  "output": "htdemucs_6s-f32.safetensors",
                  "metadata": {"name": "htdemucs_6s-f32"}})

    # the htdemucs_ft bag: four models named by their signatures, plain-dict training configs
    ft = [checkpoint(sig + "-tiny.th", HTDemucs, kwargs_for(FOUR),
                     tiny_state(10 + k, torch.float16, 4),
                     {"epochs": 360, "weights": [1.0, 1.0, 1.0, 1.0]}, fraction_as_str=True)
          for k, sig in enumerate(FT_SIGNATURES)]

    def bag_case(title, inputs, weights, output, options=()):
        cases.append({"name": title, "inputs": inputs, "options": list(options), "output": output,
                      "metadata": {"name": output.rsplit(".", 1)[0], "bag": str(len(inputs)),
                                   "sources": meta_str(FOUR), "samplerate": "44100",
                                   "audio_channels": "2",
                                   "bag_weights": ";".join(",".join(repr(float(x)) for x in row)
                                                           for row in weights)}})

    # demucs/remote/htdemucs_ft.yaml: weights [[1,0,0,0],[0,1,0,0],[0,0,1,0],[0,0,0,1]]
    eye = [[1.0 if r == c else 0.0 for c in range(4)] for r in range(4)]
    bag_case("htdemucs_ft bag, weights from its yaml", ft, eye, "htdemucs_ft.safetensors")
    order = [2, 0, 3, 1]  # each model keeps its own source's row
    bag_case("htdemucs_ft bag in another order", [ft[i] for i in order],
             [eye[i] for i in order], "shuffled.safetensors")
    w = [[0.5, 0.25, 1.0, 2.0], [1.5, 1.0, 0.0, 0.125], [1.0, 1.0, 1.0, 1.0],
         [0.0, 3.0, 1e-05, 7.0]]
    bag_case("bag with --bag-weights", ft, w, "weighted.safetensors",
             ["--bag-weights", ";".join(",".join(str(x) for x in r) for r in w)])

    # a hostile training config: the converter skips it, and must not run it
    hostile = checkpoint("hostile-training-args.th", HTDemucs, kw, tiny_state(3, torch.float16, 4),
                         {"epochs": 1, "hook": _Evil(evil_marker)})
    cases.append({"name": "a call of os.system in training_args is skipped, not run",
                  "inputs": [hostile], "options": [], "output": "hostile.safetensors",
                  "metadata": {"name": "hostile"}, "must_not_exist": evil_marker})

    # refused: each with one line on stderr that says why
    save(package(HDemucs, kw, tiny_state(4, torch.float16, 4), {}),
         os.path.join(outdir, "hdemucs.th"))
    refusals.append({"inputs": ["hdemucs.th"],
                     "stderr": "model class demucs.hdemucs.HDemucs is not supported"})
    bad = tiny_state(5, torch.float16, 4)
    bad["encoder.0.conv.bias"] = _Evil(evil_marker)
    save(package(HTDemucs, kw, bad, {}), os.path.join(outdir, "state-not-tensor.th"))
    refusals.append({"inputs": ["state-not-tensor.th"],
                     "stderr": "state['encoder.0.conv.bias']: not a tensor (a call of posix.system)"})
    save(tiny_state(6, torch.float16, 4), os.path.join(outdir, "bare-state-dict.th"))
    refusals.append({"inputs": ["bare-state-dict.th"], "stderr": "a bare state dict"})
    save(package(HTDemucs, kw, tiny_state(7, torch.float16, 4), {}),
         os.path.join(outdir, "legacy-format.th"), legacy=True)
    refusals.append({"inputs": ["legacy-format.th"], "stderr": "legacy format of torch < 1.6"})
    refusals.append({"inputs": ft[:3], "stderr": "3 of the inputs are htdemucs_ft models"})
    refusals.append({"inputs": [ft[0], six],
                     "stderr": "sources is drums,bass,other,vocals,guitar,piano, but"})
    refusals.append({"inputs": ft, "options": ["--bag-weights", "1,0,0,0;0,1,0,0"],
                     "stderr": "2 rows for 4 models"})
    refusals.append({"inputs": ft, "options": ["--bag-weights", "1,0,0;0,1,0;0,0,1;1,1,1"],
                     "stderr": "row 1 does not have 4 weights"})
    return {"checkpoints": checkpoints, "cases": cases, "refusals": refusals}


def main():
    outdir = sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "fixtures")
    expected = build(outdir)
    with open(os.path.join(outdir, "expected.json"), "w") as f:
        json.dump(expected, f, indent=1, sort_keys=True)
        f.write("\n")
    sizes = sorted((n, os.path.getsize(os.path.join(outdir, n))) for n in os.listdir(outdir))
    print("torch %s wrote %s:" % (torch.__version__, outdir))
    for n, s in sizes:
        print("  %-32s %7d bytes" % (n, s))


if __name__ == "__main__":
    main()
