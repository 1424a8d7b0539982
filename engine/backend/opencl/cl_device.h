/* An opened OpenCL device: context, one in-order queue, built kernels (cached on disk), and
 * what the fault-injection switch says about it. One per device per engine, opened lazily by
 * the worker that runs on it; a job runs on it from one thread at a time. Different devices
 * may be opened, used and closed from different threads at once.
 *
 * KERNEL CACHE: the program binary is kept in $XDG_CACHE_HOME/stembridge/ (else
 * $HOME/.cache/stembridge/) under a name hashed from the platform, device name, vendor,
 * driver version, device version, build options and kernel source, so a new driver or new
 * kernels never load a stale binary. Files are written under a temporary name and renamed, so
 * concurrent opens (two identical cards, two processes) never read half a file. A file that
 * fails its checksum or that the driver refuses is logged, ignored and rebuilt. No cache
 * directory: kernels are built every time.
 *
 * FAULT INJECTION (for tests of the fallback ladder; see tests/opencl): the environment
 * variable SB_FAULT_INJECT, read by sb_cl_device_open(), holds comma-separated entries:
 *   opencl:N:open      opening the device whose opencl_index is N fails (SB_ERR_DEVICE,
 *                      "injected").
 *   opencl:N:alloc:K   the K-th allocation through sb_cl_device_alloc() (1-based, counted
 *                      over the opened device's life) fails with SB_ERR_DEVICE_OOM, as if the
 *                      driver said CL_MEM_OBJECT_ALLOCATION_FAILURE; later ones succeed.
 *   opencl:N:alloc:K+  the K-th and every later allocation fail.
 *   opencl:N:lost:K    after the device has processed K chunks (sb_cl_device_count_chunk()
 *                      calls, K >= 0), the next one returns SB_ERR_DEVICE_LOST and the
 *                      device is lost for good.
 *   opencl:N:slow:MS   every kernel launch on the device waits MS milliseconds first: a slow
 *                      device, for the tests of sharing a file among devices.
 *   opencl:N:hold:MS   each chunk's work waits MS milliseconds in the device's queue (behind a
 *                      marker on a user event, from the chunk's first kernel launch) while the
 *                      host enqueues the rest at once: a slow GPU as the host sees one, for the
 *                      tests of a pass nobody waits for. Closing the device ends the holds.
 *   opencl:N:mma       the tensor-core product kernel (cl_gemm_mma.h) is built with two of a
 *                      fragment's registers swapped, so its products are wrong: for the tests
 *                      of its check before first use.
 *   opencl:N:tune-slow:KIND  (KIND clblast, own or tiled: a product path; split, fused or
 *                      tiles: attention's) each timed run of that path while the device
 *                      measures its paths (cl_gemm_pick.h) counts 50 times its measured time:
 *                      a path made slower, for the tests of the choice.
 *   opencl:N:tune-notimes  the measuring queue records no times: a driver that cannot be
 *                      measured that way.
 *   opencl:N:tune-wrong:KIND  (KIND own or tiled: a product path; fused or tiles: attention
 *                      in one pass, or by tiles) the check of that path before its first use
 *                      on a device that measures it (cl_gemm_pick.h) reads one wrong value
 *                      back: a driver that miscompiles it.
 * Entries for other devices or other subsystems (not starting "opencl:") are ignored; a
 * malformed "opencl:" entry is logged as a warning and ignored. Several entries may name the
 * same device (one alloc and one lost rule each; a later entry replaces an earlier one).
 */
#ifndef SB_CL_DEVICE_H
#define SB_CL_DEVICE_H

#include "backend/device.h"
#include "sb_common.h"

typedef struct sb_cl_device sb_cl_device;

/* Attention's ways, by number (the fault injector's tune-slow and tune-wrong name them; the
 * dispatcher, cl_ops.c, measures them per shape): two products around a softmax, in one pass
 * (attention.cl), by tiles (attention_tiles.cl). */
enum { SB_CL_ATT_SPLIT = 0, SB_CL_ATT_FUSED = 1, SB_CL_ATT_TILES = 2 };

/* the devices of the ICD loader, for the registry (cl_enum.c) */
sb_status sb_cl_enumerate(const sb_logger *log, sb_device *out, size_t cap, size_t *n);

/* The injected slowness before a kernel launch (opencl:N:slow:MS waits; opencl:N:hold:MS holds
 * the queue at a chunk's first launch). Called by the device's owner thread. */
void sb_cl_device_delay(sb_cl_device *d);
/* 1 when opencl:N:mma asks for a wrong tensor-core kernel on this device */
int sb_cl_device_fault_mma(const sb_cl_device *d);
/* 1 when opencl:N:tune-slow:KIND names this path (a cl_blas.h sb_cl_gemm_kind, or 4 + an
 * attention way above) */
int sb_cl_device_fault_tune_slow(const sb_cl_device *d, int kind);
/* 1 when opencl:N:tune-notimes asks for a measuring queue without times on this device */
int sb_cl_device_fault_tune_notimes(const sb_cl_device *d);
/* 1 when opencl:N:tune-wrong:KIND names this path (numbered as for tune-slow) */
int sb_cl_device_fault_tune_wrong(const sb_cl_device *d, int kind);

/* Creates the context and queue and builds (or loads from the cache) the kernels.
 * SB_ERR_DEVICE with the reason (and the compiler's log) logged on failure, SB_ERR_NOMEM for
 * host memory. The logger is copied; its fn and user must stay valid until close. Call on a
 * worker thread: a first build can take seconds. */
sb_status sb_cl_device_open(const sb_device *dev, const sb_logger *log, sb_cl_device **out);
void sb_cl_device_close(sb_cl_device *d);
/* Once a device is lost it stays lost for the life of this sb_cl_device. Any thread. */
int sb_cl_device_is_lost(const sb_cl_device *d);
const sb_device *sb_cl_device_props(const sb_cl_device *d);

/* 1 when this open loaded the built-in separator's kernels from the disk cache, 0 when it
 * compiled them (first run, new driver, corrupt or missing cache). */
int sb_cl_device_program_cached(const sb_cl_device *d);
/* The cache file of the built-in separator's kernels, "" when there is no cache directory. */
const char *sb_cl_device_cache_path(const sb_cl_device *d);
/* A file in the kernel cache's folder (KERNEL CACHE above, created when missing) named
 * TAG-HASH.EXT, the hash taken over the platform, device, vendor, driver and device version,
 * options and source: what is kept there for this device and these kernels alone. 0 when there
 * is no cache folder. */
int sb_cl_device_cache_file(const sb_cl_device *d, const char *tag, const char *source,
                            const char *options, const char *ext, char *path, size_t len);

/* Backends call this once at the start of each chunk: SB_ERR_DEVICE_LOST when the device is
 * lost (or an injected loss is due, which marks it lost), else SB_OK and the chunk counts. */
sb_status sb_cl_device_count_chunk(sb_cl_device *d);

#endif
