/* CLBlast behind the device seam (see cl_blas.h): the choice of matrix product per device, the
 * tuning files the CLBlast tuners write, and one product call that maps CLBlast's status codes
 * onto ours. Built without CLBlast (SB_HAVE_CLBLAST undefined) every device uses the backend's
 * own kernel and sb_cl_sgemm says SB_ERR_UNSUPPORTED.
 */
#include "backend/opencl/cl_blas.h"

#include <dirent.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#ifndef SB_CLBLAST_VERSION
#define SB_CLBLAST_VERSION ""
#endif

#ifdef SB_HAVE_CLBLAST
#include <clblast_c.h>
#include <jansson.h>
#endif

int sb_cl_blas_available(void)
{
#ifdef SB_HAVE_CLBLAST
	return 1;
#else
	return 0;
#endif
}

const char *sb_cl_gemm_name(sb_cl_gemm_kind k)
{
	return k == SB_CL_GEMM_CLBLAST ? "CLBlast " SB_CLBLAST_VERSION
	       : k == SB_CL_GEMM_TILED ? "tiled kernel"
	       : k == SB_CL_GEMM_TF32  ? "tensor cores, tf32" : "own kernel";
}

/* ---- tuning files ---- */

#define MAX_DEVICES 64
#define MAX_KERNELS 32
#define MAX_PARAMS 64

static pthread_mutex_t tune_lock = PTHREAD_MUTEX_INITIALIZER;
typedef struct {
	cl_device_id id;
	int kernels; /* how many kernels got tuned parameters */
} tuned_device;
static tuned_device tuned[MAX_DEVICES];
static int n_tuned;

int sb_cl_blas_tuned_kernels(sb_cl_device *d)
{
	int n = 0;
	pthread_mutex_lock(&tune_lock);
	for (int i = 0; i < n_tuned; i++)
		if (tuned[i].id == sb_cl_device_id(d))
			n = tuned[i].kernels;
	pthread_mutex_unlock(&tune_lock);
	return n;
}

#ifdef SB_HAVE_CLBLAST

typedef struct {
	char kernel[64];
	double time;
	char params[1024];
	char path[4096];
} best_entry;

typedef struct {
	const char *device, *vendor; /* what a file must name */
	best_entry best[MAX_KERNELS];
	int n;
	const sb_logger *log;
} tune_scan;

static double json_num(json_t *v)
{
	if (json_is_number(v))
		return json_number_value(v);
	if (json_is_string(v))
		return strtod(json_string_value(v), NULL);
	return -1.0;
}

/* The database name CLBlast overrides for a tuner's kernel family, by CLBlast's own rule (its
 * GetBestParametersFromJSONFile): "xgemm_2" -> "Xgemm", "xgemm_direct_1" -> "XgemmDirect",
 * "copy" -> "Copy", "padtranspose" -> "Padtranspose". The "best_kernel" field names the OpenCL
 * kernel function instead ("CopyMatrixFast"), which CLBlast does not accept. */
static const char *family_kernel(const char *family, char *out, size_t size)
{
	size_t n = 0;
	for (const char *p = family; *p && n + 1 < size; p++)
		if (*p != '_' && *p != '1' && *p != '2' && *p != '3')
			out[n++] = *p;
	out[n] = '\0';
	if (!n)
		return NULL;
	if (out[0] >= 'a' && out[0] <= 'z')
		out[0] = (char)(out[0] - 'a' + 'A');
	if (!strcmp(out, "Xgemmdirect"))
		snprintf(out, size, "XgemmDirect");
	else if (!strcmp(out, "Gemmroutine"))
		snprintf(out, size, "GemmRoutine");
	return out;
}

/* One tuner file: kept as the candidate for its kernel when it is this device's and faster. */
static void scan_file(tune_scan *s, const char *path)
{
	json_error_t jerr;
	json_t *root = json_load_file(path, 0, &jerr);
	if (!root || !json_is_object(root)) {
		sb_log(s->log, SB_LOG_WARNING, "CLBlast tuning file %s is damaged (%s, line %d): skipped",
		       path, jerr.text, jerr.line);
		json_decref(root);
		return;
	}
	const char *dev = json_string_value(json_object_get(root, "device"));
	const char *ven = json_string_value(json_object_get(root, "platform_vendor"));
	const char *prec = json_string_value(json_object_get(root, "precision"));
	const char *fam = json_string_value(json_object_get(root, "kernel_family"));
	char kern_buf[64] = "";
	const char *kern = fam ? family_kernel(fam, kern_buf, sizeof kern_buf) : NULL;
	const char *par = json_string_value(json_object_get(root, "best_parameters"));
	const double t = json_num(json_object_get(root, "best_time"));
	if (!dev || !ven || strcmp(dev, s->device) || strcmp(ven, s->vendor) || !prec ||
	    strcmp(prec, "32")) {
		json_decref(root); /* another device's, or another precision's: not ours to judge */
		return;
	}
	if (!kern || !par || !*kern || strlen(kern) >= 64 || strlen(par) >= 1024) {
		sb_log(s->log, SB_LOG_WARNING, "CLBlast tuning file %s has no usable kernel_family and "
		       "best_parameters: skipped", path);
		json_decref(root);
		return;
	}
	int at = -1;
	for (int i = 0; i < s->n; i++)
		if (!strcmp(s->best[i].kernel, kern))
			at = i;
	if (at < 0 && s->n < MAX_KERNELS) {
		at = s->n++;
		snprintf(s->best[at].kernel, sizeof s->best[at].kernel, "%s", kern);
		s->best[at].time = -1.0;
	}
	/* a file without a time never displaces one with a time */
	if (at >= 0 && (s->best[at].time < 0 || (t >= 0 && t < s->best[at].time))) {
		s->best[at].time = t;
		snprintf(s->best[at].params, sizeof s->best[at].params, "%s", par);
		snprintf(s->best[at].path, sizeof s->best[at].path, "%s", path);
	}
	json_decref(root);
}

static int ends_with(const char *s, const char *tail)
{
	const size_t n = strlen(s), m = strlen(tail);
	return n >= m && !strcmp(s + n - m, tail);
}

static void scan_dir(tune_scan *s, const char *dir, int depth)
{
	DIR *d = opendir(dir);
	if (!d)
		return;
	struct dirent *e;
	while ((e = readdir(d))) {
		if (e->d_name[0] == '.')
			continue;
		char path[4096];
		if (snprintf(path, sizeof path, "%s/%s", dir, e->d_name) >= (int)sizeof path)
			continue;
		struct stat sb;
		if (stat(path, &sb) != 0)
			continue;
		if (S_ISDIR(sb.st_mode) && depth == 0)
			scan_dir(s, path, 1);
		else if (S_ISREG(sb.st_mode) && ends_with(e->d_name, ".json"))
			scan_file(s, path);
	}
	closedir(d);
}

/* "GEMMK=0 KREG=1 ..." to names and values; extra entries (PRECISION) CLBlast ignores */
static int apply_entry(cl_device_id id, const best_entry *b, const sb_logger *log)
{
	char buf[1024];
	snprintf(buf, sizeof buf, "%s", b->params);
	const char *names[MAX_PARAMS];
	size_t values[MAX_PARAMS];
	size_t n = 0;
	char *save = NULL;
	for (char *tok = strtok_r(buf, " \t", &save); tok; tok = strtok_r(NULL, " \t", &save)) {
		char *eq = strchr(tok, '='), *end = NULL;
		if (!eq || eq == tok || n == MAX_PARAMS) {
			sb_log(log, SB_LOG_WARNING, "CLBlast tuning file %s: cannot read '%s' in "
			       "best_parameters: skipped", b->path, tok);
			return 0;
		}
		*eq = '\0';
		const unsigned long long v = strtoull(eq + 1, &end, 10);
		if (!*(eq + 1) || *end || eq[1] == '-') {
			sb_log(log, SB_LOG_WARNING, "CLBlast tuning file %s: %s has no whole number: "
			       "skipped", b->path, tok);
			return 0;
		}
		names[n] = tok;
		values[n++] = (size_t)v;
	}
	const CLBlastStatusCode rc =
		CLBlastOverrideParameters(id, b->kernel, CLBlastPrecisionSingle, n, names, values);
	if (rc != CLBlastSuccess) {
		sb_log(log, SB_LOG_WARNING, "CLBlast refused the tuned parameters for %s in %s "
		       "(status %d%s): its defaults stay", b->kernel, b->path, (int)rc,
		       rc == CLBlastMissingOverrideParameter ? ", a parameter is missing" :
		       rc == CLBlastInvalidOverrideKernel ? ", no such kernel" : "");
		return 0;
	}
	sb_log(log, SB_LOG_INFO, "CLBlast: tuned parameters for %s from %s", b->kernel, b->path);
	return 1;
}

static int apply_tuning(sb_cl_device *d)
{
	const sb_logger *log = sb_cl_device_logger(d);
	cl_device_id id = sb_cl_device_id(d);
	char name[256] = "", vendor[256] = "";
	cl_platform_id plat = NULL;
	clGetDeviceInfo(id, CL_DEVICE_NAME, sizeof name - 1, name, NULL);
	clGetDeviceInfo(id, CL_DEVICE_PLATFORM, sizeof plat, &plat, NULL);
	if (plat)
		clGetPlatformInfo(plat, CL_PLATFORM_VENDOR, sizeof vendor - 1, vendor, NULL);
	tune_scan *s = calloc(1, sizeof *s);
	if (!s)
		return 0;
	s->device = name;
	s->vendor = vendor;
	s->log = log;
	const char *env = sb_knob_get("SB_CLBLAST_TUNING");
	const char *const extra[] = {env && *env ? env : NULL, NULL};
	char dirs[16][4096];
	const size_t nd = sb_data_dirs("clblast", extra, dirs, 16);
	for (size_t i = 0; i < nd; i++)
		scan_dir(s, dirs[i], 0);
	int applied = 0;
	for (int i = 0; i < s->n; i++)
		applied += apply_entry(id, &s->best[i], log);
	if (!s->n)
		sb_log(log, SB_LOG_INFO, "CLBlast: no tuning files for %s: CLBlast's own defaults "
		       "(tools/clblast_tune.sh makes them)", name);
	free(s);
	return applied;
}

#endif /* SB_HAVE_CLBLAST */

/* SB_CL_GEMM's choice, CLBlast when it names none (and under "auto", for the shapes not
 * measured yet) */
static sb_cl_gemm_kind asked(const char *env)
{
	return env && !strcmp(env, "own") ? SB_CL_GEMM_OWN
	       : env && !strcmp(env, "tiled") ? SB_CL_GEMM_TILED
	       : env && !strcmp(env, "tf32")  ? SB_CL_GEMM_TF32 : SB_CL_GEMM_CLBLAST;
}

sb_cl_gemm_kind sb_cl_gemm_planned(void)
{
	const sb_cl_gemm_kind k = asked(sb_knob_get("SB_CL_GEMM"));
	return k == SB_CL_GEMM_CLBLAST && !sb_cl_blas_available() ? SB_CL_GEMM_OWN : k;
}

sb_cl_gemm_kind sb_cl_gemm_choose(sb_cl_device *d)
{
	const char *env = sb_knob_get("SB_CL_GEMM");
	sb_cl_gemm_kind k = asked(env);
	if (k == SB_CL_GEMM_CLBLAST && env && *env && strcmp(env, "clblast") && strcmp(env, "auto"))
		sb_log(sb_cl_device_logger(d), SB_LOG_WARNING,
		       "SB_CL_GEMM='%s' is none of 'auto', 'clblast', 'own', 'tiled', 'tf32': ignored",
		       env);
	if (k == SB_CL_GEMM_TILED || k == SB_CL_GEMM_TF32)
		return k;
#ifdef SB_HAVE_CLBLAST
	if (k == SB_CL_GEMM_CLBLAST) {
		pthread_mutex_lock(&tune_lock);
		int seen = 0;
		for (int i = 0; i < n_tuned; i++)
			seen |= tuned[i].id == sb_cl_device_id(d);
		if (!seen) {
			const int n = apply_tuning(d);
			if (n_tuned < MAX_DEVICES)
				tuned[n_tuned++] = (tuned_device){sb_cl_device_id(d), n};
		}
		pthread_mutex_unlock(&tune_lock);
	}
#else
	if (env && !strcmp(env, "clblast"))
		sb_log(sb_cl_device_logger(d), SB_LOG_WARNING,
		       "SB_CL_GEMM=clblast, but this build has no CLBlast: using the own kernel");
	k = SB_CL_GEMM_OWN;
#endif
	return k;
}

int sb_cl_gemm_measured(const sb_device *p)
{
	return sb_cl_measured(p, "SB_CL_GEMM");
}

int sb_cl_measured(const sb_device *p, const char *var)
{
	const char *env = sb_knob_get(var);
	if (env && *env)
		return !strcmp(env, "auto");
	const sb_device_type t = p->type;
	return t == SB_DEV_GPU_DISCRETE || t == SB_DEV_GPU_INTEGRATED || t == SB_DEV_ACCELERATOR;
}

/* ---- products ---- */

#ifdef SB_HAVE_CLBLAST
/* CLBlast (1.5.3, database.cpp) fills its static kernel database on the first routine it
 * builds, without a lock: two devices starting their first product at once (one song shared
 * by two GPUs, two tracks on two GPUs) would both write it. Until one product has gone
 * through, products wait for each other; after that the database is only read. */
static pthread_mutex_t first_lock = PTHREAD_MUTEX_INITIALIZER;
static atomic_int first_done;
#endif

sb_status sb_cl_sgemm(sb_cl_device *d, cl_command_queue q, int M, int N, int K, float alpha,
                      cl_mem A, size_t aoff, int lda, long sa, cl_mem B, size_t boff, int ldb,
                      long sb, int tb, float beta, cl_mem C, size_t coff, int ldc, long sc,
                      int batch)
{
#ifdef SB_HAVE_CLBLAST
	const CLBlastTranspose bt = tb ? CLBlastTransposeYes : CLBlastTransposeNo;
	CLBlastStatusCode rc;
	const int first = !atomic_load_explicit(&first_done, memory_order_acquire);
	if (first)
		pthread_mutex_lock(&first_lock);
	if (batch == 1)
		rc = CLBlastSgemm(CLBlastLayoutRowMajor, CLBlastTransposeNo, bt, (size_t)M, (size_t)N,
		                  (size_t)K, alpha, A, aoff, (size_t)lda, B, boff, (size_t)ldb, beta, C,
		                  coff, (size_t)ldc, &q, NULL);
	else
		rc = CLBlastSgemmStridedBatched(CLBlastLayoutRowMajor, CLBlastTransposeNo, bt,
		                                (size_t)M, (size_t)N, (size_t)K, alpha, A, aoff,
		                                (size_t)lda, (size_t)sa, B, boff, (size_t)ldb,
		                                (size_t)sb, beta, C, coff, (size_t)ldc, (size_t)sc,
		                                (size_t)batch, &q, NULL);
	if (first) {
		if (rc == CLBlastSuccess)
			atomic_store_explicit(&first_done, 1, memory_order_release);
		pthread_mutex_unlock(&first_lock);
	}
	if (rc == CLBlastSuccess)
		return SB_OK;
	/* out of memory and a lost device mean what they mean for our own kernels */
	switch ((int)rc) {
	case CL_MEM_OBJECT_ALLOCATION_FAILURE:
	case CL_OUT_OF_RESOURCES:
	case CL_OUT_OF_HOST_MEMORY:
	case CL_DEVICE_NOT_AVAILABLE:
	case CL_INVALID_COMMAND_QUEUE:
	case CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST:
	case -9999:
		return sb_cl_status(d, (cl_int)rc, "CLBlast matrix product");
	default:
		break;
	}
	sb_log(sb_cl_device_logger(d), SB_LOG_WARNING,
	       "CLBlast refused a %d x %d x %d product (batch %d): status %d (%s)", M, N, K, batch,
	       (int)rc, rc > -1000 ? sb_cl_error_name((cl_int)rc) : "CLBlast's own code");
	return SB_ERR_UNSUPPORTED;
#else
	(void)d, (void)q, (void)M, (void)N, (void)K, (void)alpha, (void)A, (void)aoff, (void)lda, (void)sa;
	(void)B, (void)boff, (void)ldb, (void)sb, (void)tb, (void)beta, (void)C, (void)coff;
	(void)ldc, (void)sc, (void)batch;
	return SB_ERR_UNSUPPORTED;
#endif
}
