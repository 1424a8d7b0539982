/* The path chosen per shape by measuring the paths on the device itself, for the fp32 matrix
 * products (SB_CL_GEMM unset on a GPU or an accelerator, or "auto" on any device) and attention
 * (SB_CL_ATTENTION the same way), one sb_cl_pick per operation per device: the first times a
 * shape comes, each candidate runs it again into a scratch output on a second queue that
 * records times, ordered by events so the host never waits; the fastest is kept in the kernel
 * cache's folder. README.md here tells why, how, what is kept, checked and not measured.
 * Nothing outside backend/opencl includes this.
 *
 * Threads: as the device (one job at a time).
 */
#ifndef SB_CL_GEMM_PICK_H
#define SB_CL_GEMM_PICK_H

#include "backend/opencl/cl_base.h"

typedef struct sb_cl_pick sb_cl_pick;

/* What a pick measures, and its paths: the products' are cl_blas.h's sb_cl_gemm_kind (own,
 * CLBlast, tiled), attention's cl_device.h's SB_CL_ATT_*. */
typedef enum { SB_CL_PICK_PRODUCTS, SB_CL_PICK_ATTENTION } sb_cl_pick_op;

/* What decides a path: a product's M, N, K, B transposed (0, 1), batch and the operands'
 * alignment (sb_cl_gemm_flags; plus 8 with gemm_bias's epilogue); an attention's query rows,
 * keys, head size, heads, batch items and the alignment of Q, K and O (sb_cl_gemm_flags) */
typedef struct {
	int v[6];
} sb_cl_shape;

/* Reads c's kept decisions for op. 'paths' (bits 1 << path) are the candidates, 'def' the
 * default among them; 'kernels' (the source of the kernels measured) and 'also' (anything else
 * their speed depends on; "" for nothing) are hashed into the file's name. SB_ERR_NOMEM only:
 * a missing or damaged file is not a failure. */
sb_status sb_cl_pick_open(sb_bdev *c, sb_cl_pick_op op, int paths, int def, const char *kernels,
                          const char *also, sb_cl_pick **out);
/* Waits for the timed runs still queued, then frees. */
void sb_cl_pick_free(sb_cl_pick *p);

/* The path for an operation of shape s. *time_now is the set of paths (bit 1 << path) to run
 * timed before it (0 when the shape is decided, when enough runs are under way, or when
 * 'may_time' is 0), and *slot names the shape for sb_cl_pick_timed. */
int sb_cl_pick_path(sb_cl_pick *p, const sb_cl_shape *s, int may_time, int *time_now,
                    int *slot);



/* A path that cannot run on this device (CLBlast refused, a kernel did not build or gave wrong
 * results): never a candidate again, and its shapes take the next default (products: CLBlast,
 * the own kernel, the tiled kernel, the first left). 1 when dropped; 0 when it is the last path
 * left (kept: something has to run the operation) or was gone already. */
int sb_cl_pick_drop(sb_cl_pick *p, int path);

/* Once c's queue has drained: reads the finished runs' times, decides the shapes measured
 * enough, logs and keeps what it decided. */
void sb_cl_pick_collect(sb_bdev *c, sb_cl_pick *p);

/* "measured per shape: CLBlast 1.5.3 for 3, own kernel for 9" (the shapes decided so far), or
 * "measured per shape: none yet, CLBlast 1.5.3 meanwhile" */
const char *sb_cl_pick_describe(const sb_cl_pick *p);
/* A path's name: "CLBlast 1.5.3", "attention in one pass" */
const char *sb_cl_pick_name(const sb_cl_pick *p, int path);
/* How many shapes take 'path' (measured or read from the file; a dropped path's shapes count
 * for the default): for tests and benches */
int sb_cl_pick_count(const sb_cl_pick *p, int path);
/* Timed runs enqueued by this process on p so far: for tests (0 once every shape is kept) */
long sb_cl_pick_runs(const sb_cl_pick *p);

/* Timed runs of one operation on a device that measures it per shape (the dispatchers): run(c,
 * path, out, op) enqueues path 'path' of the operation 'op' on c->q, its output 'out' (a scratch
 * output of 'floats' floats, the operation's own output's first 'lead' skipped to keep its
 * alignment), and returns SB_ERR_UNSUPPORTED when the path refuses the shape (it is dropped), else c's
 * status. Each path of 'want' runs once on the measuring queue, ordered between c's work before
 * and after; a run the device could not take is that shape's loss of the path; one that leaned
 * on an undecided product or a product path's check is not counted; a lost device or host
 * memory is the pass's failure. */
typedef sb_status (*sb_cl_timed_fn)(sb_bdev *c, int path, sb_dv out, const void *op);
void sb_cl_time_paths(sb_bdev *c, sb_cl_pick *p, int slot, int want, size_t lead, size_t floats,
                      sb_cl_timed_fn run, const void *op);

#endif
