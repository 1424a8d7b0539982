#!/usr/bin/env python3
"""By hand, not by meson: `--ensemble-mode max_spec|min_spec` against MSST's ensemble.py on the
same single-model stems (its average_waveforms, max_fft / min_fft), vocals stem.

usage: /usr/bin/python3 check_ensemble_msst.py MSST_DIR A_DIR B_DIR MAX_DIR MIN_DIR [STEM]

A_DIR, B_DIR: the two models' single runs (stembridge separate ... --model A), MAX_DIR and MIN_DIR
the ensemble's (--ensemble A,B --ensemble-mode max_spec / min_spec); each the folder holding the
stems' WAVs. Needs numpy; librosa and soundfile are replaced by the stand-ins below (librosa's
stft and istft with their defaults: periodic Hann, centred with zeros, overlap-add over the
window's squared sum), so MSST's own ensembling code runs unchanged.

Measured 2026-12-07 (tiny RoFormers of tests/fixtures/roformer, a 100000-frame stereo clip):
vocals max_spec 1.4e-7, min_spec 1.9e-7 relative L2. "other" is the input minus vocals in
Stembridge (the job's stems add back to the input; the manifest says so), not MSST's max of the
two "other" stems: 3 % apart there.
"""
import os
import sys
import types

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [os.path.join(HERE, "..", "cli")]
import wavio  # noqa: E402


def _hann(n):
    return 0.5 - 0.5 * np.cos(2 * np.pi * np.arange(n) / n)


def _stft(y, n_fft=2048, hop_length=512):
    w = _hann(n_fft)
    yp = np.pad(np.asarray(y, dtype=np.float64), n_fft // 2)
    frames = 1 + (len(yp) - n_fft) // hop_length
    f = np.stack([yp[t * hop_length:t * hop_length + n_fft] * w for t in range(frames)], axis=1)
    return np.fft.rfft(f, axis=0).astype(np.complex64)


def _istft(S, hop_length=512, length=None):
    n_fft = 2 * (S.shape[0] - 1)
    w = _hann(n_fft)
    frames = S.shape[1]
    if length is not None:
        frames = min(frames, int(np.ceil((length + 2 * (n_fft // 2)) / hop_length)))
    f = np.fft.irfft(S[:, :frames].astype(np.complex128), n=n_fft, axis=0) * w[:, None]
    n = n_fft + hop_length * (frames - 1)
    y, ws = np.zeros(n), np.zeros(n)
    for t in range(frames):
        y[t * hop_length:t * hop_length + n_fft] += f[:, t]
        ws[t * hop_length:t * hop_length + n_fft] += w * w
    nz = ws > np.finfo(np.float32).tiny
    y[nz] /= ws[nz]
    y = y[n_fft // 2:]
    if length is not None:
        y = y[:length] if len(y) >= length else np.pad(y, (0, length - len(y)))
    return y.astype(np.float32)


sys.modules["librosa"] = types.SimpleNamespace(stft=_stft, istft=_istft)
sys.modules["soundfile"] = types.SimpleNamespace()
msst, a_dir, b_dir, max_dir, min_dir = sys.argv[1:6]
stem = sys.argv[6] if len(sys.argv) > 6 else "vocals"
sys.path.insert(0, msst)
import ensemble  # noqa: E402


def read(d):
    x = np.asarray(wavio.read_wav(os.path.join(d, stem + ".wav"))[0], dtype=np.float32)
    return x.reshape(-1, 2).T.copy()


a, b = read(a_dir), read(b_dir)
worst = 0.0
for d, alg in ((max_dir, "max_fft"), (min_dir, "min_fft")):
    ref = ensemble.average_waveforms([a, b], [1, 1], alg)
    err = float(np.linalg.norm(read(d) - ref) / np.linalg.norm(ref))
    worst = max(worst, err)
    print(f"{stem} {alg}: relative L2 {err:.2e}")
sys.exit(0 if worst < 1e-5 else 1)
