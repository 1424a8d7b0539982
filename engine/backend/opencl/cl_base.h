/* The OpenCL backend's base, the one every other file of the folder calls (as ggml-cuda's
 * common.cuh): the device and buffer structs, a kernel's launch with its arguments set in order
 * and the first failure kept, the operations' program (ops.cl), the norms' statistics in
 * slices (a reduction written once), a kernel's check against the host before its first use,
 * and profiling. It calls nothing above it: the kernels (cl_gemm_*.c, cl_attention.c,
 * cl_signal.c, cl_classic.c) sit on it, the dispatcher (cl_ops.c) on them, the backend
 * (cl_backend.c) on top; tests/core/test_layers.sh holds the folder to that order.
 *
 * Threads: like the device, one job at a time.
 */
#ifndef SB_CL_BASE_H
#define SB_CL_BASE_H

#include "backend/backend_impl.h"
#include "backend/opencl/cl_blas.h"
#include "backend/opencl/cl_internal.h"

struct sb_bbuf {
	cl_mem m;
	size_t n;       /* floats */
};

enum {
	K_GEMM, K_ADD, K_GLU, K_NORM_PART, K_NORM_FINAL, K_GN_APPLY,
	K_GN_APPLY_TOKENS, K_LAYERNORM, K_SOFTMAX, K_TRANSPOSE,
	K_FTEN_TO_TOKENS, K_TOKENS_TO_FTEN, K_ADD_FREQ_EMB, K_IM2COL_TIME, K_CONVTR_GATHER,
	K_RMSNORM, K_ROPE, K_HEAD_GATE, K_STFT_FRAMES, K_ISTFT_FRAMES, K_ISTFT_OLA,
	K_MOMENTS_FINAL, K_STANDARDISE, K_GATHER, K_CMUL, K_BIAS_ITEMS, K_GN_GLU_ADD,
	K_COPY_ROWS, K_PERMUTE, K_NG_STATS, K_NG_APPLY, K_DWCONV, K_MUL, K_LSTM_CELL,
	K_RMSNORM_SEG, K_ATT_GATE, K_COUNT,
	K_ATTENTION_16 = K_COUNT, K_ATTENTION_32, K_ATTENTION_64, /* attention.cl's */
	K_ATTENTION_MMA,        /* attention_mma.cl's (bf16 or tf32 on the tensor cores) */
	K_ATTENTION_TILES,      /* attention_tiles.cl's */
	P_UPLOAD, P_DOWNLOAD, P_COPY, P_ZERO, P_FINISH,
	P_COUNT /* profile entries beyond kernels (finish: the waits a model asked for) */
};

struct sb_bdev {
	sb_cl_device *dev;
	cl_command_queue q;
	const sb_logger *log;
	sb_status st;           /* the first failure since clear() */
	/* the operations' program (ops.cl), built at the first operation */
	int built;              /* ops.cl built (sb_cl_ops_ready) */
	int chosen;             /* the products' path and attention's way chosen (cl_ops.c) */
	cl_program prog;
	cl_kernel k[K_COUNT];
	size_t red_wg;          /* work-group size of the reductions */
	cl_mem stats;           /* per batch item mean and rstd of the norms */
	size_t stats_n;
	cl_mem parts;           /* per slice count, mean and M2 of the norms (norm_part) */
	size_t parts_n;
	int att_way;            /* attention's way (cl_gemm_pick.h's SB_CL_ATT_*) until a shape is
	                           measured, or where nothing is: the dispatcher's choice (cl_ops.c) */
	struct sb_cl_pick *att_pick; /* attention's ways measured per shape, or NULL */
	struct sb_cl_attention *attention; /* its kernels and their state (cl_attention.c) */
	cl_mem tw;              /* the FFTs' twiddles, exp(-2 pi i m / 8192), m < 4096 */
	sb_cl_gemm_kind gemm;   /* CLBlast, the own kernel or the tiled one (cl_blas.h); when
	                           measuring, what a shape runs until it is measured */
	struct sb_cl_pick *pick; /* the paths measured per shape (cl_gemm_pick.h), or NULL */
	int paths_tried, paths_ok; /* product paths checked on this device before their first
	                              use there (bit 1 << sb_cl_gemm_kind), and those right */
	struct sb_cl_tiled *tiled; /* the tiled kernel's programs, when it is the choice or a
	                              candidate */
	int want_bf16;          /* bf16 products asked for (open, set_precision) */
	int mma_tried;          /* bf16 was asked once: mma is what it got (NULL: fp32) */
	struct sb_cl_mma *mma;  /* the tensor-core products in bf16 (cl_gemm_mma.h) */
	struct sb_cl_mma *tf32; /* and in tf32, when SB_CL_GEMM=tf32 is the product path */
	cl_program attm_prog[2][3]; /* attention_mma.cl in bf16 [0] and tf32 [1], for heads of 16,
	                               32, 64, built at first use */
	cl_kernel attm_k[2][3];
	int attm_tried[2][3];
	int profiling;
	int wait_way;           /* how a pass's end is waited for (cl_backend.c: wait_way) */
	sb_dev_counts counts;   /* launches, transfers and waits since the device was opened */
	struct cl_fetch *fetch; /* the reads fetch() enqueued since the last pass_end() */
	int n_fetch, cap_fetch;
	int passes_out;         /* passes ended and not yet waited for */
	long enq_at_end;        /* launches + transfers when the last pass ended */
	long prof_calls[P_COUNT];
	double prof_s[P_COUNT], prof_flops[P_COUNT];
	sb_prof_shapes prof_shapes; /* the profile's products by shape and path */
};

extern const char *const sb_cl_op_names[P_COUNT];

/* keeps the first failure of the current forward pass */
void sb_cl_fail(sb_bdev *d, sb_status st);
/* the same for an OpenCL error (sb_cl_status: mapped, logged with 'what') */
void sb_cl_fail_cl(sb_bdev *d, cl_int err, const char *what);
/* builds ops.cl and its kernels on first use; SB_OK when ready */
sb_status sb_cl_ops_ready(sb_bdev *d);
/* ops.cl's source (with gemm_rows.cl's before it), which also names a file of measured paths */
const char *sb_cl_ops_source(void);

/* bytes of src written at byte offset off of m without the host waiting: the data goes through
 * a copy of its own, freed when the write has run (a blocking write where there is no memory for
 * the copy, or no event to free it by); counted as an upload */
void sb_cl_write(sb_bdev *c, cl_mem m, size_t off, const void *src, size_t bytes,
                 const char *what);
/* the host waited for the device (sb_dev_counts.waits) */
static inline void sb_cl_waited(sb_bdev *c)
{
	c->counts.waits++;
}

/* profiling around one step: with it on, the queue is drained before and after */
double sb_cl_prof_begin(sb_bdev *d);
void sb_cl_prof_end(sb_bdev *d, int id, double t0, double flops);
/* the same around a whole product (its launches, CLBlast's, its epilogue's pass), by shape */
void sb_cl_prof_product(sb_bdev *d, double t0, int M, int N, int K, int tb, int batch, int bias,
                        const char *path);

/* ---- a launch ---- */

typedef struct {
	sb_bdev *c;
	cl_kernel k;
	int id;
	double flops; /* for the profile (matrix products) */
	cl_uint i;
	cl_int err;
} kargs;

static inline kargs args(sb_bdev *c, int kernel)
{
	if (sb_cl_ops_ready(c) != SB_OK) {
		kargs none = {c, NULL, kernel, 0.0, 0, CL_INVALID_KERNEL};
		return none;
	}
	kargs a = {c, c->k[kernel], kernel, 0.0, 0, CL_SUCCESS};
	return a;
}

static inline void set(kargs *a, size_t size, const void *p)
{
	if (a->err == CL_SUCCESS)
		a->err = clSetKernelArg(a->k, a->i, size, p);
	a->i++;
}

static inline void a_db(kargs *a, sb_dv b)
{
	cl_ulong off = b.off;
	cl_mem m = b.buf ? b.buf->m : NULL;
	set(a, sizeof m, &m);
	set(a, sizeof off, &off);
}

static inline void a_i32(kargs *a, int v)
{
	cl_int x = v;
	set(a, sizeof x, &x);
}

static inline void a_i64(kargs *a, long v)
{
	cl_long x = v;
	set(a, sizeof x, &x);
}

static inline void a_u64(kargs *a, size_t v)
{
	cl_ulong x = v;
	set(a, sizeof x, &x);
}

static inline void a_f32(kargs *a, float v)
{
	cl_float x = v;
	set(a, sizeof x, &x);
}

static inline void a_mem(kargs *a, cl_mem m)
{
	set(a, sizeof m, &m);
}

/* Enqueue with global sizes rounded up to the local ones (NULL local: 1-D, 256). */
/* The arguments both product kernels (ops.cl's gemm, gemm.cl's) begin with, in their order:
 * C = alpha * A * op(B) + beta * C over a batch of strided items (backend.h: gemm). */
static inline void a_gemm(kargs *a, int M, int N, int K, float alpha, sb_dv A, int lda, long sa,
                          sb_dv B, int ldb, long sb, int tb, float beta, sb_dv C, int ldc,
                          long sc)
{
	a_i32(a, M);
	a_i32(a, N);
	a_i32(a, K);
	a_f32(a, alpha);
	a_db(a, A);
	a_i32(a, lda);
	a_i64(a, sa);
	a_db(a, B);
	a_i32(a, ldb);
	a_i64(a, sb);
	a_i32(a, tb);
	a_f32(a, beta);
	a_db(a, C);
	a_i32(a, ldc);
	a_i64(a, sc);
}

/* The arguments the product kernels end with: gemm_bias's epilogue (gemm_rows.cl's epi), e
 * NULL for none (C's buffer then stands in for the bias, which is never read) */
static inline void a_ep(kargs *a, const sb_bias *e, sb_dv C)
{
	a_db(a, e ? e->b : C);
	a_i64(a, e ? e->bs : 0);
	a_i32(a, e ? (e->cols ? 2 : 1) | e->act << 2 : 0);
}

void sb_cl_run(kargs *a, cl_uint dims, const size_t *global, const size_t *local);

/* The operands of a product kernel's check against the host (the tensor cores' before first
 * use, cl_gemm_mma.c; the own and tiled kernels' on a measuring device, cl_products.c): A, B and C
 * of na, nb and nc floats on the host and on the device, A and B filled with the same values in
 * [-1, 1) from 'seed' and uploaded (blocking), C on the device only. SB_OK, SB_ERR_NOMEM, or
 * the device's status ('what' names the upload). close() frees what open() got, even on failure. */
typedef struct {
	float *a, *b, *c;
	sb_bbuf A, B, C;
} sb_cl_check;
sb_status sb_cl_check_open(sb_bdev *c, size_t na, size_t nb, size_t nc, unsigned seed,
                           const char *what, sb_cl_check *k);
void sb_cl_check_close(sb_cl_check *k);
/* After a checked kernel's launches: a launch the driver refused (c's failure, other than a
 * lost device; CL_OUT_OF_RESOURCES for a kernel's registers reads as out of memory) is that
 * kernel's failure, SB_ERR_DEVICE with c cleared, not the device's; then n floats of m are read
 * into dst (blocking; 'what' names the read). */
sb_status sb_cl_check_result(sb_bdev *c, cl_mem m, size_t n, float *dst, const char *what);

/* c->stats with room for the mean and rstd of at least items norms (c->st set when the device
 * has none) */
void sb_cl_need_stats(sb_bdev *c, size_t items);
/* the norms' statistics in slices: returns the slices G of each batch item, or 0 when to_stats
 * let it write a norm's mean and rstd to c->stats at once */
int sb_cl_part_stats(sb_bdev *c, sb_dv x, long stride, long n, int batch, int to_stats);

/* gemm.cl's and mma.cl's flags: 1, 2, 4 when A, B, C have every row 16-byte aligned in every
 * batch item (float4 reads and writes); a field of a measured shape's key (cl_gemm_pick.h) */
int sb_cl_gemm_flags(sb_dv A, int lda, long sa, sb_dv B, int ldb, long sb, sb_dv C, int ldc,
                     long sc);

#endif
