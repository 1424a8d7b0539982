/* A checkpoint of one of MSST's families (a bare state dict, its release layout: the RoFormers,
 * SCNet, MDX23C) and its YAML configuration to one safetensors file: the tensors as stored, the
 * YAML verbatim in the metadata key "config", the family (MSST's model type), the stems and the
 * sample rate beside it. Every tensor the configuration makes must be there with its shape, and
 * no other (convert.h). */
#include "convert/convert.h"
#include "convert/demucs_package.h"
#include "convert/mdx23c_config.h"
#include "convert/roformer_config.h"
#include "convert/safetensors_writer.h"
#include "convert/scnet_config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

typedef struct {
	const sbc_package *pk;
	const char *ckpt;
	char err[768];
	int bad;
} check;

static const sbc_named_tensor *find(const sbc_package *pk, const char *name)
{
	for (size_t i = 0; i < sbc_package_n_tensors(pk); i++)
		if (!strcmp(sbc_package_tensor_at(pk, i)->name, name))
			return sbc_package_tensor_at(pk, i);
	return NULL;
}

static void shape_str(char *buf, size_t len, int ndim, const int64_t *shape)
{
	size_t at = (size_t)snprintf(buf, len, "[");
	for (int d = 0; d < ndim && at < len; d++)
		at += (size_t)snprintf(buf + at, len - at, "%s%lld", d ? ", " : "", (long long)shape[d]);
	if (at < len)
		snprintf(buf + at, len - at, "]");
}

static void check_one(void *user, const char *name, int ndim, const int64_t *shape)
{
	check *c = user;
	if (c->bad)
		return;
	const sbc_named_tensor *t = find(c->pk, name);
	if (!t) {
		snprintf(c->err, sizeof c->err, "%s: no tensor '%s', which the configuration makes "
		         "(is the configuration this checkpoint's?)", c->ckpt, name);
		c->bad = 1;
		return;
	}
	int same = t->t.ndim == ndim;
	for (int d = 0; same && d < ndim; d++)
		same = t->t.shape[d] == shape[d];
	if (!same) {
		char a[96], b[96];
		shape_str(a, sizeof a, t->t.ndim, t->t.shape);
		shape_str(b, sizeof b, ndim, shape);
		snprintf(c->err, sizeof c->err, "%s: tensor '%s' is %s where the configuration makes "
		         "%s", c->ckpt, name, a, b);
		c->bad = 1;
		return;
	}
	if (t->t.dtype != SBC_DT_F32 && t->t.dtype != SBC_DT_F16 && t->t.dtype != SBC_DT_BF16) {
		snprintf(c->err, sizeof c->err, "%s: tensor '%s' is %s, not a float", c->ckpt, name,
		         sbc_dtype_name(t->t.dtype));
		c->bad = 1;
		return;
	}
}

typedef struct {
	char **v;
	int n;
} names;

static void collect(void *user, const char *name, int ndim, const int64_t *shape)
{
	(void)ndim;
	(void)shape;
	names *nm = user;
	char **v = realloc(nm->v, sizeof *v * (size_t)(nm->n + 1));
	if (!v)
		return;
	nm->v = v;
	if ((v[nm->n] = strdup(name)))
		nm->n++;
}

static char *read_text(const char *path, size_t *len, char *err, size_t errlen)
{
	FILE *f = fopen(path, "rb");
	if (!f) {
		sb_errorf(err, errlen, "cannot read it");
		return NULL;
	}
	char *buf = malloc((1 << 20) + 1);
	size_t n = buf ? fread(buf, 1, 1 << 20, f) : 0;
	const int more = buf && fgetc(f) != EOF;
	fclose(f);
	if (!buf || more || !n) {
		sb_errorf(err, errlen, !buf ? "out of memory" : more ? "longer than 1 MB: not a model "
		          "configuration" : "empty");
		free(buf);
		return NULL;
	}
	buf[n] = '\0';
	if (memchr(buf, '\0', n)) {
		sb_errorf(err, errlen, "not a text file");
		free(buf);
		return NULL;
	}
	*len = n;
	return buf;
}

/* A family's configuration, read: what the converter needs of it */
typedef struct {
	sb_msst_family family;
	sb_msst_common m;
	sb_rf_config rf;
	sb_scnet_config scnet;
	sb_mdx23c_config mdx;
	int rf_flags;
	const char *label;
} family_cfg;

static int tensors(const family_cfg *f, sb_msst_tensor_fn fn, void *user)
{
	switch (f->family) {
	case SB_MSST_SCNET: return sb_scnet_tensors(&f->scnet, fn, user);
	case SB_MSST_MDX23C: return sb_mdx23c_tensors(&f->mdx, fn, user);
	default: return sb_roformer_tensors(&f->rf, f->rf_flags, fn, user);
	}
}

/* the config's family, read and checked; one line in err on failure */
static sb_status read_config(const char *yaml, size_t len, family_cfg *f, char *err,
                             size_t errlen)
{
	sb_msst_yaml *y = NULL;
	sb_status st = sb_msst_yaml_load(yaml, len, &y, err, errlen);
	if (st != SB_OK)
		return st;
	f->family = sb_msst_family_of(y, err, errlen);
	switch (f->family) {
	case SB_MSST_NONE: st = SB_ERR_UNSUPPORTED; break;
	case SB_MSST_SCNET:
		st = sb_scnet_config_read(y, &f->scnet);
		f->m = f->scnet.m;
		f->label = "SCNet";
		break;
	case SB_MSST_MDX23C:
		st = sb_mdx23c_config_read(y, &f->mdx);
		f->m = f->mdx.m;
		f->label = "MDX23C";
		break;
	default:
		st = sb_rf_config_read(y, f->family == SB_MSST_MEL_ROFORMER ? SB_RF_MEL : SB_RF_BS,
		                       &f->rf);
		f->m = f->rf.m;
		f->label = f->family == SB_MSST_MEL_ROFORMER ? "Mel-Band RoFormer" : "BS-RoFormer";
		break;
	}
	if (st != SB_OK && f->family != SB_MSST_NONE)
		sb_errorf(err, errlen, "%s", sb_msst_error(y));
	sb_msst_yaml_free(y);
	return st;
}

sb_status sbc_convert_msst(const sbc_convert_opts *o)
{
	char err[768];
	const char *ckpt = o->inputs[0];
	struct stat sb;
	if (o->n_inputs != 1) {
		sb_log(o->log, SB_LOG_ERROR, "a model of MSST's is one checkpoint with its --config "
		       "(given %d)", o->n_inputs);
		return SB_ERR_INVALID;
	}
	if (o->output && !o->overwrite && !o->dry_run && lstat(o->output, &sb) == 0) {
		sb_log(o->log, SB_LOG_ERROR, "%s: exists (use --overwrite to replace it)", o->output);
		return SB_ERR_EXISTS;
	}
	size_t len = 0;
	char *yaml = read_text(o->config, &len, err, sizeof err);
	if (!yaml) {
		sb_log(o->log, SB_LOG_ERROR, "%s: %s", o->config, err);
		return SB_ERR_IO;
	}
	family_cfg *fc = calloc(1, sizeof *fc);
	sb_status st = fc ? read_config(yaml, len, fc, err, sizeof err) : SB_ERR_NOMEM;
	if (st != SB_OK) {
		sb_log(o->log, SB_LOG_ERROR, "%s: %s", o->config, fc ? err : "out of memory");
		free(fc);
		free(yaml);
		return st;
	}
	sbc_package *pk = NULL;
	st = sbc_state_open(ckpt, &pk, err, sizeof err);
	if (st != SB_OK) {
		sb_log(o->log, SB_LOG_ERROR, "%s: %s", ckpt, err);
		free(fc);
		free(yaml);
		return st;
	}
	fc->rf_flags = (find(pk, "layers.0.0.layers.0.0.to_gates.weight") ? SB_RF_GATES : 0) |
	               (find(pk, "layers.0.0.layers.0.0.rotary_embed.freqs") ? SB_RF_ROPE_FREQS : 0);
	check c = {pk, ckpt, "", 0};
	const int want = tensors(fc, check_one, &c);
	if (!c.bad && want >= 0 && (size_t)want != sbc_package_n_tensors(pk)) {
		/* every expected name is present: name one tensor the configuration does not make */
		names nm = {NULL, 0};
		tensors(fc, collect, &nm);
		const char *extra = NULL;
		for (size_t i = 0; i < sbc_package_n_tensors(pk) && !extra; i++) {
			const char *n = sbc_package_tensor_at(pk, i)->name;
			int known = 0;
			for (int k = 0; k < nm.n && !known; k++)
				known = !strcmp(nm.v[k], n);
			if (!known)
				extra = n;
		}
		snprintf(c.err, sizeof c.err, "%s: tensor '%s' is not one the configuration makes "
		         "(%zu tensors where it makes %d): the checkpoint and the configuration do not "
		         "belong together", ckpt, extra ? extra : "?", sbc_package_n_tensors(pk), want);
		for (int k = 0; k < nm.n; k++)
			free(nm.v[k]);
		free(nm.v);
		c.bad = 1;
	}
	if (want < 0 || c.bad) {
		sb_log(o->log, SB_LOG_ERROR, "%s", want < 0 ? "out of memory" : c.err);
		sbc_package_free(pk);
		free(fc);
		free(yaml);
		return want < 0 ? SB_ERR_NOMEM : SB_ERR_MODEL;
	}
	sbc_st_writer *w = sbc_st_writer_new();
	int ok = w != NULL;
	for (size_t i = 0; ok && i < sbc_package_n_tensors(pk); i++) {
		const sbc_named_tensor *t = sbc_package_tensor_at(pk, i);
		ok = sbc_st_add(w, t->name, &t->t, err, sizeof err) == SB_OK;
	}
	char name[256], stems[320] = "", rate[32];
	const char *from = o->output ? o->output : ckpt;
	const char *base = strrchr(from, '/') ? strrchr(from, '/') + 1 : from;
	snprintf(name, sizeof name, "%s", o->name ? o->name : base);
	char *dot = o->name ? NULL : strrchr(name, '.');
	if (dot && dot != name)
		*dot = '\0';
	for (int i = 0; i < fc->m.n_instruments; i++) {
		const size_t at = strlen(stems);
		snprintf(stems + at, sizeof stems - at, "%s%s", i ? "," : "", fc->m.instruments[i]);
	}
	snprintf(rate, sizeof rate, "%d", fc->m.audio_rate);
	const char *cbase = strrchr(ckpt, '/') ? strrchr(ckpt, '/') + 1 : ckpt;
	ok = ok && sbc_st_set_metadata(w, "name", name) == SB_OK &&
	     sbc_st_set_metadata(w, "family", sb_msst_family_name(fc->family)) == SB_OK &&
	     sbc_st_set_metadata(w, "config", yaml) == SB_OK &&
	     sbc_st_set_metadata(w, "sources", stems) == SB_OK &&
	     sbc_st_set_metadata(w, "samplerate", rate) == SB_OK &&
	     sbc_st_set_metadata(w, "checkpoint", cbase) == SB_OK;
	if (!ok) {
		sb_log(o->log, SB_LOG_ERROR, "%s", w ? err : "out of memory");
		st = SB_ERR_NOMEM;
	} else if (!o->dry_run) {
		st = sbc_st_write(w, o->output, o->overwrite, err, sizeof err);
		if (st != SB_OK)
			sb_log(o->log, SB_LOG_ERROR, "%s: %s", o->output, err);
	}
	if (st == SB_OK)
		sb_log(o->log, SB_LOG_INFO, "%s%s: '%s', %s, %zu tensors (%.1f MB), stems %s%s",
		       o->dry_run ? "checked, not written: " : "wrote ", o->output ? o->output : ckpt,
		       name, fc->label, sbc_st_count(w), (double)sbc_st_data_bytes(w) / 1e6, stems,
		       fc->m.target[0] ? " (the model's one output: the target)" : "");
	sbc_st_writer_free(w);
	sbc_package_free(pk);
	free(fc);
	free(yaml);
	return st;
}
