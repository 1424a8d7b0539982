/* OpenCL kernels of the backend operations (backend.h: sb_ops; cl_ops.c launches them), after
 * gemm_rows.cl (meson.build). Every buffer comes with an offset in floats, so one weight buffer
 * and a few activation buffers serve every layer. LayerNorm and softmax use one work-group per
 * row; GroupNorm's statistics come in slices merged without cancellation (norm_part, below).
 * Work-group sizes: GEMM 16 x 16, reductions RED_WG (a power of two, set at build time).
 */
#ifndef RED_WG
#define RED_WG 256
#endif

/* ---- C = alpha * A (M x K) * op(B) + beta * C, row-major, batched over dimension 2 ----
 * tb = 0: B is K x N; tb = 1: B is N x K. A 64 x 64 tile per work-group, 4 x 4 per item; ep:
 * gemm_bias's epilogue (gemm_rows.cl). */
#define TS 64
#define TK 16
__kernel __attribute__((reqd_work_group_size(16, 16, 1)))
void gemm(int M, int N, int K, float alpha,
          __global const float *A, ulong aoff, int lda, long sa,
          __global const float *B, ulong boff, int ldb, long sb, int tb,
          float beta, __global float *C, ulong coff, int ldc, long sc,
          __global const float *bias, ulong biasoff, long bstride, int ep)
{
	const int tx = get_local_id(0), ty = get_local_id(1);
	const int col0 = get_group_id(0) * TS, row0 = get_group_id(1) * TS;
	const long bt = get_group_id(2);
	A += aoff + bt * sa;
	B += boff + bt * sb;
	C += coff + bt * sc;
	bias += biasoff + bt * bstride;
	__local float As[TK][TS + 1];
	__local float Bs[TK][TS + 1];
	float acc[4][4];
	for (int i = 0; i < 4; i++)
		for (int j = 0; j < 4; j++)
			acc[i][j] = 0.f;
	const int lid = ty * 16 + tx;
	for (int k0 = 0; k0 < K; k0 += TK) {
		for (int l = 0; l < 4; l++) {
			const int idx = lid + 256 * l;
			{
				const int m = idx / TK, k = idx % TK;
				const int gm = row0 + m, gk = k0 + k;
				As[k][m] = gm < M && gk < K ? A[(long)gm * lda + gk] : 0.f;
			}
			if (!tb) {
				const int k = idx / TS, n = idx % TS;
				const int gk = k0 + k, gn = col0 + n;
				Bs[k][n] = gk < K && gn < N ? B[(long)gk * ldb + gn] : 0.f;
			} else {
				const int n = idx / TK, k = idx % TK;
				const int gk = k0 + k, gn = col0 + n;
				Bs[k][n] = gk < K && gn < N ? B[(long)gn * ldb + gk] : 0.f;
			}
		}
		barrier(CLK_LOCAL_MEM_FENCE);
		for (int k = 0; k < TK; k++) {
			float a[4], b[4];
			for (int i = 0; i < 4; i++) {
				a[i] = As[k][ty + 16 * i];
				b[i] = Bs[k][tx + 16 * i];
			}
			for (int i = 0; i < 4; i++)
				for (int j = 0; j < 4; j++)
					acc[i][j] = fma(a[i], b[j], acc[i][j]);
		}
		barrier(CLK_LOCAL_MEM_FENCE);
	}
	for (int i = 0; i < 4; i++) {
		const int gm = row0 + ty + 16 * i;
		if (gm >= M)
			continue;
		for (int j = 0; j < 4; j++) {
			const int gn = col0 + tx + 16 * j;
			if (gn >= N)
				continue;
			const long at = (long)gm * ldc + gn;
			C[at] = epi(alpha * acc[i][j] + (beta != 0.f ? beta * C[at] : 0.f), bias, ep, gm,
			            gn);
		}
	}
}

inline float sigm(float x)
{
	return 1.f / (1.f + exp(-x));
}

/* gemm_bias's epilogue after a product that has none (CLBlast's), and bias_cols (one item of
 * rows x cols): items of M x N at ldc, sc; id 0 the column, 1 the row, 2 the item */
__kernel void bias_items(__global float *C, ulong coff, int M, int N, int ldc, long sc,
                         __global const float *bias, ulong biasoff, long bstride, int ep)
{
	const int c = get_global_id(0), r = get_global_id(1);
	const long bt = get_global_id(2);
	if (c >= N || r >= M)
		return;
	__global float *p = C + coff + bt * sc + (long)r * ldc + c;
	*p = epi(*p, bias + biasoff + bt * bstride, ep, r, c);
}

__kernel void add(__global float *x, ulong xoff, __global const float *y, ulong yoff, ulong n)
{
	const ulong i = get_global_id(0);
	if (i < n)
		x[xoff + i] += y[yoff + i];
}

/* batch items of [2C][T] -> [C][T]: out = z[:C] * sigmoid(z[C:]) */
__kernel void glu(__global const float *z, ulong zoff, long zstride, __global float *o,
                  ulong ooff, long ostride, int CT)
{
	const int e = get_global_id(0);
	const long bi = get_global_id(1);
	if (e >= CT)
		return;
	const __global float *zz = z + zoff + bi * zstride;
	o[ooff + bi * ostride + e] = zz[e] * sigm(zz[CT + e]);
}

/* Mean and variance of a large tensor in one read, on every compute unit: each work-group
 * takes a slice of one batch item (G slices an item) and leaves its count, mean and M2 (the sum
 * of squared deviations); norm_final merges them. With one slice an item (items enough to fill
 * the device, or items that small) a norm's mean and rstd are written at once ('stats'): no
 * norm_final. Within a work-item Welford's update, across
 * work-items and slices Chan, Golub and LeVeque's pairwise merge ("Updating formulae and a
 * pairwise algorithm for computing sample variances", 1979): no cancellation however large the
 * mean is against the spread, as the two-pass form it replaces. */
static void merge(float *n, float *m, float *q, float n2, float m2, float q2)
{
	const float nn = *n + n2;
	if (nn <= 0.f)
		return;
	const float d = m2 - *m;
	*m += d * (n2 / nn);
	*q += q2 + d * d * (*n * n2 / nn);
	*n = nn;
}

/* The sum and the maximum of every work-item's v in a work-group, returned to all of them (the
 * local array may be used again afterwards): the one tree reduction the kernels below share. */
static float group_sum(__local float *red, int l, float v)
{
	red[l] = v;
	barrier(CLK_LOCAL_MEM_FENCE);
	for (int w = RED_WG / 2; w > 0; w >>= 1) {
		if (l < w)
			red[l] += red[l + w];
		barrier(CLK_LOCAL_MEM_FENCE);
	}
	const float r = red[0];
	barrier(CLK_LOCAL_MEM_FENCE);
	return r;
}

static float group_max(__local float *red, int l, float v)
{
	red[l] = v;
	barrier(CLK_LOCAL_MEM_FENCE);
	for (int w = RED_WG / 2; w > 0; w >>= 1) {
		if (l < w)
			red[l] = fmax(red[l], red[l + w]);
		barrier(CLK_LOCAL_MEM_FENCE);
	}
	const float r = red[0];
	barrier(CLK_LOCAL_MEM_FENCE);
	return r;
}

/* every work-item's (count, mean, M2) merged into entry 0 of the local arrays */
static void merge_group(__local float *rn, __local float *rm, __local float *rq, int l, float cn,
                        float cm, float cq)
{
	rn[l] = cn;
	rm[l] = cm;
	rq[l] = cq;
	barrier(CLK_LOCAL_MEM_FENCE);
	for (int w = RED_WG / 2; w > 0; w >>= 1) {
		if (l < w) {
			float nn = rn[l], mm = rm[l], qq = rq[l];
			merge(&nn, &mm, &qq, rn[l + w], rm[l + w], rq[l + w]);
			rn[l] = nn;
			rm[l] = mm;
			rq[l] = qq;
		}
		barrier(CLK_LOCAL_MEM_FENCE);
	}
}

__kernel __attribute__((reqd_work_group_size(RED_WG, 1, 1)))
void norm_part(__global const float *x, ulong xoff, long stride, long n, int G,
               __global float *part, __global float *stats, int final)
{
	__local float rn[RED_WG], rm[RED_WG], rq[RED_WG];
	const int l = get_local_id(0);
	const long gid = get_group_id(0), bi = gid / G, g = gid % G;
	const long per = (n + G - 1) / G, a = g * per, e = min(n, a + per);
	const __global float *p = x + xoff + bi * stride;
	float cn = 0.f, cm = 0.f, cq = 0.f;
	for (long i = a + l; i < e; i += RED_WG) {
		const float v = p[i];
		cn += 1.f;
		const float d = v - cm;
		cm += d / cn;
		cq += d * (v - cm);
	}
	merge_group(rn, rm, rq, l, cn, cm, cq);
	if (l == 0 && final) { /* G = 1: gid is the item */
		stats[2 * gid] = rm[0];
		stats[2 * gid + 1] = rsqrt((rn[0] > 0.f ? rq[0] / rn[0] : 0.f) + 1e-5f);
	} else if (l == 0) {
		part[3 * gid] = rn[0];
		part[3 * gid + 1] = rm[0];
		part[3 * gid + 2] = rq[0];
	}
}

/* mean and 1/sqrt(var + 1e-5) of each batch item from its G slices; one work-group an item */
__kernel __attribute__((reqd_work_group_size(RED_WG, 1, 1)))
void norm_final(__global const float *part, int G, __global float *stats)
{
	__local float rn[RED_WG], rm[RED_WG], rq[RED_WG];
	const int l = get_local_id(0);
	const long bi = get_group_id(0);
	const __global float *p = part + 3 * bi * (long)G;
	float cn = 0.f, cm = 0.f, cq = 0.f;
	for (int i = l; i < G; i += RED_WG)
		merge(&cn, &cm, &cq, p[3 * i], p[3 * i + 1], p[3 * i + 2]);
	merge_group(rn, rm, rq, l, cn, cm, cq);
	if (l == 0) {
		stats[2 * bi] = rm[0];
		stats[2 * bi + 1] = rsqrt((rn[0] > 0.f ? rq[0] / rn[0] : 0.f) + 1e-5f);
	}
}

/* GroupNorm(1) apply: batch items of [C][T]; channel affine per (e / T); optional GELU */
__kernel void gn_apply(__global float *x, ulong xoff, long stride, int CT, int T,
                       __global const float *stats, __global const float *w, ulong woff,
                       __global const float *b, ulong boff, int act)
{
	const int e = get_global_id(0);
	const long bi = get_global_id(1);
	if (e >= CT)
		return;
	const int c = e / T;
	__global float *p = x + xoff + bi * stride + e;
	const float v = (*p - stats[2 * bi]) * stats[2 * bi + 1] * w[woff + c] + b[boff + c];
	*p = act ? gelu(v) : v;
}

/* x [C][T] += s[c] a sigmoid(g), a and g the halves of GroupNorm(1)'s output of z [2C][T],
 * normalised as they are read: item bi with its stats and the channel affine w, b */
__kernel void gn_glu_add(__global float *x, ulong xoff, long xstride, __global const float *z,
                         ulong zoff, long zstride, int CT, int T, __global const float *stats,
                         __global const float *w, ulong woff, __global const float *b, ulong boff,
                         __global const float *s, ulong soff)
{
	const int e = get_global_id(0);
	const long bi = get_global_id(1);
	if (e >= CT)
		return;
	const int c = e / T, cg = c + CT / T;
	const __global float *zz = z + zoff + bi * zstride;
	const float m = stats[2 * bi], r = stats[2 * bi + 1];
	const float a = (zz[e] - m) * r * w[woff + c] + b[boff + c];
	const float g = (zz[CT + e] - m) * r * w[woff + cg] + b[boff + cg];
	x[xoff + bi * xstride + e] += s[soff + c] * (a * sigm(g));
}

/* token GroupNorm(1, D) apply: x [n][D], one group, affine per column */
__kernel void gn_apply_tokens(__global float *x, ulong xoff, ulong n, int D,
                              __global const float *stats, __global const float *w, ulong woff,
                              __global const float *b, ulong boff)
{
	const ulong i = get_global_id(0);
	if (i >= n)
		return;
	const int c = i % (ulong)D;
	x[xoff + i] = (x[xoff + i] - stats[0]) * stats[1] * w[woff + c] + b[boff + c];
}

/* out[r] = LayerNorm(x[r]) over D, one work-group per row; out may be x */
__kernel __attribute__((reqd_work_group_size(RED_WG, 1, 1)))
void layernorm(__global const float *x, ulong xoff, __global float *o, ulong ooff, int D,
               __global const float *w, ulong woff, __global const float *b, ulong boff)
{
	__local float red[RED_WG];
	const int l = get_local_id(0);
	const long r = get_group_id(0);
	const __global float *p = x + xoff + r * D;
	float s = 0.f;
	for (int i = l; i < D; i += RED_WG)
		s += p[i];
	const float mean = group_sum(red, l, s) / (float)D;
	float q = 0.f;
	for (int i = l; i < D; i += RED_WG) {
		const float d = p[i] - mean;
		q += d * d;
	}
	const float rs = rsqrt(group_sum(red, l, q) / (float)D + 1e-5f);
	for (int i = l; i < D; i += RED_WG)
		o[ooff + r * D + i] = (p[i] - mean) * rs * w[woff + i] + b[boff + i];
}

/* softmax of each row in place, one work-group per row */
__kernel __attribute__((reqd_work_group_size(RED_WG, 1, 1)))
void softmax_rows(__global float *x, ulong xoff, int n)
{
	__local float red[RED_WG];
	const int l = get_local_id(0);
	__global float *p = x + xoff + (long)get_group_id(0) * n;
	float m = -INFINITY;
	for (int i = l; i < n; i += RED_WG)
		m = fmax(m, p[i]);
	m = group_max(red, l, m);
	float s = 0.f;
	for (int i = l; i < n; i += RED_WG) {
		const float e = exp(p[i] - m);
		p[i] = e;
		s += e;
	}
	const float inv = 1.f / group_sum(red, l, s);
	for (int i = l; i < n; i += RED_WG)
		p[i] *= inv;
}

/* out[c][r] = in[r][c] for an R x Cc matrix */
__kernel void transpose(__global const float *in, ulong ioff, __global float *o, ulong ooff,
                        int R, int Cc)
{
	const int c = get_global_id(0), r = get_global_id(1);
	if (c < Cc && r < R)
		o[ooff + (long)c * R + r] = in[ioff + (long)r * Cc + c];
}

/* freq tensor rows [Fr][C][T] <-> tokens [T * Fr][C] (token t * Fr + f) */
__kernel void ften_to_tokens(__global const float *x, ulong xoff, __global float *o, ulong ooff,
                             int Fr, int C, int T)
{
	const int t = get_global_id(0), c = get_global_id(1), f = get_global_id(2);
	if (t < T)
		o[ooff + ((long)t * Fr + f) * C + c] = x[xoff + ((long)f * C + c) * T + t];
}

__kernel void tokens_to_ften(__global const float *x, ulong xoff, __global float *o, ulong ooff,
                             int Fr, int C, int T)
{
	const int t = get_global_id(0), c = get_global_id(1), f = get_global_id(2);
	if (t < T)
		o[ooff + ((long)f * C + c) * T + t] = x[xoff + ((long)t * Fr + f) * C + c];
}

/* x[f][c][t] += emb[f][c] (the frequency embedding, pre-scaled) */
__kernel void add_freq_emb(__global float *x, ulong xoff, int C, int T,
                           __global const float *emb, ulong eoff)
{
	const int t = get_global_id(0), c = get_global_id(1), f = get_global_id(2);
	if (t < T)
		x[xoff + ((long)f * C + c) * T + t] += emb[eoff + (long)f * C + c];
}

/* Conv1d(k 8, s 4, p 2) input columns: col[(ci * 8 + k)][j] = x[ci][4 j + k - 2] */
__kernel void im2col_time(__global const float *x, ulong xoff, long lin, __global float *col,
                          ulong coff, long lout)
{
	const long j = get_global_id(0);
	const int row = get_global_id(1); /* ci * 8 + k */
	if (j >= lout)
		return;
	const int ci = row / 8, k = row % 8;
	const long idx = 4 * j + k - 2;
	col[coff + (long)row * lout + j] = idx >= 0 && idx < lin ? x[xoff + ci * lin + idx] : 0.f;
}

/* ConvTranspose1d(k 8, s 4) from P [8][cout][lin] (tap, channel, input), cropped by 2 */
__kernel void convtr_gather(__global const float *p, ulong poff, long lin, int cout, long length,
                            __global const float *b, ulong boff, int act, __global float *o,
                            ulong ooff)
{
	const long to = get_global_id(0);
	const int co = get_global_id(1);
	if (to >= length)
		return;
	const long u = to + 2;
	const int k1 = (int)(u & 3);
	const long t1 = u >> 2, t2 = t1 - 1;
	float v = b[boff + co];
	if (t1 < lin)
		v += p[poff + ((long)k1 * cout + co) * lin + t1];
	if (t2 >= 0 && t2 < lin)
		v += p[poff + ((long)(k1 + 4) * cout + co) * lin + t2];
	o[ooff + (long)co * length + to] = act ? gelu(v) : v;
}

/* ---- the RoFormers' operations ---- */

/* out[r] = x[r] sqrt(D) / max(||x[r]||, 1e-12) w, one work-group per row; out may be x */
__kernel __attribute__((reqd_work_group_size(RED_WG, 1, 1)))
void rmsnorm(__global const float *x, ulong xoff, __global float *o, ulong ooff, int D,
             __global const float *w, ulong woff)
{
	__local float red[RED_WG];
	const int l = get_local_id(0);
	const long r = get_group_id(0);
	const __global float *p = x + xoff + r * D;
	float q = 0.f;
	for (int i = l; i < D; i += RED_WG)
		q += p[i] * p[i];
	const float a = sqrt((float)D) / fmax(sqrt(group_sum(red, l, q)), 1e-12f);
	for (int i = l; i < D; i += RED_WG)
		o[ooff + r * D + i] = p[i] * a * w[woff + i];
}

/* RMSNorm of segment s of row r (backend.h: rmsnorm_seg): work-group r nseg + s */
__kernel __attribute__((reqd_work_group_size(RED_WG, 1, 1)))
void rmsnorm_seg(__global const float *x, ulong xoff, __global float *o, ulong ooff, long ld,
                 int nseg, __global const float *seg, ulong segoff, __global const float *w,
                 ulong woff)
{
	__local float red[RED_WG];
	const int l = get_local_id(0);
	const long g = get_group_id(0), r = g / nseg;
	const int s = (int)(g % nseg);
	const int a = (int)seg[segoff + s], n = (int)seg[segoff + s + 1] - a;
	const __global float *p = x + xoff + r * ld + a;
	float q = 0.f;
	for (int i = l; i < n; i += RED_WG)
		q += p[i] * p[i];
	const float f = sqrt((float)n) / fmax(sqrt(group_sum(red, l, q)), 1e-12f);
	for (int i = l; i < n; i += RED_WG)
		o[ooff + r * ld + a + i] = p[i] * f * w[woff + a + i];
}

/* rotary embedding of interleaved pairs; work-item (pair i, row r) */
__kernel void rope(__global float *x, ulong xoff, int ld, int cols, int hd,
                   __global const float *cs, ulong csoff, int div, int mod)
{
	const int i = get_global_id(0);
	const long r = get_global_id(1);
	if (i >= cols / 2)
		return;
	const int j = i % (hd / 2);
	const __global float *t = cs + csoff + ((r / div) % mod) * (long)hd + 2 * j;
	const float c = t[0], s = t[1];
	__global float *p = x + xoff + r * ld + 2 * i;
	const float x0 = p[0], x1 = p[1];
	p[0] = x0 * c - x1 * s;
	p[1] = x1 * c + x0 * s;
}

/* x[r ldx + e] *= sigmoid(g[r ldg + e / hd]); work-item (column e, row r) */
__kernel void head_gate(__global float *x, ulong xoff, int ldx, __global const float *g,
                        ulong goff, int ldg, int hd, int cols)
{
	const int e = get_global_id(0);
	const long r = get_global_id(1);
	if (e >= cols)
		return;
	x[xoff + r * ldx + e] *= sigm(g[goff + r * ldg + e / hd]);
}

/* attention's per-head gates after its products' way (backend.h: attention's g); work-item
 * (column e, query row i, item b) */
__kernel void att_gate(__global float *o, ulong ooff, int ldo, long so, __global const float *g,
                       ulong goff, int ldq, long sq, int hd, int cols)
{
	const int e = get_global_id(0), i = get_global_id(1);
	const long b = get_global_id(2);
	if (e >= cols)
		return;
	o[ooff + b * so + (long)i * ldo + e] *= sigm(g[goff + b * sq + (long)i * ldq + e / hd]);
}

/* ---- short-time Fourier transforms (backend.h: stft, istft) ----
 * One work-group a frame of a channel. A real frame of n_fft samples goes through one complex
 * FFT of n = n_fft / 2 points in local memory (even and odd samples as real and imaginary
 * parts, the usual packing), in place: loaded in bit-reversed order, then log2 n radix-2
 * butterfly stages. tw[m] = exp(-2 pi i m / 8192), m < 4096, computed in double on the host;
 * a transform of N = n_fft points uses every (8192 / N)-th entry (tstep). */
#define FFT_MAX 4096 /* complex points: n_fft up to 8192 */

static float2 c_mul(float2 a, float2 b)
{
	return (float2)(a.x * b.x - a.y * b.y, a.x * b.y + a.y * b.x);
}

static int bit_rev(int m, int bits)
{
	int r = 0;
	for (int i = 0; i < bits; i++, m >>= 1)
		r = (r << 1) | (m & 1);
	return r;
}

static long reflect_once(long s, long L)
{
	if (s < 0)
		s = -s;
	if (s >= L)
		s = 2 * (L - 1) - s;
	return s;
}

/* exp(-2 pi i k / N), or its conjugate for the inverse */
static float2 twiddle(__global const float2 *tw, int k, int tstep, int inv)
{
	const float2 w = tw[k * tstep];
	return inv ? (float2)(w.x, -w.y) : w;
}

/* the n-point complex FFT of z (in bit-reversed order) in place; the transform of N = 2n real
 * points takes its twiddles at step tstep, so the stage of length len takes step
 * tstep * N / len */
static void fft_stages(__local float2 *z, int n, __global const float2 *tw, int tstep, int inv)
{
	const int l = get_local_id(0), wg = get_local_size(0);
	for (int len = 2; len <= n; len <<= 1) {
		const int hl = len >> 1, step = tstep * (2 * n / len);
		for (int b = l; b < n / 2; b += wg) {
			const int grp = b / hl, k = b - grp * hl;
			const int i0 = grp * len + k, i1 = i0 + hl;
			const float2 u = z[i0], v = c_mul(z[i1], twiddle(tw, k * step, 1, inv));
			z[i0] = u + v;
			z[i1] = u - v;
		}
		barrier(CLK_LOCAL_MEM_FENCE);
	}
}

/* frame t = group 0, channel c = group 1 */
__kernel void stft_frames(__global const float *x, ulong xoff, long xs, long L, int n_fft,
                          int bits, int hop, long pad, __global const float *w, ulong woff,
                          float scale, __global const float2 *tw, int tstep,
                          __global float *X, ulong Xoff, int bins, long sc, long sf, long st,
                          long sri)
{
	__local float2 z[FFT_MAX];
	const int l = get_local_id(0), wg = get_local_size(0);
	const int t = get_group_id(0), c = get_group_id(1), n = n_fft >> 1;
	const __global float *xc = x + xoff + c * xs;
	w += woff;
	const long s0 = (long)t * hop - pad;
	for (int m = l; m < n; m += wg) {
		const long a = s0 + 2 * m;
		z[bit_rev(m, bits)] = (float2)(xc[reflect_once(a, L)] * w[2 * m],
		                               xc[reflect_once(a + 1, L)] * w[2 * m + 1]);
	}
	barrier(CLK_LOCAL_MEM_FENCE);
	fft_stages(z, n, tw, tstep, 0);
	__global float *o = X + Xoff + c * sc + t * st;
	for (int k = l; k < bins; k += wg) {
		float2 v;
		if (k == 0 || k == n) {
			const float2 z0 = z[0];
			v = (float2)(k == 0 ? z0.x + z0.y : z0.x - z0.y, 0.f);
		} else {
			const float2 a = z[k], b = (float2)(z[n - k].x, -z[n - k].y);
			const float2 e = 0.5f * (a + b), d = 0.5f * (a - b);
			v = e + c_mul(twiddle(tw, k, tstep, 0), (float2)(d.y, -d.x));
		}
		o[k * sf] = v.x * scale;
		o[k * sf + sri] = v.y * scale;
	}
}

/* bin k of frame (c, t) as the inverse reads it: zero from bins on, DC and Nyquist real */
static float2 bin_of(__global const float *x, int k, int n, int bins, long sf, long sri)
{
	if (k >= bins)
		return (float2)(0.f, 0.f);
	return (float2)(x[k * sf], k == 0 || k == n ? 0.f : x[k * sf + sri]);
}

/* frame t = group 0, channel c = group 1: work[c][t][i] = scale w[i] y[i] */
__kernel void istft_frames(__global const float *X, ulong Xoff, int bins, long sc, long sf,
                           long st, long sri, int frames, int n_fft, int bits,
                           __global const float *w, ulong woff, float scale,
                           __global const float2 *tw, int tstep, __global float *work,
                           ulong workoff)
{
	__local float2 z[FFT_MAX];
	const int l = get_local_id(0), wg = get_local_size(0);
	const int t = get_group_id(0), c = get_group_id(1), n = n_fft >> 1;
	const __global float *x = X + Xoff + c * sc + t * st;
	/* Z[k] = (Y[k] + conj Y[n-k]) + i exp(+2 pi i k / N) (Y[k] - conj Y[n-k]): its n-point
	 * inverse is y[2m] + i y[2m+1] */
	for (int k = l; k < n; k += wg) {
		const float2 ya = bin_of(x, k, n, bins, sf, sri), yc = bin_of(x, n - k, n, bins, sf, sri);
		const float2 yb = (float2)(yc.x, -yc.y);
		const float2 s = ya + yb, d = c_mul(ya - yb, twiddle(tw, k, tstep, 1));
		z[bit_rev(k, bits)] = (float2)(s.x - d.y, s.y + d.x);
	}
	barrier(CLK_LOCAL_MEM_FENCE);
	fft_stages(z, n, tw, tstep, 1);
	w += woff;
	__global float *o = work + workoff + ((long)c * frames + t) * n_fft;
	for (int m = l; m < n; m += wg) {
		const float2 v = z[m];
		o[2 * m] = v.x * scale * w[2 * m];
		o[2 * m + 1] = v.y * scale * w[2 * m + 1];
	}
}

/* output sample j = id 0 of channel c = id 1: the frames over it in frame order, divided by
 * the squared-window envelope of frames -e0 .. frames + e1 - 1 */
__kernel void istft_ola(__global const float *work, ulong workoff, int frames, int n_fft,
                        int hop, long pad, long L, __global const float *w, ulong woff, int e0,
                        int e1, __global float *o, ulong ooff, long os, int add)
{
	const long j = get_global_id(0);
	const int c = get_global_id(1);
	if (j >= L)
		return;
	w += woff;
	const long p = j + pad;
	const __global float *fr = work + workoff + (long)c * frames * n_fft;
	long t0 = p - n_fft < 0 ? 0 : (p - n_fft) / hop + 1, t1 = min(p / hop, (long)frames - 1);
	float acc = 0.f;
	for (long t = t0; t <= t1; t++)
		acc += fr[t * n_fft + (p - t * hop)];
	float env = 0.f;
	for (long f = (p - n_fft) / hop; f <= p / hop; f++) {
		const long i = p - f * hop;
		if (f >= -e0 && f < frames + e1 && i >= 0 && i < n_fft)
			env += w[i] * w[i];
	}
	const float v = env > 1e-11f ? acc * (1.f / env) : 0.f;
	__global float *q = o + ooff + c * os + j;
	*q = add ? *q + v : v;
}

/* ---- standardisation (backend.h: moments, standardise) ---- */

/* the mean and the unbiased standard deviation from norm_part's G slices; one work-group */
__kernel __attribute__((reqd_work_group_size(RED_WG, 1, 1)))
void moments_final(__global const float *part, int G, __global float *stats, ulong soff)
{
	__local float rn[RED_WG], rm[RED_WG], rq[RED_WG];
	const int l = get_local_id(0);
	float cn = 0.f, cm = 0.f, cq = 0.f;
	for (int i = l; i < G; i += RED_WG)
		merge(&cn, &cm, &cq, part[3 * i], part[3 * i + 1], part[3 * i + 2]);
	merge_group(rn, rm, rq, l, cn, cm, cq);
	if (l == 0) {
		stats[soff] = rm[0];
		stats[soff + 1] = sqrt(rq[0] / (rn[0] > 1.f ? rn[0] - 1.f : 1.f));
	}
}

__kernel void standardise(__global const float *x, ulong xoff, __global float *o, ulong ooff,
                          ulong n, __global const float *stats, ulong soff, float eps,
                          int inverse)
{
	const ulong i = get_global_id(0);
	if (i >= n)
		return;
	const float m = stats[soff], s = stats[soff + 1];
	const float v = x[xoff + i];
	o[ooff + i] = inverse ? v * s + m : (v - m) / (s + eps);
}

/* ---- a RoFormer's bands (backend.h: gather, cmul) ---- */

/* column i = id 0 of row r = id 1 */
__kernel void gather_cols(__global const float *x, ulong xoff, long ldx, __global float *o,
                          ulong ooff, long ldo, int n, __global const float *ptr, ulong poff,
                          __global const float *idx, ulong ioff, __global const float *w,
                          ulong woff)
{
	const int i = get_global_id(0);
	const long r = get_global_id(1);
	if (i >= n)
		return;
	const __global float *xr = x + xoff + r * ldx;
	const int p0 = (int)ptr[poff + i], p1 = (int)ptr[poff + i + 1];
	float acc = 0.f;
	for (int p = p0; p < p1; p++)
		acc += xr[(int)idx[ioff + p]];
	o[ooff + r * ldo + i] = acc * w[woff + i];
}

/* pair i = id 0 of item b = id 1 */
__kernel void cmul(__global const float *a, ulong aoff, long sa, __global const float *c,
                   ulong coff, __global float *o, ulong ooff, long so, ulong n)
{
	const ulong i = get_global_id(0);
	const long b = get_global_id(1);
	if (i >= n)
		return;
	const float2 u = vload2(0, a + aoff + b * sa + 2 * i), v = vload2(0, c + coff + 2 * i);
	vstore2((float2)(u.x * v.x - u.y * v.y, u.x * v.y + u.y * v.x), 0, o + ooff + b * so + 2 * i);
}

/* ---- the convolution nets' group (cl_convnet.c) ---- */

/* k = id 0 of row r = id 1 of item i = id 2 */
__kernel void copy_rows(__global float *d, ulong doff, long ldd, long ldi,
                        __global const float *s, ulong soff, long lds, long lsi, long n)
{
	const long k = get_global_id(0), r = get_global_id(1), i = get_global_id(2);
	if (k >= n)
		return;
	d[doff + i * ldi + r * ldd + k] = s[soff + i * lsi + r * lds + k];
}

/* e = id 0, c = id 1, (a, b) = id 2 of x [d0][d1][d2][d3] */
__kernel void permute4(__global const float *x, ulong xoff, __global float *o, ulong ooff, int d1,
                       int d2, int d3, long o0, long o1, long o2, long o3)
{
	const int e = get_global_id(0), c = get_global_id(1);
	const long ab = get_global_id(2), a = ab / d1, b = ab % d1;
	if (e >= d3 || c >= d2)
		return;
	o[ooff + a * o0 + b * o1 + c * o2 + e * o3] = x[xoff + (ab * d2 + c) * d3 + e];
}

/* a group's mean and 1 / sqrt(var + 1e-5): one work-group per (i1, i2, group); its values are
 * cg channels x F rows x T at strides sc, sf, 1 */
__kernel __attribute__((reqd_work_group_size(RED_WG, 1, 1)))
void ng_stats(__global const float *x, ulong xoff, int n2, int G, int cg, int F, int T,
              long s1, long s2, long sc, long sf, __global float *stats)
{
	__local float rn[RED_WG], rm[RED_WG], rq[RED_WG];
	const int l = get_local_id(0);
	const long q = get_group_id(0), i1 = q / ((long)n2 * G), i2 = q / G % n2, g = q % G;
	const __global float *p = x + xoff + i1 * s1 + i2 * s2 + g * cg * sc;
	const long per = (long)F * T, n = per * cg;
	float cn = 0.f, cm = 0.f, cq = 0.f;
	for (long j = l; j < n; j += RED_WG) {
		const long c = j / per, f = j % per / T, t = j % T;
		const float v = p[c * sc + f * sf + t];
		cn += 1.f;
		const float d = v - cm;
		cm += d / cn;
		cq += d * (v - cm);
	}
	merge_group(rn, rm, rq, l, cn, cm, cq);
	if (l == 0) {
		stats[2 * q] = rm[0];
		stats[2 * q + 1] = rsqrt((rn[0] > 0.f ? rq[0] / rn[0] : 0.f) + 1e-5f);
	}
}

/* t = id 0, (c, f) = id 1, (i1, i2) = id 2; act 1 GELU, 3 SiLU */
__kernel void ng_apply(__global const float *x, ulong xoff, __global float *o, ulong ooff, int n2,
                       int C, int G, int F, int T, long s1, long s2, long sc, long sf,
                       __global const float *stats, __global const float *w, ulong woff,
                       __global const float *b, ulong boff, int act)
{
	const int t = get_global_id(0);
	const long cf = get_global_id(1), i12 = get_global_id(2);
	if (t >= T || cf >= (long)C * F)
		return;
	const int c = cf / F, f = cf % F;
	const long at = i12 / n2 * s1 + i12 % n2 * s2 + c * sc + f * sf + t;
	const long q = i12 * G + c / (C / G);
	float v = (x[xoff + at] - stats[2 * q]) * stats[2 * q + 1] * w[woff + c] + b[boff + c];
	if (act == 1)
		v = gelu(v);
	else if (act == 3)
		v = v * sigm(v);
	o[ooff + at] = v;
}

/* t = id 0, c = id 1, row r = id 2: a depthwise Conv1d of odd kernel k, zero-padded */
__kernel void dwconv(__global const float *x, ulong xoff, int C, int T, int k,
                     __global const float *w, ulong woff, __global const float *b, ulong boff,
                     __global float *o, ulong ooff)
{
	const int t = get_global_id(0), c = get_global_id(1);
	const long r = get_global_id(2);
	if (t >= T || c >= C)
		return;
	const __global float *xr = x + xoff + (r * C + c) * T;
	float s = b[boff + c];
	for (int u = 0; u < k; u++) {
		const int at = t + u - k / 2;
		if (at >= 0 && at < T)
			s += w[woff + c * k + u] * xr[at];
	}
	o[ooff + (r * C + c) * T + t] = s;
}

__kernel void mul(__global float *x, ulong xoff, __global const float *y, ulong yoff, ulong n)
{
	const ulong i = get_global_id(0);
	if (i < n)
		x[xoff + i] *= y[yoff + i];
}

/* ---- the LSTM group (cl_convnet.c's cell, cl_ops.c's products) ---- */

/* step k of every sequence q = id 1 and direction r = id 2, unit i = id 0: the gates' update
 * from z (the step's input and recurrent products, [dirs][n S][4H]) and the cell states
 * cs [dirs][n][H]; h to o [n][S][dirs H] */
__kernel void lstm_cell(__global const float *z, ulong zoff, __global float *cs, ulong csoff,
                        __global float *o, ulong ooff, int n, int S, int H, int dirs, int k)
{
	const int i = get_global_id(0), q = get_global_id(1), r = get_global_id(2);
	if (i >= H || q >= n)
		return;
	const long s = r ? S - 1 - k : k, G = 4L * H;
	const __global float *zz = z + zoff + r * (long)n * S * G + ((long)q * S + s) * G;
	__global float *c = cs + csoff + ((long)r * n + q) * H;
	const float ig = sigm(zz[i]), fg = sigm(zz[H + i]), gg = tanh(zz[2 * H + i]),
	            og = sigm(zz[3 * H + i]);
	const float cn = fg * c[i] + ig * gg;
	c[i] = cn;
	o[ooff + ((long)q * S + s) * dirs * H + r * H + i] = og * tanh(cn);
}
