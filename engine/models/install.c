/* Model installer (install.h): libcurl downloads, SHA-256 checks (OpenSSL's libcrypto, which
 * libcurl already brings), in-process conversion, an atomic rename into the model folder. */
#include "models/install.h"

#include "convert/convert.h"
#include "io/temp_file.h"
#include "models/families.h"

#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define MAX_TRIES 3
#define CONNECT_TIMEOUT_S 30L

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static int curl_ok;

static void curl_init(void)
{
	curl_ok = curl_global_init(CURL_GLOBAL_DEFAULT) == CURLE_OK;
}

static sb_status errno_status(int e)
{
	return e == ENOSPC || e == EDQUOT || e == EFBIG ? SB_ERR_NOSPACE : SB_ERR_IO;
}

static void sb_install_model_dir(const sb_install_opts *o, char *buf, size_t len)
{
	if (o && o->model_dir && *o->model_dir) {
		snprintf(buf, len, "%s", o->model_dir);
		return;
	}
	char dirs[1][4096];
	if (sb_model_dirs(NULL, dirs, 1) == 1)
		snprintf(buf, len, "%s", dirs[0]);
	else
		snprintf(buf, len, "/tmp/stembridge/models");
}

static void cache_dir_of(const sb_install_opts *o, char *buf, size_t len)
{
	if (o->cache_dir && *o->cache_dir) {
		snprintf(buf, len, "%s", o->cache_dir);
		return;
	}
	const char *xdg = sb_knob_get("XDG_CACHE_HOME"), *home = sb_knob_get("HOME");
	if (xdg && xdg[0] == '/')
		snprintf(buf, len, "%s/stembridge/downloads", xdg);
	else
		snprintf(buf, len, "%s/.cache/stembridge/downloads", home && *home ? home : "/tmp");
}

/* mkdir -p DIR and a file created and removed in it: the folder can take files */
static sb_status writable_dir(const char *dir, const char *what, const sb_logger *log)
{
	char probe[4200];
	snprintf(probe, sizeof probe, "%s/.probe", dir);
	sb_temp t;
	if (sb_make_parents(probe) != 0 || sb_temp_create(probe, &t) != 0) {
		const int e = errno;
		sb_log(log, SB_LOG_ERROR, "cannot write to the %s %s: %s", what, dir, strerror(e));
		return errno_status(e);
	}
	sb_temp_discard(&t);
	return SB_OK;
}

/* ---- SHA-256 ---- */

static sb_status sha256_file(const char *path, char hex[65])
{
	FILE *f = fopen(path, "rb");
	if (!f)
		return SB_ERR_IO;
	EVP_MD_CTX *ctx = EVP_MD_CTX_new();
	unsigned char buf[1 << 16], md[32];
	unsigned int mdlen = 0;
	int ok = ctx && EVP_DigestInit_ex(ctx, EVP_sha256(), NULL) == 1;
	size_t n;
	while (ok && (n = fread(buf, 1, sizeof buf, f)) > 0)
		ok = EVP_DigestUpdate(ctx, buf, n) == 1;
	ok = ok && !ferror(f) && EVP_DigestFinal_ex(ctx, md, &mdlen) == 1 && mdlen == 32;
	EVP_MD_CTX_free(ctx);
	fclose(f);
	if (!ok)
		return SB_ERR_IO;
	for (int i = 0; i < 32; i++)
		snprintf(hex + 2 * i, 3, "%02x", md[i]);
	return SB_OK;
}

/* ---- one download ---- */

typedef struct {
	const sb_install_opts *o;
	sb_install_progress *p;
	FILE *f;
	int write_errno;
	uint64_t base;        /* bytes of the file before this transfer (a resume) */
	uint64_t before;      /* bytes of the model's earlier files */
	uint64_t model_total;
	double t0, last_t, last_report;
	uint64_t last_bytes;
	double rate;
} xfer;

static size_t on_write(char *data, size_t size, size_t nmemb, void *user)
{
	xfer *x = user;
	const size_t n = size * nmemb;
	if (fwrite(data, 1, n, x->f) != n) {
		x->write_errno = errno ? errno : EIO;
		return 0;
	}
	return n;
}

static void report(xfer *x, uint64_t now_bytes, uint64_t total_bytes, int force)
{
	const double t = sb_now();
	if (t - x->last_t >= 0.5) {
		const double r = (double)(now_bytes - x->last_bytes) / (t - x->last_t);
		x->rate = x->rate > 0 ? 0.7 * x->rate + 0.3 * r : r;
		x->last_t = t;
		x->last_bytes = now_bytes;
	}
	if (!force && t - x->last_report < 0.2)
		return;
	x->last_report = t;
	sb_install_progress *p = x->p;
	p->file_done = x->base + now_bytes;
	if (total_bytes)
		p->file_total = x->base + total_bytes;
	p->done = x->before + p->file_done;
	p->total = x->model_total > p->done ? x->model_total : p->done;
	p->rate = x->rate;
	p->eta_s = x->rate > 1 ? (double)(p->total - p->done) / x->rate : -1;
	if (x->o->progress)
		x->o->progress(x->o->progress_user, p);
}

static int on_progress(void *user, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal,
                       curl_off_t ulnow)
{
	(void)ultotal;
	(void)ulnow;
	xfer *x = user;
	if (x->o->cancel && atomic_load(x->o->cancel))
		return 1;
	report(x, (uint64_t)dlnow, (uint64_t)dltotal, 0);
	return 0;
}

static const char *host_of(const char *url, char *buf, size_t len)
{
	const char *p = strstr(url, "://");
	p = p ? p + 3 : url;
	size_t n = strcspn(p, "/?#");
	snprintf(buf, len, "%.*s", (int)n, p);
	return buf;
}

static void mb(uint64_t bytes, char *buf, size_t len)
{
	snprintf(buf, len, "%.1f MB", (double)bytes / 1e6);
}

/* Fetches url into 'partial' (appending to what is there), then renames it to 'dest'. */
static sb_status fetch(const sb_install_opts *o, const char *url, const char *partial,
                       const char *dest, const char *name, sb_install_progress *p,
                       uint64_t before, uint64_t model_total)
{
	const sb_logger *log = o->log;
	char host[256], have[32];
	host_of(url, host, sizeof host);
	sb_status st = SB_ERR_NETWORK;
	int restarted = 0;
	for (int attempt = 1; attempt <= MAX_TRIES; attempt++) {
		const int fd = open(partial, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
		if (fd < 0) {
			const int e = errno;
			sb_log(log, SB_LOG_ERROR, "cannot write %s: %s", partial, strerror(e));
			return errno_status(e);
		}
		if (flock(fd, LOCK_EX | LOCK_NB) != 0 && errno == EWOULDBLOCK) {
			close(fd);
			sb_log(log, SB_LOG_ERROR, "another install is downloading %s right now: wait for it "
			       "to finish", name);
			return SB_ERR_EXISTS;
		}
		struct stat sbuf;
		fstat(fd, &sbuf);
		xfer x = {o, p, fdopen(fd, "ab"), 0, (uint64_t)sbuf.st_size, before, model_total,
		          sb_now(), sb_now(), 0, 0, 0};
		if (!x.f) {
			close(fd);
			return SB_ERR_NOMEM;
		}
		p->resumed = x.base > 0;
		p->file_done = x.base;
		char errbuf[CURL_ERROR_SIZE] = "";
		CURL *c = curl_easy_init();
		if (!c) {
			fclose(x.f);
			sb_log(log, SB_LOG_ERROR, "cannot start a download (libcurl)");
			return SB_ERR_NOMEM;
		}
		curl_easy_setopt(c, CURLOPT_URL, url);
		curl_easy_setopt(c, CURLOPT_ERRORBUFFER, errbuf);
		curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
		curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 1L);
		curl_easy_setopt(c, CURLOPT_MAXREDIRS, 5L);
		curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
		curl_easy_setopt(c, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
		curl_easy_setopt(c, CURLOPT_FAILONERROR, 1L);
		curl_easy_setopt(c, CURLOPT_USERAGENT, "stembridge/0.1.0");
		curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT, CONNECT_TIMEOUT_S);
		curl_easy_setopt(c, CURLOPT_LOW_SPEED_LIMIT, 1024L);
		curl_easy_setopt(c, CURLOPT_LOW_SPEED_TIME, (long)(o->stall_s > 0 ? o->stall_s : 60));
		curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_write);
		curl_easy_setopt(c, CURLOPT_WRITEDATA, &x);
		curl_easy_setopt(c, CURLOPT_NOPROGRESS, 0L);
		curl_easy_setopt(c, CURLOPT_XFERINFOFUNCTION, on_progress);
		curl_easy_setopt(c, CURLOPT_XFERINFODATA, &x);
		if (x.base > 0)
			curl_easy_setopt(c, CURLOPT_RESUME_FROM_LARGE, (curl_off_t)x.base);
		const CURLcode rc = curl_easy_perform(c);
		long code = 0;
		curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &code);
		curl_easy_cleanup(c);
		int e = 0;
		if (fflush(x.f) != 0 || fsync(fileno(x.f)) != 0)
			e = errno;
		if (fclose(x.f) != 0 && !e)
			e = errno;
		if (rc == CURLE_OK && !e) {
			if (rename(partial, dest) != 0) {
				e = errno;
				sb_log(log, SB_LOG_ERROR, "cannot name %s: %s", dest, strerror(e));
				return errno_status(e);
			}
			return SB_OK;
		}
		struct stat now;
		mb(stat(partial, &now) == 0 ? (uint64_t)now.st_size : 0, have, sizeof have);
		if (rc == CURLE_WRITE_ERROR || e) {
			const int we = x.write_errno ? x.write_errno : e ? e : EIO;
			char dir[4096];
			sb_dir_of(partial, dir, sizeof dir);
			sb_log(log, SB_LOG_ERROR, "downloading %s into %s: %s%s", name, dir,
			       errno_status(we) == SB_ERR_NOSPACE ? "no space left: " : "", strerror(we));
			return errno_status(we);
		}
		if (rc == CURLE_ABORTED_BY_CALLBACK) {
			sb_log(log, SB_LOG_WARNING, "the download of %s stopped at %s; it resumes from there "
			       "next time", name, have);
			return SB_ERR_CANCELLED;
		}
		if ((rc == CURLE_HTTP_RETURNED_ERROR && code == 416) || rc == CURLE_RANGE_ERROR) {
			/* the server will not continue this partial file (changed, or no ranges) */
			if (!restarted++) {
				if (truncate(partial, 0) != 0)
					unlink(partial);
				attempt--;
				continue;
			}
		}
		if (rc == CURLE_HTTP_RETURNED_ERROR) {
			sb_log(log, SB_LOG_ERROR, "%s: the server answered HTTP %ld%s", url, code,
			       code == 404 ? " (not found: is the base URL right?)" : "");
			return SB_ERR_NETWORK;
		}
		if (rc == CURLE_COULDNT_RESOLVE_HOST || rc == CURLE_COULDNT_RESOLVE_PROXY ||
		    rc == CURLE_COULDNT_CONNECT) {
			sb_log(log, SB_LOG_ERROR, "cannot reach %s to download %s (offline? behind a proxy, "
			       "set https_proxy): %s", host, name, errbuf[0] ? errbuf : curl_easy_strerror(rc));
			return SB_ERR_NETWORK;
		}
		const int transient = rc == CURLE_PARTIAL_FILE || rc == CURLE_RECV_ERROR ||
		                      rc == CURLE_GOT_NOTHING || rc == CURLE_SEND_ERROR ||
		                      rc == CURLE_OPERATION_TIMEDOUT;
		if (!transient) {
			sb_log(log, SB_LOG_ERROR, "downloading %s from %s failed: %s", name, host,
			       errbuf[0] ? errbuf : curl_easy_strerror(rc));
			return SB_ERR_NETWORK;
		}
		if (attempt == MAX_TRIES) {
			sb_log(log, SB_LOG_ERROR, "downloading %s from %s: %s, %d times; %s are kept and the "
			       "same command resumes from there", name, host,
			       rc == CURLE_OPERATION_TIMEDOUT ? "the transfer stalled"
			                                      : "the connection broke",
			       MAX_TRIES, have);
			return SB_ERR_NETWORK;
		}
		sb_log(log, SB_LOG_WARNING, "downloading %s: %s at %s; resuming (try %d of %d)", name,
		       rc == CURLE_OPERATION_TIMEDOUT ? "the transfer stalled" : "the connection broke",
		       have, attempt + 1, MAX_TRIES);
		for (int i = 0; i < 10 * attempt; i++) { /* 1 s, then 2 s, waiting for a cancel too */
			if (o->cancel && atomic_load(o->cancel))
				return SB_ERR_CANCELLED;
			const struct timespec ts = {0, 100000000};
			nanosleep(&ts, NULL);
		}
	}
	return st;
}

/* A catalogue file into the cache, complete and checked. */
static sb_status get_file(const sb_install_opts *o, const char *base_url, int mirror,
                          const char *cache, const sb_catalog_model *m, int i,
                          sb_install_progress *p, uint64_t before, char *dest, size_t dlen)
{
	const sb_catalog_file *f = &m->files[i];
	const sb_logger *log = o->log;
	char url[2048], partial[4300];
	/* where it is published, unless a mirror was given (which serves the path) */
	if (f->url[0] && !mirror)
		snprintf(url, sizeof url, "%s", f->url);
	else
		snprintf(url, sizeof url, "%s%s%s", base_url,
		         base_url[0] && base_url[strlen(base_url) - 1] == '/' ? "" : "/", f->path);
	snprintf(dest, dlen, "%s/%s", cache, f->name);
	snprintf(partial, sizeof partial, "%.4200s.partial", dest);
	p->file = f->name;
	p->file_index = i + 1;
	p->file_total = f->bytes;
	for (int fresh = 0; fresh < 2; fresh++) {
		struct stat sbuf;
		int resumed = 0;
		if (stat(dest, &sbuf) != 0) {
			resumed = stat(partial, &sbuf) == 0 && sbuf.st_size > 0;
			p->stage = SB_INSTALL_DOWNLOADING;
			p->stage_name = "downloading";
			sb_log(log, SB_LOG_INFO, "%s: %s %s", m->name, resumed ? "resuming" : "downloading",
			       url);
			const sb_status st = fetch(o, url, partial, dest, f->name, p, before, m->bytes);
			if (st != SB_OK)
				return st;
		}
		p->stage = SB_INSTALL_VERIFYING;
		p->stage_name = "verifying";
		if (o->progress)
			o->progress(o->progress_user, p);
		char hex[65];
		if (sha256_file(dest, hex) != SB_OK) {
			sb_log(log, SB_LOG_ERROR, "cannot read %s back to check it", dest);
			return SB_ERR_IO;
		}
		if (f->unverified) {
			/* no digest published: the exact size here, a full load at the conversion */
			if (f->bytes && !f->approximate && stat(dest, &sbuf) == 0 &&
			    (uint64_t)sbuf.st_size != f->bytes) {
				unlink(dest);
				sb_log(log, SB_LOG_ERROR, "%s: %lld bytes where the catalogue expects %llu (the "
				       "download is damaged or the server holds another file); nothing was "
				       "installed", f->name, (long long)sbuf.st_size,
				       (unsigned long long)f->bytes);
				return SB_ERR_FORMAT;
			}
			sb_log(log, SB_LOG_WARNING, "%s: its publisher gives no digest; its SHA-256 here is "
			       "%s (checked %s)", f->name, hex, f->config ? "by reading it as the "
			       "configuration" : "by its size and a full load against its configuration");
			return SB_OK;
		}
		const size_t k = strlen(f->sha256);
		if (!strncmp(hex, f->sha256, k))
			return SB_OK;
		unlink(dest);
		if (resumed && !fresh) {
			sb_log(log, SB_LOG_WARNING, "%s: the resumed download does not match its checksum; "
			       "downloading it again from the start", f->name);
			continue;
		}
		sb_log(log, SB_LOG_ERROR, "%s: checksum mismatch: expected SHA-256 %.*s..., got "
		       "%.*s... (the download is damaged or the server holds another file); nothing "
		       "was installed", f->name, (int)(k < 16 ? k : 16), f->sha256,
		       (int)(k < 16 ? k : 16), hex);
		return SB_ERR_FORMAT;
	}
	return SB_ERR_FORMAT;
}

sb_status sb_model_install(const sb_catalog *cat, const char *name, const sb_install_opts *o,
                           char *path_out, size_t len)
{
	const sb_logger *log = o->log;
	const sb_catalog_model *m = sb_catalog_find(cat, name);
	if (!m) {
		char list[512] = "";
		for (int i = 0, at = 0; i < sb_catalog_count(cat); i++)
			at += snprintf(list + at, sizeof list - (size_t)at, "%s%s", i ? ", " : "",
			               sb_catalog_at(cat, i)->name);
		sb_log(log, SB_LOG_ERROR, "no model '%s' in the catalogue (%s: %s)", name,
		       sb_catalog_origin(cat), list);
		return SB_ERR_MODEL;
	}
	char dir[4096], final[4200], cache[4096];
	sb_install_model_dir(o, dir, sizeof dir);
	snprintf(final, sizeof final, "%s/%s.safetensors", dir, m->name);
	if (path_out)
		snprintf(path_out, len, "%s", final);
	struct stat sbuf;
	if (!o->force && stat(final, &sbuf) == 0) {
		sb_log(log, SB_LOG_INFO, "%s is already installed: %s", m->name, final);
		return SB_OK;
	}
	sb_status st = writable_dir(dir, "model folder", log);
	if (st != SB_OK)
		return st;
	cache_dir_of(o, cache, sizeof cache);
	if ((st = writable_dir(cache, "download folder", log)) != SB_OK)
		return st;
	pthread_once(&curl_once, curl_init);
	if (!curl_ok) {
		sb_log(log, SB_LOG_ERROR, "libcurl did not start");
		return SB_ERR_NETWORK;
	}
	const char *env = sb_knob_get("STEMBRIDGE_MODEL_URL");
	const char *base = o->base_url && *o->base_url ? o->base_url
	                 : env && *env               ? env
	                                             : sb_catalog_base_url(cat);
	sb_install_progress p = {.model = m->name, .n_files = m->n_files, .eta_s = -1};
	char files[SB_CATALOG_MAX_FILES][4200];
	const char *inputs[SB_CATALOG_MAX_FILES];
	uint64_t before = 0;
	for (int i = 0; i < m->n_files; i++) {
		st = get_file(o, base, base != sb_catalog_base_url(cat), cache, m, i, &p, before, files[i],
		              sizeof files[i]);
		if (st != SB_OK)
			return st;
		inputs[i] = files[i];
		if (stat(files[i], &sbuf) == 0)
			before += (uint64_t)sbuf.st_size;
	}
	if (o->cancel && atomic_load(o->cancel))
		return SB_ERR_CANCELLED;

	/* convert into a temporary file of ours in the model folder, open it as a model, and
	 * only then give it its name */
	p.stage = SB_INSTALL_CONVERTING;
	p.stage_name = "converting";
	if (o->progress)
		o->progress(o->progress_user, &p);
	sb_log(log, SB_LOG_INFO, "%s: converting %d checkpoint%s", m->name, m->n_files,
	       m->n_files == 1 ? "" : "s");
	sb_temp stage;
	if (sb_temp_create(final, &stage) != 0) {
		const int e = errno;
		sb_log(log, SB_LOG_ERROR, "cannot write to the model folder %s: %s", dir, strerror(e));
		return errno_status(e);
	}
	/* a model of MSST's: the checkpoint, and its configuration beside it */
	const char *config = NULL;
	int n_in = 0;
	for (int i = 0; i < m->n_files; i++) {
		if (m->files[i].config)
			config = files[i];
		else
			inputs[n_in++] = files[i];
	}
	sbc_convert_opts co = {
		.inputs = inputs,
		.n_inputs = n_in,
		.config = config,
		.output = stage.path,
		.name = m->name,
		.weights = m->bag_weights[0] ? m->bag_weights : NULL,
		.overwrite = 1,
		.log = log,
	};
	st = sbc_convert(&co);
	if (st == SB_OK) {
		sb_model *model = NULL;
		const sb_model_family *f = sb_model_family_of_catalog(m->family);
		st = f ? f->open(stage.path, m->name, log, &model) : SB_ERR_MODEL;
		if (st == SB_OK && model->info.stems != m->stems) {
			char got[128], want[128];
			sb_stem_mask_text(model->info.stems, ", ", got, sizeof got);
			sb_stem_mask_text(m->stems, ", ", want, sizeof want);
			sb_log(log, SB_LOG_ERROR, "%s: the checkpoints make the stems %s, the catalogue "
			       "promises %s: not installed", m->name, got, want);
			st = SB_ERR_MODEL;
		}
		sb_model_free(model);
	}
	if (st == SB_OK && sb_place_file(stage.path, final, o->force) != 0) {
		const int e = errno;
		sb_log(log, SB_LOG_ERROR, "cannot name %s: %s", final, strerror(e));
		st = e == EEXIST ? SB_ERR_EXISTS : errno_status(e);
	}
	if (st == SB_OK) {
		stage.path[0] = '\0';
		if (sb_sync_dir(dir) != 0) {
			const int e = errno;
			sb_log(log, SB_LOG_ERROR, "cannot sync the model folder %s: %s", dir, strerror(e));
			unlink(final);
			st = errno_status(e);
		}
	}
	sb_temp_discard(&stage);
	if (st != SB_OK)
		return st;
	if (!o->keep_downloads)
		for (int i = 0; i < m->n_files; i++)
			unlink(files[i]);
	p.stage = SB_INSTALL_DONE;
	p.stage_name = "done";
	p.done = p.total = before;
	p.eta_s = 0;
	if (o->progress)
		o->progress(o->progress_user, &p);
	sb_log(log, SB_LOG_INFO, "%s installed: %s", m->name, final);
	return SB_OK;
}

sb_status sb_model_remove(const char *name, const char *model_dir, const sb_logger *log)
{
	sb_install_opts o = {.model_dir = model_dir};
	char dir[4096], path[4200];
	sb_install_model_dir(&o, dir, sizeof dir);
	if (strchr(name, '/') || !strcmp(name, "builtin") || !*name) {
		sb_log(log, SB_LOG_ERROR, "'%s' is not an installed model's name", name);
		return SB_ERR_INVALID;
	}
	snprintf(path, sizeof path, "%s/%s.safetensors", dir, name);
	if (unlink(path) == 0) {
		sb_sync_dir(dir);
		sb_log(log, SB_LOG_INFO, "removed %s", path);
		return SB_OK;
	}
	const int e = errno;
	char dirs[16][4096];
	const size_t n = sb_model_dirs(NULL, dirs, 16);
	for (size_t i = 0; e == ENOENT && i < n; i++) {
		snprintf(path, sizeof path, "%s/%s.safetensors", dirs[i], name);
		if (access(path, F_OK) == 0) {
			sb_log(log, SB_LOG_ERROR, "%s is installed in %s, not in your model folder %s: "
			       "remove it there (a system-wide install is your package manager's)", name,
			       dirs[i], dir);
			return SB_ERR_MODEL;
		}
	}
	if (e == ENOENT) {
		sb_log(log, SB_LOG_ERROR, "%s is not installed (no %s)", name, path);
		return SB_ERR_MODEL;
	}
	sb_log(log, SB_LOG_ERROR, "cannot remove %s: %s", path, strerror(e));
	return errno_status(e);
}
