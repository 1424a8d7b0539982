/* The products' and attention's paths measured per shape on the device (cl_gemm_pick.h). */
#include "backend/opencl/cl_gemm_pick.h"

#include "backend/opencl/cl_gemm_tiled.h"
#include "io/cache_file.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define RUNS 3          /* timed runs of each path before a shape is decided */
#define PATHS 3         /* the most paths an operation has (the products': own, CLBlast, tiled) */
#define MAX_SHAPES 4096 /* no model has near this many; more are run by the default */
#define SCRATCH_MAX ((size_t)1 << 30) /* and a sixteenth of the device's memory */
#define FILE_MAX ((long)1 << 20)
#define SLOWED 50.0     /* opencl:N:tune-slow:KIND: that path's times count this many times */
#define LIMIT (1 << 24) /* the largest number in a kept shape */

/* What each operation's pick knows of it */
typedef struct {
	const char *tag;         /* the file's name starts with it */
	const char *what;        /* in messages */
	const char *fields;      /* the file's header: the shape's numbers */
	int npaths;
	const char *word[PATHS]; /* each path in the file */
	int order[PATHS];        /* the defaults' order when one is dropped */
	int lo[6], hi[6];        /* each number's range in a kept shape */
	int slow_bit;            /* opencl:N:tune-slow's bit for path 0 (cl_device.h) */
} op_info;

static const op_info ops[] = {
	[SB_CL_PICK_PRODUCTS] = {"products", "matrix products", "M N K B-transposed batch alignment",
	                         3, {"own", "clblast", "tiled"},
	                         {SB_CL_GEMM_CLBLAST, SB_CL_GEMM_OWN, SB_CL_GEMM_TILED},
	                         {1, 1, 0, 0, 1, 0}, {LIMIT, LIMIT, LIMIT, 1, LIMIT, 15}, 0},
	[SB_CL_PICK_ATTENTION] = {"attention", "attention", "query-rows keys head-size heads batch "
	                          "alignment", 3, {"split", "fused", "tiles"},
	                          {SB_CL_ATT_FUSED, SB_CL_ATT_SPLIT, SB_CL_ATT_TILES},
	                          {1, 1, 1, 1, 1, 0}, {LIMIT, LIMIT, 4096, LIMIT, LIMIT, 7}, 4},
};

typedef struct {
	sb_cl_shape s;
	int kind;            /* the path decided, -1 while it is measured */
	int kept;            /* decided by measuring (goes to the file) */
	int runs[PATHS];     /* timed runs enqueued */
	int tried[PATHS];    /* runs discarded since the last collect (sb_cl_pick_discard) */
	int got[PATHS];      /* of them, read back */
	double best[PATHS];  /* the fastest read, seconds; 0 when none gave a time */
} entry;

typedef struct {
	int slot, kind;
	cl_event e0, e1; /* the markers before and after the run */
} timed_run;

struct sb_cl_pick {
	const op_info *op;
	sb_cl_device *dev;
	const sb_logger *log;
	entry *e;
	int n, cap;
	timed_run *r;
	int nr, rcap;
	cl_event open;       /* mark()'s marker, waiting for its timed() */
	int paths;           /* the candidates left (bit 1 << kind) */
	int def;             /* what an undecided shape runs */
	int off;             /* measuring gave up (logged): undecided shapes take the default */
	int off_kept;        /* ... and are kept so: the driver cannot be measured this way */
	cl_command_queue tq; /* the measuring queue, with profiling on */
	sb_bbuf scratch;
	long runs_total;
	long provisional;    /* undecided shapes given the default so far */
	char path[4096];     /* the file; "" without a cache folder */
	char desc[256];
};

const char *sb_cl_pick_name(const sb_cl_pick *p, int k)
{
	if (p->op == &ops[SB_CL_PICK_PRODUCTS])
		return sb_cl_gemm_name((sb_cl_gemm_kind)k);
	return k == SB_CL_ATT_FUSED ? "attention in one pass"
	       : k == SB_CL_ATT_TILES ? "attention by tiles"
	                            : "attention as two products and a softmax";
}

static void describe(sb_cl_pick *p)
{
	size_t b = (size_t)snprintf(p->desc, sizeof p->desc, "measured per shape: ");
	int any = 0;
	for (int i = 0; i < p->op->npaths && b < sizeof p->desc; i++) {
		const int k = p->op->order[i], n = sb_cl_pick_count(p, k);
		if (n)
			b += (size_t)snprintf(p->desc + b, sizeof p->desc - b, "%s%s for %d",
			                      any++ ? ", " : "", sb_cl_pick_name(p, k), n);
	}
	if (!any && p->off)
		snprintf(p->desc, sizeof p->desc, "%s (the device could not be measured)",
		         sb_cl_pick_name(p, p->def));
	else if (!any)
		snprintf(p->desc + b, sizeof p->desc - b, "none yet, %s meanwhile",
		         sb_cl_pick_name(p, p->def));
}

static entry *find(sb_cl_pick *p, const sb_cl_shape *s)
{
	for (int i = 0; i < p->n; i++)
		if (!memcmp(&p->e[i].s, s, sizeof *s))
			return &p->e[i];
	return NULL;
}

static entry *add(sb_cl_pick *p, const sb_cl_shape *s)
{
	if (p->n == p->cap) {
		const int cap = p->cap ? p->cap * 2 : 64;
		if (cap > MAX_SHAPES)
			return NULL;
		entry *e = realloc(p->e, sizeof *e * (size_t)cap);
		if (!e)
			return NULL;
		p->e = e;
		p->cap = cap;
	}
	entry *e = &p->e[p->n++];
	memset(e, 0, sizeof *e);
	e->s = *s;
	e->kind = -1;
	return e;
}

/* ---- the file ---- */

static int parse_line(const op_info *op, const char *line, sb_cl_shape *s, int *kind)
{
	char word[16];
	int used = 0, *v = s->v;
	if (sscanf(line, "%d %d %d %d %d %d %15s %n", &v[0], &v[1], &v[2], &v[3], &v[4], &v[5], word,
	           &used) != 7 || line[used] != '\0')
		return 0;
	for (int i = 0; i < 6; i++)
		if (v[i] < op->lo[i] || v[i] > op->hi[i])
			return 0;
	*kind = -1;
	for (int k = 0; k < op->npaths; k++)
		if (!strcmp(word, op->word[k]))
			*kind = k;
	return *kind >= 0;
}

/* Reads a file of kept decisions into p (kept entries; shapes p has already are left as they
 * are). 1 when the file was whole or absent; 0 with *why when it is damaged or unreadable. */
static int read_kept(sb_cl_pick *p, const char *path, char *why, size_t why_len)
{
	FILE *f = sb_cache_file_open(path, FILE_MAX);
	if (!f) {
		const int err = errno;
		snprintf(why, why_len, "%s", strerror(err));
		return err == ENOENT;
	}
	char line[256];
	int no = 0, bad = 0;
	long bytes = 0;
	while (!bad && fgets(line, sizeof line, f)) {
		no++;
		const size_t len = strlen(line);
		bytes += (long)len;
		if (len == 0 || line[len - 1] != '\n' || bytes > FILE_MAX) {
			bad = 1; /* cut short, or not ours */
			break;
		}
		line[len - 1] = '\0';
		if (line[0] == '#')
			continue;
		sb_cl_shape sh;
		int kind;
		if (!parse_line(p->op, line, &sh, &kind)) {
			bad = 1;
			break;
		}
		entry *e = find(p, &sh);
		if (e && e->kept)
			continue; /* this process's own decision */
		if (!e && !(e = add(p, &sh)))
			break;
		e->kind = kind; /* another's decision, for a shape this one has not decided (or has
		                   only left to the default) */
		e->kept = 1;
	}
	const int unreadable = ferror(f);
	fclose(f);
	if (unreadable)
		snprintf(why, why_len, "it cannot be read");
	else if (bad)
		snprintf(why, why_len, "line %d is not a shape's choice", no);
	return !bad && !unreadable;
}

/* The kept decisions; a damaged file is logged and its shapes measured again. */
static void load(sb_cl_pick *p)
{
	char why[128];
	if (!read_kept(p, p->path, why, sizeof why)) {
		sb_log(p->log, SB_LOG_WARNING, "ignoring %s (%s): measuring the %s again", p->path,
		       why, p->op->what);
		p->n = 0;
		return;
	}
	if (p->n)
		sb_log(p->log, SB_LOG_INFO, "%s on %s: %d shapes measured before, from %s",
		       p->op->what, sb_cl_device_props(p->dev)->label, p->n, p->path);
}

/* sb_cache_file_save's two steps: what another process kept since is read in first under the lock,
 * so no writer drops another's; then every kept decision */
static int reread(void *user)
{
	sb_cl_pick *p = user;
	char why[128];
	read_kept(p, p->path, why, sizeof why); /* a damaged file has nothing to keep */
	return 0;
}

static int write_kept(FILE *f, void *user)
{
	const sb_cl_pick *p = user;
	fprintf(f, "# stembridge: the fastest fp32 path of the %s for each shape on %s, measured "
	        "there (delete to measure again)\n# %s path\n", p->op->what,
	        sb_cl_device_props(p->dev)->name, p->op->fields);
	for (int i = 0; i < p->n; i++) {
		const entry *e = &p->e[i];
		const int *v = e->s.v;
		if (e->kept)
			fprintf(f, "%d %d %d %d %d %d %s\n", v[0], v[1], v[2], v[3], v[4], v[5],
			        p->op->word[e->kind]);
	}
	return 0;
}

static void save(sb_cl_pick *p)
{
	if (p->path[0] && sb_cache_file_save(p->path, reread, write_kept, p, p->log) != 0)
		sb_log(p->log, SB_LOG_WARNING, "cannot keep the measured %s in %s: %s (measured again "
		       "next time)", p->op->what, p->path, strerror(errno));
}

/* ---- open, free ---- */

sb_status sb_cl_pick_open(sb_bdev *c, sb_cl_pick_op op, int paths, int def, const char *kernels,
                          const char *also, sb_cl_pick **out)
{
	*out = NULL;
	sb_cl_pick *p = calloc(1, sizeof *p);
	if (!p)
		return SB_ERR_NOMEM;
	p->op = &ops[op];
	p->dev = c->dev;
	p->log = c->log;
	p->paths = paths;
	p->def = def;
	/* a new driver, new kernels (the sources hashed into the file's name), another tiling, a
	 * new CLBlast or new tuning for it: measured again */
	const char *tile = sb_knob_get("SB_CL_TILE"), *tiled = sb_cl_tiled_source();
	char opts[768], table[256];
	sb_cl_tiled_table(table, sizeof table);
	snprintf(opts, sizeof opts, "%s v1, paths %d, %s tuned %d, SB_CL_TILE=%s, tilings %s%s%s",
	         p->op->tag, p->paths, sb_cl_gemm_name(SB_CL_GEMM_CLBLAST),
	         sb_cl_blas_tuned_kernels(c->dev), tile ? tile : "", table, *also ? ", " : "", also);
	const size_t nk = strlen(kernels), nt = strlen(tiled);
	char *sources = malloc(nk + nt + 1);
	if (!sources) {
		free(p);
		return SB_ERR_NOMEM;
	}
	memcpy(sources, kernels, nk);
	memcpy(sources + nk, tiled, nt + 1);
	if (!sb_cl_device_cache_file(c->dev, p->op->tag, sources, opts, "txt", p->path,
	                             sizeof p->path))
		p->path[0] = '\0';
	free(sources);
	if (p->path[0])
		load(p);
	describe(p);
	*out = p;
	return SB_OK;
}

void sb_cl_pick_free(sb_cl_pick *p)
{
	if (!p)
		return;
	if (p->tq) {
		clFlush(sb_cl_device_queue(p->dev)); /* what the measuring queue waits for */
		clFinish(p->tq);
	}
	for (int i = 0; i < p->nr; i++) {
		clReleaseEvent(p->r[i].e0);
		clReleaseEvent(p->r[i].e1);
	}
	if (p->open)
		clReleaseEvent(p->open);
	if (p->scratch.m)
		clReleaseMemObject(p->scratch.m);
	if (p->tq)
		clReleaseCommandQueue(p->tq);
	free(p->r);
	free(p->e);
	free(p);
}

/* ---- the choice ---- */

/* Stops measuring in this process. 'kept': the driver cannot be measured this way at all, so
 * the shapes are kept with the default and the next process does not try again (a new driver
 * has a file of its own); otherwise (a queue or memory refused for now) they are measured
 * again next time. */
static void give_up(sb_cl_pick *p, const char *why, int kept)
{
	if (!p->off)
		sb_log(p->log, SB_LOG_INFO, "%s on %s: not measured (%s): %s for the shapes not "
		       "measured before", p->op->what, sb_cl_device_props(p->dev)->label, why,
		       sb_cl_pick_name(p, p->def));
	p->off = 1;
	p->off_kept |= kept;
}

int sb_cl_pick_path(sb_cl_pick *p, const sb_cl_shape *s, int may_time, int *time_now,
                    int *slot)
{
	*time_now = 0;
	*slot = -1;
	entry *e = find(p, s);
	if (!e && !(e = add(p, s)))
		return p->def;
	if (e->kind >= 0)
		return p->paths >> e->kind & 1 ? e->kind : p->def;
	if (!(p->paths & (p->paths - 1))) { /* one path left (the default): nothing to measure */
		e->kind = p->def;
		return p->def;
	}
	p->provisional++;
	if (!may_time || p->off)
		return p->def;
	for (int k = 0; k < p->op->npaths; k++)
		if (p->paths >> k & 1 && e->runs[k] + e->tried[k] < RUNS)
			*time_now |= 1 << k;
	*slot = (int)(e - p->e);
	return p->def;
}

static cl_command_queue sb_cl_pick_begin(sb_bdev *c, sb_cl_pick *p, int slot, size_t floats,
                                  sb_dv *scratch)
{
	entry *e = &p->e[slot];
	const uint64_t mem = sb_cl_device_props(p->dev)->global_mem / 16;
	if ((uint64_t)floats * sizeof(float) > (mem < SCRATCH_MAX ? mem : SCRATCH_MAX)) {
		e->kind = p->def; /* too large to spare a second output for: the default, not kept */
		return NULL;
	}
	cl_int err = CL_SUCCESS;
	if (!p->tq) {
		const cl_command_queue_properties times =
		        sb_cl_device_fault_tune_notimes(p->dev) ? 0 : CL_QUEUE_PROFILING_ENABLE;
		p->tq = clCreateCommandQueue(sb_cl_device_context(p->dev), sb_cl_device_id(p->dev),
		                             times, &err);
		if (err != CL_SUCCESS) {
			p->tq = NULL;
			give_up(p, sb_cl_error_name(err), 0);
			return NULL;
		}
	}
	const int fresh = p->scratch.n < floats;
	if (fresh) {
		cl_mem m = NULL;
		const size_t n = floats < ((size_t)1 << 20) ? (size_t)1 << 20 : floats;
		if (sb_cl_device_alloc(p->dev, n * sizeof(float), CL_MEM_READ_WRITE, &m) != SB_OK) {
			e->kind = p->def; /* no memory to spare for it now: the default, not kept */
			return NULL;
		}
		if (p->scratch.m)
			clReleaseMemObject(p->scratch.m); /* freed once the queued runs are done */
		p->scratch.m = m;
		p->scratch.n = n;
	}
	if (p->nr + PATHS > p->rcap) {
		const int cap = p->rcap ? p->rcap * 2 : 64;
		timed_run *r = realloc(p->r, sizeof *r * (size_t)cap);
		if (!r) {
			e->kind = p->def;
			return NULL;
		}
		p->r = r;
		p->rcap = cap;
	}
	cl_event m = NULL;
	if (clEnqueueMarkerWithWaitList(c->q, 0, NULL, &m) != CL_SUCCESS) {
		give_up(p, "no marker in the queue", 0);
		return NULL;
	}
	clFlush(c->q); /* the measuring queue waits for m: it must reach the device */
	err = clEnqueueBarrierWithWaitList(p->tq, 1, &m, NULL);
	clReleaseEvent(m);
	if (err != CL_SUCCESS) {
		give_up(p, sb_cl_error_name(err), 0);
		return NULL;
	}
	const float zero = 0.f; /* a new scratch output cleared, after the barrier: the device's */
	if (fresh && clEnqueueFillBuffer(p->tq, p->scratch.m, &zero, sizeof zero, 0,
	                                 p->scratch.n * sizeof(float), 0, NULL, NULL) != CL_SUCCESS) {
		give_up(p, "its scratch output cannot be cleared", 0);
		return NULL;
	}
	scratch->buf = &p->scratch;
	scratch->off = 0;
	return p->tq;
}

/* mark()'s marker, its run not recorded (a new mark, a run failed or discarded) */
static void release_open(sb_cl_pick *p)
{
	if (p->open)
		clReleaseEvent(p->open);
	p->open = NULL;
}

static void sb_cl_pick_mark(sb_cl_pick *p)
{
	release_open(p);
	if (clEnqueueMarkerWithWaitList(p->tq, 0, NULL, &p->open) != CL_SUCCESS)
		p->open = NULL;
}

static void sb_cl_pick_timed(sb_cl_pick *p, int slot, int k)
{
	cl_event e1 = NULL;
	if (!p->open || clEnqueueMarkerWithWaitList(p->tq, 0, NULL, &e1) != CL_SUCCESS) {
		give_up(p, "no marker in the measuring queue", 0);
		return;
	}
	p->r[p->nr++] = (timed_run){slot, k, p->open, e1};
	p->open = NULL;
	p->e[slot].runs[k]++;
	p->runs_total++;
}

static void sb_cl_pick_end(sb_bdev *c, sb_cl_pick *p)
{
	cl_event t = NULL;
	if (clEnqueueMarkerWithWaitList(p->tq, 0, NULL, &t) != CL_SUCCESS) {
		/* the pass cannot be ordered after the runs: wait here, once, rather than time
		 * runs that share the device with it */
		clFlush(c->q);
		clFinish(p->tq);
		give_up(p, "no marker in the measuring queue", 0);
		return;
	}
	clFlush(p->tq); /* the pass waits for it: it must reach the device */
	const cl_int err = clEnqueueBarrierWithWaitList(c->q, 1, &t, NULL);
	clReleaseEvent(t);
	if (err != CL_SUCCESS) {
		clFlush(c->q);
		clFinish(p->tq);
		give_up(p, sb_cl_error_name(err), 0);
	}
}

static void sb_cl_pick_failed(sb_cl_pick *p, int slot, int k)
{
	entry *e = &p->e[slot];
	e->runs[k] = e->got[k] = RUNS; /* done, with no time: never this shape's choice */
	e->best[k] = 0.0;
	release_open(p);
}

static void sb_cl_pick_discard(sb_cl_pick *p, int slot, int k)
{
	p->e[slot].tried[k]++;
	release_open(p);
}

static long sb_cl_pick_provisional(const sb_cl_pick *p)
{
	return p->provisional;
}

int sb_cl_pick_drop(sb_cl_pick *p, int k)
{
	if (!(p->paths >> k & 1) || p->paths == 1 << k)
		return 0; /* gone already, or the last one: something has to run the operation */
	p->paths &= ~(1 << k);
	if (p->def == k)
		for (int i = p->op->npaths - 1; i >= 0; i--)
			if (p->paths >> p->op->order[i] & 1)
				p->def = p->op->order[i];
	describe(p);
	return 1;
}

/* The run's time from its markers: 0 when it has none (a failed run), -1 while it is queued */
static double run_time(sb_cl_pick *p, const timed_run *r)
{
	cl_int state = CL_COMPLETE;
	if (clGetEventInfo(r->e1, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof state, &state, NULL) !=
	    CL_SUCCESS || state < 0)
		return 0.0;
	if (state != CL_COMPLETE)
		return -1.0;
	cl_ulong t0 = 0, t1 = 0;
	cl_int err = clGetEventProfilingInfo(r->e0, CL_PROFILING_COMMAND_END, sizeof t0, &t0, NULL);
	if (err == CL_SUCCESS)
		err = clGetEventProfilingInfo(r->e1, CL_PROFILING_COMMAND_END, sizeof t1, &t1, NULL);
	if (err != CL_SUCCESS) {
		give_up(p, err == CL_PROFILING_INFO_NOT_AVAILABLE
		           ? "the driver gives no times for the measuring queue's markers"
		           : sb_cl_error_name(err), err == CL_PROFILING_INFO_NOT_AVAILABLE);
		return 0.0;
	}
	if (t1 <= t0)
		return 0.0; /* a timer too coarse for this product: a run without a time */
	const double t = (double)(t1 - t0) * 1e-9;
	return sb_cl_device_fault_tune_slow(p->dev, p->op->slow_bit + r->kind) ? t * SLOWED : t;
}

/* the fastest path of a measured shape: the default unless another ran 3 % faster */
static int fastest(const sb_cl_pick *p, const entry *e)
{
	int k = -1;
	for (int j = 0; j < p->op->npaths; j++)
		if (p->paths >> j & 1 && e->best[j] > 0.0 && (k < 0 || e->best[j] < e->best[k]))
			k = j;
	if (k < 0)
		return -1;
	const double d = e->best[p->def];
	return d > 0.0 && e->best[k] > 0.97 * d ? p->def : k;
}

void sb_cl_pick_collect(sb_bdev *c, sb_cl_pick *p)
{
	int left = 0;
	for (int i = 0; i < p->nr; i++) {
		timed_run *r = &p->r[i];
		const double t = run_time(p, r);
		if (t < 0.0) {
			p->r[left++] = *r; /* still queued: a pass given up on before it ended */
			continue;
		}
		entry *e = &p->e[r->slot];
		e->got[r->kind]++;
		if (t > 0.0 && (e->best[r->kind] == 0.0 || t < e->best[r->kind]))
			e->best[r->kind] = t;
		clReleaseEvent(r->e0);
		clReleaseEvent(r->e1);
	}
	p->nr = left;
	for (int i = 0; i < p->n; i++) /* a discarded run may be tried again from the next pass */
		memset(p->e[i].tried, 0, sizeof p->e[i].tried);
	int decided = 0, counts[PATHS] = {0};
	for (int i = 0; i < p->n; i++) {
		entry *e = &p->e[i];
		if (e->kind >= 0)
			continue;
		int done = !p->off;
		for (int k = 0; k < p->op->npaths; k++)
			if (p->paths >> k & 1 && e->got[k] < RUNS)
				done = 0;
		if (p->off) { /* kept as such only when the driver cannot be measured (give_up) */
			e->kind = p->def;
			e->kept = p->off_kept;
			decided += e->kept;
			counts[e->kind] += e->kept;
			continue;
		}
		if (!done)
			continue;
		const int win = fastest(p, e);
		e->kind = win >= 0 ? win : p->def;
		e->kept = win >= 0;
		if (e->kept) {
			decided++;
			counts[e->kind]++;
			const int *v = e->s.v;
			char t[96];
			size_t b = 0;
			for (int k = 0; k < p->op->npaths && b < sizeof t; k++)
				b += (size_t)snprintf(t + b, sizeof t - b, "%s%s %.3f", k ? ", " : "",
				                      p->op->word[k], e->best[k] * 1e3);
			sb_log(p->log, SB_LOG_DEBUG, "%s %d %d %d %d %d %d (%s): %s ms: %s", p->op->tag,
			       v[0], v[1], v[2], v[3], v[4], v[5], p->op->fields, t, p->op->word[e->kind]);
		}
	}
	int measuring = 0;
	for (int i = 0; i < p->n; i++)
		measuring |= p->e[i].kind < 0;
	if (!measuring && !p->nr && p->scratch.m) { /* a new shape allocates it again */
		clReleaseMemObject(p->scratch.m);
		p->scratch.m = NULL;
		p->scratch.n = 0;
	}
	describe(p);
	if (!decided)
		return;
	if (p->off) {
		sb_log(c->log, SB_LOG_INFO, "%s on %s: %d more shapes through %s, not measured%s%s",
		       p->op->what, sb_cl_device_props(p->dev)->label, decided, sb_cl_pick_name(p, p->def),
		       p->path[0] ? ", kept in " : "", p->path);
	} else {
		char t[192];
		size_t b = 0;
		for (int i = 0; i < p->op->npaths && b < sizeof t; i++) {
			const int k = p->op->order[i];
			b += (size_t)snprintf(t + b, sizeof t - b, "%s%s fastest for %d", i ? ", " : "",
			                      sb_cl_pick_name(p, k), counts[k]);
		}
		sb_log(c->log, SB_LOG_INFO, "%s on %s: %d more shapes measured (%s)%s%s", p->op->what,
		       sb_cl_device_props(p->dev)->label, decided, t, p->path[0] ? ", kept in " : "",
		       p->path);
	}
	save(p);
}

const char *sb_cl_pick_describe(const sb_cl_pick *p)
{
	return p->desc;
}

int sb_cl_pick_count(const sb_cl_pick *p, int k)
{
	int n = 0;
	for (int i = 0; i < p->n; i++) {
		const int kind = p->e[i].kind;
		n += p->e[i].kept && kind >= 0 && (p->paths >> kind & 1 ? kind : p->def) == k;
	}
	return n;
}

long sb_cl_pick_runs(const sb_cl_pick *p)
{
	return p->runs_total;
}

void sb_cl_time_paths(sb_bdev *c, struct sb_cl_pick *p, int slot, int want, size_t lead,
                      size_t floats, sb_cl_timed_fn run, const void *op)
{
	sb_dv S;
	cl_command_queue tq = sb_cl_pick_begin(c, p, slot, floats, &S);
	if (!tq)
		return;
	S.off = lead;
	cl_command_queue q = c->q;
	c->q = tq;
	for (int j = 0; j < 3 && c->st == SB_OK; j++) {
		if (!(want >> j & 1))
			continue;
		/* a run that leaned on what is not settled yet (a product of attention's products'
		 * way still undecided, so run through the default and timed inside this run, or
		 * checked inside it) is not this path's own time */
		const long provisional = c->pick ? sb_cl_pick_provisional(c->pick) : 0;
		const int tried = c->paths_tried;
		sb_cl_pick_mark(p);
		const sb_status st = run(c, j, S, op);
		const int leaned = (c->pick && sb_cl_pick_provisional(c->pick) != provisional) ||
		                   c->paths_tried != tried;
		if (st == SB_ERR_UNSUPPORTED) {
			sb_cl_pick_drop(p, j); /* CLBlast refused the shape (logged) */
		} else if (c->st == SB_ERR_DEVICE_LOST || c->st == SB_ERR_NOMEM) {
			sb_cl_pick_discard(p, slot, j); /* the pass's failure, not the path's */
		} else if (leaned) {
			/* a failure may be the unsettled work's (memory for a default's buffers beside
			 * the scratch outputs), not the path's: tried again */
			c->st = SB_OK;
			sb_cl_pick_discard(p, slot, j);
		} else if (c->st != SB_OK) {
			/* a timed run that could not be enqueued (memory for CLBlast's own buffers beside
			 * the scratch output, say) is this shape's loss of that path, not the pass's */
			sb_log(c->log, SB_LOG_INFO, "a timed run of %s failed (%s): measured without it",
			       sb_cl_pick_name(p, j), sb_status_str(c->st));
			c->st = SB_OK;
			sb_cl_pick_failed(p, slot, j);
		} else {
			sb_cl_pick_timed(p, slot, j);
		}
	}
	c->q = q;
	sb_cl_pick_end(c, p);
}
