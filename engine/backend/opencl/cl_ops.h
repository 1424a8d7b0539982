/* What the files of the OpenCL backend's operations share (cl_ops.c, cl_signal.c,
 * cl_attention.c): launching
 * a kernel of ops.cl, with its arguments set in order and the first error kept; the norms'
 * statistics in slices; and the signal operations, which the sb_ops table names. Nothing
 * outside backend/opencl includes this.
 */
#ifndef SB_CL_OPS_H
#define SB_CL_OPS_H

#include "backend/opencl/cl_backend.h"

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
 * use, cl_gemm_mma.c; the own and tiled kernels' on a measuring device, cl_ops.c): A, B and C
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

/* The first bf16 product on this device (--precision bf16): opens the tensor-core kernel where
 * the device has it (cl_ops.c). Only running out of host memory is a failure. */
sb_status sb_cl_bf16_products(sb_bdev *c);

/* Timed runs of one operation on a device that measures it per shape (cl_gemm_pick.h;
 * cl_ops.c): run(c, path, out, op) enqueues path 'path' of the operation 'op' on c->q, its
 * output 'out' (a scratch output of 'floats' floats, the operation's own output's first
 * 'lead' skipped to keep its alignment), and returns SB_ERR_UNSUPPORTED when the path refuses
 * the shape (it is dropped), else c's status. Each path of 'want' runs once on the measuring
 * queue, ordered between c's work before and after; a run the device could not take is that
 * shape's loss of the path; one that leaned on an undecided product or a product path's check
 * is not counted; a lost device or host memory is the pass's failure. */
typedef sb_status (*sb_cl_timed_fn)(sb_bdev *c, int path, sb_dv out, const void *op);
void sb_cl_time_paths(sb_bdev *c, struct sb_cl_pick *p, int slot, int want, size_t lead,
                      size_t floats, sb_cl_timed_fn run, const void *op);

/* attention (cl_attention.c), set up with the device's operations: how it runs (setup), and
 * whether it is measured per shape, once the products' path is chosen (measure: SB_OK or
 * SB_ERR_NOMEM); its kernels, programs and measured choice released when the device closes
 * (free); and the operation */
void sb_cl_attention_setup(sb_bdev *c, cl_device_type type);
sb_status sb_cl_attention_measure(sb_bdev *c);
void sb_cl_attention_free(sb_bdev *c);
void sb_cl_op_attention(sb_bdev *c, sb_dv q, int ldq, sb_dv k, sb_dv v, int ldkv, int nq, int nk,
                        int heads, int hd, float scale, sb_dv o, int ldo, int batch, long sq,
                        long skv, long so);

/* the norms' statistics in slices (cl_ops.c): returns the slices G of each batch item, or 0
 * when to_stats let it write a norm's mean and rstd to c->stats at once */
int sb_cl_part_stats(sb_bdev *c, sb_dv x, long stride, long n, int batch, int to_stats);

/* the signal operations (cl_signal.c) */
void sb_cl_op_stft(sb_bdev *c, const sb_stft *g, sb_dv x, long xs, int ch, long L, sb_dv w,
                   float scale, sb_dv X);
void sb_cl_op_istft(sb_bdev *c, const sb_stft *g, sb_dv X, int ch, long L, sb_dv w,
                    float scale, int e0, int e1, sb_dv o, long os, int add, sb_dv work);
void sb_cl_op_moments(sb_bdev *c, sb_dv x, size_t n, sb_dv stats);
void sb_cl_op_standardise(sb_bdev *c, sb_dv x, sb_dv o, size_t n, sb_dv stats, float eps,
                          int inverse);
void sb_cl_op_gather(sb_bdev *c, sb_dv x, long ldx, sb_dv o, long ldo, size_t rows, int n,
                     sb_dv ptr, sb_dv idx, sb_dv w);
void sb_cl_op_cmul(sb_bdev *c, sb_dv x, long sa, sb_dv y, sb_dv o, long so, size_t n,
                   int batch);

#endif
