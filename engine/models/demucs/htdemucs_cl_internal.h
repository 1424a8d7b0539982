/* Inside the OpenCL path of HTDemucs: a net's weights on one device, device buffers, and the
 * kernel launches (htdemucs_cl_ops.c) that the forward pass (htdemucs_cl_forward.c) is made
 * of. The layouts are the CPU path's (htdemucs_internal.h), so both compute the same sums;
 * where the CPU path loops over frequency rows, the device runs one batched product over all
 * rows. The STFT and its inverse stay on the host (fftw): they are 1 % of the work and the
 * transfers around them (input, two output tensors) are small.
 *
 * Threads: one job at a time per state, like the device it runs on.
 */
#ifndef SB_HTDEMUCS_CL_INTERNAL_H
#define SB_HTDEMUCS_CL_INTERNAL_H

#include "models/demucs/htdemucs_internal.h"
#include "backend/opencl/cl_blas.h"
#include "backend/opencl/cl_internal.h"

/* a view into a device buffer: offset in floats */
typedef struct {
	cl_mem m;
	size_t off;
} hd_db;

static inline hd_db hd_at(hd_db b, size_t floats)
{
	b.off += floats;
	return b;
}

/* a frequency-branch tensor on the device, the CPU layout with its zero pad rows */
typedef struct {
	int F, C, T;
	hd_db base;
} hd_dften;

static inline hd_db hd_drow(const hd_dften *x, int f)
{
	return hd_at(x->base, (size_t)(f + HD_FPAD) * (size_t)x->C * (size_t)x->T);
}

enum {
	K_GEMM, K_BIAS_ACT, K_FILL_BIAS, K_BIAS_COLS, K_ADD, K_GLU, K_GLU_ADD, K_NORM_STATS,
	K_GN_APPLY, K_GN_APPLY_TOKENS, K_LAYERNORM, K_SOFTMAX, K_SCALE_ADD, K_TRANSPOSE,
	K_FTEN_TO_TOKENS, K_TOKENS_TO_FTEN, K_ADD_FREQ_EMB, K_IM2COL_TIME, K_CONVTR_GATHER,
	K_COUNT,
	P_UPLOAD = K_COUNT, P_DOWNLOAD, P_COUNT /* profile entries beyond the kernels */
};

typedef struct {
	cl_mem m;
	size_t bytes;
	int used;
} hd_dblock;

#define HD_CL_MAX_BLOCKS 256

struct sb_htdemucs_cl {
	const sb_htdemucs *net;
	sb_cl_device *dev;
	cl_command_queue q;
	const sb_logger *log;
	cl_program prog;
	cl_kernel k[K_COUNT];
	size_t red_wg;      /* work-group size of the reduction kernels */
	cl_mem weights;     /* every weight array of the net, back to back */
	const float **wptr; /* host arrays sorted by address, and their offsets in 'weights' */
	size_t *woff, *wlen;
	int n_w;
	cl_mem stats;       /* per-batch-item mean and rstd of the norms */
	size_t stats_n;
	hd_dblock blocks[HD_CL_MAX_BLOCKS]; /* activation buffers kept between segments */
	int n_blocks;
	sb_status st;       /* first failure of the current forward (later calls do nothing) */
	sb_cl_gemm_kind gemm; /* CLBlast or the own kernel (cl_blas.h) */
	int profiling;      /* sb_htdemucs_cl_set_profiling */
	int prof_calls[P_COUNT];
	double prof_s[P_COUNT], prof_flops[P_COUNT];
};

/* the device copy of a host weight array of the net (or of a place inside one) */
hd_db hd_cl_w(sb_htdemucs_cl *c, const float *host);

/* Activation buffers: reused between segments; freed with the state. */
hd_db hd_cl_alloc(sb_htdemucs_cl *c, size_t floats);
void hd_cl_release(sb_htdemucs_cl *c, hd_db b);
sb_status hd_cl_dften_alloc(sb_htdemucs_cl *c, hd_dften *x, int F, int C, int T);
void hd_cl_dften_free(sb_htdemucs_cl *c, hd_dften *x);
void hd_cl_zero(sb_htdemucs_cl *c, hd_db b, size_t floats);
void hd_cl_upload(sb_htdemucs_cl *c, hd_db dst, const float *src, size_t floats);
void hd_cl_download(sb_htdemucs_cl *c, float *dst, hd_db src, size_t floats);

/* Kernel launches; they record the first failure in c->st and do nothing after one. */
void hd_cl_gemm(sb_htdemucs_cl *c, int M, int N, int K, float alpha, hd_db A, int lda, long sa,
                hd_db B, int ldb, long sb, int tb, float beta, hd_db C, int ldc, long sc,
                int batch);
void hd_cl_bias_act(sb_htdemucs_cl *c, hd_db x, size_t n, int C, int T, const float *b, int act);
void hd_cl_fill_bias(sb_htdemucs_cl *c, hd_db x, size_t n, int C, int T, const float *b);
void hd_cl_bias_cols(sb_htdemucs_cl *c, hd_db x, size_t n, int cols, const float *b, int act);
void hd_cl_add(sb_htdemucs_cl *c, hd_db x, hd_db y, size_t n);
void hd_cl_glu(sb_htdemucs_cl *c, hd_db z, long zstride, hd_db out, long ostride, int CT,
               int batch);
void hd_cl_glu_add(sb_htdemucs_cl *c, hd_db x, long xstride, hd_db z, long zstride, int CT,
                   int T, const float *scale, int batch);
/* GroupNorm(1) of 'batch' items of [C][T] at 'stride', affine per channel, optional GELU */
void hd_cl_groupnorm(sb_htdemucs_cl *c, hd_db x, long stride, int C, int T, int batch,
                     const float *w, const float *b, int act);
/* GroupNorm(1, D) over all n tokens of x [n][D] */
void hd_cl_groupnorm_tokens(sb_htdemucs_cl *c, hd_db x, size_t n, int D, const float *w,
                            const float *b);
void hd_cl_layernorm(sb_htdemucs_cl *c, hd_db x, hd_db out, size_t n, int D, const float *w,
                     const float *b);
void hd_cl_softmax(sb_htdemucs_cl *c, hd_db x, size_t rows, int n);
void hd_cl_scale_add(sb_htdemucs_cl *c, hd_db x, hd_db y, const float *g, size_t n, int D);
void hd_cl_transpose(sb_htdemucs_cl *c, hd_db in, hd_db out, int R, int Cc);
void hd_cl_ften_tokens(sb_htdemucs_cl *c, hd_db x, hd_db out, int Fr, int C, int T, int back);
void hd_cl_add_freq_emb(sb_htdemucs_cl *c, hd_db x, int F, int C, int T, const float *emb);
void hd_cl_im2col_time(sb_htdemucs_cl *c, hd_db x, long lin, int cin, hd_db col, long lout);
void hd_cl_convtr_gather(sb_htdemucs_cl *c, hd_db p, long lin, int cout, long length,
                         const float *b, int act, hd_db out);
/* y [n][out] = x [n][in] W^T + b (nn.Linear), optional GELU */
void hd_cl_linear(sb_htdemucs_cl *c, hd_db x, size_t n, int in, const float *w, const float *b,
                  int out, hd_db y, int act);

/* The transformer on device tokens (htdemucs_cl_forward.c). */
void hd_cl_transformer(sb_htdemucs_cl *c, hd_db x, int Fr, int T1, hd_db xt, int T2);

#endif
