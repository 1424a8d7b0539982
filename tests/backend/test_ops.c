/* Every operation of the backend interface (backend/backend.h: sb_ops, and the built-in
 * model's classic group) on every device of every registered backend, by normalised error
 * ||got - want|| / ||want|| (as ggml's test-backend-ops does it):
 *   - sb_ops against a plain C reference of the arithmetic backend.h defines, computed in
 *     double (so the CPU backend is checked too, not taken as the truth);
 *   - sb_ops and the classic group against the CPU backend.
 * Nothing below names a backend: one registered in backend/registry.c is tested here the day
 * it is added. An operation of an optional group (backend/ops.c's table) that a backend or a
 * device leaves out is reported "not supported"; the core must be there in full. Shapes are odd on purpose (tails of tiles and vectors), some large enough that
 * the CPU backend splits them over its threads, with offsets into buffers and padded leading
 * dimensions, and batches whose items share one weight (stride 0).
 *
 * usage: test_ops [--ops gemm,attention] [--expect PRODUCTS] [--expect-kernel NAME]
 *                 [--expect-path PATH] [--bf16 | --tf32]
 *   prints one line per backend, device and operation; exit 1 on a failure.
 *   POCL_DEVICES="pthread pthread" gives two OpenCL devices.
 *   --ops      only these operations' cases (gemm, attention), so a product kernel chosen by
 *              the environment (SB_CL_GEMM, SB_CL_TILE) is checked without the rest
 *   --expect   every device outside the CPU backend must describe its products as starting
 *              with PRODUCTS (the kernel the environment asked for really ran)
 *   --expect-kernel  every device outside the CPU backend must list NAME in its profile (the
 *              cases run profiled): a kernel the environment chose (SB_CL_ATTENTION) ran
 *   --expect-path  the same for a path of the profile's products by shape (profile_products),
 *              a prefix: "tiled 16x", the tiled kernel's thin tiling, took products of few rows
 *   --bf16     devices opened for bf16 products (--precision bf16): the products' reference
 *              rounds A and B to bf16 (to nearest even) and sums exactly, so a device's
 *              error is its fp32 sums' alone; every device outside the CPU backend must say it
 *              ran bf16, and a CPU without bf16 instructions is left out (test_gemm checks it)
 *   --tf32     the same for tf32 inputs (to nearest, ties away), the product path the
 *              environment chose (SB_CL_GEMM=tf32); the CPU backend, which has none, left out
 *   --unsupported OP  an optional operation some device here leaves out: its cases must say
 *              "not supported" there (exit 77, a skip, when every device has it)
 */
#include "backend/backend.h"
#include "models/classic/classic_ops.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int failures;
static int bf16_mode, tf32_mode; /* --bf16, --tf32 */

static void log_fn(void *user, sb_log_level level, const char *msg)
{
	(void)user;
	if (level <= SB_LOG_WARNING)
		fprintf(stderr, "  [backend] %s\n", msg);
	/* bf16, tf32: a kernel that fell back to fp32 (its check refused it) is a failure here,
	 * though its fp32 results would pass the reduced precision's tolerance */
	if ((bf16_mode || tf32_mode) && level <= SB_LOG_WARNING &&
	    (strstr(msg, "fp32 instead") || strstr(msg, "running fp32") ||
	     strstr(msg, "own kernel instead"))) {
		printf("  FAIL: fell back to fp32: %s\n", msg);
		failures++;
	}
}
static const sb_logger logger = {log_fn, NULL};

/* x as a product's input: rounded to bf16 (to nearest even) or to tf32 (to nearest, ties away
 * from zero) in those modes */
static float rounded(float x)
{
	uint32_t u;
	memcpy(&u, &x, sizeof u);
	if (bf16_mode)
		u = (u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u;
	else if (tf32_mode)
		u = (u + 0x1000u) & 0xffffe000u;
	memcpy(&x, &u, sizeof x);
	return x;
}

/* ---- data ---- */

static unsigned rng = 12345u;
static float frand(void)
{
	rng = rng * 1664525u + 1013904223u;
	return (float)((rng >> 8) / 16777216.0 * 2.0 - 1.0);
}
static float *rnd(size_t n, float scale)
{
	float *x = malloc(sizeof(float) * (n ? n : 1));
	for (size_t i = 0; i < n; i++)
		x[i] = scale * frand();
	return x;
}
static double *dup_d(const float *x, size_t n)
{
	double *d = malloc(sizeof(double) * (n ? n : 1));
	for (size_t i = 0; i < n; i++)
		d[i] = x[i];
	return d;
}

static double rel_err(const float *got, const double *want, size_t n)
{
	double e = 0, r = 0;
	for (size_t i = 0; i < n; i++) {
		const double d = (double)got[i] - want[i];
		if (!isfinite(got[i]))
			return INFINITY;
		e += d * d;
		r += want[i] * want[i];
	}
	return sqrt(e / (r > 0 ? r : 1));
}
static double rel_err_f(const float *got, const float *want, size_t n)
{
	double *w = dup_d(want, n);
	double e = rel_err(got, w, n);
	free(w);
	return e;
}

/* ---- a device and its buffers ---- */

typedef struct {
	const sb_exec *x;
	sb_bbuf *bufs[32];
	int n;
	int failed;
	size_t off; /* where put() places data in its buffer: 5, or 8 for 16-byte alignment */
} arena;

/* n floats on the device at a small offset into a larger buffer, with h's contents */
static sb_dv put(arena *a, const float *h, size_t n)
{
	sb_dv v = {NULL, 0};
	const size_t off = a->off;
	sb_bbuf *b = NULL;
	if (a->n == 32 || a->x->be->alloc(a->x->d, n + off + 3, &b) != SB_OK) {
		a->failed = 1;
		return v;
	}
	a->bufs[a->n++] = b;
	v.buf = b;
	v.off = off;
	if (h)
		a->x->be->upload(a->x->d, v, h, n);
	return v;
}
static void get(arena *a, float *h, sb_dv v, size_t n)
{
	if (!a->failed && v.buf)
		a->x->be->download(a->x->d, h, v, n);
}
static sb_status done(arena *a)
{
	sb_status st = a->failed ? SB_ERR_DEVICE_OOM : a->x->be->finish(a->x->d);
	a->x->be->clear(a->x->d);
	return st;
}
static void arena_free(arena *a)
{
	for (int i = 0; i < a->n; i++)
		a->x->be->release(a->x->d, a->bufs[i]);
	a->n = 0;
	a->failed = 0;
}

/* One case's verdict: against the reference, and against the CPU backend's output. */
typedef struct {
	const char *dev;
	const float *cpu; /* the CPU backend's result of the same case (NULL: this is the CPU) */
} where;

static void verdict(const where *w, const char *op, const char *shape, sb_status st,
                    const float *got, const double *want, size_t n, double tol)
{
	if (st != SB_OK) {
		printf("  %-9s %-16s %-28s FAIL: %s\n", w->dev, op, shape, sb_status_str(st));
		failures++;
		return;
	}
	const double e = rel_err(got, want, n);
	const double ec = w->cpu ? rel_err_f(got, w->cpu, n) : 0;
	const int ok = e < tol && ec < tol;
	printf("  %-9s %-16s %-28s ref %.1e  cpu %.1e  %s\n", w->dev, op, shape, e, ec,
	       ok ? "ok" : "FAIL");
	if (!ok)
		failures++;
}

/* The results a device gives, in case order, kept for the CPU to compare the others with. */
#define MAX_CASES 160
typedef struct {
	float *out[MAX_CASES];
	size_t n[MAX_CASES];
	int count;
} results;

static const float *keep(results *r, int i, const float *got, size_t n)
{
	if (!r || i >= MAX_CASES)
		return NULL;
	free(r->out[i]);
	r->out[i] = malloc(sizeof(float) * (n ? n : 1));
	memcpy(r->out[i], got, sizeof(float) * n);
	r->n[i] = n;
	if (i >= r->count)
		r->count = i + 1;
	return r->out[i];
}

typedef struct {
	arena *a;
	const char *dev;
	results *cpu;  /* the CPU backend's results (NULL while running the CPU itself) */
	results *mine; /* where this device's results go (the CPU's run fills cpu) */
	int i;         /* case number */
} run;

static void judge(run *r, const char *op, const char *shape, sb_status st, const float *got,
                  const double *want, size_t n, double tol)
{
	where w = {r->dev, NULL};
	if (r->cpu && r->i < r->cpu->count && r->cpu->n[r->i] == n)
		w.cpu = r->cpu->out[r->i];
	verdict(&w, op, shape, st, got, want, n, tol);
	keep(r->mine, r->i, got, n);
	r->i++;
}

static const sb_ops *ops(run *r) { return r->a->x->be->ops; }
static sb_bdev *dv(run *r) { return r->a->x->d; }

/* Whether the device runs op (a member of an optional group, which a backend may leave out).
 * A case of one it does not run draws its inputs all the same, so that the cases after it get
 * the CPU's, and says so in place of a verdict. */
static int has(run *r, const char *op)
{
	return sb_exec_supports(r->a->x, sb_op_find(op));
}
static const char *unsupported_op; /* --unsupported */
static int unsupported_seen;
static void not_supported(run *r, const char *op, const char *shape)
{
	printf("  %-9s %-16s %-28s not supported\n", r->dev, op, shape);
	unsupported_seen += unsupported_op && !strcmp(op, unsupported_op);
	r->i++;
}

/* ---- the operations ---- */

static double gelu(double x) { return 0.5 * x * (1.0 + erf(x / sqrt(2.0))); }

static long up4(long x, int align)
{
	return align ? (x + 3) / 4 * 4 : x;
}

/* gemm_bias's epilogues for case_gemm_ep: none (plain gemm), a bias per row, per column, or
 * per column or row with a bias of each item's own (bs), each with an activation */
enum { EP_NONE, EP_ROWS, EP_COLS, EP_COLS_ITEMS, EP_ROWS_ITEMS };

/* align: which of A (1), B (2), C (4) have leading dimensions, strides and offsets that are
 * multiples of 4 floats (a GPU kernel's float4 paths); the others are odd */
static void case_gemm_ep(run *r, int M, int N, int K, int tb, int batch, int batch2, int pad,
                         int share_a, int align, float beta, int ep, int act)
{
	const int al_a = align & 1, al_b = align & 2, al_c = align & 4;
	const int lda = (int)up4(K + pad, al_a), ldb = (int)up4((tb ? K : N) + pad, al_b),
	          ldc = (int)up4(N + pad, al_c);
	const long sa = share_a ? 0 : up4((long)M * lda + 3, al_a),
	           sb = up4((long)(tb ? N : K) * ldb + 1, al_b), sc = up4((long)M * ldc + 2, al_c);
	const long sa2 = share_a ? 0 : up4(sa * batch + 7, al_a), sb2 = up4(sb * batch + 5, al_b),
	           sc2 = up4(sc * batch + 4, al_c);
	const size_t na = (size_t)(share_a ? (long)M * lda : sa2 * batch2),
	             nb = (size_t)(sb2 * batch2), nc = (size_t)(sc2 * batch2);
	const float alpha = 0.7f;
	/* the bias: M or N values, or M or N for each item at a stride of M + 2 or N + 3 */
	const int rows = ep == EP_ROWS || ep == EP_ROWS_ITEMS;
	const long bs = ep == EP_COLS_ITEMS ? N + 3 : ep == EP_ROWS_ITEMS ? M + 2 : 0;
	const size_t nbias = (size_t)(bs * batch + (rows ? M : N));
	float *A = rnd(na, 1), *B = rnd(nb, 1), *C = rnd(nc, 1), *got = malloc(sizeof(float) * nc);
	float *bias = rnd(nbias, 1);
	double *want = dup_d(C, nc);
	for (int j = 0; j < batch2; j++)
		for (int i = 0; i < batch; i++) {
			const float *a = A + i * sa + j * sa2, *b = B + i * sb + j * sb2;
			double *c = want + i * sc + j * sc2;
			const float *bi = bias + i * bs;
			for (int m = 0; m < M; m++)
				for (int n = 0; n < N; n++) {
					double s = 0;
					for (int k = 0; k < K; k++) {
						const float x = rounded(a[(size_t)m * lda + k]),
						            y = rounded(tb ? b[(size_t)n * ldb + k]
						                           : b[(size_t)k * ldb + n]);
						s += (double)x * y;
					}
					double v = alpha * s + beta * c[(size_t)m * ldc + n];
					if (ep != EP_NONE)
						v += rows ? bi[m] : bi[n];
					c[(size_t)m * ldc + n] = act == SB_ACT_GELU   ? gelu(v)
					                         : act == SB_ACT_TANH ? tanh(v)
					                                              : v;
				}
		}
	r->a->off = al_a ? 8 : 5;
	sb_dv dA = put(r->a, A, na);
	r->a->off = al_b ? 8 : 5;
	sb_dv dB = put(r->a, B, nb);
	r->a->off = al_c ? 8 : 5;
	sb_dv dC = put(r->a, C, nc);
	r->a->off = 3;
	const sb_bias e = {put(r->a, bias, nbias), bs, !rows, act};
	r->a->off = 5;
	if (!r->a->failed && ep == EP_NONE)
		ops(r)->gemm(dv(r), M, N, K, alpha, dA, lda, sa, dB, ldb, sb, tb, beta, dC, ldc, sc,
		             batch, batch2, sa2, sb2, sc2);
	else if (!r->a->failed)
		ops(r)->gemm_bias(dv(r), M, N, K, alpha, dA, lda, sa, dB, ldb, sb, tb, beta, dC, ldc,
		                  sc, batch, batch2, sa2, sb2, sc2, &e);
	memcpy(got, C, sizeof(float) * nc);
	get(r->a, got, dC, nc);
	sb_status st = done(r->a);
	char shape[96];
	static const char *const eps[] = {"", " +rows", " +cols", " +cols of each item",
	                                  " +rows of each item"};
	snprintf(shape, sizeof shape, "%dx%dx%d%s b%dx%d%s%s%s%s%s%s", M, N, K, tb ? " tB" : "",
	         batch, batch2, pad ? " pad" : "", share_a ? " A0" : "", align ? " v" : "",
	         beta == 0.f ? " b0" : "", eps[ep],
	         act == SB_ACT_GELU ? " gelu" : act == SB_ACT_TANH ? " tanh" : "");
	judge(r, ep == EP_NONE ? "gemm" : "gemm_bias", shape, st, got, want, nc,
	      2e-6 * sqrt((double)K) + 1e-6);
	arena_free(r->a);
	free(A);
	free(B);
	free(C);
	free(bias);
	free(got);
	free(want);
}

static void case_gemm_at(run *r, int M, int N, int K, int tb, int batch, int batch2, int pad,
                         int share_a, int align, float beta)
{
	case_gemm_ep(r, M, N, K, tb, batch, batch2, pad, share_a, align, beta, EP_NONE, 0);
}

static void case_gemm(run *r, int M, int N, int K, int tb, int batch, int batch2, int pad,
                      int share_a)
{
	case_gemm_at(r, M, N, K, tb, batch, batch2, pad, share_a, 0, 0.3f);
}

/* An elementwise operation: x (and y) in, x out. */
enum { E_ZERO, E_COPY, E_COLS, E_COLS_GELU, E_COLS_TANH, E_ADD, E_ROWCH };
static void case_ew(run *r, int kind, int C, int T, int batch)
{
	const size_t n = (size_t)C * T * batch;
	float *x = rnd(n, 2), *y = rnd(n, 1), *b = rnd((size_t)C * T, 1), *got = malloc(sizeof(float) * n);
	double *want = dup_d(x, n);
	const char *name = "?";
	for (size_t i = 0; i < n; i++) {
		switch (kind) {
		case E_ZERO: want[i] = 0; name = "zero"; break;
		case E_COPY: want[i] = y[i]; name = "copy"; break;
		case E_COLS_TANH: want[i] = tanh((double)x[i] + b[i % (size_t)T]); name = "bias_cols tanh";
			break;
		case E_COLS: want[i] = (double)x[i] + b[i % (size_t)T]; name = "bias_cols"; break;
		case E_COLS_GELU: want[i] = gelu((double)x[i] + b[i % (size_t)T]); name = "bias_cols gelu";
			break;
		case E_ADD: want[i] = (double)x[i] + y[i]; name = "add"; break;
		case E_ROWCH: name = "add_row_channel"; break; /* below */
		}
	}
	float *e = NULL;
	if (kind == E_ROWCH) { /* x [F = batch][C][T] += e[f][c] */
		e = rnd((size_t)batch * C, 1);
		for (size_t i = 0; i < n; i++)
			want[i] = (double)x[i] + e[i / (size_t)T];
	}
	sb_dv dx = put(r->a, x, n), dy = put(r->a, y, n), db = put(r->a, b, (size_t)C * T);
	sb_dv de = e ? put(r->a, e, (size_t)batch * C) : db;
	if (!r->a->failed)
		switch (kind) {
		case E_ZERO: ops(r)->zero(dv(r), dx, n); break;
		case E_COPY: ops(r)->copy(dv(r), dx, dy, n); break;
		case E_COLS_TANH: ops(r)->bias_cols(dv(r), dx, n, T, db, SB_ACT_TANH); break;
		case E_COLS: ops(r)->bias_cols(dv(r), dx, n, T, db, SB_ACT_NONE); break;
		case E_COLS_GELU: ops(r)->bias_cols(dv(r), dx, n, T, db, SB_ACT_GELU); break;
		case E_ADD: ops(r)->add(dv(r), dx, dy, n); break;
		case E_ROWCH: ops(r)->add_row_channel(dv(r), dx, batch, C, T, de); break;
		}
	memcpy(got, x, sizeof(float) * n);
	get(r->a, got, dx, n);
	sb_status st = done(r->a);
	char shape[64];
	snprintf(shape, sizeof shape, "%d x %d x %d", batch, C, T);
	judge(r, name, shape, st, got, want, n, 1e-6);
	arena_free(r->a);
	free(x);
	free(y);
	free(b);
	free(e);
	free(got);
	free(want);
}

static double sigmoid(double v) { return 1.0 / (1.0 + exp(-v)); }

static void case_glu(run *r, int CT, int batch)
{
	const long zs = 2L * CT + 4, xs = CT + 3;
	const size_t nz = (size_t)zs * batch, nx = (size_t)xs * batch;
	float *z = rnd(nz, 3), *x = rnd(nx, 1);
	float *got = malloc(sizeof(float) * nx);
	double *want = dup_d(x, nx);
	for (int b = 0; b < batch; b++)
		for (int e = 0; e < CT; e++)
			want[b * xs + e] = (double)z[b * zs + e] * sigmoid(z[b * zs + CT + e]);
	sb_dv dz = put(r->a, z, nz), dx = put(r->a, x, nx);
	if (!r->a->failed)
		ops(r)->glu(dv(r), dz, zs, dx, xs, CT, batch);
	memcpy(got, x, sizeof(float) * nx);
	get(r->a, got, dx, nx);
	sb_status st = done(r->a);
	char shape[64];
	snprintf(shape, sizeof shape, "%d x %d", batch, CT);
	judge(r, "glu", shape, st, got, want, nx, 1e-6);
	arena_free(r->a);
	free(z);
	free(x);
	free(got);
	free(want);
}

/* mean and biased variance of n values */
static void stats(const float *x, size_t n, size_t step, double *mean, double *rstd)
{
	double s = 0, q = 0;
	for (size_t i = 0; i < n; i++)
		s += x[i * step];
	const double m = s / (double)n;
	for (size_t i = 0; i < n; i++)
		q += (x[i * step] - m) * (x[i * step] - m);
	*mean = m;
	*rstd = 1.0 / sqrt(q / (double)n + 1e-5);
}

static void case_groupnorm(run *r, int C, int T, int batch, int act)
{
	const long stride = (long)C * T + 9;
	const size_t n = (size_t)stride * batch;
	float *x = rnd(n, 2), *w = rnd((size_t)C, 1), *b = rnd((size_t)C, 1);
	for (size_t i = 0; i < n; i++)
		x[i] += 0.5f; /* a mean to take out */
	float *got = malloc(sizeof(float) * n);
	double *want = dup_d(x, n);
	for (int i = 0; i < batch; i++) {
		double m, rs;
		stats(x + i * stride, (size_t)C * T, 1, &m, &rs);
		for (int c = 0; c < C; c++)
			for (int t = 0; t < T; t++) {
				const size_t at = (size_t)(i * stride) + (size_t)c * T + t;
				const double v = (x[at] - m) * rs * w[c] + b[c];
				want[at] = act ? gelu(v) : v;
			}
	}
	sb_dv dx = put(r->a, x, n), dw = put(r->a, w, (size_t)C), db = put(r->a, b, (size_t)C);
	if (!r->a->failed)
		ops(r)->groupnorm(dv(r), dx, stride, C, T, batch, dw, db, act);
	memcpy(got, x, sizeof(float) * n);
	get(r->a, got, dx, n);
	sb_status st = done(r->a);
	char shape[64];
	snprintf(shape, sizeof shape, "%d x %d x %d%s", batch, C, T, act ? " gelu" : "");
	judge(r, "groupnorm", shape, st, got, want, n, 2e-6);
	arena_free(r->a);
	free(x);
	free(w);
	free(b);
	free(got);
	free(want);
}

/* DConv's end: x += scale GLU(GroupNorm(z)) over items of z [2C][T] */
static void case_gn_glu_add(run *r, int C, int T, int batch)
{
	const int CT = C * T;
	const long zs = 2L * CT + 5, xs = CT + 3;
	const size_t nz = (size_t)zs * batch, nx = (size_t)xs * batch;
	float *z = rnd(nz, 2), *x = rnd(nx, 1), *w = rnd((size_t)2 * C, 1),
	      *b = rnd((size_t)2 * C, 1), *sc = rnd((size_t)C, 1);
	for (size_t i = 0; i < nz; i++)
		z[i] += 0.5f; /* a mean to take out */
	float *got = malloc(sizeof(float) * nx);
	double *want = dup_d(x, nx);
	for (int i = 0; i < batch; i++) {
		double m, rs;
		stats(z + i * zs, (size_t)2 * CT, 1, &m, &rs);
		for (int e = 0; e < CT; e++) {
			const int c = e / T, cg = c + C;
			const double a = (z[i * zs + e] - m) * rs * w[c] + b[c],
			             g = (z[i * zs + CT + e] - m) * rs * w[cg] + b[cg];
			want[i * xs + e] = (double)x[i * xs + e] + (double)sc[c] * a * sigmoid(g);
		}
	}
	sb_dv dz = put(r->a, z, nz), dx = put(r->a, x, nx), dw = put(r->a, w, (size_t)2 * C),
	      db = put(r->a, b, (size_t)2 * C), ds = put(r->a, sc, (size_t)C);
	const int on = has(r, "gn_glu_add");
	if (on && !r->a->failed)
		ops(r)->gn_glu_add(dv(r), dx, xs, dz, zs, C, T, dw, db, ds, batch);
	memcpy(got, x, sizeof(float) * nx);
	get(r->a, got, dx, nx);
	sb_status st = done(r->a);
	char shape[64];
	snprintf(shape, sizeof shape, "%d x 2 %d x %d", batch, C, T);
	if (on)
		judge(r, "gn_glu_add", shape, st, got, want, nx, 2e-6);
	else
		not_supported(r, "gn_glu_add", shape);
	arena_free(r->a);
	free(z);
	free(x);
	free(w);
	free(b);
	free(sc);
	free(got);
	free(want);
}

enum { N_TOKENS, N_LAYER, N_LAYER_INPLACE };
static void case_norm_tokens(run *r, int kind, int rows, int D)
{
	const size_t n = (size_t)rows * D;
	float *x = rnd(n, 2), *w = rnd((size_t)D, 1), *b = rnd((size_t)D, 1), *o = rnd(n, 1);
	float *got = malloc(sizeof(float) * n);
	double *want = malloc(sizeof(double) * n);
	if (kind == N_TOKENS) {
		double m, rs;
		stats(x, n, 1, &m, &rs);
		for (size_t i = 0; i < n; i++)
			want[i] = (x[i] - m) * rs * w[i % (size_t)D] + b[i % (size_t)D];
	} else {
		for (int row = 0; row < rows; row++) {
			double m, rs;
			stats(x + (size_t)row * D, (size_t)D, 1, &m, &rs);
			for (int d = 0; d < D; d++)
				want[(size_t)row * D + d] = (x[(size_t)row * D + d] - m) * rs * w[d] + b[d];
		}
	}
	sb_dv dx = put(r->a, x, n), dw = put(r->a, w, (size_t)D), db = put(r->a, b, (size_t)D);
	sb_dv dout = kind == N_LAYER ? put(r->a, o, n) : dx;
	if (!r->a->failed) {
		if (kind == N_TOKENS)
			ops(r)->groupnorm_tokens(dv(r), dx, (size_t)rows, D, dw, db);
		else
			ops(r)->layernorm(dv(r), dx, dout, (size_t)rows, D, dw, db);
	}
	get(r->a, got, dout, n);
	sb_status st = done(r->a);
	char shape[64];
	snprintf(shape, sizeof shape, "%d x %d%s", rows, D, kind == N_LAYER_INPLACE ? " in place" : "");
	judge(r, kind == N_TOKENS ? "groupnorm_tokens" : "layernorm", shape, st, got, want, n, 2e-6);
	arena_free(r->a);
	free(x);
	free(w);
	free(b);
	free(o);
	free(got);
	free(want);
}

static void case_softmax(run *r, int rows, int n)
{
	const size_t total = (size_t)rows * n;
	float *x = rnd(total, 8);
	for (size_t i = 0; i < total; i += 7)
		x[i] += 60.0f; /* exp would overflow without the max taken out */
	float *got = malloc(sizeof(float) * total);
	double *want = malloc(sizeof(double) * total);
	for (int row = 0; row < rows; row++) {
		const float *v = x + (size_t)row * n;
		double mx = v[0], s = 0;
		for (int i = 1; i < n; i++)
			mx = v[i] > mx ? v[i] : mx;
		for (int i = 0; i < n; i++)
			s += exp(v[i] - mx);
		for (int i = 0; i < n; i++)
			want[(size_t)row * n + i] = exp(v[i] - mx) / s;
	}
	sb_dv dx = put(r->a, x, total);
	if (!r->a->failed)
		ops(r)->softmax(dv(r), dx, (size_t)rows, n);
	get(r->a, got, dx, total);
	sb_status st = done(r->a);
	char shape[64];
	snprintf(shape, sizeof shape, "%d x %d", rows, n);
	judge(r, "softmax", shape, st, got, want, total, 2e-6);
	arena_free(r->a);
	free(x);
	free(got);
	free(want);
}

enum { L_TRANSPOSE, L_TO_TOKENS, L_FROM_TOKENS };
static void case_layout(run *r, int kind, int F, int C, int T)
{
	const size_t n = (size_t)F * C * (kind == L_TRANSPOSE ? 1 : T);
	float *x = rnd(n, 1), *got = malloc(sizeof(float) * n);
	double *want = malloc(sizeof(double) * n);
	if (kind == L_TRANSPOSE) { /* F x C matrix */
		for (int i = 0; i < F; i++)
			for (int c = 0; c < C; c++)
				want[(size_t)c * F + i] = x[(size_t)i * C + c];
	} else {
		for (int f = 0; f < F; f++)
			for (int c = 0; c < C; c++)
				for (int t = 0; t < T; t++) {
					const size_t row = ((size_t)f * C + c) * T + t;
					const size_t tok = ((size_t)t * F + f) * C + c;
					if (kind == L_TO_TOKENS)
						want[tok] = x[row];
					else
						want[row] = x[tok];
				}
	}
	sb_dv dx = put(r->a, x, n), dout = put(r->a, NULL, n);
	if (!r->a->failed) {
		if (kind == L_TRANSPOSE)
			ops(r)->transpose(dv(r), dx, dout, F, C);
		else
			ops(r)->rows_tokens(dv(r), dx, dout, F, C, T, kind == L_FROM_TOKENS);
	}
	get(r->a, got, dout, n);
	sb_status st = done(r->a);
	char shape[64];
	if (kind == L_TRANSPOSE)
		snprintf(shape, sizeof shape, "%d x %d", F, C);
	else
		snprintf(shape, sizeof shape, "%d x %d x %d%s", F, C, T,
		         kind == L_FROM_TOKENS ? " back" : "");
	judge(r, kind == L_TRANSPOSE ? "transpose" : "rows_tokens", shape, st, got, want, n, 1e-7);
	arena_free(r->a);
	free(x);
	free(got);
	free(want);
}

static void case_im2col(run *r, int cin, long lin)
{
	const long lout = (lin + 4 - 8) / 4 + 1;
	const size_t nx = (size_t)cin * lin, nc = (size_t)cin * 8 * lout;
	float *x = rnd(nx, 1), *got = malloc(sizeof(float) * nc);
	double *want = malloc(sizeof(double) * nc);
	for (int ci = 0; ci < cin; ci++)
		for (int k = 0; k < 8; k++)
			for (long j = 0; j < lout; j++) {
				const long idx = 4 * j + k - 2;
				want[((size_t)ci * 8 + k) * lout + j] =
					idx >= 0 && idx < lin ? x[(size_t)ci * lin + idx] : 0.0;
			}
	sb_dv dx = put(r->a, x, nx), dc = put(r->a, NULL, nc);
	const int on = has(r, "im2col_k8s4");
	if (on && !r->a->failed)
		ops(r)->im2col_k8s4(dv(r), dx, lin, cin, dc, lout);
	get(r->a, got, dc, nc);
	sb_status st = done(r->a);
	char shape[64];
	snprintf(shape, sizeof shape, "%d x %ld -> %ld", cin, lin, lout);
	if (on)
		judge(r, "im2col_k8s4", shape, st, got, want, nc, 1e-7);
	else
		not_supported(r, "im2col_k8s4", shape);
	arena_free(r->a);
	free(x);
	free(got);
	free(want);
}

static void case_convtr(run *r, int cout, long lin, long length, int act)
{
	const size_t np = (size_t)8 * cout * lin, no = (size_t)cout * length;
	float *p = rnd(np, 1), *b = rnd((size_t)cout, 1), *got = malloc(sizeof(float) * no);
	double *want = malloc(sizeof(double) * no);
	for (int c = 0; c < cout; c++)
		for (long t = 0; t < length; t++) {
			const long u = t + 2, t1 = u / 4, t2 = t1 - 1;
			const int k = (int)(u % 4);
			double v = b[c];
			if (t1 < lin)
				v += p[((size_t)k * cout + c) * lin + t1];
			if (t2 >= 0 && t2 < lin)
				v += p[((size_t)(k + 4) * cout + c) * lin + t2];
			want[(size_t)c * length + t] = act ? gelu(v) : v;
		}
	sb_dv dp = put(r->a, p, np), db = put(r->a, b, (size_t)cout), dout = put(r->a, NULL, no);
	const int on = has(r, "convtr_k8s4");
	if (on && !r->a->failed)
		ops(r)->convtr_k8s4(dv(r), dp, lin, cout, length, db, act, dout);
	get(r->a, got, dout, no);
	sb_status st = done(r->a);
	char shape[64];
	snprintf(shape, sizeof shape, "%d x %ld -> %ld%s", cout, lin, length, act ? " gelu" : "");
	if (on)
		judge(r, "convtr_k8s4", shape, st, got, want, no, 1e-6);
	else
		not_supported(r, "convtr_k8s4", shape);
	arena_free(r->a);
	free(p);
	free(b);
	free(got);
	free(want);
}

/* self-attention (q, k, v columns of one fused projection) or cross-attention (k, v of their
 * own matrix), over 'batch' sequences; interleaved: the items' rows alternate (row i of item b
 * at (i batch + b) ld, as an axial transformer's time sequences lie), else item after item */
/* with per-head gates (backend.h: attention's g, as a RoFormer's): the first heads columns of
 * q's rows stand in for them */
static int att_gated;

static void case_attention(run *r, int nq, int nk, int heads, int hd, int fused, int batch,
                           int interleaved)
{
	const int D = heads * hd;
	if (fused)
		nk = nq;
	const int rq = fused ? 3 * D : D, rkv = fused ? 3 * D : 2 * D, ro = D + 3;
	/* row strides and item strides of q, k/v and o */
	const int ldq = interleaved ? rq * batch : rq, ldkv = interleaved ? rkv * batch : rkv,
	          ldo = interleaved ? ro * batch : ro;
	const long sq = interleaved ? rq : (long)nq * rq, skv = interleaved ? rkv : (long)nk * rkv,
	           so = interleaved ? ro : (long)nq * ro;
	const size_t nqv = (size_t)nq * rq * batch, nkv = fused ? 0 : (size_t)nk * rkv * batch,
	             no = (size_t)nq * ro * batch;
	float *qm = rnd(nqv, 1), *kvm = fused ? NULL : rnd(nkv, 1), *o = rnd(no, 1);
	const float scale = 1.f / sqrtf((float)hd);
	float *got = malloc(sizeof(float) * no);
	double *want = dup_d(o, no), *p = malloc(sizeof(double) * (size_t)nk);
	for (int b = 0; b < batch; b++) {
		const float *qp = qm + b * sq, *kp = fused ? qm + b * sq + D : kvm + b * skv,
		            *vp = fused ? qm + b * sq + 2 * D : kvm + b * skv + D;
		for (int h = 0; h < heads; h++)
			for (int i = 0; i < nq; i++) {
				double mx = -INFINITY, sum = 0;
				/* bf16: the two products' inputs rounded (the scaled query, the keys; the
				 * weights, the values), the softmax's sum not */
				for (int j = 0; j < nk; j++) {
					double v = 0;
					for (int e = 0; e < hd; e++)
						v += (double)rounded(scale * qp[(size_t)i * ldq + h * hd + e]) *
						     rounded(kp[(size_t)j * ldkv + h * hd + e]);
					p[j] = v;
					mx = p[j] > mx ? p[j] : mx;
				}
				for (int j = 0; j < nk; j++)
					sum += (p[j] = exp(p[j] - mx));
				const double gate = att_gated ? 1 / (1 + exp(-(double)qp[(size_t)i * ldq + h])) : 1;
				for (int c = 0; c < hd; c++) {
					double v = 0;
					for (int j = 0; j < nk; j++)
						v += rounded((float)p[j]) / sum *
						     rounded(vp[(size_t)j * ldkv + h * hd + c]);
					want[b * so + (size_t)i * ldo + h * hd + c] = v * gate;
				}
			}
	}
	sb_dv dq = put(r->a, qm, nqv), dkv = fused ? dq : put(r->a, kvm, nkv), dout = put(r->a, o, no);
	if (!r->a->failed)
		ops(r)->attention(dv(r), dq, ldq, fused ? sb_dv_at(dq, (size_t)D) : dkv,
		                  fused ? sb_dv_at(dq, (size_t)2 * D) : sb_dv_at(dkv, (size_t)D), ldkv,
		                  nq, nk, heads, hd, scale, dout, ldo, batch, sq, fused ? sq : skv, so,
		                  att_gated ? dq : (sb_dv){NULL, 0});
	memcpy(got, o, sizeof(float) * no);
	get(r->a, got, dout, no);
	sb_status st = done(r->a);
	char shape[64];
	snprintf(shape, sizeof shape, "%dx %d x %d, %d x %d%s%s%s", batch, nq, nk, heads, hd,
	         fused ? " qkv" : "", interleaved ? " axial" : "", att_gated ? " gated" : "");
	/* bf16, tf32: each weight rounded at its block's maximum on a device (online softmax), at
	 * the row's here: the same relative size, other values */
	judge(r, "attention", shape, st, got, want, no, bf16_mode ? 4e-3 : tf32_mode ? 5e-4 : 2e-6);
	arena_free(r->a);
	free(qm);
	free(kvm);
	free(o);
	free(got);
	free(want);
	free(p);
}

/* RMSNorm of rows of D, in place or not */
static void case_rmsnorm(run *r, int rows, int D, int inplace)
{
	const size_t n = (size_t)rows * D;
	float *x = rnd(n, 2), *w = rnd((size_t)D, 1), *got = malloc(sizeof(float) * n);
	double *want = malloc(sizeof(double) * n);
	for (int i = 0; i < rows; i++) {
		double q = 0;
		for (int c = 0; c < D; c++)
			q += (double)x[(size_t)i * D + c] * x[(size_t)i * D + c];
		const double a = sqrt((double)D) / fmax(sqrt(q), 1e-12);
		for (int c = 0; c < D; c++)
			want[(size_t)i * D + c] = x[(size_t)i * D + c] * a * w[c];
	}
	if (rows > 1) /* a row of zeros stays zeros (the norm's floor) */
		for (int c = 0; c < D; c++)
			x[c] = 0.f, want[c] = 0;
	sb_dv dx = put(r->a, x, n), dw = put(r->a, w, (size_t)D);
	sb_dv dout = inplace ? dx : put(r->a, NULL, n);
	if (!r->a->failed)
		ops(r)->rmsnorm(dv(r), dx, dout, (size_t)rows, D, dw);
	get(r->a, got, dout, n);
	sb_status st = done(r->a);
	char shape[64];
	snprintf(shape, sizeof shape, "%d x %d%s", rows, D, inplace ? " in place" : "");
	judge(r, "rmsnorm", shape, st, got, want, n, 1e-6);
	arena_free(r->a);
	free(x);
	free(w);
	free(got);
	free(want);
}

/* RMSNorm of segments of rows at stride ld (a RoFormer's bands of widths 4 to 600, and one
 * longer than a work-group), the columns past the last segment left alone */
static void case_rmsnorm_seg(run *r, int rows, int nseg, int widest, int inplace)
{
	float *seg = malloc(sizeof(float) * (size_t)(nseg + 1));
	int at = 0;
	for (int s = 0; s <= nseg; s++) {
		seg[s] = (float)at;
		at += s == nseg / 2 ? widest : 4 * (1 + s % 3);
	}
	const int width = (int)seg[nseg];
	const long ld = width + 3;
	const size_t n = (size_t)rows * (size_t)ld;
	float *x = rnd(n, 2), *w = rnd((size_t)width, 1), *got = malloc(sizeof(float) * n);
	double *want = dup_d(x, n);
	if (rows > 1) /* a segment of zeros stays zeros (the norm's floor) */
		for (int c = (int)seg[1]; c < (int)seg[2]; c++)
			x[ld + c] = 0.f;
	for (int i = 0; i < rows; i++)
		for (int s = 0; s < nseg; s++) {
			const int a = (int)seg[s], b = (int)seg[s + 1];
			double q = 0;
			for (int c = a; c < b; c++)
				q += (double)x[i * ld + c] * x[i * ld + c];
			const double f = sqrt((double)(b - a)) / fmax(sqrt(q), 1e-12);
			for (int c = a; c < b; c++)
				want[i * ld + c] = x[i * ld + c] * f * w[c];
		}
	sb_dv dx = put(r->a, x, n), dw = put(r->a, w, (size_t)width),
	      ds = put(r->a, seg, (size_t)nseg + 1);
	sb_dv dout = inplace ? dx : put(r->a, x, n);
	if (!r->a->failed)
		ops(r)->rmsnorm_seg(dv(r), dx, dout, (size_t)rows, ld, nseg, ds, dw);
	get(r->a, got, dout, n);
	sb_status st = done(r->a);
	char shape[64];
	snprintf(shape, sizeof shape, "%d x %d segments (to %d)%s", rows, nseg, widest,
	         inplace ? " in place" : "");
	judge(r, "rmsnorm_seg", shape, st, got, want, n, 1e-6);
	arena_free(r->a);
	free(seg);
	free(x);
	free(w);
	free(got);
	free(want);
}

/* rotary embedding of the first cols of rows at stride ld; positions (r / div) % mod */
static void case_rope(run *r, int rows, int ld, int cols, int hd, int div, int mod)
{
	const size_t n = (size_t)rows * ld, ncs = (size_t)mod * hd;
	float *x = rnd(n, 1), *cs = malloc(sizeof(float) * ncs), *got = malloc(sizeof(float) * n);
	for (int p = 0; p < mod; p++)
		for (int j = 0; j < hd / 2; j++) {
			const double a = p * pow(10000.0, -2.0 * j / hd);
			cs[(size_t)p * hd + 2 * j] = (float)cos(a);
			cs[(size_t)p * hd + 2 * j + 1] = (float)sin(a);
		}
	double *want = dup_d(x, n);
	for (int i = 0; i < rows; i++) {
		const int p = (i / div) % mod;
		for (int k = 0; k < cols / 2; k++) {
			const int j = k % (hd / 2);
			const double c = cs[(size_t)p * hd + 2 * j], s = cs[(size_t)p * hd + 2 * j + 1];
			const double x0 = x[(size_t)i * ld + 2 * k], x1 = x[(size_t)i * ld + 2 * k + 1];
			want[(size_t)i * ld + 2 * k] = x0 * c - x1 * s;
			want[(size_t)i * ld + 2 * k + 1] = x1 * c + x0 * s;
		}
	}
	sb_dv dx = put(r->a, x, n), dcs = put(r->a, cs, ncs);
	if (!r->a->failed)
		ops(r)->rope(dv(r), dx, (size_t)rows, ld, cols, hd, dcs, div, mod);
	get(r->a, got, dx, n);
	sb_status st = done(r->a);
	char shape[64];
	snprintf(shape, sizeof shape, "%d x %d/%d, hd %d, /%d %%%d", rows, cols, ld, hd, div, mod);
	judge(r, "rope", shape, st, got, want, n, 1e-6);
	arena_free(r->a);
	free(x);
	free(cs);
	free(got);
	free(want);
}

/* per-head sigmoid gates read from columns of the same rows (as a fused projection has them) */
static void case_head_gate(run *r, int rows, int heads, int hd)
{
	const int ld = heads * hd + heads + 5;
	const size_t n = (size_t)rows * ld;
	float *x = rnd(n, 3), *got = malloc(sizeof(float) * n);
	double *want = dup_d(x, n);
	const int g0 = heads * hd + 2;
	for (int i = 0; i < rows; i++)
		for (int e = 0; e < heads * hd; e++)
			want[(size_t)i * ld + e] =
			    x[(size_t)i * ld + e] / (1.0 + exp(-(double)x[(size_t)i * ld + g0 + e / hd]));
	sb_dv dx = put(r->a, x, n);
	if (!r->a->failed)
		ops(r)->head_gate(dv(r), dx, ld, sb_dv_at(dx, (size_t)g0), ld, (size_t)rows, heads, hd);
	get(r->a, got, dx, n);
	sb_status st = done(r->a);
	char shape[64];
	snprintf(shape, sizeof shape, "%d x %d x %d", rows, heads, hd);
	judge(r, "head_gate", shape, st, got, want, n, 1e-6);
	arena_free(r->a);
	free(x);
	free(got);
	free(want);
}

/* ---- signal operations ---- */

static double hann(int i, int n) { return 0.5 - 0.5 * cos(2.0 * M_PI * i / n); }

static long refl(long s, long L)
{
	if (s < 0)
		s = -s;
	if (s >= L)
		s = 2 * (L - 1) - s;
	return s;
}

/* the spectrum's layout: 0 HTDemucs's (bins as rows, channels' re and im as rows of frames),
 * 1 a RoFormer's (frames major, bins, channels, re and im interleaved) */
static sb_stft geometry(int n_fft, int hop, int frames, int bins, long pad, int ch, int layout)
{
	sb_stft g = {n_fft, hop, frames, bins, pad, 0, 0, 0, 0};
	if (layout == 0) {
		g.sc = 2L * frames;
		g.sf = 2L * ch * frames;
		g.st = 1;
		g.sri = frames;
	} else {
		g.sc = 2;
		g.sf = 2L * ch;
		g.st = 2L * ch * bins;
		g.sri = 1;
	}
	return g;
}

static size_t spec_floats(const sb_stft *g, int ch)
{
	return (size_t)g->frames * (size_t)g->bins * (size_t)ch * 2;
}

/* the transform of ch signals of L samples (at a stride of L + 3) */
static void case_stft(run *r, int n_fft, int hop, int frames, int bins, long pad, long L, int ch,
                      int layout)
{
	const sb_stft g = geometry(n_fft, hop, frames, bins, pad, ch, layout);
	const long xs = L + 3;
	const size_t nx = (size_t)ch * xs, nX = spec_floats(&g, ch);
	float *x = rnd(nx, 1), *w = malloc(sizeof(float) * n_fft), *got = malloc(sizeof(float) * nX);
	double *want = calloc(nX, sizeof(double)), *cs = malloc(sizeof(double) * 2 * n_fft);
	for (int i = 0; i < n_fft; i++) {
		w[i] = (float)hann(i, n_fft);
		cs[2 * i] = cos(2.0 * M_PI * i / n_fft);
		cs[2 * i + 1] = sin(2.0 * M_PI * i / n_fft);
	}
	const double scale = 1.0 / sqrt((double)n_fft);
	for (int c = 0; c < ch; c++)
		for (int t = 0; t < frames; t++)
			for (int f = 0; f < bins; f++) {
				double re = 0, im = 0;
				for (int i = 0; i < n_fft; i++) {
					const double v = (double)w[i] * x[c * xs + refl((long)t * hop - pad + i, L)];
					const int k = (int)(((long)f * i) % n_fft);
					re += v * cs[2 * k];
					im -= v * cs[2 * k + 1];
				}
				const size_t o = (size_t)(c * g.sc + f * g.sf + t * g.st);
				want[o] = re * scale;
				want[o + g.sri] = im * scale;
			}
	sb_dv dx = put(r->a, x, nx), dw = put(r->a, w, (size_t)n_fft), dX = put(r->a, NULL, nX);
	if (!r->a->failed)
		ops(r)->stft(dv(r), &g, dx, xs, ch, L, dw, (float)scale, dX);
	get(r->a, got, dX, nX);
	sb_status st = done(r->a);
	char shape[64];
	snprintf(shape, sizeof shape, "%d/%d, %d x %d x %d %s", n_fft, hop, ch, frames, bins,
	         layout ? "frames" : "rows");
	judge(r, "stft", shape, st, got, want, nX, 4e-6);
	arena_free(r->a);
	free(x);
	free(w);
	free(got);
	free(want);
	free(cs);
}

/* the inverse of a random spectrum, added to (or written over) ch outputs at a stride */
static void case_istft(run *r, int n_fft, int hop, int frames, int bins, long pad, long L, int ch,
                       int layout, int e0, int e1, int add)
{
	const sb_stft g = geometry(n_fft, hop, frames, bins, pad, ch, layout);
	const long os = L + 5;
	const size_t nX = spec_floats(&g, ch), no = (size_t)ch * os;
	const size_t nwork = (size_t)ch * frames * n_fft;
	float *X = rnd(nX, 1), *o = rnd(no, 1), *w = malloc(sizeof(float) * n_fft);
	float *got = malloc(sizeof(float) * no);
	double *want = dup_d(o, no), *cs = malloc(sizeof(double) * n_fft);
	double *y = malloc(sizeof(double) * nwork);
	for (int i = 0; i < n_fft; i++) {
		w[i] = (float)hann(i, n_fft);
		cs[i] = cos(2.0 * M_PI * i / n_fft);
	}
	const double scale = 1.0 / sqrt((double)n_fft);
	/* Re sum over the Hermitian extension: X0 + 2 sum Re(X_f e^{i theta}) + X_{N/2} (-1)^i */
	for (int c = 0; c < ch; c++)
		for (int t = 0; t < frames; t++)
			for (int i = 0; i < n_fft; i++) {
				double v = 0;
				for (int f = 0; f < bins && f <= n_fft / 2; f++) {
					const size_t at = (size_t)(c * g.sc + f * g.sf + t * g.st);
					const int k = (int)(((long)f * i) % n_fft);
					const double co = cs[k], si = cs[(k + 3 * n_fft / 4) % n_fft];
					if (f == 0 || f == n_fft / 2)
						v += X[at] * co;
					else
						v += 2 * (X[at] * co - X[at + g.sri] * si);
				}
				y[((size_t)c * frames + t) * n_fft + i] = v * scale * w[i];
			}
	for (int c = 0; c < ch; c++)
		for (long j = 0; j < L; j++) {
			const long p = j + pad;
			double acc = 0, env = 0;
			for (long t = -e0; t < frames + e1; t++) {
				const long i = p - t * hop;
				if (i < 0 || i >= n_fft)
					continue;
				env += (double)w[i] * w[i];
				if (t >= 0 && t < frames)
					acc += y[((size_t)c * frames + t) * n_fft + i];
			}
			const double v = env > 1e-11 ? acc / env : 0;
			want[c * os + j] = add ? want[c * os + j] + v : v;
		}
	sb_dv dX = put(r->a, X, nX), dw = put(r->a, w, (size_t)n_fft), d_o = put(r->a, o, no);
	sb_dv dwork = put(r->a, NULL, nwork);
	if (!r->a->failed)
		ops(r)->istft(dv(r), &g, dX, ch, L, dw, (float)scale, e0, e1, d_o, os, add, dwork);
	get(r->a, got, d_o, no);
	sb_status st = done(r->a);
	char shape[64];
	snprintf(shape, sizeof shape, "%d/%d, %d x %d x %d %s%s", n_fft, hop, ch, frames, bins,
	         layout ? "frames" : "rows", add ? " add" : "");
	judge(r, "istft", shape, st, got, want, no, 4e-6);
	arena_free(r->a);
	free(X);
	free(o);
	free(w);
	free(got);
	free(want);
	free(cs);
	free(y);
}

/* the mean and std of n values far from zero, then standardised and back */
static void case_moments(run *r, size_t n, int inverse)
{
	float *x = rnd(n, 0.5f), *got = malloc(sizeof(float) * n);
	for (size_t i = 0; i < n; i++)
		x[i] += 3.f;
	double s = 0, q = 0;
	for (size_t i = 0; i < n; i++)
		s += x[i];
	const double m = s / n;
	for (size_t i = 0; i < n; i++)
		q += (x[i] - m) * (x[i] - m);
	const double sd = sqrt(q / (n > 1 ? n - 1 : 1));
	double *want = malloc(sizeof(double) * n);
	for (size_t i = 0; i < n; i++)
		want[i] = inverse ? x[i] * sd + m : (x[i] - m) / (sd + 1e-5);
	float stats[2] = {0, 0};
	sb_dv dx = put(r->a, x, n), ds = put(r->a, NULL, 2);
	if (!r->a->failed) {
		ops(r)->moments(dv(r), dx, n, ds);
		ops(r)->standardise(dv(r), dx, dx, n, ds, 1e-5f, inverse);
	}
	get(r->a, got, dx, n);
	get(r->a, stats, ds, 2);
	sb_status st = done(r->a);
	char shape[64];
	snprintf(shape, sizeof shape, "%zu%s", n, inverse ? " inverse" : "");
	if (st == SB_OK && (fabs(stats[0] - m) > 1e-5 * fabs(m) || fabs(stats[1] - sd) > 1e-5 * sd)) {
		printf("  %-9s %-16s %-28s FAIL: mean %g std %g, want %g %g\n", r->dev, "moments",
		       shape, stats[0], stats[1], m, sd);
		failures++;
	}
	judge(r, "moments", shape, st, got, want, n, 2e-6);
	arena_free(r->a);
	free(x);
	free(got);
	free(want);
}

/* columns gathered and summed: each output column sums 0 to 3 random input columns */
static void case_gather(run *r, int rows, int cols, int n)
{
	const long ldx = cols + 3, ldo = n + 2;
	const size_t nx = (size_t)rows * ldx, no = (size_t)rows * ldo;
	float *x = rnd(nx, 1), *o = rnd(no, 1), *w = rnd((size_t)n, 1);
	float *ptr = malloc(sizeof(float) * (n + 1)), *idx = malloc(sizeof(float) * 3 * n);
	float *got = malloc(sizeof(float) * no);
	int p = 0;
	for (int i = 0; i < n; i++) {
		ptr[i] = (float)p;
		const int k = (int)((frand() + 1.f) * 1.999f); /* 0 .. 3 */
		for (int j = 0; j < k; j++)
			idx[p++] = (float)(int)((frand() + 1.f) * 0.4999f * cols);
	}
	ptr[n] = (float)p;
	double *want = dup_d(o, no);
	for (int i = 0; i < rows; i++)
		for (int c = 0; c < n; c++) {
			double acc = 0;
			for (int q = (int)ptr[c]; q < (int)ptr[c + 1]; q++)
				acc += x[(size_t)i * ldx + (int)idx[q]];
			want[(size_t)i * ldo + c] = acc * w[c];
		}
	sb_dv dx = put(r->a, x, nx), d_o = put(r->a, o, no), dw = put(r->a, w, (size_t)n);
	sb_dv dp = put(r->a, ptr, (size_t)n + 1), di = put(r->a, idx, p > 0 ? (size_t)p : 1);
	if (!r->a->failed)
		ops(r)->gather(dv(r), dx, ldx, d_o, ldo, (size_t)rows, n, dp, di, dw);
	get(r->a, got, d_o, no);
	sb_status st = done(r->a);
	char shape[64];
	snprintf(shape, sizeof shape, "%d x %d <- %d", rows, n, cols);
	judge(r, "gather", shape, st, got, want, no, 1e-6);
	arena_free(r->a);
	free(x);
	free(o);
	free(w);
	free(ptr);
	free(idx);
	free(got);
	free(want);
}

/* complex products of batch items with one shared factor, in place or not */
static void case_cmul(run *r, size_t n, int batch, int inplace)
{
	const long sa = (long)(2 * n + 4), so = inplace ? sa : (long)(2 * n + 6);
	const size_t na = (size_t)batch * sa, no = (size_t)batch * so;
	float *a = rnd(na, 1), *c = rnd(2 * n, 1), *o = rnd(no, 1), *got = malloc(sizeof(float) * no);
	double *want = dup_d(inplace ? a : o, no);
	for (int b = 0; b < batch; b++)
		for (size_t i = 0; i < n; i++) {
			const double ar = a[b * sa + 2 * i], ai = a[b * sa + 2 * i + 1];
			const double cr = c[2 * i], ci = c[2 * i + 1];
			want[b * so + 2 * i] = ar * cr - ai * ci;
			want[b * so + 2 * i + 1] = ar * ci + ai * cr;
		}
	sb_dv da = put(r->a, a, na), dc = put(r->a, c, 2 * n);
	sb_dv d_o = inplace ? da : put(r->a, o, no);
	if (!r->a->failed)
		ops(r)->cmul(dv(r), da, sa, dc, d_o, so, n, batch);
	get(r->a, got, d_o, no);
	sb_status st = done(r->a);
	char shape[64];
	snprintf(shape, sizeof shape, "%d x %zu%s", batch, n, inplace ? " in place" : "");
	judge(r, "cmul", shape, st, got, want, no, 1e-6);
	arena_free(r->a);
	free(a);
	free(c);
	free(o);
	free(got);
	free(want);
}

/* ---- SB_OPS_LSTM ---- */

static double sigm_d(double v) { return 1.0 / (1.0 + exp(-v)); }

/* torch.nn.LSTM(D, H, bidirectional = dirs == 2, batch_first) over n sequences of S steps, in
 * double, step by step as its documentation writes it */
static void case_lstm(run *r, int n, int S, int D, int H, int dirs)
{
	const long G = 4L * H;
	const size_t nx = (size_t)n * S * D, no = (size_t)n * S * dirs * H;
	float *x = rnd(nx, 1), *wih = rnd((size_t)dirs * G * D, 0.4f),
	      *whh = rnd((size_t)dirs * G * H, 0.4f), *b = rnd((size_t)dirs * G, 0.3f);
	float *got = malloc(sizeof(float) * no);
	double *want = malloc(sizeof(double) * no), *h = calloc((size_t)H, sizeof(double)),
	       *c = calloc((size_t)H, sizeof(double)), *z = malloc(sizeof(double) * (size_t)G);
	for (int q = 0; q < n; q++)
		for (int dr = 0; dr < dirs; dr++) {
			for (int i = 0; i < H; i++)
				h[i] = c[i] = 0;
			for (int k = 0; k < S; k++) {
				const int s = dr ? S - 1 - k : k;
				const float *xs = x + ((size_t)q * S + s) * D;
				for (long g = 0; g < G; g++) {
					double v = b[dr * G + g];
					for (int i = 0; i < D; i++)
						v += (double)wih[(dr * G + g) * D + i] * xs[i];
					for (int i = 0; i < H; i++)
						v += (double)whh[(dr * G + g) * H + i] * h[i];
					z[g] = v;
				}
				for (int i = 0; i < H; i++) {
					c[i] = sigm_d(z[H + i]) * c[i] + sigm_d(z[i]) * tanh(z[2 * H + i]);
					h[i] = sigm_d(z[3 * H + i]) * tanh(c[i]);
					want[((size_t)q * S + s) * dirs * H + dr * H + i] = h[i];
				}
			}
		}
	const int on = has(r, "lstm");
	sb_dv dx = put(r->a, x, nx), dwi = put(r->a, wih, (size_t)dirs * G * D),
	      dwh = put(r->a, whh, (size_t)dirs * G * H), db = put(r->a, b, (size_t)dirs * G),
	      dout = put(r->a, NULL, no), dwork = put(r->a, NULL, (size_t)dirs * n * (S + 1) * G);
	if (on && !r->a->failed)
		ops(r)->lstm(dv(r), dx, n, S, D, H, dirs, dwi, dwh, db, dout, dwork);
	get(r->a, got, dout, no);
	sb_status st = done(r->a);
	char shape[64];
	snprintf(shape, sizeof shape, "%d x %d x %d -> %d%s", n, S, D, H, dirs == 2 ? " bi" : "");
	if (on)
		judge(r, "lstm", shape, st, got, want, no, 2e-5);
	else
		not_supported(r, "lstm", shape);
	arena_free(r->a);
	free(x);
	free(wih);
	free(whh);
	free(b);
	free(got);
	free(want);
	free(h);
	free(c);
	free(z);
}

/* ---- SB_OPS_CONVNET ---- */

/* rows of a band copied into a padded buffer, batch items apart */
static void case_copy_rows(run *r, int rows, long n, int batch)
{
	const long lds = n + 3, lsi = rows * lds + 7, ldd = n + 5, ldi = rows * ldd + 2;
	const size_t ns = (size_t)(lsi * batch), nd = (size_t)(ldi * batch);
	float *src = rnd(ns, 1), *dst = rnd(nd, 1), *got = malloc(sizeof(float) * nd);
	double *want = dup_d(dst, nd);
	for (int i = 0; i < batch; i++)
		for (int q = 0; q < rows; q++)
			for (long k = 0; k < n; k++)
				want[i * ldi + q * ldd + k] = src[i * lsi + q * lds + k];
	const int on = has(r, "copy_rows");
	sb_dv ds = put(r->a, src, ns), dd = put(r->a, dst, nd);
	if (on && !r->a->failed)
		ops(r)->copy_rows(dv(r), dd, ldd, ldi, ds, lds, lsi, rows, n, batch);
	memcpy(got, dst, sizeof(float) * nd);
	get(r->a, got, dd, nd);
	sb_status st = done(r->a);
	char shape[64];
	snprintf(shape, sizeof shape, "%d x %d x %ld", batch, rows, n);
	if (on)
		judge(r, "copy_rows", shape, st, got, want, nd, 1e-7);
	else
		not_supported(r, "copy_rows", shape);
	arena_free(r->a);
	free(src);
	free(dst);
	free(got);
	free(want);
}

/* a transpose of x [d0][d1][d2][d3] to the order perm (o's dimensions are x's in that order),
 * optionally into a wider buffer (pad: o's rows of its last dimension padded) */
static void case_permute(run *r, int d0, int d1, int d2, int d3, const int perm[4], int pad)
{
	const int dims[4] = {d0, d1, d2, d3};
	int od[4];
	for (int k = 0; k < 4; k++)
		od[k] = dims[perm[k]];
	long ostr[4]; /* strides of o's own dimensions, the last padded */
	ostr[3] = 1;
	ostr[2] = od[3] + pad;
	ostr[1] = ostr[2] * od[2];
	ostr[0] = ostr[1] * od[1];
	long os[4];
	for (int k = 0; k < 4; k++)
		os[perm[k]] = ostr[k];
	const size_t nx = (size_t)d0 * d1 * d2 * d3, no = (size_t)(ostr[0] * od[0]);
	float *x = rnd(nx, 1), *o = rnd(no, 1), *got = malloc(sizeof(float) * no);
	double *want = dup_d(o, no);
	for (int a = 0; a < d0; a++)
		for (int b = 0; b < d1; b++)
			for (int c = 0; c < d2; c++)
				for (int e = 0; e < d3; e++)
					want[a * os[0] + b * os[1] + c * os[2] + e * os[3]] =
					    x[(((size_t)a * d1 + b) * d2 + c) * d3 + e];
	const int on = has(r, "permute");
	sb_dv dx = put(r->a, x, nx), d_o = put(r->a, o, no);
	if (on && !r->a->failed)
		ops(r)->permute(dv(r), dx, dims, os, d_o);
	memcpy(got, o, sizeof(float) * no);
	get(r->a, got, d_o, no);
	sb_status st = done(r->a);
	char shape[64];
	snprintf(shape, sizeof shape, "%dx%dx%dx%d (%d%d%d%d)%s", d0, d1, d2, d3, perm[0], perm[1],
	         perm[2], perm[3], pad ? " pad" : "");
	if (on)
		judge(r, "permute", shape, st, got, want, no, 1e-7);
	else
		not_supported(r, "permute", shape);
	arena_free(r->a);
	free(x);
	free(o);
	free(got);
	free(want);
}

/* GroupNorm of items [C][F][T] stored as rows [F][C][T] (rows = 1) or channels first, G
 * groups, n1 x n2 items apart, into o or in place */
static void case_norm_groups(run *r, int n1, int n2, int C, int G, int F, int T, int rows,
                             int act, int inplace)
{
	sb_norm_geom g = {n1, n2, C, G, F, T, 0, 0, 0, 0};
	g.sc = rows ? T : (long)F * T;
	g.sf = rows ? (long)C * T : T;
	g.s2 = (long)C * F * T + 3;
	g.s1 = g.s2 * n2 + 5;
	const size_t n = (size_t)(g.s1 * n1);
	float *x = rnd(n, 2), *w = rnd((size_t)C, 1), *b = rnd((size_t)C, 1), *o = rnd(n, 1);
	for (size_t i = 0; i < n; i++)
		x[i] += 0.5f; /* a mean to take out */
	float *got = malloc(sizeof(float) * n);
	double *want = dup_d(inplace ? x : o, n);
	const int cg = C / G;
	for (int i1 = 0; i1 < n1; i1++)
		for (int i2 = 0; i2 < n2; i2++)
			for (int q = 0; q < G; q++) {
				double s = 0, sq = 0;
				const double cnt = (double)cg * F * T;
				for (int pass = 0; pass < 3; pass++)
					for (int c = q * cg; c < (q + 1) * cg; c++)
						for (int f = 0; f < F; f++)
							for (int t = 0; t < T; t++) {
								const long at = i1 * g.s1 + i2 * g.s2 + c * g.sc + f * g.sf + t;
								const double m = s / cnt;
								if (pass == 0) {
									s += x[at];
								} else if (pass == 1) {
									sq += (x[at] - m) * (x[at] - m);
								} else {
									const double v = (x[at] - m) / sqrt(sq / cnt + 1e-5) * w[c] + b[c];
									want[at] = act == SB_ACT_GELU ? gelu(v)
									           : act == SB_ACT_SILU ? v * sigm_d(v) : v;
								}
							}
			}
	const int on = has(r, "norm_groups");
	sb_dv dx = put(r->a, x, n), dw = put(r->a, w, (size_t)C), db = put(r->a, b, (size_t)C);
	sb_dv d_o = inplace ? dx : put(r->a, o, n);
	if (on && !r->a->failed)
		ops(r)->norm_groups(dv(r), dx, &g, dw, db, act, d_o);
	memcpy(got, inplace ? x : o, sizeof(float) * n);
	get(r->a, got, d_o, n);
	sb_status st = done(r->a);
	char shape[80];
	snprintf(shape, sizeof shape, "%dx%d x %d/%d x %dx%d %s%s%s", n1, n2, C, G, F, T,
	         rows ? "rows" : "chan", act == SB_ACT_GELU ? " gelu" : act == SB_ACT_SILU
	         ? " silu" : "", inplace ? " in place" : "");
	if (on)
		judge(r, "norm_groups", shape, st, got, want, n, 2e-6);
	else
		not_supported(r, "norm_groups", shape);
	arena_free(r->a);
	free(x);
	free(w);
	free(b);
	free(o);
	free(got);
	free(want);
}

static void case_dwconv(run *r, int rows, int C, int T, int k)
{
	const size_t n = (size_t)rows * C * T;
	float *x = rnd(n, 1), *w = rnd((size_t)C * k, 1), *b = rnd((size_t)C, 1);
	float *got = malloc(sizeof(float) * n);
	double *want = malloc(sizeof(double) * n);
	for (int q = 0; q < rows; q++)
		for (int c = 0; c < C; c++)
			for (int t = 0; t < T; t++) {
				double v = b[c];
				for (int u = 0; u < k; u++) {
					const int at = t + u - k / 2;
					if (at >= 0 && at < T)
						v += (double)w[c * k + u] * x[((size_t)q * C + c) * T + at];
				}
				want[((size_t)q * C + c) * T + t] = v;
			}
	const int on = has(r, "dwconv");
	sb_dv dx = put(r->a, x, n), dw = put(r->a, w, (size_t)C * k), db = put(r->a, b, (size_t)C),
	      d_o = put(r->a, NULL, n);
	if (on && !r->a->failed)
		ops(r)->dwconv(dv(r), dx, rows, C, T, k, dw, db, d_o);
	get(r->a, got, d_o, n);
	sb_status st = done(r->a);
	char shape[64];
	snprintf(shape, sizeof shape, "%d x %d x %d, k %d", rows, C, T, k);
	if (on)
		judge(r, "dwconv", shape, st, got, want, n, 1e-6);
	else
		not_supported(r, "dwconv", shape);
	arena_free(r->a);
	free(x);
	free(w);
	free(b);
	free(got);
	free(want);
}

static void case_mul(run *r, size_t n)
{
	float *x = rnd(n, 1), *y = rnd(n, 1), *got = malloc(sizeof(float) * n);
	double *want = malloc(sizeof(double) * n);
	for (size_t i = 0; i < n; i++)
		want[i] = (double)x[i] * y[i];
	const int on = has(r, "mul");
	sb_dv dx = put(r->a, x, n), dy = put(r->a, y, n);
	if (on && !r->a->failed)
		ops(r)->mul(dv(r), dx, dy, n);
	get(r->a, got, dx, n);
	sb_status st = done(r->a);
	char shape[64];
	snprintf(shape, sizeof shape, "%zu", n);
	if (on)
		judge(r, "mul", shape, st, got, want, n, 1e-7);
	else
		not_supported(r, "mul", shape);
	arena_free(r->a);
	free(x);
	free(y);
	free(got);
	free(want);
}

#ifdef SB_TOY_FAMILY
/* the test group's one operation (-Dtoy_family=true): the CPU backend has it, others not */
static void case_toy_mix(run *r, size_t n)
{
	float *x = rnd(n, 1), *y = rnd(n, 1), *got = malloc(sizeof(float) * n);
	double *want = malloc(sizeof(double) * n);
	for (size_t i = 0; i < n; i++)
		want[i] = 0.5 * x[i] - 2.0 * y[i];
	sb_dv dx = put(r->a, x, n), dy = put(r->a, y, n), dout = put(r->a, NULL, n);
	const int on = has(r, "toy_mix");
	if (on && !r->a->failed)
		ops(r)->toy_mix(dv(r), dx, dy, dout, n, 0.5f, -2.0f);
	get(r->a, got, dout, n);
	sb_status st = done(r->a);
	char shape[64];
	snprintf(shape, sizeof shape, "%zu", n);
	if (on)
		judge(r, "toy_mix", shape, st, got, want, n, 1e-7);
	else
		not_supported(r, "toy_mix", shape);
	arena_free(r->a);
	free(x);
	free(y);
	free(got);
	free(want);
}
#endif

/* --ops: the operations to test, NULL for all */
static const char *only_ops;

static int wanted(const char *op)
{
	if (!only_ops)
		return 1;
	const size_t n = strlen(op);
	for (const char *p = only_ops; (p = strstr(p, op)); p += n)
		if ((p == only_ops || p[-1] == ',') && (p[n] == ',' || p[n] == '\0'))
			return 1;
	return 0;
}

/* Every case, in a fixed order (the CPU's results are matched by position). */
static void all_cases(run *r)
{
	if (wanted("gemm")) {
		case_gemm(r, 37, 45, 70, 0, 1, 1, 0, 0);
		case_gemm(r, 37, 45, 70, 1, 1, 1, 3, 0);
		case_gemm(r, 19, 33, 48, 0, 3, 2, 1, 1);   /* weights shared by every item */
		case_gemm(r, 24, 17, 40, 1, 4, 1, 0, 0);   /* more items than a CPU has threads */
		case_gemm(r, 256, 300, 384, 0, 1, 1, 0, 0); /* split over threads, tiled on a GPU */
		case_gemm(r, 200, 128, 256, 1, 2, 1, 0, 1);
		/* a GPU kernel's float4 paths (aligned operands), its ragged tiles in M, N and K
		 * (K not a multiple of 4), one row or one column, beta 0, and mixed alignments */
		case_gemm_at(r, 130, 260, 37, 0, 1, 1, 0, 0, 7, 0.3f);
		case_gemm_at(r, 130, 260, 37, 1, 1, 1, 0, 0, 7, 0.3f);
		case_gemm_at(r, 520, 264, 300, 0, 1, 1, 0, 0, 7, 0.3f);
		case_gemm_at(r, 264, 520, 96, 1, 1, 1, 0, 0, 7, 0.f);
		case_gemm_at(r, 129, 67, 45, 0, 3, 2, 1, 0, 3, 0.f);
		case_gemm_at(r, 64, 96, 48, 1, 3, 1, 0, 1, 5, 0.3f);
		case_gemm_at(r, 70, 133, 64, 1, 2, 2, 2, 0, 6, 0.3f);
		case_gemm_at(r, 1, 300, 64, 1, 1, 1, 0, 0, 7, 0.3f);
		case_gemm_at(r, 300, 1, 70, 0, 1, 1, 0, 0, 7, 0.3f);
		case_gemm_at(r, 3, 5, 2, 0, 2, 1, 0, 0, 7, 0.3f);
		/* gemm_bias: the epilogue after each path's product, on its float4 stores and its
		 * ragged edges, with beta (a tap added to the ones before), batches of both levels
		 * and a bias of each item's own */
		case_gemm_ep(r, 130, 260, 37, 0, 1, 1, 0, 0, 7, 0.f, EP_ROWS, SB_ACT_GELU);
		case_gemm_ep(r, 129, 67, 45, 0, 3, 2, 1, 0, 3, 0.3f, EP_ROWS, SB_ACT_NONE);
		case_gemm_ep(r, 264, 520, 96, 1, 1, 1, 0, 0, 7, 0.f, EP_COLS, SB_ACT_GELU);
		case_gemm_ep(r, 70, 133, 64, 1, 2, 2, 2, 0, 6, 1.f, EP_COLS, SB_ACT_NONE);
		case_gemm_ep(r, 37, 45, 70, 1, 3, 1, 0, 1, 0, 0.f, EP_COLS_ITEMS, SB_ACT_TANH);
		case_gemm_ep(r, 24, 17, 40, 1, 4, 1, 0, 0, 5, 0.f, EP_COLS_ITEMS, SB_ACT_NONE);
		case_gemm_ep(r, 200, 128, 256, 0, 2, 1, 0, 1, 7, 0.f, EP_ROWS, SB_ACT_TANH);
		case_gemm_ep(r, 67, 129, 45, 1, 3, 2, 0, 0, 7, 0.f, EP_ROWS_ITEMS, SB_ACT_GELU);
		case_gemm_ep(r, 33, 19, 48, 0, 3, 2, 1, 0, 0, 0.3f, EP_COLS_ITEMS, SB_ACT_NONE);
		/* products of few rows (a GPU's thin tiling): a DConv's first convolution, 6 channels
		 * over ragged frames with one weight for every row of the batch, 12 rows unaligned,
		 * and 48 rows with a tap added */
		case_gemm_ep(r, 6, 335, 48, 0, 24, 1, 0, 1, 7, 0.f, EP_ROWS, SB_ACT_GELU);
		case_gemm_at(r, 12, 336, 96, 0, 5, 1, 1, 1, 0, 0.3f);
		case_gemm_ep(r, 48, 200, 72, 0, 3, 1, 0, 1, 7, 1.f, EP_ROWS, SB_ACT_NONE);
	}
	if (wanted("attention")) {
		case_attention(r, 37, 37, 3, 8, 1, 1, 0);
		case_attention(r, 300, 300, 8, 48, 1, 1, 0);  /* more query rows than a CPU block */
		case_attention(r, 45, 70, 4, 16, 0, 1, 0);
		case_attention(r, 600, 257, 8, 48, 0, 1, 0);
		case_attention(r, 50, 50, 4, 16, 1, 3, 0);    /* segments of a batch, one after another */
		case_attention(r, 30, 45, 2, 8, 0, 2, 0);
		case_attention(r, 41, 41, 2, 16, 1, 5, 1);    /* a RoFormer's time sequences, per band */
		case_attention(r, 7, 7, 4, 8, 1, 19, 0);      /* its band sequences: many and short */
		att_gated = 1;                                /* with a RoFormer's per-head gates */
		case_attention(r, 41, 41, 2, 16, 1, 5, 1);
		case_attention(r, 7, 7, 4, 8, 1, 19, 0);
		case_attention(r, 70, 70, 4, 64, 1, 3, 1);
		att_gated = 0;
		/* the usual head of 64 (HTDemucs, the RoFormers), 32, and one past what a one-pass
		 * kernel holds: rows and keys off its tiles */
		case_attention(r, 130, 97, 2, 64, 0, 2, 0);
		case_attention(r, 70, 70, 8, 64, 1, 3, 1);
		case_attention(r, 65, 33, 3, 32, 0, 1, 0);
		case_attention(r, 40, 50, 2, 80, 0, 2, 0);
		r->a->off = 8;                                /* aligned: a GPU kernel's float4 paths */
		case_attention(r, 300, 300, 8, 48, 1, 1, 0);
		case_attention(r, 64, 64, 4, 16, 1, 6, 1);
		r->a->off = 5;
	}
	if (only_ops)
		return;
	case_ew(r, E_ZERO, 7, 33, 3);
	case_ew(r, E_COPY, 7, 33, 3);
	case_ew(r, E_COPY, 48, 2000, 1);
	case_ew(r, E_COLS, 7, 33, 3);
	case_ew(r, E_COLS_GELU, 5, 384, 40);
	case_ew(r, E_ADD, 7, 33, 3);
	case_ew(r, E_ADD, 64, 2100, 1);
	case_ew(r, E_ROWCH, 6, 9, 4);
	case_ew(r, E_ROWCH, 48, 336, 8);
	case_glu(r, 60, 3);
	case_glu(r, 48 * 700, 2);
	case_groupnorm(r, 8, 40, 3, 0);
	case_groupnorm(r, 8, 40, 1, 1);
	case_groupnorm(r, 48, 2000, 1, 1); /* one item split over threads */
	case_groupnorm(r, 24, 300, 5, 0);  /* more items than threads */
	/* items of several slices, but enough of them (twice a 2-core CPU's compute units) that
	 * each is one slice whose statistics a GPU writes at once */
	case_groupnorm(r, 48, 336, 9, 1);
	case_gn_glu_add(r, 6, 40, 3);
	case_gn_glu_add(r, 48, 336, 9);    /* one slice an item on a GPU's rule */
	case_gn_glu_add(r, 48, 2000, 1);   /* one item in slices */
	case_norm_tokens(r, N_TOKENS, 50, 24);
	case_norm_tokens(r, N_TOKENS, 700, 192);
	case_norm_tokens(r, N_LAYER, 30, 64);
	case_norm_tokens(r, N_LAYER_INPLACE, 333, 384);
	case_softmax(r, 20, 37);
	case_softmax(r, 64, 1100);
	case_layout(r, L_TRANSPOSE, 45, 70, 0);
	case_layout(r, L_TRANSPOSE, 300, 257, 0);
	case_layout(r, L_TO_TOKENS, 6, 5, 7);
	case_layout(r, L_FROM_TOKENS, 6, 5, 7);
	case_layout(r, L_TO_TOKENS, 8, 48, 336);
	case_layout(r, L_FROM_TOKENS, 8, 48, 336);
	case_im2col(r, 3, 50);
	case_im2col(r, 48, 4411);
	case_convtr(r, 5, 12, 45, 0);
	case_convtr(r, 48, 1103, 4410, 1);
	case_ew(r, E_COLS_TANH, 5, 384, 40);
	case_rmsnorm(r, 37, 24, 0);
	case_rmsnorm(r, 700, 384, 1);
	case_rmsnorm(r, 5, 1030, 0);                  /* longer rows than a work-group */
	case_rmsnorm_seg(r, 41, 9, 24, 0);
	case_rmsnorm_seg(r, 300, 62, 600, 1);
	case_rmsnorm_seg(r, 3, 5, 1030, 0);
	case_rope(r, 60, 3 * 32 + 4, 2 * 32, 16, 1, 60);
	case_rope(r, 6 * 11, 2 * 24, 2 * 24, 8, 6, 11);  /* time positions of [T][bands] rows */
	case_rope(r, 6 * 11, 2 * 24, 2 * 24, 8, 1, 6);   /* band positions */
	case_head_gate(r, 33, 4, 16);
	case_head_gate(r, 500, 8, 64);
	case_stft(r, 256, 64, 21, 128, 96, 1200, 2, 0);   /* HTDemucs's shape, Nyquist dropped */
	case_stft(r, 64, 15, 9, 33, 32, 120, 1, 1);       /* a RoFormer's: centred, every bin */
	case_stft(r, 4096, 1024, 3, 2048, 1536, 3000, 2, 0);
	case_stft(r, 8, 2, 5, 5, 4, 9, 3, 1);             /* the smallest */
	case_istft(r, 256, 64, 21, 128, 96, 1200, 2, 0, 2, 2, 1);
	case_istft(r, 64, 15, 9, 33, 32, 120, 1, 1, 0, 0, 0);
	case_istft(r, 2048, 441, 4, 1025, 1024, 1500, 2, 1, 0, 0, 0);
	case_moments(r, 1000, 0);
	case_moments(r, 2000003, 0);
	case_moments(r, 777, 1);
	case_gather(r, 37, 50, 41);
	case_gather(r, 801, 4100, 3000);               /* a RoFormer chunk's frames */
	case_cmul(r, 1000, 3, 0);
	case_cmul(r, 4100, 2, 1);
	/* SB_OPS_LSTM: SCNet's frequency path (few steps, many sequences) and its time path */
	if (wanted("lstm")) {
		case_lstm(r, 37, 9, 12, 12, 2);
		case_lstm(r, 5, 40, 24, 48, 2);
		case_lstm(r, 3, 7, 10, 6, 1);
		case_lstm(r, 130, 19, 32, 32, 2);
	}
	/* SB_OPS_CONVNET */
	case_copy_rows(r, 13, 77, 3);
	case_copy_rows(r, 200, 1000, 2);
	{
		static const int p0213[4] = {0, 2, 1, 3}, p0132[4] = {0, 1, 3, 2},
		                 p0312[4] = {0, 3, 1, 2}, p1023[4] = {1, 0, 2, 3};
		case_permute(r, 2, 9, 7, 33, p0213, 0);  /* rows [F][C][T] <-> channels first */
		case_permute(r, 2, 9, 7, 33, p0132, 0);  /* a time path's [T][C] per row */
		case_permute(r, 3, 5, 11, 6, p0312, 1);  /* tokens [T][F][C] from rows, padded */
		case_permute(r, 40, 1, 64, 130, p1023, 0);
	}
	case_norm_groups(r, 2, 1, 12, 1, 9, 33, 1, SB_ACT_NONE, 0);   /* a dual-path norm */
	case_norm_groups(r, 1, 7, 8, 1, 1, 50, 1, SB_ACT_SILU, 1);    /* a conv module's */
	case_norm_groups(r, 2, 1, 6, 6, 20, 16, 1, SB_ACT_GELU, 1);   /* InstanceNorm, rows */
	case_norm_groups(r, 1, 2, 8, 4, 5, 31, 0, SB_ACT_GELU, 0);    /* GroupNorm4, channels */
	case_norm_groups(r, 1, 1, 16, 16, 256, 64, 1, SB_ACT_NONE, 1); /* larger than a slice */
	case_dwconv(r, 11, 3, 70, 3);
	case_dwconv(r, 4, 5, 9, 7);
	case_mul(r, 1001);
	case_mul(r, 100003);
#ifdef SB_TOY_FAMILY
	case_toy_mix(r, 1000);
#endif
}

/* The classic group: one chunk of the built-in separator, against the CPU backend. */
static float *classic_chunk(const sb_exec *x, int nt, size_t *n_out, sb_status *st)
{
	sb_classic_params p;
	sb_classic_params_default(&p);
	sb_classic_geom g;
	sb_classic_geometry(&p, 44100, &g);
	g.channels = 2;
	g.max_frames = nt;
	float *t = malloc(sizeof(float) * ((size_t)g.n_fft + 2 * (size_t)g.bins));
	sb_classic_tables(&p, 44100, g.n_fft, t, t + g.n_fft, t + g.n_fft + g.bins);
	g.win = t;
	g.bass_w = t + g.n_fft;
	g.voice_w = t + g.n_fft + g.bins;
	const size_t n_in = (size_t)(nt + 2 * g.kt + 1) * g.hop * 2;
	*n_out = (size_t)3 * (nt + 1) * g.hop * 2;
	rng = 777u;
	float *in = rnd(n_in, 0.5f), *out = calloc(*n_out, sizeof(float));
	sb_classic_state *s = NULL;
	*st = x->be->classic->create(x->d, &g, &s);
	if (*st == SB_OK) {
		*st = x->be->classic->process(s, nt, in, out);
		x->be->classic->destroy(s);
	}
	free(t);
	free(in);
	return out;
}

int main(int argc, char **argv)
{
	const char *expect = NULL, *expect_kernel = NULL, *expect_path = NULL;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--ops") && i + 1 < argc) {
			only_ops = argv[++i];
		} else if (!strcmp(argv[i], "--expect") && i + 1 < argc) {
			expect = argv[++i];
		} else if (!strcmp(argv[i], "--expect-kernel") && i + 1 < argc) {
			expect_kernel = argv[++i];
		} else if (!strcmp(argv[i], "--expect-path") && i + 1 < argc) {
			expect_path = argv[++i];
		} else if (!strcmp(argv[i], "--bf16")) {
			bf16_mode = 1;
		} else if (!strcmp(argv[i], "--tf32")) {
			tf32_mode = 1;
		} else if (!strcmp(argv[i], "--unsupported") && i + 1 < argc) {
			unsupported_op = argv[++i];
		} else {
			fprintf(stderr, "usage: test_ops [--ops gemm,attention] [--expect PRODUCTS] "
			        "[--expect-kernel NAME] [--expect-path PATH] [--bf16 | --tf32] "
			        "[--unsupported OP]\n");
			return 2;
		}
	}
	sb_device_list *list = NULL;
	if (sb_devices_enumerate(&logger, &list) != SB_OK) {
		fprintf(stderr, "no device list\n");
		return 1;
	}
	/* the registered backends and their devices */
	for (size_t b = 0; sb_backend_at(b); b++) {
		const sb_backend *be = sb_backend_at(b);
		size_t n = 0;
		for (size_t i = 0; i < sb_devices_count(list); i++)
			n += sb_devices_get(list, i)->backend == be;
		printf("backend %s (interface %u): %zu device%s%s\n", be->name, be->api, n,
		       n == 1 ? "" : "s", n ? "" : " here (nothing to test on this machine)");
		if (be->api != SB_BACKEND_API) {
			printf("  FAIL: %s speaks interface %u, the engine %u\n", be->name, be->api,
			       SB_BACKEND_API);
			failures++;
		}
		/* every entry of the table is there (the built-in model's group is optional: a backend
		 * without it runs that model on the CPU) */
		const void *const must[] = {be->enumerate, be->open, be->close, be->lost, be->begin_chunk,
		                            be->row_tile, be->batch, be->alloc, be->wrap, be->release,
		                            be->upload, be->download, be->fetch, be->finish, be->status,
		                            be->clear, be->ops, be->set_profiling, be->profile,
		                            be->describe};
		for (size_t k = 0; k < sizeof must / sizeof must[0]; k++)
			if (!must[k]) {
				printf("  FAIL: %s leaves entry %zu of its table empty\n", be->name, k);
				failures++;
			}
		/* the core in full; an optional group's members where it has them (a device may
		 * still say no through supports(): the cases below ask each device) */
		size_t members = 0;
		for (size_t k = 0; be->ops && sb_op_at(k); k++) {
			const sb_op_info *op = sb_op_at(k);
			if (op->offset == (size_t)-1)
				continue; /* the classic group, tried on each device below */
			members++;
			if (*(void *const *)((const char *)be->ops + op->offset))
				continue;
			if (op->group == SB_OPS_CORE) {
				printf("  FAIL: %s leaves %s, an operation of the core, empty\n", be->name,
				       op->name);
				failures++;
			} else {
				printf("  %s: %s (the %s group) not supported\n", be->name, op->name,
				       sb_op_group_name(op->group));
			}
		}
		if (members != sizeof(sb_ops) / sizeof(void *)) {
			printf("  FAIL: backend/ops.c names %zu operations, sb_ops has %zu\n", members,
			       sizeof(sb_ops) / sizeof(void *));
			failures++;
		}
	}

	results cpu = {{0}, {0}, 0};
	float *cpu_classic = NULL;
	size_t cpu_classic_n = 0;
	for (size_t i = 0; i < sb_devices_count(list); i++) {
		const sb_device *d = sb_devices_get(list, i);
		sb_exec x;
		const sb_open_opts oo = {0, bf16_mode ? SB_PREC_BF16 : SB_PREC_FP32, 0};
		printf("%s: %s [%s]\n", d->id, d->label, d->backend->name);
		if (sb_exec_open(d, &oo, &logger, &x) != SB_OK) {
			printf("  FAIL: %s does not open\n", d->id);
			failures++;
			continue;
		}
		if ((bf16_mode && x.be == sb_backend_cpu() &&
		     strcmp(x.be->precision ? x.be->precision(x.d) : "fp32", "bf16")) ||
		    (tf32_mode && x.be == sb_backend_cpu())) {
			printf("  %-9s runs fp32 (no %s products): left out\n", d->id,
			       tf32_mode ? "tf32" : "bf16");
			sb_exec_close(&x);
			continue;
		}
		arena a = {&x, {0}, 0, 0, 5};
		results mine = {{0}, {0}, 0};
		/* bf16, tf32: the reference alone (the devices' sums run in different orders) */
		run r = {&a, d->id, i == 0 || bf16_mode || tf32_mode ? NULL : &cpu,
		         i == 0 ? &cpu : &mine, 0};
		rng = 12345u;
		/* --expect-* asks it of the devices outside the CPU backend; the CPU's cases run
		 * profiled too: its products by shape must add up to its products */
		const int other = x.be != sb_backend_cpu();
		const int cpu_shapes = !other && x.be->profile_products && wanted("gemm");
		const int profiled = (other && (expect_kernel || expect_path)) || cpu_shapes;
		if (profiled)
			x.be->set_profiling(x.d, 1);
		all_cases(&r);
		if (cpu_shapes) {
			sb_prof_entry p[64];
			const int np = x.be->profile(x.d, p, 64);
			double gemm = 0, by_shape = 0;
			for (int k = 0; k < np; k++)
				if (!strcmp(p[k].name, "gemm"))
					gemm = p[k].flops;
			sb_prof_product pp[256];
			const int npp = x.be->profile_products(x.d, pp, 256);
			for (int k = 0; k < npp; k++)
				by_shape += pp[k].flops;
			printf("  %-9s products by shape: %d shapes, %.4g of the profile's %.4g MFLOP\n",
			       d->id, npp, by_shape / 1e6, gemm / 1e6);
			if (npp <= 0 || !(fabs(by_shape - gemm) <= 1e-9 * gemm)) {
				printf("  FAIL: %s's products by shape do not add up to its products\n", d->id);
				failures++;
			}
		}
		if (other && expect_path) {
			sb_prof_product p[256];
			const int np = x.be->profile_products ? x.be->profile_products(x.d, p, 256) : 0;
			long calls = 0;
			for (int k = 0; k < np; k++)
				if (p[k].path && !strncmp(p[k].path, expect_path, strlen(expect_path))) {
					printf("  %-9s %dx%dx%d b%d through %s\n", d->id, p[k].M, p[k].N, p[k].K,
					       p[k].batch, p[k].path);
					calls += p[k].calls;
				}
			if (!calls) {
				printf("  FAIL: %s ran no product through %s\n", d->id, expect_path);
				failures++;
			}
		}
		if (other && expect_kernel) {
			sb_prof_entry p[64];
			const int np = x.be->profile(x.d, p, 64);
			long calls = 0;
			for (int k = 0; k < np; k++)
				if (!strcmp(p[k].name, expect_kernel))
					calls += p[k].calls;
			printf("  %-9s %ld launch%s of %s\n", d->id, calls, calls == 1 ? "" : "es",
			       expect_kernel);
			if (!calls) {
				printf("  FAIL: %s never ran %s\n", d->id, expect_kernel);
				failures++;
			}
		}
		if (profiled)
			x.be->set_profiling(x.d, 0);
		const char *products = x.be->describe(x.d);
		printf("  %-9s products through %s\n", d->id, products);
		const char *prec = x.be->precision ? x.be->precision(x.d) : "fp32";
		const char *want_prec = bf16_mode ? "bf16" : tf32_mode ? "tf32" : NULL;
		if (want_prec && strcmp(prec, want_prec)) {
			printf("  FAIL: %s ran its products in %s, not %s\n", d->id, prec, want_prec);
			failures++;
		}
		if (expect && other && strncmp(products, expect, strlen(expect))) {
			printf("  FAIL: %s ran its products through %s, not %s\n", d->id, products, expect);
			failures++;
		}
		if (only_ops) {
			for (int k = 0; k < mine.count; k++)
				free(mine.out[k]);
			sb_exec_close(&x);
			continue;
		}
		/* the classic group */
		size_t n = 0;
		sb_status st = SB_OK;
		if (!sb_exec_supports(&x, sb_op_find("classic"))) {
			printf("  %-9s %-16s %-28s %s\n", d->id, "classic", "24 frames, stereo",
			       "not supported: the built-in model runs on the CPU");
			for (int k = 0; k < mine.count; k++)
				free(mine.out[k]);
			sb_exec_close(&x);
			continue;
		}
		float *out = classic_chunk(&x, 24, &n, &st);
		if (i == 0) {
			cpu_classic = out;
			cpu_classic_n = n;
			printf("  %-9s %-16s %-28s %s\n", d->id, "classic", "24 frames, stereo",
			       st == SB_OK ? "ok (the reference)" : sb_status_str(st));
			failures += st != SB_OK;
		} else {
			const double e = st == SB_OK && n == cpu_classic_n ? rel_err_f(out, cpu_classic, n)
			                                                   : INFINITY;
			const int ok = e < 1e-4;
			printf("  %-9s %-16s %-28s cpu %.1e  %s\n", d->id, "classic", "24 frames, stereo",
			       e, ok ? "ok" : "FAIL");
			failures += !ok;
			free(out);
		}
		for (int k = 0; k < mine.count; k++)
			free(mine.out[k]);
		sb_exec_close(&x);
	}
	for (int k = 0; k < cpu.count; k++)
		free(cpu.out[k]);
	free(cpu_classic);
	sb_devices_free(list);
	printf("%d failure(s)\n", failures);
	if (!failures && unsupported_op && !unsupported_seen) {
		printf("SKIP: every device here runs %s\n", unsupported_op);
		return 77;
	}
	return failures ? 1 : 0;
}
