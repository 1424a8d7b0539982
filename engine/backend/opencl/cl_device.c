/* An opened OpenCL device (cl_device.h, cl_internal.h): context, one in-order queue, the
 * built-in separator's program through a disk cache, allocations and error mapping, and the
 * SB_FAULT_INJECT switch that the fallback tests use.
 *
 * Threads: open/close run on the worker that owns the device. Nothing here is global: each
 * device carries its own counters and flags (atomics, because the scheduler may ask
 * is_lost() from another thread), and the cache is shared only through the file system, where
 * rename() makes each file appear whole.
 */
#include "backend/opencl/cl_blas.h" /* the product paths named by tune-slow */
#include "backend/opencl/cl_internal.h"

#include "core/fault.h"
#include "io/cache_file.h"
#include "io/temp_file.h"

#include "classic_cl.h" /* generated from classic.cl: the built-in model's kernels */

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static pthread_mutex_t build_lock = PTHREAD_MUTEX_INITIALIZER;

#define CACHE_MAGIC "SBCLBIN1"
#define CACHE_MAX_BYTES ((size_t)512 << 20) /* no real program binary is near this */
#define BUILD_LOG_MAX_LINES 200

struct sb_cl_device {
	sb_device props;
	sb_logger log;
	cl_device_id dev;
	cl_context ctx;
	cl_command_queue queue;
	cl_program classic;
	int classic_cached;
	char cache_path[4096];
	atomic_int lost;
	atomic_long allocs;    /* allocations asked of sb_cl_device_alloc so far */
	atomic_long chunks;    /* chunks counted by sb_cl_device_count_chunk so far */
	long fault_alloc;      /* K of "alloc:K", 0 = no allocation fault */
	int fault_alloc_plus;  /* "alloc:K+" */
	long fault_lost;       /* K of "lost:K", -1 = no loss */
	long fault_slow_ms;    /* MS of "slow:MS", 0 = none */
	long fault_hold_ms;    /* MS of "hold:MS", 0 = none */
	int fault_mma;         /* "mma": the tensor-core kernel built wrong */
	int fault_tune;        /* the measured paths' faults: "tune-slow:KIND" bit KIND (an
	                          sb_cl_gemm_kind; attention's 4 + its path), "tune-notimes" bit 8,
	                          "tune-wrong:KIND" 16 + the same */
	int hold_armed;        /* a pass began: its first launch holds the queue (owner thread) */
	struct {               /* the held queue's timer: its own thread, started at the first hold */
		pthread_t thread;
		int started, cut;  /* cut: the device closes, every hold ends now */
		pthread_mutex_t lock;
		pthread_cond_t cond;
		cl_event ev[8];    /* user events the queue waits behind, in order, and when each ends */
		struct timespec due[8];
		int n;
	} hold;
};

const char *sb_cl_error_name(cl_int err)
{
	switch (err) {
#define E(x) case x: return #x
	E(CL_SUCCESS);
	E(CL_DEVICE_NOT_FOUND);
	E(CL_DEVICE_NOT_AVAILABLE);
	E(CL_COMPILER_NOT_AVAILABLE);
	E(CL_MEM_OBJECT_ALLOCATION_FAILURE);
	E(CL_OUT_OF_RESOURCES);
	E(CL_OUT_OF_HOST_MEMORY);
	E(CL_PROFILING_INFO_NOT_AVAILABLE);
	E(CL_MEM_COPY_OVERLAP);
	E(CL_IMAGE_FORMAT_MISMATCH);
	E(CL_IMAGE_FORMAT_NOT_SUPPORTED);
	E(CL_BUILD_PROGRAM_FAILURE);
	E(CL_MAP_FAILURE);
	E(CL_MISALIGNED_SUB_BUFFER_OFFSET);
	E(CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST);
	E(CL_COMPILE_PROGRAM_FAILURE);
	E(CL_LINKER_NOT_AVAILABLE);
	E(CL_LINK_PROGRAM_FAILURE);
	E(CL_DEVICE_PARTITION_FAILED);
	E(CL_KERNEL_ARG_INFO_NOT_AVAILABLE);
	E(CL_INVALID_VALUE);
	E(CL_INVALID_DEVICE_TYPE);
	E(CL_INVALID_PLATFORM);
	E(CL_INVALID_DEVICE);
	E(CL_INVALID_CONTEXT);
	E(CL_INVALID_QUEUE_PROPERTIES);
	E(CL_INVALID_COMMAND_QUEUE);
	E(CL_INVALID_HOST_PTR);
	E(CL_INVALID_MEM_OBJECT);
	E(CL_INVALID_IMAGE_FORMAT_DESCRIPTOR);
	E(CL_INVALID_IMAGE_SIZE);
	E(CL_INVALID_SAMPLER);
	E(CL_INVALID_BINARY);
	E(CL_INVALID_BUILD_OPTIONS);
	E(CL_INVALID_PROGRAM);
	E(CL_INVALID_PROGRAM_EXECUTABLE);
	E(CL_INVALID_KERNEL_NAME);
	E(CL_INVALID_KERNEL_DEFINITION);
	E(CL_INVALID_KERNEL);
	E(CL_INVALID_ARG_INDEX);
	E(CL_INVALID_ARG_VALUE);
	E(CL_INVALID_ARG_SIZE);
	E(CL_INVALID_KERNEL_ARGS);
	E(CL_INVALID_WORK_DIMENSION);
	E(CL_INVALID_WORK_GROUP_SIZE);
	E(CL_INVALID_WORK_ITEM_SIZE);
	E(CL_INVALID_GLOBAL_OFFSET);
	E(CL_INVALID_EVENT_WAIT_LIST);
	E(CL_INVALID_EVENT);
	E(CL_INVALID_OPERATION);
	E(CL_INVALID_GL_OBJECT);
	E(CL_INVALID_BUFFER_SIZE);
	E(CL_INVALID_MIP_LEVEL);
	E(CL_INVALID_GLOBAL_WORK_SIZE);
	E(CL_INVALID_PROPERTY);
	E(CL_INVALID_IMAGE_DESCRIPTOR);
	E(CL_INVALID_COMPILER_OPTIONS);
	E(CL_INVALID_LINKER_OPTIONS);
	E(CL_INVALID_DEVICE_PARTITION_COUNT);
#undef E
	case -9999: return "NVIDIA -9999 (illegal memory access in a kernel)";
	default: return "unknown OpenCL error";
	}
}

static void mark_lost(sb_cl_device *d)
{
	if (d)
		atomic_store(&d->lost, 1);
}

sb_status sb_cl_status(sb_cl_device *d, cl_int err, const char *what)
{
	sb_status st;
	switch (err) {
	case CL_SUCCESS:
		return SB_OK;
	case CL_MEM_OBJECT_ALLOCATION_FAILURE:
	case CL_OUT_OF_RESOURCES:
	case CL_OUT_OF_HOST_MEMORY:
		st = SB_ERR_DEVICE_OOM;
		break;
	case CL_DEVICE_NOT_AVAILABLE:
	case CL_INVALID_COMMAND_QUEUE:
	case CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST:
	case -9999:
		st = SB_ERR_DEVICE_LOST;
		break;
	default:
		st = SB_ERR_DEVICE;
		break;
	}
	if (!d)
		return st;
	if (st == SB_ERR_DEVICE_LOST)
		mark_lost(d);
	sb_log(&d->log, st == SB_ERR_DEVICE_OOM ? SB_LOG_WARNING : SB_LOG_ERROR,
	       "OpenCL %s (%s): %s failed: %s (%d)%s", d->props.id, d->props.name, what,
	       sb_cl_error_name(err), (int)err,
	       st == SB_ERR_DEVICE_LOST ? "; the device is lost for this session" : "");
	return st;
}

/* ---- fault injection ---------------------------------------------------------------- */

static int parse_long(const char *s, long *v, const char **end)
{
	char *e = NULL;
	if (*s < '0' || *s > '9')
		return 0;
	errno = 0;
	*v = strtol(s, &e, 10);
	if (errno || e == s)
		return 0;
	*end = e;
	return 1;
}

/* Reads SB_FAULT_INJECT (cl_device.h has the grammar) for this device. Returns 1 when opening
 * must fail. */
static int parse_faults(sb_cl_device *d)
{
	int open_fails = 0;
	char entries[32][128];
	const int n_entries = sb_fault_entries("opencl:", entries, 32);
	for (int i = 0; i < n_entries; i++) {
		const char *e = entries[i], *p = e;
		long n = 0, k = 0;
		int ok = parse_long(p, &n, &p) && *p++ == ':';
		int is_open = 0, is_alloc = 0, is_lost = 0, is_slow = 0, is_hold = 0, is_mma = 0;
		int plus = 0, tune = 0;
		if (ok) {
			if (!strcmp(p, "open")) {
				is_open = 1;
			} else if (!strcmp(p, "mma")) {
				is_mma = 1;
			} else if (!strcmp(p, "tune-notimes")) {
				tune = 1 << 8; /* beyond the paths' bits */
			} else if (!strncmp(p, "tune-wrong:", 11)) {
				p += 11; /* bits 16 + sb_cl_gemm_kind */
				tune = !strcmp(p, "own") ? 1 << (16 + SB_CL_GEMM_OWN)
				            : !strcmp(p, "tiled") ? 1 << (16 + SB_CL_GEMM_TILED)
				            : !strcmp(p, "fused") ? 1 << (16 + 4 + SB_CL_ATT_FUSED)
				            : !strcmp(p, "tiles") ? 1 << (16 + 4 + SB_CL_ATT_TILES) : 0;
				ok = tune != 0;
			} else if (!strncmp(p, "tune-slow:", 10)) {
				p += 10; /* the names of cl_blas.h's sb_cl_gemm_kind, then attention's paths */
				tune = !strcmp(p, "own") ? 1 << SB_CL_GEMM_OWN
				            : !strcmp(p, "clblast") ? 1 << SB_CL_GEMM_CLBLAST
				            : !strcmp(p, "tiled") ? 1 << SB_CL_GEMM_TILED
				            : !strcmp(p, "split") ? 1 << (4 + SB_CL_ATT_SPLIT)
				            : !strcmp(p, "fused") ? 1 << (4 + SB_CL_ATT_FUSED)
				            : !strcmp(p, "tiles") ? 1 << (4 + SB_CL_ATT_TILES) : 0;
				ok = tune != 0;
			} else if (!strncmp(p, "alloc:", 6)) {
				p += 6;
				ok = parse_long(p, &k, &p) && k >= 1;
				if (ok && *p == '+') {
					plus = 1;
					p++;
				}
				ok = ok && *p == '\0';
				is_alloc = ok;
			} else if (!strncmp(p, "lost:", 5)) {
				p += 5;
				ok = parse_long(p, &k, &p) && *p == '\0';
				is_lost = ok;
			} else if (!strncmp(p, "slow:", 5)) {
				p += 5;
				ok = parse_long(p, &k, &p) && *p == '\0' && k >= 0 && k <= 60000;
				is_slow = ok;
			} else if (!strncmp(p, "hold:", 5)) {
				p += 5;
				ok = parse_long(p, &k, &p) && *p == '\0' && k >= 0 && k <= 600000;
				is_hold = ok;
			} else {
				ok = 0;
			}
		}
		if (!ok) {
			sb_log(&d->log, SB_LOG_WARNING,
			       "SB_FAULT_INJECT: ignoring 'opencl:%s' (want opencl:N:open, opencl:N:alloc:K[+], "
			       "opencl:N:lost:K, opencl:N:slow:MS, opencl:N:hold:MS, opencl:N:mma, "
			       "opencl:N:tune-slow:clblast|own|tiled|split|fused|tiles, opencl:N:tune-notimes "
			       "or opencl:N:tune-wrong:own|tiled|fused|tiles)", e);
			continue;
		}
		if (n != d->props.index)
			continue;
		if (is_open)
			open_fails = 1;
		if (is_alloc) {
			d->fault_alloc = k;
			d->fault_alloc_plus = plus;
		}
		if (is_lost)
			d->fault_lost = k;
		if (is_slow)
			d->fault_slow_ms = k;
		if (is_hold)
			d->fault_hold_ms = k;
		if (is_mma)
			d->fault_mma = 1;
		d->fault_tune |= tune;
		sb_log(&d->log, SB_LOG_INFO, "SB_FAULT_INJECT: %s will fail: opencl:%s", d->props.id,
		       e);
	}
	return open_fails;
}

/* The held queue's timer thread: ends each hold when it is due, or all of them at once when
 * the device closes. */
static void *hold_main(void *arg)
{
	sb_cl_device *d = arg;
	pthread_mutex_lock(&d->hold.lock);
	while (!d->hold.cut || d->hold.n > 0) {
		if (d->hold.n == 0) {
			pthread_cond_wait(&d->hold.cond, &d->hold.lock);
			continue;
		}
		if (!d->hold.cut &&
		    pthread_cond_timedwait(&d->hold.cond, &d->hold.lock, &d->hold.due[0]) != ETIMEDOUT)
			continue; /* woken: look again */
		cl_event ev = d->hold.ev[0];
		d->hold.n--;
		memmove(d->hold.ev, d->hold.ev + 1, sizeof d->hold.ev[0] * (size_t)d->hold.n);
		memmove(d->hold.due, d->hold.due + 1, sizeof d->hold.due[0] * (size_t)d->hold.n);
		pthread_mutex_unlock(&d->hold.lock);
		clSetUserEventStatus(ev, CL_COMPLETE);
		clReleaseEvent(ev);
		pthread_mutex_lock(&d->hold.lock);
	}
	pthread_mutex_unlock(&d->hold.lock);
	return NULL;
}

/* opencl:N:hold:MS: the first launch of a pass puts a marker in the queue that waits for a
 * user event the timer thread sets MS later, so the pass's work sits in the queue while the
 * host enqueues the rest at full speed: a slow GPU as the host sees one */
static void hold_queue(sb_cl_device *d)
{
	cl_int err = CL_SUCCESS;
	cl_event ev = clCreateUserEvent(d->ctx, &err);
	if (err != CL_SUCCESS)
		return;
	const struct timespec due = sb_deadline(CLOCK_REALTIME, d->fault_hold_ms);
	/* the marker first: once the timer thread has the event it may end and release it */
	if (clEnqueueMarkerWithWaitList(d->queue, 1, &ev, NULL) != CL_SUCCESS) {
		clSetUserEventStatus(ev, CL_COMPLETE);
		clReleaseEvent(ev);
		return;
	}
	clFlush(d->queue);
	pthread_mutex_lock(&d->hold.lock);
	if (!d->hold.started)
		d->hold.started = pthread_create(&d->hold.thread, NULL, hold_main, d) == 0;
	const int room = d->hold.started && d->hold.n < 8;
	if (room) {
		d->hold.ev[d->hold.n] = ev;
		d->hold.due[d->hold.n++] = due;
		pthread_cond_signal(&d->hold.cond);
	}
	pthread_mutex_unlock(&d->hold.lock);
	if (!room) {
		clSetUserEventStatus(ev, CL_COMPLETE);
		clReleaseEvent(ev);
		return;
	}
	/* what a test waits for before it cancels or races the held pass */
	sb_log(&d->log, SB_LOG_WARNING, "SB_FAULT_INJECT: %s holds a pass %ld ms in its queue",
	       d->props.id, d->fault_hold_ms);
}

int sb_cl_device_fault_mma(const sb_cl_device *d)
{
	return d->fault_mma;
}

int sb_cl_device_fault_tune_slow(const sb_cl_device *d, int kind)
{
	return (d->fault_tune >> kind) & 1;
}

int sb_cl_device_fault_tune_notimes(const sb_cl_device *d)
{
	return (d->fault_tune >> 8) & 1;
}

int sb_cl_device_fault_tune_wrong(const sb_cl_device *d, int kind)
{
	return (d->fault_tune >> (16 + kind)) & 1;
}

void sb_cl_device_delay(sb_cl_device *d)
{
	if (d && d->hold_armed) {
		d->hold_armed = 0;
		hold_queue(d);
	}
	if (d && d->fault_slow_ms > 0) {
		const struct timespec ts = {d->fault_slow_ms / 1000, (d->fault_slow_ms % 1000) * 1000000};
		nanosleep(&ts, NULL);
	}
}

sb_status sb_cl_device_count_chunk(sb_cl_device *d)
{
	if (!d)
		return SB_ERR_INVALID;
	if (atomic_load(&d->lost))
		return SB_ERR_DEVICE_LOST;
	long done = atomic_fetch_add(&d->chunks, 1);
	d->hold_armed = d->fault_hold_ms > 0;
	if (d->fault_lost >= 0 && done >= d->fault_lost) {
		mark_lost(d);
		sb_log(&d->log, SB_LOG_ERROR,
		       "OpenCL %s (%s): device lost after %ld chunks (injected by SB_FAULT_INJECT)",
		       d->props.id, d->props.name, done);
		return SB_ERR_DEVICE_LOST;
	}
	return SB_OK;
}

sb_status sb_cl_device_alloc(sb_cl_device *d, size_t bytes, cl_mem_flags flags, cl_mem *out)
{
	*out = NULL;
	if (atomic_load(&d->lost))
		return SB_ERR_DEVICE_LOST;
	long nth = atomic_fetch_add(&d->allocs, 1) + 1;
	if (d->fault_alloc > 0 &&
	    (nth == d->fault_alloc || (d->fault_alloc_plus && nth > d->fault_alloc))) {
		sb_log(&d->log, SB_LOG_WARNING,
		       "OpenCL %s (%s): allocation %ld of %zu bytes failed: "
		       "CL_MEM_OBJECT_ALLOCATION_FAILURE (injected by SB_FAULT_INJECT)",
		       d->props.id, d->props.name, nth, bytes);
		return SB_ERR_DEVICE_OOM;
	}
	if (bytes == 0)
		bytes = 1;
	if (d->props.max_alloc && bytes > d->props.max_alloc) {
		sb_log(&d->log, SB_LOG_WARNING,
		       "OpenCL %s (%s): %zu bytes exceed the device's largest allocation (%llu)",
		       d->props.id, d->props.name, bytes, (unsigned long long)d->props.max_alloc);
		return SB_ERR_DEVICE_OOM;
	}
	cl_int err = CL_SUCCESS;
	cl_mem m = clCreateBuffer(d->ctx, flags, bytes, NULL, &err);
	if (err != CL_SUCCESS || !m) {
		if (m)
			clReleaseMemObject(m);
		return sb_cl_status(d, err != CL_SUCCESS ? err : CL_MEM_OBJECT_ALLOCATION_FAILURE,
		                    "allocating a buffer");
	}
	*out = m;
	return SB_OK;
}

/* ---- kernel cache ------------------------------------------------------------------- */

static uint64_t fnv1a(uint64_t h, const void *data, size_t len)
{
	const unsigned char *p = data;
	for (size_t i = 0; i < len; i++) {
		h ^= p[i];
		h *= 0x100000001b3ull;
	}
	return h;
}

static uint64_t fnv1a_str(uint64_t h, const char *s)
{
	return fnv1a(h, s, strlen(s) + 1); /* the NUL keeps "ab"+"c" apart from "a"+"bc" */
}

static void dev_str(cl_device_id dev, cl_device_info what, char *buf, size_t len)
{
	buf[0] = '\0';
	if (clGetDeviceInfo(dev, what, len - 1, buf, NULL) != CL_SUCCESS)
		buf[0] = '\0';
	buf[len - 1] = '\0';
}

/* The cache file for (device, driver, kernels, options); 0 when there is no cache dir. */
int sb_cl_device_cache_file(const sb_cl_device *d, const char *tag, const char *source,
                            const char *options, const char *ext, char *path, size_t len)
{
	char dir[3800], version[256];
	if (!sb_cache_dir(dir, sizeof dir))
		return 0;
	dev_str(d->dev, CL_DEVICE_VERSION, version, sizeof version);
	uint64_t h = 0xcbf29ce484222325ull;
	h = fnv1a_str(h, "stembridge kernel cache v1");
	h = fnv1a_str(h, d->props.platform);
	h = fnv1a_str(h, d->props.name);
	h = fnv1a_str(h, d->props.vendor);
	h = fnv1a_str(h, d->props.driver);
	h = fnv1a_str(h, version);
	h = fnv1a_str(h, options);
	h = fnv1a_str(h, source);
	int n = snprintf(path, len, "%s/%s-%016llx.%s", dir, tag, (unsigned long long)h, ext);
	return n > 0 && (size_t)n < len;
}

/* File layout: magic, payload size, FNV-1a of the payload, payload (the driver's binary).
 * The checksum catches truncated or damaged files before the driver sees them. */
typedef struct {
	char magic[8];
	uint64_t size;
	uint64_t sum;
} cache_header;

static unsigned char *read_cache(const char *path, size_t *size, const char **why)
{
	FILE *f = fopen(path, "rb");
	*why = NULL;
	if (!f)
		return NULL; /* no file yet: not worth a message */
	cache_header hd;
	unsigned char *bin = NULL;
	if (fread(&hd, sizeof hd, 1, f) != 1 || memcmp(hd.magic, CACHE_MAGIC, 8) != 0) {
		*why = "not a kernel cache file";
	} else if (hd.size == 0 || hd.size > CACHE_MAX_BYTES) {
		*why = "bad size";
	} else if (!(bin = malloc(hd.size))) {
		*why = "out of host memory";
	} else if (fread(bin, 1, hd.size, f) != hd.size || fgetc(f) != EOF) {
		*why = "truncated or too long";
	} else if (fnv1a(0xcbf29ce484222325ull, bin, hd.size) != hd.sum) {
		*why = "checksum mismatch";
	}
	fclose(f);
	if (*why) {
		free(bin);
		return NULL;
	}
	*size = hd.size;
	return bin;
}

static void write_cache(sb_cl_device *d, cl_program prog, const char *path)
{
	size_t size = 0;
	if (clGetProgramInfo(prog, CL_PROGRAM_BINARY_SIZES, sizeof size, &size, NULL) != CL_SUCCESS ||
	    size == 0 || size > CACHE_MAX_BYTES)
		return; /* the driver offers no binary: build from source every time */
	unsigned char *bin = malloc(size);
	if (!bin)
		return;
	unsigned char *bins[1] = {bin};
	if (clGetProgramInfo(prog, CL_PROGRAM_BINARIES, sizeof bins, bins, NULL) != CL_SUCCESS) {
		free(bin);
		return;
	}
	cache_header hd;
	memcpy(hd.magic, CACHE_MAGIC, 8);
	hd.size = size;
	hd.sum = fnv1a(0xcbf29ce484222325ull, bin, size);
	/* A unique temporary name in the same directory, then rename(): a reader sees the old
	 * file or the new one, never a partial write, even with two identical devices opening at
	 * once. */
	char dir[4096];
	sb_dir_of(path, dir, sizeof dir);
	sb_temp_clean_stale(dir, &d->log); /* what a process killed mid-write left */
	sb_temp t;
	int ok = sb_temp_create(path, &t) == 0;
	if (ok) {
		ok = write(t.fd, &hd, sizeof hd) == (ssize_t)sizeof hd &&
		     write(t.fd, bin, size) == (ssize_t)size;
		if (ok && rename(t.path, path) == 0)
			t.path[0] = '\0';
		else
			ok = 0;
		sb_temp_discard(&t);
	}
	free(bin);
	if (!ok)
		sb_log(&d->log, SB_LOG_WARNING, "OpenCL %s: cannot write the kernel cache %s: %s",
		       d->props.id, path, strerror(errno));
	else
		sb_log(&d->log, SB_LOG_DEBUG, "OpenCL %s: kernels cached in %s", d->props.id, path);
}

/* The compiler's log, line by line through the logger (sb_log has a bounded buffer). */
static void log_build_log(sb_cl_device *d, cl_program prog, sb_log_level level)
{
	size_t len = 0;
	if (clGetProgramBuildInfo(prog, d->dev, CL_PROGRAM_BUILD_LOG, 0, NULL, &len) != CL_SUCCESS ||
	    len <= 1)
		return;
	char *text = malloc(len + 1);
	if (!text)
		return;
	if (clGetProgramBuildInfo(prog, d->dev, CL_PROGRAM_BUILD_LOG, len, text, NULL) == CL_SUCCESS) {
		text[len] = '\0';
		int lines = 0;
		char *save = NULL;
		for (char *l = strtok_r(text, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
			if (++lines > BUILD_LOG_MAX_LINES) {
				sb_log(&d->log, level, "  (build log cut after %d lines)", BUILD_LOG_MAX_LINES);
				break;
			}
			sb_log(&d->log, level, "  %s", l);
		}
	}
	free(text);
}

static cl_program load_cached(sb_cl_device *d, const char *path, const char *options)
{
	size_t size = 0;
	const char *why = NULL;
	unsigned char *bin = read_cache(path, &size, &why);
	if (!bin) {
		if (why)
			sb_log(&d->log, SB_LOG_WARNING,
			       "OpenCL %s: ignoring the kernel cache %s (%s); rebuilding", d->props.id, path,
			       why);
		return NULL;
	}
	cl_int err = CL_SUCCESS, bst = CL_SUCCESS;
	const unsigned char *bins[1] = {bin};
	cl_program prog = clCreateProgramWithBinary(d->ctx, 1, &d->dev, &size, bins, &bst, &err);
	free(bin);
	if (err == CL_SUCCESS && bst == CL_SUCCESS)
		err = clBuildProgram(prog, 1, &d->dev, options, NULL, NULL);
	if (err != CL_SUCCESS || bst != CL_SUCCESS) {
		sb_log(&d->log, SB_LOG_WARNING,
		       "OpenCL %s: the driver refused the cached kernels %s (%s); rebuilding",
		       d->props.id, path, sb_cl_error_name(err != CL_SUCCESS ? err : bst));
		if (prog)
			clReleaseProgram(prog);
		return NULL;
	}
	return prog;
}

static sb_status build_cached(sb_cl_device *d, const char *tag, const char *source,
                              const char *options, cl_program *out, int *from_cache,
                              char *path, size_t path_len)
{
	*out = NULL;
	if (from_cache)
		*from_cache = 0;
	if (!options)
		options = "";
	int cached = sb_cl_device_cache_file(d, tag, source, options, "clbin", path, path_len);
	if (!cached)
		path[0] = '\0';
	double t = sb_now();
	if (cached) {
		cl_program prog = load_cached(d, path, options);
		if (prog) {
			sb_log(&d->log, SB_LOG_INFO, "OpenCL %s: kernels '%s' loaded from cache %s (%.2f s)",
			       d->props.id, tag, path, sb_now() - t);
			if (from_cache)
				*from_cache = 1;
			*out = prog;
			return SB_OK;
		}
	}
	cl_int err = CL_SUCCESS;
	cl_program prog = clCreateProgramWithSource(d->ctx, 1, &source, NULL, &err);
	if (err != CL_SUCCESS) {
		sb_status st = sb_cl_status(d, err, "creating the program");
		return st == SB_ERR_DEVICE_OOM ? SB_ERR_DEVICE : st;
	}
	err = clBuildProgram(prog, 1, &d->dev, options, NULL, NULL);
	if (err != CL_SUCCESS) {
		sb_log(&d->log, SB_LOG_ERROR, "OpenCL %s (%s): building kernels '%s' failed (%s):",
		       d->props.id, d->props.name, tag, sb_cl_error_name(err));
		log_build_log(d, prog, SB_LOG_ERROR);
		clReleaseProgram(prog);
		return SB_ERR_DEVICE;
	}
	sb_log(&d->log, SB_LOG_INFO, "OpenCL %s: kernels '%s' compiled (%.2f s)", d->props.id, tag,
	       sb_now() - t);
	if (cached)
		write_cache(d, prog, path);
	*out = prog;
	return SB_OK;
}

sb_status sb_cl_device_build(sb_cl_device *d, const char *tag, const char *source,
                             const char *options, cl_program *out, int *from_cache)
{
	char path[4096];
	return build_cached(d, tag, source, options, out, from_cache, path, sizeof path);
}

sb_status sb_cl_device_kernel(sb_cl_device *d, cl_program prog, const char *name, cl_kernel *out)
{
	cl_int err = CL_SUCCESS;
	*out = clCreateKernel(prog, name, &err);
	if (err == CL_SUCCESS)
		return SB_OK;
	*out = NULL;
	char what[160];
	snprintf(what, sizeof what, "creating kernel '%s'", name);
	sb_status st = sb_cl_status(d, err, what);
	return st == SB_ERR_DEVICE_LOST || st == SB_ERR_DEVICE_OOM ? st : SB_ERR_DEVICE;
}

/* ---- open / close ------------------------------------------------------------------- */

/* The driver calls this from any of its threads; the logger is thread-safe by contract. */
static void CL_CALLBACK context_notify(const char *info, const void *priv, size_t cb, void *user)
{
	(void)priv;
	(void)cb;
	sb_cl_device *d = user;
	sb_log(&d->log, SB_LOG_WARNING, "OpenCL %s driver: %s", d->props.id, info);
}

sb_status sb_cl_device_open(const sb_device *dev, const sb_logger *log, sb_cl_device **out)
{
	if (!out)
		return SB_ERR_INVALID;
	*out = NULL;
	if (!dev)
		return SB_ERR_INVALID;
	if (!dev->native[1]) {
		sb_log(log, SB_LOG_ERROR, "%s (%s) is not an OpenCL device", dev->id, dev->name);
		return SB_ERR_DEVICE;
	}
	sb_cl_device *d = calloc(1, sizeof *d);
	if (!d) {
		sb_log(log, SB_LOG_ERROR, "OpenCL %s: out of host memory", dev->id);
		return SB_ERR_NOMEM;
	}
	d->props = *dev;
	if (log)
		d->log = *log;
	d->dev = dev->native[1];
	d->fault_lost = -1;
	pthread_mutex_init(&d->hold.lock, NULL);
	pthread_cond_init(&d->hold.cond, NULL);
	atomic_init(&d->lost, 0);
	atomic_init(&d->allocs, 0);
	atomic_init(&d->chunks, 0);
	if (parse_faults(d)) {
		sb_log(&d->log, SB_LOG_ERROR, "OpenCL %s (%s): cannot open the device: injected "
		       "(SB_FAULT_INJECT)", dev->id, dev->name);
		free(d);
		return SB_ERR_DEVICE;
	}

	cl_int err = CL_SUCCESS;
	cl_context_properties cprops[] = {CL_CONTEXT_PLATFORM, (cl_context_properties)dev->native[0],
	                                  0};
	d->ctx = clCreateContext(cprops, 1, &d->dev, context_notify, d, &err);
	if (err != CL_SUCCESS) {
		sb_cl_status(d, err, "creating a context");
		d->ctx = NULL;
		sb_cl_device_close(d);
		return SB_ERR_DEVICE;
	}
	/* One in-order queue: every chunk's kernels run in submission order without events. */
	d->queue = clCreateCommandQueue(d->ctx, d->dev, 0, &err);
	if (err != CL_SUCCESS) {
		sb_cl_status(d, err, "creating a command queue");
		d->queue = NULL;
		sb_cl_device_close(d);
		return SB_ERR_DEVICE;
	}
	/* Builds are serialised across devices: some drivers' compilers (PoCL's LLVM, seen under
	 * ThreadSanitizer) are not safe to run from two threads at once, and a build is rare. */
	pthread_mutex_lock(&build_lock);
	sb_status st = build_cached(d, "classic", (const char *)classic_cl, "", &d->classic,
	                            &d->classic_cached, d->cache_path, sizeof d->cache_path);
	pthread_mutex_unlock(&build_lock);
	if (st != SB_OK) {
		sb_cl_device_close(d);
		return st == SB_ERR_NOMEM ? st : SB_ERR_DEVICE;
	}
	*out = d;
	return SB_OK;
}

void sb_cl_device_close(sb_cl_device *d)
{
	if (!d)
		return;
	if (d->hold.started) {
		/* the injected holds end now: a closing device finishes its work */
		pthread_mutex_lock(&d->hold.lock);
		d->hold.cut = 1;
		pthread_cond_signal(&d->hold.cond);
		pthread_mutex_unlock(&d->hold.lock);
		pthread_join(d->hold.thread, NULL);
	}
	pthread_mutex_destroy(&d->hold.lock);
	pthread_cond_destroy(&d->hold.cond);
	if (d->queue) {
		clFinish(d->queue);
		clReleaseCommandQueue(d->queue);
	}
	if (d->classic)
		clReleaseProgram(d->classic);
	if (d->ctx)
		clReleaseContext(d->ctx);
	free(d);
}

int sb_cl_device_is_lost(const sb_cl_device *d)
{
	return d ? atomic_load(&((sb_cl_device *)d)->lost) : 0;
}

const sb_device *sb_cl_device_props(const sb_cl_device *d)
{
	return d ? &d->props : NULL;
}

int sb_cl_device_program_cached(const sb_cl_device *d)
{
	return d ? d->classic_cached : 0;
}

const char *sb_cl_device_cache_path(const sb_cl_device *d)
{
	return d ? d->cache_path : "";
}

cl_context sb_cl_device_context(const sb_cl_device *d)
{
	return d->ctx;
}

cl_command_queue sb_cl_device_queue(const sb_cl_device *d)
{
	return d->queue;
}

cl_device_id sb_cl_device_id(const sb_cl_device *d)
{
	return d->dev;
}

cl_program sb_cl_device_classic_program(const sb_cl_device *d)
{
	return d->classic;
}

const sb_logger *sb_cl_device_logger(const sb_cl_device *d)
{
	return &d->log;
}
