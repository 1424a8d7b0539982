/* Inside the engine (engine/jobs): the job table, the workers and the device slots that
 * engine.c (the API), scheduler.c and device_slots.c share. README.md tells how they work
 * together; each file says which lock its functions need. */
#ifndef SB_ENGINE_INTERNAL_H
#define SB_ENGINE_INTERNAL_H

#include "jobs/job_run.h"

#include <pthread.h>
#include <stdatomic.h>

typedef struct sb_job sb_job;
typedef struct sb_worker sb_worker;

struct sb_job {
	sb_job_id id;
	sb_job_spec spec;          /* strings point into 'strings' */
	sb_model_choice choice;    /* its model, resolved at submit */
	char *strings[8];
	char requested[640];       /* what the job asked for, for the result */
	sb_device_set set;         /* resolved entries, with their fallbacks' reasons */
	sb_job_progress progress;
	sb_job_outcome result;
	atomic_int cancel;
	int ended;
	int released;              /* released while running: freed by its worker when it ends */
	int input_released;
	pthread_cond_t done;
	int pooled;                /* waits in the engine's pool for a free device of 'want' */
	sb_device_set want;        /* a pooled job: the devices it asked for */
	double units;              /* its audio in seconds, what the sharing rule counts */
	int shares;                /* its model deals segments out to several devices (not the
	                              built-in, which runs on the first device of a set) */
	sb_job *next_in_table;
	sb_job *next_in_queue;
};

struct sb_worker {
	sb_engine *e;
	pthread_t thread;
	int started;
	uint64_t key;              /* the set's entries as bits; 0: each job's own (sequential) */
	sb_model_cache *keep;       /* its last job's model: touched by its thread, or by another
	                              holding the locks of every device in kept_mask (run_job) */
	uint64_t kept_mask;        /* the devices (not the CPU) the kept model's weights are on */
	sb_job *head, *tail;
	pthread_cond_t wake;
	/* a device of the engine's set: it also takes pooled jobs (jobs without a device) */
	int pool;
	size_t dev;                /* its device entry */
	double ran_s, audio_s;     /* pooled jobs it ran alone: seconds taken, audio's seconds */
	double busy_since;         /* when its current job started, 0 when idle */
	double busy_units;         /* and that job's units */
	sb_job_id lent_to;         /* its device is lent to this job (a lone one), 0 when not */
	/* its jobs on threads of their own, two at most, so that one reads its input and writes
	 * its stems while the other separates (scheduler.c: overlapped(); job_run.h:
	 * sb_job_env.hold) */
	int in_flight;
	unsigned long tickets, turn; /* the order in which they hold the devices */
	pthread_cond_t turned;
	sb_worker *next;
};

/* A device of the table as the engine keeps it (device_slots.c) */
typedef struct {
	pthread_mutex_t lock;      /* held by the job that uses the device */
	sb_exec x;                 /* opened, or not yet (tried 0) or failed to (why) */
	int tried;
	char why[512];
} sb_slot;

struct sb_engine {
	sb_engine_opts opts;
	char **model_path;
	sb_device_list *devices;
	size_t *set;
	size_t n_set, rr;          /* rr: the next device of the set in sequential mode */
	sb_slot *dev;              /* one per device entry */
	pthread_mutex_t lock;
	int stopping;
	sb_job *jobs;
	sb_worker *workers;
	sb_job *pool_head, *pool_tail; /* jobs for the free devices of the sets they name */
	int paused;                /* sb_engine_pause(): no job starts */
	sb_job_id next_id;
};

/* The devices one job opened for itself: the native CPU (each job gets its own threads). */
typedef struct {
	sb_engine *e;
	sb_exec own[4];
	int n_own;
	int bf16;                  /* the job asks for bf16 products */
	int gpus;                  /* the job's GPUs that run (job_run.h: sb_device_access.gpus) */
	int others;                /* the engine's other GPUs, which other jobs may run meanwhile */
} job_devices;

/* ---- device_slots.c ---- */

/* the slots of the engine's device table, each device closed and its lock unused */
sb_status sb_slots_new(sb_engine *e, size_t n);
/* closes every device (after the workers' cached models are freed) */
void sb_slots_free(sb_engine *e);
/* In parallel mode, the GPUs of the engine's set outside the job's own */
int sb_slots_other_gpus(const sb_engine *e, const sb_device_set *set);
/* The job runner's way to a device (job_run.h: sb_device_access.open); user: job_devices */
sb_status sb_slots_open(void *user, size_t i, sb_exec *out, char *why, size_t wlen);
/* the set's devices other than the native CPU, as bits (the ones with a lock) */
uint64_t sb_slots_mask(const sb_engine *e, const sb_device_set *s);
/* Takes the locks of set's devices (in table order) and frees the models other workers cache
 * on any of them; returns the devices locked */
uint64_t sb_slots_lock(sb_engine *e, sb_worker *w, const sb_device_set *set);
void sb_slots_unlock(sb_engine *e, uint64_t m);

/* ---- scheduler.c ---- */

/* Under e->lock: the worker for a device set (parallel) or the one worker (sequential),
 * started the first time; NULL without memory or a thread */
sb_worker *sb_sched_worker_for(sb_engine *e, const sb_device_set *set);
/* Under e->lock: j at the end of the queue head..tail (the pool, or a worker's own) */
void sb_sched_append(sb_job **head, sb_job **tail, sb_job *j);
/* Under e->lock: every device of the set looks at the pool again */
void sb_sched_wake_pool(sb_engine *e);
/* Under e->lock: j taken out of the pool or a worker's queue; 0 when it is in neither */
int sb_sched_unqueue(sb_engine *e, sb_job *j);
/* Under e->lock: j, cancelled before any device took it, ends now */
void sb_sched_end_unstarted(sb_engine *e, sb_job *j);
/* everything of j freed, its samples given back (once) first */
void sb_sched_job_free(sb_job *j);
/* the CLOCK_REALTIME time s seconds from now, for pthread_cond_timedwait */
struct timespec sb_sched_deadline(double s);

#endif
