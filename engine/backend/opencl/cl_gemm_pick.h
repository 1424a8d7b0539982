/* The path chosen per shape by measuring the paths on the device itself, for two operations:
 * the fp32 matrix products (what SB_CL_GEMM means when it is unset on a GPU or an accelerator,
 * or "auto" on any device, cl_blas.h) and attention (SB_CL_ATTENTION the same way: in one pass,
 * by tiles or as two products around a softmax, cl_attention.c). One sb_cl_pick per operation per
 * device.
 * Nothing outside backend/opencl includes this.
 *
 * WHY: which of CLBlast, the own kernel (ops.cl) and the tiled kernel (gemm.cl) is fastest
 * depends on the device and on the shape. On an H100 the own kernel ran HTDemucs's products at
 * 19.5 TFLOP/s against CLBlast's 15.1 (bench/gpu/README.md); on PoCL CLBlast runs them 2.5x
 * faster than the own kernel; the RoFormers' larger products and every GPU of AMD or Intel were
 * never measured here. Attention likewise: in one pass it made an H100's BS-RoFormer chunk
 * 0.479 -> 0.405 s, while HTDemucs's long sequences (336 work-groups of 64 rows, fewer than
 * the H100 holds) ran 7.8 ms a segment against 6.0 ms as products. A table of our own would be
 * a guess for each device nobody here owns, so the device measures itself, as cuDNN's
 * benchmark mode does, and keeps what it found.
 *
 * HOW, without a wait: the first times a shape comes (a product's M, N, K, B transposed or not,
 * batch and the operands' alignment; an attention's query rows, keys, head size, heads, batch
 * and alignment), the operation itself runs through the default path (products: CLBlast where
 * the build has it, else the own kernel; attention: what the driver was measured to run best,
 * cl_attention.c). Before it, each candidate path runs the same operation again into a scratch
 * output, on a second queue of the device that records times. Events order the two queues: the
 * candidates start when the pass's work before them has ended, and the pass's next work starts
 * when they have, so each timed run has the device to itself and the host never waits. A run's
 * time lies between two markers around it. The times are read once the pass has drained
 * (sb_cl_pick_collect). A shape whose candidates have RUNS timed runs each takes the one with
 * the fastest run; the default stays unless another is 3 % faster. An undecided shape keeps
 * running the default, so the stems never wait for a decision and only the first passes pay for
 * the extra runs. A timed run of attention's products' way counts only once every product it
 * ran was decided and checked (sb_cl_pick_provisional): until then its time is not the way's
 * own, and its products are measured inside it (on their own measuring queue, ordered after
 * the attention's), so attention's shapes are decided after their products'. A discarded run
 * is tried again, at most RUNS times a pass.
 *
 * KEPT: the decisions go to products-HASH.txt and attention-HASH.txt in the kernel cache's
 * folder (cl_device.h), the hash over the device and its driver, the kernels' sources,
 * SB_CL_TILE, the CLBlast version and the CLBlast tuning applied (and for attention how the
 * products run and its kernels' build); a line of six numbers and the path per shape. It is
 * read at the device's first operation. A writer takes a lock (PATH.lock),
 * reads in what other processes kept since, writes under a temporary name and renames. A
 * damaged file is logged and its shapes measured again; deleting the file measures them again.
 * Without a cache folder the decisions last as long as the process.
 *
 * CHECKED: the own and the tiled kernel may never have run on this device (an AMD or Intel
 * GPU), so each is checked against the host's products before its first use on an opened device
 * (cl_products.c: both layouts of B, aligned rows and not, at both of the tiled kernel's
 * tilings, and nothing written outside C's products), with one wait; a path that gives wrong
 * products or that the driver refuses is left out, with a warning, even where a kept file names
 * it. CLBlast, the default and a tested library, is not checked. Attention in one pass and by tiles are
 * checked the same way (cl_attention.c) before they are measured or used where a kept file
 * names them.
 *
 * NOT MEASURED: a shape whose scratch output would exceed a sixteenth of the device's memory or
 * 1 GiB (it keeps the default; the scratch output is freed once no shape is being measured),
 * and any shape while the device profiles its operations (bench --profile: every operation
 * waits there). A timed run that cannot be enqueued (memory for CLBlast's own buffers, say)
 * leaves that path out of its shape's choice; it fails the pass only when the device is lost
 * or the host's memory ran out (sb_cl_time_paths below).
 * A driver that gives no times for the markers turns the measuring off (logged): its shapes keep
 * the default, and are kept so (a new driver gets a file of its own); a queue or a marker
 * refused turns it off for this process only.
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

/* Timed runs of one operation. begin() orders the measuring queue after c's queue and returns
 * it with a scratch output of 'floats' floats (NULL when the shape cannot be timed: then it is
 * decided for the default). mark() and timed() go around each path's run on that queue; end()
 * orders c's queue after them. */
cl_command_queue sb_cl_pick_begin(sb_bdev *c, sb_cl_pick *p, int slot, size_t floats,
                                  sb_dv *scratch);
void sb_cl_pick_mark(sb_cl_pick *p);
void sb_cl_pick_timed(sb_cl_pick *p, int slot, int path);
void sb_cl_pick_end(sb_bdev *c, sb_cl_pick *p);

/* A timed run of 'path' that could not be enqueued (after sb_cl_pick_mark): the shape is
 * measured without it. */
void sb_cl_pick_failed(sb_cl_pick *p, int slot, int path);
/* A run of 'path' after sb_cl_pick_mark that does not count (its time is not the path's own,
 * or the pass failed): forgotten, and the shape's path timed again, up to RUNS tries a pass. */
void sb_cl_pick_discard(sb_cl_pick *p, int slot, int path);
/* How many times so far a shape not yet decided was given the default (sb_cl_pick_path): a
 * run built on these operations counts only when this did not change during it. */
long sb_cl_pick_provisional(const sb_cl_pick *p);

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
