"""MSST's models (the RoFormers, SCNet, MDX23C) importable on Debian 12's python3-torch 1.13, for make_model.py and
reference.py: the stand-ins for the imports Debian lacks (beartype, packaging, librosa,
ml_collections, omegaconf, soundfile, tqdm) are the ones tests/fixtures/make_roformer_golden.py
writes (read from that script, not copied, so the two cannot drift), written into
REF/roformer-shims; then MSST, rotary-embedding-torch and einops go on sys.path.

REF: a folder holding, each at its top or one folder down, ZFTurbo/Music-Source-Separation-
Training (models/, utils/, configs/), lucidrains/rotary-embedding-torch and arogozhnikov/einops
(the golden script's REF_DIR; default /tmp/roformer-ref).
"""
import ast
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
GOLDEN_SCRIPT = os.path.join(HERE, "..", "..", "tests", "fixtures", "make_roformer_golden.py")

# the public configs, as MSST ships them
CONFIGS = {
    "ep317": ("bs_roformer", "configs/viperx/model_bs_roformer_ep_317_sdr_12.9755.yaml"),
    "kim": ("mel_band_roformer", "configs/KimberleyJensen/config_vocals_mel_band_roformer_kj.yaml"),
    "scnet": ("scnet", "configs/config_musdb18_scnet.yaml"),
    "scnet_large": ("scnet", "configs/config_musdb18_scnet_large.yaml"),
    "mdx23c": ("mdx23c", "configs/config_vocals_mdx23c.yaml"),
}


def find(ref, marker):
    for d in [ref] + sorted(os.path.join(ref, e) for e in os.listdir(ref)):
        if os.path.exists(os.path.join(d, marker)):
            return d
    return None


def shim_files():
    """SHIM_FILES of the golden script, read as a literal from its source."""
    tree = ast.parse(open(GOLDEN_SCRIPT).read())
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", "") == "SHIM_FILES"
                                                for t in node.targets):
            return ast.literal_eval(node.value)
    sys.exit(f"no SHIM_FILES in {GOLDEN_SCRIPT}")


def setup(ref):
    """Writes the stand-ins and puts the reference on sys.path; returns MSST's folder."""
    ref = os.path.abspath(ref)
    msst, rot, ein = (find(ref, m) for m in ("models/bs_roformer/bs_roformer.py",
                                              "rotary_embedding_torch/rotary_embedding_torch.py",
                                              "einops/einops.py"))
    if not (msst and rot and ein):
        sys.exit(f"{ref} must hold MSST, rotary-embedding-torch and einops "
                 "(tests/fixtures/make_roformer_golden.py says where from)")
    shims = os.path.join(ref, "roformer-shims")
    for rel, text in shim_files().items():
        path = os.path.join(shims, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        if not os.path.exists(path) or open(path).read() != text:
            with open(path, "w") as f:
                f.write(text)
    sys.path[:0] = [msst, rot, ein, shims]
    return msst


def model_type(yaml_path):
    """MSST's --model_type, from the config (the family is not written in it)."""
    import yaml
    cfg = yaml.load(open(yaml_path), Loader=yaml.FullLoader)
    m = cfg["model"]
    return ("bs_roformer" if "freqs_per_bands" in m else "mel_band_roformer" if "num_bands" in m
            else "scnet" if "band_SR" in m else "mdx23c")


def build(kind, config):
    """The model as inference.py builds it, flash_attn off (torch 1.13 has no
    scaled_dot_product_attention; the non-flash path is the same softmax(q k^T / sqrt d) v)."""
    if kind == "scnet":
        from models.scnet import SCNet
        return SCNet(**config.model)
    if kind == "mdx23c":
        from models.mdx23c_tfc_tdf_v3 import TFC_TDF_net
        return TFC_TDF_net(config)
    from models.bs_roformer.bs_roformer import BSRoformer
    from models.bs_roformer.mel_band_roformer import MelBandRoformer
    kw = dict(config.model)
    kw["flash_attn"] = False
    return (BSRoformer if kind == "bs_roformer" else MelBandRoformer)(**kw)
