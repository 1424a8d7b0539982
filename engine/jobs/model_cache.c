/* The model cached from one job to the next (model_cache.h). */
#include "jobs/model_cache.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* what makes two jobs' models the same one */
typedef struct {
	int valid;                 /* 0: never the same as another (the file could not be read) */
	char name[256], path[4352];
	int64_t size, mtime_ns;
	uint64_t ino, dev;
	size_t n_set;
	size_t set[SB_MAX_SET];
	int bf16;
} keep_key;

struct sb_model_cache {
	sb_model *model;           /* NULL while a job has it, or when none is kept */
	keep_key held;             /* the kept model's */
	keep_key lent;             /* the model a job has now: kept under it when given back */
};

sb_model_cache *sb_model_cache_new(void)
{
	return calloc(1, sizeof(sb_model_cache));
}

void sb_model_cache_free(sb_model_cache *k)
{
	if (!k)
		return;
	sb_model_free(k->model);
	free(k);
}

static int same_key(const keep_key *a, const keep_key *b)
{
	if (!a->valid || !b->valid || strcmp(a->name, b->name) || strcmp(a->path, b->path) ||
	    a->size != b->size || a->mtime_ns != b->mtime_ns || a->ino != b->ino ||
	    a->dev != b->dev || a->n_set != b->n_set || a->bf16 != b->bf16)
		return 0;
	for (size_t i = 0; i < a->n_set; i++)
		if (a->set[i] != b->set[i])
			return 0;
	return 1;
}

/* The key of the model part names, its file as it is on disk now */
static void key_of(const sb_model_part *part, const sb_device_set *set, int bf16, keep_key *key)
{
	memset(key, 0, sizeof *key);
	snprintf(key->name, sizeof key->name, "%s", part->name);
	snprintf(key->path, sizeof key->path, "%s", part->path);
	key->valid = 1;
	if (key->path[0]) {
		struct stat s;
		if (stat(key->path, &s) != 0) {
			key->valid = 0;
		} else {
			key->size = (int64_t)s.st_size;
			key->mtime_ns = (int64_t)s.st_mtim.tv_sec * 1000000000 + s.st_mtim.tv_nsec;
			key->ino = (uint64_t)s.st_ino;
			key->dev = (uint64_t)s.st_dev;
		}
	}
	key->n_set = set ? set->n : 0;
	for (size_t i = 0; i < key->n_set && i < SB_MAX_SET; i++)
		key->set[i] = set->index[i];
	key->bf16 = bf16 != 0;
}

sb_status sb_model_cache_open(sb_model_cache *k, const sb_model_part *part,
                             const sb_device_set *set, int bf16, const sb_logger *log,
                             sb_model **out, int *kept)
{
	*out = NULL;
	*kept = 0;
	if (!k)
		return sb_model_open_file(part->name, part->path, log, out);
	keep_key key;
	key_of(part, set, bf16, &key);
	if (k->model && same_key(&k->held, &key)) {
		*out = k->model;
		k->model = NULL;
		k->lent = k->held;
		*kept = 1;
		return SB_OK;
	}
	/* another model, or this one changed: the kept one goes first (one model at a time) */
	sb_model_free(k->model);
	k->model = NULL;
	k->lent = key;
	return sb_model_open_file(key.name, key.path, log, out);
}

void sb_model_cache_done(sb_model_cache *k, sb_model *m, int keep)
{
	if (!m)
		return;
	if (!k || !keep || k->model || !k->lent.valid) {
		sb_model_free(m);
		return;
	}
	k->model = m;
	k->held = k->lent;
}

int sb_model_cache_holds(const sb_model_cache *k)
{
	return k && k->model;
}

void sb_model_cache_drop(sb_model_cache *k)
{
	if (!k || !k->model)
		return;
	sb_model_free(k->model);
	k->model = NULL;
}
