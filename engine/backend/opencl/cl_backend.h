/* Inside the OpenCL backend: the device and buffer structs its files share (cl_backend.c,
 * cl_ops.c, cl_signal.c, cl_attention.c, cl_classic.c, cl_enum.c). Nothing outside backend/opencl includes this.
 */
#ifndef SB_CL_BACKEND_H
#define SB_CL_BACKEND_H

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
	K_MOMENTS_FINAL, K_STANDARDISE, K_GATHER, K_CMUL, K_BIAS_ITEMS, K_GN_GLU_ADD, K_COUNT,
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
	int built;
	cl_program prog;
	cl_kernel k[K_COUNT];
	size_t red_wg;          /* work-group size of the reductions */
	cl_mem stats;           /* per batch item mean and rstd of the norms */
	size_t stats_n;
	cl_mem parts;           /* per slice count, mean and M2 of the norms (norm_part) */
	size_t parts_n;
	int att_way;            /* attention's way (cl_gemm_pick.h's SB_CL_ATT_*): in one pass
	                           (attention.cl), by tiles (attention_tiles.cl) or as two
	                           products around a softmax, the scores in att; when measuring,
	                           what a shape runs until it is measured */
	struct sb_cl_pick *att_pick; /* attention's three ways measured per shape, or NULL */
	int att_checked;        /* attention in one pass checked on this device before its first
	                           use there (measuring): 1 right, -1 wrong or refused, 0 not yet */
	int att_local;          /* attention.cl's tiles through local memory (a GPU) */
	cl_program att_prog[3]; /* attention.cl on a GPU for heads of up to 16, 32 and 64
	                           values, each built at its first attention in one pass (all
	                           three at once where the way is measured, to check them); on a
	                           CPU driver one program, [0], for the three */
	cl_kernel att_k[3];     /* attention_16, _32, _64 */
	int attt_checked;       /* attention by tiles checked here before its first use there
	                           (measuring): 1 right, -1 wrong or refused, 0 not yet */
	cl_program attt_prog[3]; /* attention_tiles.cl for heads of up to 16, 32, 64 values, built
	                            at its first use (all three at once where measured) */
	cl_kernel attt_k[3];
	cl_mem att;             /* attention scores (the products' way, cl_attention.c) */
	size_t att_n;
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
	long prof_calls[P_COUNT];
	double prof_s[P_COUNT], prof_flops[P_COUNT];
	sb_prof_shapes prof_shapes; /* the profile's products by shape and path */
};

extern const sb_ops sb_cl_ops;
extern const sb_classic_ops sb_cl_classic_ops;
extern const char *const sb_cl_op_names[P_COUNT];

/* keeps the first failure of the current forward pass */
void sb_cl_fail(sb_bdev *d, sb_status st);
/* builds ops.cl and its kernels on first use; SB_OK when ready */
sb_status sb_cl_ops_ready(sb_bdev *d);
/* profiling around one step (cl_backend.c) */
double sb_cl_prof_begin(sb_bdev *d);
void sb_cl_prof_end(sb_bdev *d, int id, double t0, double flops);
/* the same around a whole product (its launches, CLBlast's, its epilogue's pass), by shape */
void sb_cl_prof_product(sb_bdev *d, double t0, int M, int N, int K, int tb, int batch, int bias,
                        const char *path);
/* the devices of the ICD loader, for the registry (cl_enum.c) */
sb_status sb_cl_enumerate(const sb_logger *log, sb_device *out, size_t cap, size_t *n);

#endif
