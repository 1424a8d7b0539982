/* Inside the CPU backend: what its files share (the device's struct for the files of its
 * operations, the signal arithmetic of cpu_signal.c). Nothing outside backend/cpu includes this. */
#ifndef SB_CPU_INTERNAL_H
#define SB_CPU_INTERNAL_H

#include "backend/backend_impl.h"
#include "backend/cpu/gemm.h"
#include "core/thread_pool.h"

extern const sb_classic_ops sb_cpu_classic_ops;


/* the signal operations (cpu_signal.c): SB_ERR_NOMEM when scratch or a plan cannot be made */
sb_status sb_cpu_stft(sb_pool *pool, const sb_stft *g, const float *x, long xs, int ch, long L,
                      const float *w, float scale, float *X);
sb_status sb_cpu_istft(sb_pool *pool, const sb_stft *g, const float *X, int ch, long L,
                       const float *w, float scale, int e0, int e1, float *o, long os, int add,
                       float *work);
void sb_cpu_moments(const float *x, size_t n, float *stats);
void sb_cpu_standardise(sb_pool *pool, const float *x, float *o, size_t n, const float *stats,
                        float eps, int inverse);
void sb_cpu_gather(sb_pool *pool, const float *x, long ldx, float *o, long ldo, size_t rows,
                   int n, const float *ptr, const float *idx, const float *w);
void sb_cpu_cmul(sb_pool *pool, const float *a, long sa, const float *c, float *o, long so,
                 size_t n, int batch);

/* ---- the device, for the files of its operations (cpu_ops.c, cpu_products.c) ---- */

struct sb_bbuf {
	float *p;
	size_t n;
	int owned;
};

/* the operations the profile counts; op_names in cpu_backend.c names them in this order */
enum {
	OP_GEMM, OP_ZERO, OP_COPY, OP_BIAS_COLS, OP_ADD, OP_GLU, OP_GLU_ADD, OP_GROUPNORM,
	OP_GN_TOKENS, OP_LAYERNORM, OP_SOFTMAX, OP_TRANSPOSE, OP_ROWS_TOKENS, OP_ADD_ROW_CHANNEL,
	OP_IM2COL, OP_CONVTR, OP_ATTENTION, OP_UPLOAD,
	OP_DOWNLOAD, OP_RMSNORM, OP_ROPE, OP_HEAD_GATE, OP_STFT, OP_ISTFT, OP_MOMENTS,
	OP_STANDARDISE, OP_GATHER, OP_CMUL, OP_LSTM, OP_COPY_ROWS, OP_PERMUTE, OP_NORM_GROUPS,
	OP_DWCONV, OP_MUL, OP_RMSNORM_SEG, OP_COUNT
};

struct sb_bdev {
	sb_pool *pool;
	int threads;
	int tile;
	sb_status st;
	int profiling;
	long calls[OP_COUNT];
	double secs[OP_COUNT], flops[OP_COUNT];
	sb_prof_shapes shapes;  /* the profile's products by shape and path */
	const sb_logger *log;
	float *att;             /* attention scores, one block per thread */
	size_t att_n;
	int bf16;               /* products take bf16 inputs (asked for, and the CPU has them) */
	sb_gemm_ws **ws;        /* packing buffers, one per worker */
};

static inline float *P(sb_dv v)
{
	return v.buf->p + v.off;
}

/* an operation's start and its count, time and flops when the device is profiling */
static inline double prof_t0(sb_bdev *d)
{
	return d->profiling ? sb_now() : 0.0;
}

static inline void prof_add(sb_bdev *d, int op, double t0, double flops)
{
	if (!d->profiling)
		return;
	d->calls[op]++;
	d->secs[op] += sb_now() - t0;
	d->flops[op] += flops;
}

/* the operations table (cpu_ops.c) and the three operations built on matrix products
 * (cpu_products.c), which it names */
extern const sb_ops sb_cpu_ops;
void sb_cpu_op_gemm(sb_bdev *d, int M, int N, int K, float alpha, sb_dv A, int lda, long sa,
                    sb_dv B, int ldb, long sb, int tb, float beta, sb_dv C, int ldc, long sc,
                    int batch, int batch2, long sa2, long sb2, long sc2);
/* act(p[c] + b[c]) for c < n: a row's bias per column (bias_cols, gemm_bias); cpu_ops.c */
void sb_cpu_bias_cols(float *p, int n, const float *b, int act);
/* the items of per_item values each worth waking a pool thread for (cpu_ops.c) */
int64_t sb_cpu_grain(int64_t per_item);
void sb_cpu_op_gemm_bias(sb_bdev *d, int M, int N, int K, float alpha, sb_dv A, int lda,
                         long sa, sb_dv B, int ldb, long sb, int tb, float beta, sb_dv C, int ldc,
                         long sc, int batch, int batch2, long sa2, long sb2, long sc2,
                         const sb_bias *e);
void sb_cpu_op_attention(sb_bdev *d, sb_dv q, int ldq, sb_dv k, sb_dv v, int ldkv, int nq,
                         int nk, int heads, int hd, float scale, sb_dv o, int ldo, int batch,
                         long sq, long skv, long so, sb_dv g);

/* the LSTM group (cpu_lstm.c) and the convolution nets' group (cpu_convnet.c) */
void sb_cpu_op_lstm(sb_bdev *d, sb_dv x, int n, int S, int D, int H, int dirs, sb_dv wih,
                    sb_dv whh, sb_dv b, sb_dv o, sb_dv work);
void sb_cpu_op_copy_rows(sb_bdev *d, sb_dv dst, long ldd, long ldi, sb_dv src, long lds,
                         long lsi, int rows, long n, int batch);
void sb_cpu_op_permute(sb_bdev *d, sb_dv x, const int dims[4], const long os[4], sb_dv o);
void sb_cpu_op_norm_groups(sb_bdev *d, sb_dv x, const sb_norm_geom *g, sb_dv w, sb_dv b,
                           int act, sb_dv o);
void sb_cpu_op_dwconv(sb_bdev *d, sb_dv x, int rows, int C, int T, int k, sb_dv w, sb_dv b,
                      sb_dv o);
void sb_cpu_op_mul(sb_bdev *d, sb_dv x, sb_dv y, size_t n);

#endif
