/* The backend interface: what a compute backend (the native CPU, OpenCL; later Vulkan, CUDA,
 * Metal ...) offers the models, as one versioned table of functions, after ggml's backend
 * registry (ggml-backend-impl.h): enumerate its devices with their properties, open one,
 * allocate buffers and move data, run the operations the models are written in, synchronise,
 * close. A backend is one folder (backend/cpu, backend/opencl) that defines one sb_backend;
 * registering it is one line in backend/registry.c. Nothing outside its folder includes its
 * headers or names its types: models and the job engine see sb_backend, sb_bdev and sb_dv only.
 *
 * DATA: float32 everywhere. An sb_dv is a place in device memory (a buffer and an offset in
 * floats); matrices are row-major with explicit leading dimensions; "batch" walks items at a
 * stride in floats (0: the same item for every batch index, as weights are).
 *
 * ERRORS: operations enqueue and return nothing. The first failure on a device (out of device
 * memory, a lost device, a kernel that did not run) is kept by the device, every later
 * operation does nothing, and status() / finish() return it (SB_ERR_DEVICE_OOM,
 * SB_ERR_DEVICE_LOST, SB_ERR_DEVICE), so a model's forward pass reads as straight-line code and
 * checks once, before it reads results back. clear() starts a new forward pass.
 *
 * THREADS: a device (sb_bdev) is used by one thread at a time (the job engine's worker that
 * owns it); different devices may be used from different threads at once. enumerate() may run
 * on any non-real-time thread.
 *
 * Adding a backend: a folder with enumerate/open/close, the buffer functions, the core of sb_ops
 * and the optional groups it has (tests/backend checks each against the CPU backend the day it
 * is registered, and says "not supported" for what it leaves out), one line in registry.c, one
 * line in backend/meson.build.
 */
#ifndef SB_BACKEND_H
#define SB_BACKEND_H

#include "backend/device.h"
#include "sb_common.h"

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#define SB_BACKEND_API 10

/* 1 when one of the n stop flags (NULL entries skipped) is set: what drain() and a model's
 * pass look at between their steps */
static inline int sb_stop_set(const atomic_int *const *stop, int n)
{
	for (int i = 0; i < n; i++)
		if (stop[i] && atomic_load_explicit(stop[i], memory_order_relaxed))
			return 1;
	return 0;
}

typedef struct sb_bdev sb_bdev; /* an opened device: the backend's own struct */
typedef struct sb_bbuf sb_bbuf; /* memory on a device: the backend's own struct */
typedef struct sb_bpass sb_bpass; /* a pass ended and not yet waited for (pass_end) */

/* a place in device memory: a buffer and an offset in floats */
typedef struct {
	sb_bbuf *buf;
	size_t off;
} sb_dv;

static inline sb_dv sb_dv_at(sb_dv v, size_t floats)
{
	v.off += floats;
	return v;
}

/* The geometry of a short-time Fourier transform as torch.stft / torch.istft compute it, for
 * the stft and istft operations. n_fft is a power of two from 8 to 8192. Frame t < frames of a
 * channel starts at sample t hop - pad of its signal; samples before 0 or from L on are
 * reflected once about the ends (s < 0: -s; s >= L: 2 (L - 1) - s; pad < L). A spectrum holds
 * bins f < bins (<= n_fft / 2 + 1) of every frame and channel: the real part of (c, f, t) at
 * c sc + f sf + t st and the imaginary part sri further. */
typedef struct {
	int n_fft, hop, frames, bins;
	long pad;
	long sc, sf, st, sri;
} sb_stft;

/* GELU: 0.5 x (1 + erf(x / sqrt 2)); TANH (bias_cols and gemm_bias only): tanh x; SILU
 * (norm_groups only): x sigmoid(x) */
enum { SB_ACT_NONE = 0, SB_ACT_GELU = 1, SB_ACT_TANH = 2, SB_ACT_SILU = 3 };

/* Where norm_groups finds its values: element (i1, i2, c, f, t) of x at
 * i1 s1 + i2 s2 + c sc + f sf + t, for i1 < n1, i2 < n2, c < C, f < F, t < T; the channels in G
 * groups of C / G. A GroupNorm over [C][F][T] items is (n1 items, n2 = 1, sc = F T, sf = T);
 * the same items stored as rows [F][C][T] take sc = T, sf = C T; InstanceNorm is G = C. */
typedef struct {
	int n1, n2, C, G, F, T;
	long s1, s2, sc, sf;
} sb_norm_geom;

/* What gemm_bias adds to a product's every element and the activation after it: for item i of
 * the first batch level, b[i bs + r] for row r (cols = 0: a convolution's output channels) or
 * b[i bs + c] for column c (cols = 1: nn.Linear's features on token rows); bs = 0: one bias
 * for every item */
typedef struct {
	sb_dv b;
	long bs;
	int cols, act;
} sb_bias;

/* The operations the models are written in. Each one is defined by its arithmetic here; every
 * backend computes it within float rounding of the CPU backend (tests/backend/test_ops.c).
 * The core comes first and every backend fills it; then the optional groups (sb_op_group), whose
 * members a backend may leave NULL: a model family names the groups it needs
 * (models/families.c) and the job runner places a model only on devices that have them.
 * Indices: i over the n elements of a tensor; [..][C][T] tensors hold channel c = (i / T) % C;
 * token tensors [n][D] hold column i % D. Norms use the mean and the biased variance of their
 * group (eps = 1e-5, rstd = 1 / sqrt(var + eps)); how a backend sums them is its own. */
typedef struct {
	/* C_ij = alpha A_ij op(B_ij) + beta C_ij for i < batch, j < batch2: A_ij (M x K) at
	 * A + i sa + j sa2, B_ij (K x N, or N x K with tb = 1) at B + i sb + j sb2, C_ij (M x N) at
	 * C + i sc + j sc2. The second level walks items whose rows the first level walks (a
	 * batch of segments, each a batch of frequency rows). */
	void (*gemm)(sb_bdev *d, int M, int N, int K, float alpha, sb_dv A, int lda, long sa,
	             sb_dv B, int ldb, long sb, int tb, float beta, sb_dv C, int ldc, long sc,
	             int batch, int batch2, long sa2, long sb2, long sc2);
	/* x[i] = 0 for i < n */
	void (*zero)(sb_bdev *d, sb_dv x, size_t n);
	/* dst[i] = src[i] for i < n (the ranges do not overlap) */
	void (*copy)(sb_bdev *d, sb_dv dst, sb_dv src, size_t n);
	/* x[i] = act(x[i] + b[i % cols]) */
	void (*bias_cols)(sb_bdev *d, sb_dv x, size_t n, int cols, sb_dv b, int act);
	/* x[i] += y[i] */
	void (*add)(sb_bdev *d, sb_dv x, sb_dv y, size_t n);
	/* for each batch item b: o[b os + e] = z[b zs + e] sigmoid(z[b zs + CT + e]), e < CT */
	void (*glu)(sb_bdev *d, sb_dv z, long zs, sb_dv o, long os, int CT, int batch);
	/* GroupNorm with one group over each batch item's C x T values at x + b stride, then
	 * v = (v - mean) rstd w[c] + b[c], then act */
	void (*groupnorm)(sb_bdev *d, sb_dv x, long stride, int C, int T, int batch, sb_dv w,
	                  sb_dv b, int act);
	/* GroupNorm(1, D) over all n x D values of tokens x [n][D], affine per column */
	void (*groupnorm_tokens)(sb_bdev *d, sb_dv x, size_t n, int D, sb_dv w, sb_dv b);
	/* o[r] = LayerNorm(x[r]) over D, affine per column; o may be x */
	void (*layernorm)(sb_bdev *d, sb_dv x, sb_dv o, size_t rows, int D, sb_dv w, sb_dv b);
	/* each of the rows of n values: x = exp(x - max) / sum */
	void (*softmax)(sb_bdev *d, sb_dv x, size_t rows, int n);
	/* out[c][r] = in[r][c] for an R x C matrix */
	void (*transpose)(sb_bdev *d, sb_dv in, sb_dv out, int R, int C);
	/* rows [F][C][T] to tokens [T * F][C] (token t F + f), or back (back = 1) */
	void (*rows_tokens)(sb_bdev *d, sb_dv x, sb_dv o, int F, int C, int T, int back);
	/* x[f][c][t] += e[f][c] */
	void (*add_row_channel)(sb_bdev *d, sb_dv x, int F, int C, int T, sb_dv e);
	/* multi-head attention over batch sequences: for item b < batch, head h < heads, query
	 * row i < nq, c < hd,
	 * o[b so + i ldo + h hd + c] = sum_j P[i][j] v[b skv + j ldkv + h hd + c] with
	 * P[i][j] = softmax over j < nk of scale sum_e q[b sq + i ldq + h hd + e]
	 *                                             k[b skv + j ldkv + h hd + e]
	 * (k and v may be columns of one matrix, as q, k and v of a fused projection are; the
	 * items may interleave, as the sequences of an axial transformer do). Where the scores
	 * live is the backend's own business: a CPU keeps a block of them in cache, a GPU may
	 * hold them all or none, never more than its memory allows. With per-head gates (g.buf
	 * not NULL: a RoFormer's, columns of the rows q is read from), each row of each head is
	 * multiplied by sigmoid(g[b sq + i ldq + h]) as it is written (issue #50: no launch and no
	 * pass over o of its own). */
	void (*attention)(sb_bdev *d, sb_dv q, int ldq, sb_dv k, sb_dv v, int ldkv, int nq, int nk,
	                  int heads, int hd, float scale, sb_dv o, int ldo, int batch, long sq,
	                  long skv, long so, sb_dv g);
	/* RMSNorm (the RoFormers): o[r][c] = x[r][c] sqrt(D) / max(||x[r]||, 1e-12) w[c] over the
	 * D values of each row; o may be x */
	void (*rmsnorm)(sb_bdev *d, sb_dv x, sb_dv o, size_t rows, int D, sb_dv w);
	/* RMSNorm of each segment of each row (a RoFormer's bands, all in one launch): for row
	 * r < rows at x + r ld and segment s < nseg, its columns i from seg[s] to seg[s + 1] - 1
	 * (whole numbers as floats, ascending), of len_s values,
	 * o[r ld + i] = x[r ld + i] sqrt(len_s) / max(||x[r, seg s]||, 1e-12) w[i]; o may be x */
	void (*rmsnorm_seg)(sb_bdev *d, sb_dv x, sb_dv o, size_t rows, long ld, int nseg, sb_dv seg,
	                    sb_dv w);
	/* rotary position embedding on interleaved pairs (rotary-embedding-torch): for row
	 * r < rows at x + r ld, position p = (r / div) % mod, pair i < cols / 2 with j = i % (hd / 2)
	 * and (c, s) = (cs[(p hd / 2 + j) 2], cs[(p hd / 2 + j) 2 + 1]):
	 * (x[2i], x[2i+1]) = (x[2i] c - x[2i+1] s, x[2i+1] c + x[2i] s); cols a multiple of hd */
	void (*rope)(sb_bdev *d, sb_dv x, size_t rows, int ld, int cols, int hd, sb_dv cs, int div,
	             int mod);
	/* per-head gates: x[r ldx + h hd + c] *= sigmoid(g[r ldg + h]), r < rows, h < heads */
	void (*head_gate)(sb_bdev *d, sb_dv x, int ldx, sb_dv g, int ldg, size_t rows, int heads,
	                  int hd);
	/* the STFT of ch signals of L samples at x + c xs (geometry g, window w [n_fft]):
	 * X(c, f, t) = scale sum_{i < n_fft} w[i] x[c xs + s(t hop - pad + i)] exp(-2 pi i f i / n_fft)
	 * for f < g->bins, written to X as g lays it out */
	void (*stft)(sb_bdev *d, const sb_stft *g, sb_dv x, long xs, int ch, long L, sb_dv w,
	             float scale, sb_dv X);
	/* the inverse STFT with overlap-add (torch.istft): frame t of channel c is
	 * y_t[i] = scale w[i] Re sum_{f < n_fft} X'(c, f, t) exp(2 pi i f i / n_fft), i < n_fft, where
	 * X' is the Hermitian extension of the bins f < g->bins of X (the others zero, and the
	 * imaginary parts of DC and Nyquist taken as zero); output sample j < L at position
	 * p = j + g->pad is o[c os + j] = sum_t y_t[p - t hop] / env(p) (0 where env(p) <= 1e-11),
	 * env(p) = sum of w[p - t hop]^2 over frames t from -e0 to frames + e1 - 1 (the frames a
	 * reference cropped away still count in its envelope). add = 1 adds to o instead.
	 * work: ch x frames x n_fft floats of scratch. */
	void (*istft)(sb_bdev *d, const sb_stft *g, sb_dv X, int ch, long L, sb_dv w, float scale,
	              int e0, int e1, sb_dv o, long os, int add, sb_dv work);
	/* stats[0] = mean, stats[1] = unbiased standard deviation (torch.std) of x[i], i < n */
	void (*moments)(sb_bdev *d, sb_dv x, size_t n, sb_dv stats);
	/* with (m, s) = (stats[0], stats[1]): inverse 0: o[i] = (x[i] - m) / (s + eps);
	 * inverse 1: o[i] = x[i] s + m; i < n, o may be x */
	void (*standardise)(sb_bdev *d, sb_dv x, sb_dv o, size_t n, sb_dv stats, float eps,
	                    int inverse);
	/* columns gathered and summed (a RoFormer's band split and its masks' way back): for row
	 * r < rows and column i < n, o[r ldo + i] = w[i] sum of x[r ldx + idx[p]] over p from
	 * ptr[i] to ptr[i + 1] - 1, in that order; ptr (n + 1 values) and idx hold whole numbers
	 * as floats (exact below 2^24); o and x do not overlap */
	void (*gather)(sb_bdev *d, sb_dv x, long ldx, sb_dv o, long ldo, size_t rows, int n,
	               sb_dv ptr, sb_dv idx, sb_dv w);
	/* complex products of (re, im) pairs: for item b < batch and pair i < n,
	 * (o re, o im) at o + b so + 2 i = (a re c re - a im c im, a re c im + a im c re) with a at
	 * a + b sa + 2 i and c at c + 2 i (the same for every item); o may be a */
	void (*cmul)(sb_bdev *d, sb_dv a, long sa, sb_dv c, sb_dv o, long so, size_t n, int batch);
	/* gemm, then each element v of every C_ij at row r, column c:
	 * v = act(v + e->b[i e->bs + (e->cols ? c : r)]), in the product's own pass where the
	 * backend can (a GPU's product writes C once: no launch and no pass over C of its own,
	 * issue #24) */
	void (*gemm_bias)(sb_bdev *d, int M, int N, int K, float alpha, sb_dv A, int lda, long sa,
	                  sb_dv B, int ldb, long sb, int tb, float beta, sb_dv C, int ldc, long sc,
	                  int batch, int batch2, long sa2, long sb2, long sc2, const sb_bias *e);

	/* ---- SB_OPS_HTDEMUCS: HTDemucs's convolutions and DConv steps, fused ---- */
	/* the input columns of a Conv1d(kernel 8, stride 4, padding 2) over x [cin][lin]:
	 * col[ci 8 + k][j] = x[ci][4 j + k - 2] (0 outside), j < lout */
	void (*im2col_k8s4)(sb_bdev *d, sb_dv x, long lin, int cin, sb_dv col, long lout);
	/* a ConvTranspose1d(kernel 8, stride 4) from per-tap products p [8][cout][lin], cropped by
	 * 2: o[c][t] = act(b[c] + p[u%4][c][u/4] + p[u%4 + 4][c][u/4 - 1]), u = t + 2, t < length */
	void (*convtr_k8s4)(sb_bdev *d, sb_dv p, long lin, int cout, long length, sb_dv b, int act,
	                    sb_dv o);
	/* DConv's last steps: z' = groupnorm(z, zs, 2 C, T, batch, w, b, SB_ACT_NONE), then for
	 * each batch item b and e < C T: x[b xs + e] += scale[e / T] z'[e] sigmoid(z'[C T + e])
	 * (z' at b zs), without a pass that writes z' where the backend can (issue #24); z is
	 * scratch afterwards */
	void (*gn_glu_add)(sb_bdev *d, sb_dv x, long xs, sb_dv z, long zs, int C, int T, sb_dv w,
	                   sb_dv b, sb_dv scale, int batch);

	/* ---- SB_OPS_LSTM: recurrent layers (SCNet's dual-path RNN) ---- */
	/* A one-layer LSTM (torch.nn.LSTM, batch_first; gates i, f, g, o) over the n sequences of
	 * S steps of x [n][S][D], in both directions when dirs = 2 (the second from the last step
	 * to the first), from zero states: direction r at each of its steps s computes
	 * z = wih[r] x[s] + whh[r] h + b[r] (wih [dirs][4H][D], whh [dirs][4H][H], b [dirs][4H]:
	 * b_ih + b_hh), i = sigmoid(z[0, H)), f = sigmoid(z[H, 2H)), g = tanh(z[2H, 3H)),
	 * o = sigmoid(z[3H, 4H)), c = f c + i g, h = o tanh(c), and writes h to
	 * o[q][s][r H + k], k < H. The input products of every step are one product; only the
	 * recurrence runs step by step. work: dirs n (S + 1) 4H floats. */
	void (*lstm)(sb_bdev *d, sb_dv x, int n, int S, int D, int H, int dirs, sb_dv wih,
	             sb_dv whh, sb_dv b, sb_dv o, sb_dv work);

	/* ---- SB_OPS_CONVNET: the layouts and norms of the convolution U-Nets (SCNet, MDX23C),
	 * whose convolutions are products (gemm) over rows [F][C][T] ---- */
	/* dst[i ldi + r ldd + k] = src[i lsi + r lds + k], i < batch, r < rows, k < n (the ranges
	 * do not overlap): a band of rows, a padded copy, one half of a concatenation */
	void (*copy_rows)(sb_bdev *d, sb_dv dst, long ldd, long ldi, sb_dv src, long lds, long lsi,
	                  int rows, long n, int batch);
	/* a transpose of up to four dimensions: o[a os[0] + b os[1] + c os[2] + e os[3]] =
	 * x[((a dims[1] + b) dims[2] + c) dims[3] + e] for (a, b, c, e) < dims */
	void (*permute)(sb_bdev *d, sb_dv x, const int dims[4], const long os[4], sb_dv o);
	/* GroupNorm of strided values (sb_norm_geom g): per (i1, i2, group) the mean and the biased
	 * variance of its C / G channels' F T values, then v = act((v - mean) rstd w[c] + b[c]),
	 * written to o at the same place relative to it (o may be x) */
	void (*norm_groups)(sb_bdev *d, sb_dv x, const sb_norm_geom *g, sb_dv w, sb_dv b, int act,
	                    sb_dv o);
	/* a depthwise Conv1d (groups = C) of odd kernel k, zero-padded by k / 2, over the rows
	 * x [rows][C][T]: o[r][c][t] = b[c] + sum_u w[c k + u] x[r][c][t + u - k / 2] */
	void (*dwconv)(sb_bdev *d, sb_dv x, int rows, int C, int T, int k, sb_dv w, sb_dv b,
	               sb_dv o);
	/* x[i] *= y[i], i < n */
	void (*mul)(sb_bdev *d, sb_dv x, sb_dv y, size_t n);
#ifdef SB_TOY_FAMILY
	/* ---- SB_OPS_TOY (tests only, -Dtoy_family=true): o[i] = a x[i] + b y[i], i < n ---- */
	void (*toy_mix)(sb_bdev *d, sb_dv x, sb_dv y, sb_dv o, size_t n, float a, float b);
#endif
} sb_ops;

/* The operation groups: the core, and the optional ones. Adding an optional group is an entry
 * here, its members at the end of sb_ops, one line each in backend/ops.c's table, and the
 * families that need it naming it; a backend fills its members where it has them. */
typedef enum {
	SB_OPS_CORE = 0,   /* every backend, every entry */
	SB_OPS_HTDEMUCS,   /* im2col_k8s4, convtr_k8s4, gn_glu_add */
	SB_OPS_CLASSIC,    /* the built-in model's chunk: sb_backend.classic (sb_classic_ops) */
	SB_OPS_LSTM,       /* lstm */
	SB_OPS_CONVNET,    /* copy_rows, permute, norm_groups, dwconv, mul */
#ifdef SB_TOY_FAMILY
	SB_OPS_TOY,        /* tests only: toy_mix */
#endif
	SB_N_OP_GROUPS
} sb_op_group;

/* An operation by name, its group and where it sits in sb_ops (backend/ops.c). */
typedef struct {
	const char *name;
	sb_op_group group;
	size_t offset;     /* of its member in sb_ops; (size_t)-1 for the classic group's chunk */
} sb_op_info;

/* The operations, core first, then each optional group's; NULL past the last. */
const sb_op_info *sb_op_at(size_t i);
const sb_op_info *sb_op_find(const char *name);
const char *sb_op_group_name(sb_op_group g);

/* The built-in separator's per-chunk work (models/classic/classic.h steps 1-6 and the inverse
 * STFT of step 7), an operation group of its own: an STFT, medians and masks do not decompose
 * into the matrix operations above without losing most of their speed. The geometry and the
 * tables come from the model, so both backends compute the same numbers. */
typedef struct {
	int n_fft, hop, kt, kf, bins;
	int kf_lo, k_lo; /* the narrow frequency median of bins k < k_lo */
	float beta, eps, gamma, c_mono;
	int channels;
	int max_frames;  /* the largest nt process() will be given */
	const float *win, *bass_w, *voice_w; /* n_fft, bins, bins values (copied by create) */
} sb_classic_geom;

typedef struct sb_classic_state sb_classic_state;
typedef struct {
	/* SB_ERR_NOMEM, SB_ERR_DEVICE_OOM, SB_ERR_DEVICE on failure (logged) */
	sb_status (*create)(sb_bdev *d, const sb_classic_geom *g, sb_classic_state **out);
	/* in: (nt + 2 kt + 1) hop frames of input; out: 3 stems of (nt + 1) hop frames (see
	 * models/classic/classic_ops.h for the exact contract) */
	sb_status (*process)(sb_classic_state *s, int nt, const float *in, float *out);
	void (*destroy)(sb_classic_state *s);
} sb_classic_ops;

/* An entry of a device's profile: an operation, its calls, wall seconds with the queue drained
 * around each call, and floating-point operations (matrix products). */
typedef struct {
	const char *name;
	long calls;
	double seconds, flops;
} sb_prof_entry;

/* A matrix product's entry of a device's profile, by shape and path (profile_products): M, N, K,
 * B transposed, the first batch level, gemm_bias's epilogue (1) or none (0), and what ran it
 * (a string the device owns: read it before the device closes). */
typedef struct {
	int M, N, K, tb, batch, bias;
	const char *path;
	long calls;
	double seconds, flops;
} sb_prof_product;

/* What a device has done since it was opened, counted whether profiling is on or not (the
 * profile's own waits are not): launches (kernels enqueued, and each call of a library that
 * enqueues its own, CLBlast's), uploads, read-backs (download and fetch), and the host's waits
 * for the device (finish, drain, pass_wait, a blocking read or write: each time the host thread
 * sat until the device had run something), bytes each way. */
typedef struct {
	long launches, uploads, downloads, waits;
	double bytes_up, bytes_down;
} sb_dev_counts;

/* Arithmetic of a device's matrix products. bf16: inputs rounded to bf16, sums in fp32, every
 * other operation fp32; a backend that cannot says so once in the log and runs fp32. */
typedef enum { SB_PREC_FP32 = 0, SB_PREC_BF16 = 1 } sb_precision;

typedef struct {
	int threads;                 /* host threads a CPU backend may use, 0 = all cores (less
	                                one for each GPU beside it) */
	sb_precision precision;      /* asked for; precision() says what runs */
	/* GPUs that run at the same time as this CPU device (in the same file, or other files of
	 * the same session), each fed by a host thread of its own. A CPU backend then runs below
	 * them: threads 0 leaves one core to each, and the threads it starts (every one but the
	 * caller's) run at a lower priority (SB_CPU_BESIDE_NICE), so that its work does not slow
	 * theirs (issue #24). */
	int beside;
} sb_open_opts;

struct sb_backend {
	unsigned api;                /* SB_BACKEND_API */
	const char *name;            /* "cpu", "opencl": its folder, and the prefix of device ids */

	/* Devices: adds this backend's devices to out[*n .. cap) in a stable order, each with its
	 * id ("<name>:<index>", or the name alone for a backend with one device), stable key,
	 * names, type, memory, and backend/index set. Failures that only mean "no device" (no
	 * driver installed) are logged as notes and leave none. */
	sb_status (*enumerate)(const sb_logger *log, sb_device *out, size_t cap, size_t *n);
	/* Opens a device for use: SB_ERR_DEVICE (logged, with the driver's words) when it cannot. */
	sb_status (*open)(const sb_device *dev, const sb_open_opts *o, const sb_logger *log,
	                  sb_bdev **out);
	void (*close)(sb_bdev *d);
	/* Lost for good (a failure that ends the device for this process). */
	int (*lost)(const sb_bdev *d);
	/* Called once per unit of work (a segment, a chunk): SB_ERR_DEVICE_LOST when the device is
	 * lost (the fault injector's hook), else SB_OK. */
	sb_status (*begin_chunk)(sb_bdev *d);
	/* Rows of a batched layer to run per operation: 0 for all at once (a GPU, where launches
	 * cost), a few for a CPU (the rows' data stays in cache from one operation to the next). */
	int (*row_tile)(const sb_bdev *d);
	/* Segments per forward pass this device runs best with (models batch that many where its
	 * memory allows; a job's choice overrides it). */
	int (*batch)(const sb_bdev *d);

	/* Memory. alloc: SB_ERR_DEVICE_OOM when the device has no room. wrap: device memory with
	 * the contents of host memory that outlives it and never changes (weights): a backend that
	 * shares host memory uses it in place, another copies it, perhaps only by the next
	 * finish() (the caller keeps the host memory until then). */
	sb_status (*alloc)(sb_bdev *d, size_t floats, sb_bbuf **out);
	sb_status (*wrap)(sb_bdev *d, const float *host, size_t floats, sb_bbuf **out);
	void (*release)(sb_bdev *d, sb_bbuf *b);
	/* upload: src is free again on return (the device may take the data later, after the work
	 * queued before it, without the host waiting); download: done on return. */
	void (*upload)(sb_bdev *d, sb_dv dst, const float *src, size_t n);
	void (*download)(sb_bdev *d, float *dst, sb_dv src, size_t n);
	/* A read-back at the end of a pass, without a wait of its own (issue #50: one wait a pass):
	 * n floats of src, read after the work enqueued before it, are in dst once the next drain()
	 * (or the pass_wait() of the pass it belongs to) has returned SB_OK. Until then dst is not
	 * touched, and after a wait that gave up (a stop flag) or failed it is never touched: the
	 * data lands in the backend's own memory first. A CPU backend copies at once. */
	void (*fetch)(sb_bdev *d, float *dst, sb_dv src, size_t n);

	/* Waits for everything enqueued; returns the first failure since clear(). */
	sb_status (*finish)(sb_bdev *d);
	/* finish(), unless one of the n flags of stop (NULL entries skipped) is set first: then
	 * SB_ERR_CANCELLED at once, and the work enqueued goes on with nobody waiting for it (it
	 * reads no host memory the caller owns; later work on the device queues behind it). For a pass whose result is no longer wanted: another device finished its
	 * segment first, or the job was cancelled (issue #24: nothing is waited for). */
	sb_status (*drain)(sb_bdev *d, const atomic_int *const *stop, int n);
	/* Optional (NULL: the device has run each operation when it returns, as the CPU has): the
	 * work enqueued since the last pass_end() (or since the device was opened) as a pass of its
	 * own, with the reads fetch() enqueued in it, so that the next pass can be enqueued before
	 * this one is waited for and the device goes from one to the next without waiting for the
	 * host (a pipeline). pass_wait() waits for p alone as drain() does (the stop flags; SB_OK,
	 * the first failure of its work, or SB_ERR_CANCELLED), puts its reads in place on SB_OK, and
	 * frees p: each ended pass is waited for once, in the order they were ended. The pass's
	 * failure is its own: clear() before the next pass does not forget it. NULL from pass_end()
	 * when the host has no memory for it (the failure is kept by the device). */
	sb_bpass *(*pass_end)(sb_bdev *d);
	sb_status (*pass_wait)(sb_bdev *d, sb_bpass *p, const atomic_int *const *stop, int n);
	/* Optional: the counts since the device was opened (sb_dev_counts) */
	void (*counts)(const sb_bdev *d, sb_dev_counts *out);
	/* The first failure since clear(), without waiting. */
	sb_status (*status)(const sb_bdev *d);
	void (*clear)(sb_bdev *d);

	const sb_ops *ops;
	const sb_classic_ops *classic; /* optional (SB_OPS_CLASSIC): NULL runs the built-in model
	                                  on the CPU */
	/* Optional (ggml's supports_op): whether device d runs op, for a backend whose devices
	 * differ; NULL: every operation whose member it fills. */
	int (*supports)(const sb_bdev *d, const sb_op_info *op);

	/* Profiling: with it on, every operation waits for the device before and after it and is
	 * timed; turning it on clears the totals. profile() copies up to max non-empty entries,
	 * the slowest first. describe() says how matrix products run ("avx512 fp32 12x32",
	 * "CLBlast 1.5.3"). precision() (optional: NULL means "fp32") says what they compute in. */
	void (*set_profiling)(sb_bdev *d, int on);
	int (*profile)(const sb_bdev *d, sb_prof_entry *out, int max);
	/* Optional (NULL: the profile's "gemm" alone): the products of the profile by shape and
	 * path, the slowest first, up to max; a shape past the backend's room counts in an entry
	 * of M = 0 */
	int (*profile_products)(const sb_bdev *d, sb_prof_product *out, int max);
	const char *(*describe)(const sb_bdev *d);
	const char *(*precision)(const sb_bdev *d);
	/* Optional: the precision of the products from now on, for a device opened once and kept
	 * for jobs that ask for different ones (a GPU in the job engine); NULL: fixed at open. */
	void (*set_precision)(sb_bdev *d, sb_precision p);
	/* Optional: one line on how a device of this backend computes, for device listings (the
	 * CPU: its instructions and what runs its products). May load libraries; never called
	 * where no thread may start (a plugin's instantiate). */
	void (*details)(const sb_device *p, char *buf, size_t len);
};

/* ---- the registry (backend/registry.c) ---- */

/* The registered backends, the CPU first; NULL after the last. */
const sb_backend *sb_backend_at(size_t i);
const sb_backend *sb_backend_by_name(const char *name);
/* The CPU backend (always there: the floor of every fallback). */
const sb_backend *sb_backend_cpu(void);

/* A device opened for a model: the backend and its device, as the model holds them. */
typedef struct {
	const sb_backend *be;
	sb_bdev *d;
	const sb_device *props;
} sb_exec;

/* Whether x runs op (its member is there, and supports() says yes) */
int sb_exec_supports(const sb_exec *x, const sb_op_info *op);
/* Whether x runs every operation of the groups (bits 1 << SB_OPS_*; the core is assumed); when
 * not, the first group it lacks into *missing (may be NULL). */
int sb_exec_has_groups(const sb_exec *x, unsigned groups, sb_op_group *missing);

/* Opens the device of a table entry through its backend (logs the reason on failure). */
sb_status sb_exec_open(const sb_device *dev, const sb_open_opts *o, const sb_logger *log,
                       sb_exec *out);
void sb_exec_close(sb_exec *x);

#endif
