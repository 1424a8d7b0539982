#!/bin/sh
# Stand-ins for the modules the reference demucs imports that Debian 12 lacks (einops, julius,
# openunmix, omegaconf, dora, tqdm), written into DIR. Only einops.rearrange is ever called on
# HTDemucs's inference path; reference.py's `check` proves the stand-ins right by reproducing
# the golden output. Used by run_bench.sh and bench/gpu/prepare.sh.
#
#   bench/demucs/make_shims.sh DIR
set -eu
S=${1:?usage: make_shims.sh DIR}
[ -f "$S/einops/__init__.py" ] && exit 0
mkdir -p "$S/einops" "$S/julius" "$S/openunmix" "$S/omegaconf" "$S/dora" "$S/tqdm"
cat > "$S/einops/__init__.py" <<'EOF'
# Stand-in for einops.rearrange (not in Debian 12), enough for demucs/htdemucs.py and
# transformer.py: one side of each pattern may group axes in parentheses.
import re


def _parse(side):
    return [t[1:-1].split() if t.startswith("(") else [t]
            for t in re.findall(r"\([^)]*\)|\S+", side)]


def rearrange(x, pattern, **sizes):
    left, right = [s.strip() for s in pattern.split("->")]
    lg, rg = _parse(left), _parse(right)
    dims = dict(sizes)
    for grp, n in zip(lg, x.shape):
        known, unknown = 1, [a for a in grp if a not in dims]
        for a in grp:
            known *= dims.get(a, 1)
        if unknown:
            dims[unknown[0]] = n // known
    flat = [a for g in lg for a in g]
    x = x.reshape([dims[a] for a in flat])
    order = [a for g in rg for a in g]
    x = x.permute([flat.index(a) for a in order])
    out = []
    for g in rg:
        n = 1
        for a in g:
            n *= dims[a]
        out.append(n)
    return x.reshape(out)
EOF
printf '# Stand-in (not in Debian 12): HTDemucs never resamples.\n' > "$S/julius/__init__.py"
: > "$S/openunmix/__init__.py"
printf '# Stand-in (not in Debian 12): HTDemucs with cac=True never filters.\ndef wiener(*a, **k):\n    raise NotImplementedError\n' > "$S/openunmix/filtering.py"
printf '# Stand-in (not in Debian 12): only used to save configs.\nclass OmegaConf:\n    pass\n' > "$S/omegaconf/__init__.py"
: > "$S/dora/__init__.py"
printf 'def fatal(*a):\n    raise RuntimeError(" ".join(map(str, a)))\n' > "$S/dora/log.py"
printf 'def tqdm(it, *a, **k):\n    return it\n' > "$S/tqdm/__init__.py"
