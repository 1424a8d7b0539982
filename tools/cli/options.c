/* The options separate and batch share (options.h). */
#include "options.h"

#include "stembridge.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <signal.h>
#include <string.h>

const char sb_cli_options_help[] =
	"  -o, --output DIR        where the stems go (required)\n"
	"  --device D              auto (default: the best device; every GPU when there are\n"
	"                          several), all (every GPU and the CPU), cpu, device:N (the\n"
	"                          N-th accelerator), a backend's NAME:N (opencl:0), or a comma\n"
	"                          list of them; 'stembridge devices' lists them\n"
	"  --batch N               segments per forward pass on each device (default: the\n"
	"                          device's; more is faster where memory allows)\n"
	"  --model NAME            auto (default: the best installed model, htdemucs first, else\n"
	"                          builtin), builtin, htdemucs, htdemucs_ft, htdemucs_6s, any\n"
	"                          model 'stembridge models' lists, or a .safetensors file\n"
	"  --ensemble A,B[,..]     an ensemble: the models' stems combined per stem, each over the\n"
	"                          models that make it (the manifest names them)\n"
	"  --ensemble-mode M       avg_wave (default: the weighted mean of the waveforms),\n"
	"                          max_spec or min_spec (per time-frequency bin the value of the\n"
	"                          largest or smallest magnitude)\n"
	"  --ensemble-weights W,.. one weight per model of --ensemble (default: equal)\n"
	"  --quality best          with auto: the best combination the installed models allow for\n"
	"                          each stem, a published ensemble where its figure is higher\n"
	"  --model-other           keep the model's own \"other\" (default: other = input minus\n"
	"                          the other stems written, so they add back to the input)\n"
	"  --shifts N              Demucs: average N random time shifts (slower, a little\n"
	"                          better; seeded, so runs repeat)\n"
	"  --overlap F             Demucs: segment overlap, above 0 up to 0.9 (default 0.25)\n"
	"  --stems LIST            which of the model's stems to write (default: all of them):\n"
	"                          vocals,drums,bass,other, and guitar,piano with htdemucs_6s;\n"
	"                          stems left out fold into other (vocals,other = karaoke);\n"
	"                          special models' lead_vocals, backing_vocals, dry, reverb,\n"
	"                          kick, snare, toms, hihat, cymbals, ride, crash\n"
	"  --format wav|flac       file format (default wav)\n"
	"  --bits 16|24|32         sample format: wav 16, 24 or 32 (float, default); flac 24\n"
	"  --template T            file names, default {track}/{stem}.{ext}; fields\n"
	"                          {track} {take} {stem} {model} {ext}\n"
	"  --overwrite             replace stems that exist (default: refuse)\n"
	"  --threads N             CPU threads per job (default: all cores)\n"
	"  --precision fp32|bf16   matrix products' inputs (default fp32): bf16 is about twice\n"
	"                          as fast on a CPU with AVX512_BF16 and runs on the tensor\n"
	"                          cores of an NVIDIA GPU (Ampere or later), sums stay fp32;\n"
	"                          elsewhere it says so and runs fp32. The manifest records\n"
	"                          what ran\n"
	"  --model-path DIR        another folder to look for models in\n"
	"  -q, --quiet             no progress, warnings or summary; errors only\n";

void sb_cli_opts_init(sb_cli_opts *o)
{
	memset(o, 0, sizeof *o);
	o->bits = 32;
	o->timeline_start = -1;
	o->mode = SB_MODE_PARALLEL;
}

static int parse_stems(const char *s, unsigned *mask)
{
	*mask = 0;
	char buf[256];
	snprintf(buf, sizeof buf, "%s", s);
	char *save = NULL;
	for (char *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
		const int k = sb_stem_index(t);
		if (k < 0) {
			char known[256];
			sb_stem_mask_text(~0u, ", ", known, sizeof known);
			fprintf(stderr, "stembridge: error: unknown stem '%s' (stems: %s; a model makes "
			        "some of them)\n", t, known);
			return 0;
		}
		*mask |= 1u << k;
	}
	return *mask != 0;
}

/* "N" or "N,M,...": whole sample counts, 0 or more; the list replaces an earlier one. */
static int parse_timelines(sb_cli_opts *o, const char *v)
{
	int n = 1;
	for (const char *c = v; *c; c++)
		n += *c == ',';
	long long *t = calloc((size_t)n, sizeof *t);
	if (!t)
		return 0;
	const char *at = v;
	for (int k = 0; k < n; k++) {
		char *end = NULL;
		errno = 0;
		t[k] = strtoll(at, &end, 10);
		if (end == at || errno || t[k] < 0 || (*end != ',' && *end) || (*end == ',' && k == n - 1)) {
			free(t);
			return 0;
		}
		at = end + 1;
	}
	free(o->timelines);
	o->timelines = t;
	o->n_timelines = n;
	o->timeline_start = t[0];
	return 1;
}

long long sb_cli_timeline_of(const sb_cli_opts *o, int i)
{
	if (o->n_timelines == 0)
		return -1;
	return o->timelines[o->n_timelines == 1 ? 0 : i];
}

int sb_cli_timelines_fit(const sb_cli_opts *o, int n_inputs)
{
	if (o->n_timelines <= 1 || o->n_timelines == n_inputs)
		return 1;
	fprintf(stderr, "stembridge: error: --timeline-start has %d values for %d input%s (give one "
	        "for every input, in order, or one for all)\n", o->n_timelines, n_inputs,
	        n_inputs == 1 ? "" : "s");
	return 0;
}

void sb_cli_opts_free(sb_cli_opts *o)
{
	free(o->timelines);
	o->timelines = NULL;
	o->n_timelines = 0;
}

static int bad(const char *msg)
{
	fprintf(stderr, "stembridge: error: %s\n", msg);
	return -1;
}

/* v as a whole decimal number from lo to hi into *out; *out untouched when it is not one. */
static int int_in(const char *v, long lo, long hi, int *out)
{
	char *end = NULL;
	const long n = strtol(v, &end, 10);
	if (!end || *end || n < lo || n > hi)
		return 0;
	*out = (int)n;
	return 1;
}

int sb_cli_parse_option(sb_cli_opts *o, int argc, char **argv, int *i)
{
	const char *a = argv[*i];
	/* flags without a value */
	if (!strcmp(a, "--parallel"))
		o->mode = SB_MODE_PARALLEL;
	else if (!strcmp(a, "--sequential"))
		o->mode = SB_MODE_SEQUENTIAL;
	else if (!strcmp(a, "--model-other"))
		o->model_other = 1;
	else if (!strcmp(a, "--overwrite"))
		o->overwrite = 1;
	else if (!strcmp(a, "-q") || !strcmp(a, "--quiet"))
		o->quiet = 1;
	else
		goto valued;
	return 1;
valued:;
	static const char *const valued_names[] = {
		"-o", "--output", "--device", "--model", "--stems", "--format", "--bits", "--template",
		"--timeline-start", "--shifts", "--overlap", "--batch", "--threads", "--model-path",
		"--precision", "--ensemble", "--ensemble-mode", "--ensemble-weights", "--quality",
	};
	int known = 0;
	for (size_t k = 0; k < sizeof valued_names / sizeof *valued_names; k++)
		known |= !strcmp(a, valued_names[k]);
	if (!known)
		return 0;
	if (*i + 1 >= argc) {
		fprintf(stderr, "stembridge: error: %s needs a value\n", a);
		return -1;
	}
	const char *v = argv[++*i];
	char *end = NULL;
	if (!strcmp(a, "-o") || !strcmp(a, "--output")) {
		o->out_dir = v;
	} else if (!strcmp(a, "--device")) {
		o->device_arg = v;
	} else if (!strcmp(a, "--model")) {
		o->model = v;
	} else if (!strcmp(a, "--stems")) {
		if (!parse_stems(v, &o->stems))
			return -1;
	} else if (!strcmp(a, "--format")) {
		if (!strcmp(v, "flac"))
			o->flac = 1;
		else if (!strcmp(v, "wav"))
			o->flac = 0;
		else {
			fprintf(stderr, "stembridge: error: unknown format '%s' (wav, flac)\n", v);
			return -1;
		}
	} else if (!strcmp(a, "--bits")) {
		o->bits = atoi(v);
		if (o->bits != 16 && o->bits != 24 && o->bits != 32)
			return bad("--bits takes 16, 24 or 32");
	} else if (!strcmp(a, "--template")) {
		o->tmpl = v;
	} else if (!strcmp(a, "--timeline-start")) {
		if (!parse_timelines(o, v))
			return bad("--timeline-start takes a sample count, or one per input separated "
			           "by commas");
	} else if (!strcmp(a, "--shifts")) {
		if (!int_in(v, 0, 32, &o->shifts))
			return bad("--shifts takes 0 to 32");
	} else if (!strcmp(a, "--overlap")) {
		o->overlap = strtod(v, &end);
		if (!end || *end || !(o->overlap > 0 && o->overlap <= 0.9))
			return bad("--overlap takes more than 0, up to 0.9");
	} else if (!strcmp(a, "--batch")) {
		if (!int_in(v, 1, 64, &o->batch))
			return bad("--batch takes 1 to 64");
	} else if (!strcmp(a, "--threads")) {
		o->threads = atoi(v);
	} else if (!strcmp(a, "--precision")) {
		if (strcmp(v, "fp32") && strcmp(v, "bf16")) {
			fprintf(stderr, "stembridge: error: unknown precision '%s' (fp32, bf16)\n", v);
			return -1;
		}
		o->bf16 = !strcmp(v, "bf16");
	} else if (!strcmp(a, "--ensemble")) {
		o->ensemble = v;
	} else if (!strcmp(a, "--ensemble-mode")) {
		o->ensemble_mode = !strcmp(v, "avg_wave")   ? SB_ENSEMBLE_AVG_WAVE
		                   : !strcmp(v, "max_spec") ? SB_ENSEMBLE_MAX_SPEC
		                   : !strcmp(v, "min_spec") ? SB_ENSEMBLE_MIN_SPEC : -1;
		if (o->ensemble_mode < 0)
			return bad("--ensemble-mode takes avg_wave, max_spec or min_spec");
	} else if (!strcmp(a, "--ensemble-weights")) {
		char buf[256], *save = NULL;
		snprintf(buf, sizeof buf, "%s", v);
		int k = 0;
		for (char *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save), k++) {
			const double w = strtod(t, &end);
			if (k == SB_ENSEMBLE_MAX || !end || *end || !(w > 0) || w > 1000)
				return bad("--ensemble-weights takes up to 8 numbers above 0, comma-separated");
			o->ensemble_weights[k] = w;
		}
	} else if (!strcmp(a, "--quality")) {
		if (strcmp(v, "best") && strcmp(v, "single"))
			return bad("--quality takes best (ensembles count) or single");
		o->quality_best = !strcmp(v, "best");
	} else if (!strcmp(a, "--model-path")) {
		if (o->n_model_path < 7)
			o->model_path[o->n_model_path++] = v;
	}
	return 1;
}

sb_format sb_cli_format(const sb_cli_opts *o)
{
	return o->flac ? SB_FORMAT_FLAC
	     : o->bits == 16 ? SB_FORMAT_WAV16 : o->bits == 24 ? SB_FORMAT_WAV24 : SB_FORMAT_WAVF32;
}

void sb_cli_job_spec(const sb_cli_opts *o, sb_job_spec *spec)
{
	memset(spec, 0, sizeof *spec);
	spec->model = o->ensemble ? o->ensemble : o->model;
	spec->ensemble_mode = o->ensemble_mode;
	memcpy(spec->ensemble_weights, o->ensemble_weights, sizeof spec->ensemble_weights);
	spec->quality_best = o->quality_best;
	spec->stems = o->stems;
	spec->out_dir = o->out_dir;
	spec->name_template = o->tmpl;
	spec->format = sb_cli_format(o);
	spec->overwrite = o->overwrite;
	spec->timeline_start = o->timeline_start;
	spec->shifts = o->shifts;
	spec->bf16 = o->bf16;
	spec->keep_model_other = o->model_other;
	spec->overlap = o->overlap;
}

void sb_cli_clock(double s, char *out, size_t len)
{
	const long t = (long)(s + 0.5);
	if (t >= 3600)
		snprintf(out, len, "%ld:%02ld:%02ld", t / 3600, t / 60 % 60, t % 60);
	else
		snprintf(out, len, "%ld:%02ld", t / 60, t % 60);
}

void sb_cli_catch_stop(void (*handler)(int))
{
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = handler;
	sa.sa_flags = SA_RESETHAND;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
}
