/* stembridge-convert: the released Demucs v4 checkpoints (PyTorch .th files) to the safetensors
 * files Stembridge loads, without Python and without running any of the pickle.
 *
 *   stembridge-convert IN.th -o OUT.safetensors                    one model
 *   stembridge-convert A.th B.th C.th D.th -o OUT.safetensors      a bag of models (htdemucs_ft)
 *   stembridge-convert MODEL.ckpt --config MODEL.yaml -o OUT.safetensors   a RoFormer
 *
 * One model: the tensors keep the state dict's names and dtypes, and `__metadata__` holds every
 * constructor setting (settings_format.h says how values are written), `klass`, `name` and
 * `checkpoint` (the input's file name). A bag of K: `bag` = K, model k's tensors and settings
 * under "<k>.", the shared `sources`, `samplerate` and `audio_channels`, and `bag_weights`: K
 * rows separated by ';' of one weight per source separated by ','.
 *
 * Exit status: 0 written (or checked, with --dry-run), 1 refused or failed, 2 usage. Every
 * failure is one line on stderr naming the file and the reason.
 */
#include "stembridge.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PROG "stembridge-convert"
#define MAX_INPUTS SBC_MAX_INPUTS

static void usage(FILE *f)
{
	fprintf(f,
	        "usage: " PROG " IN.th [IN.th...] -o OUT.safetensors [options]\n"
	        "       " PROG " MODEL.ckpt --config MODEL.yaml -o OUT.safetensors [options]\n"
	        "\n"
	        "Converts a released Demucs v4 checkpoint (htdemucs 955717e8-8726e21a.th, htdemucs_6s\n"
	        "5c90dfd2-34c22ccb.th) into a safetensors model for Stembridge; several checkpoints\n"
	        "(the four htdemucs_ft models) become one bag-of-models file. A BS-RoFormer or\n"
	        "Mel-Band RoFormer checkpoint (a state dict, as Music-Source-Separation-Training\n"
	        "publishes them) is converted with its YAML configuration, checked tensor by tensor.\n"
	        "\n"
	        "options:\n"
	        "  -o, --output FILE      the safetensors file to write\n"
	        "  --config YAML          a RoFormer's configuration (the .yaml beside its .ckpt)\n"
	        "  --name NAME            the model's name in the file (default: FILE's name without\n"
	        "                         .safetensors)\n"
	        "  --bag-weights W        a bag's weights: one row per model, separated by ';', of one\n"
	        "                         weight per source, separated by ',' (default: htdemucs_ft's\n"
	        "                         when the inputs are its four models, else all 1)\n"
	        "  --check-shapes JSON    compare tensor names and shapes with released-shapes.json\n"
	        "                         when the settings are a released model's\n"
	        "  --overwrite            replace FILE if it exists (default: refuse)\n"
	        "  --dry-run              read and check everything, write nothing\n"
	        "  -q, --quiet            errors only\n"
	        "\n"
	        "'stembridge models' lists the installed models, and for each missing one the files\n"
	        "to download and the command that converts them.\n");
}

typedef struct {
	const char *inputs[MAX_INPUTS];
	int n_inputs;
	const char *output, *name, *weights, *shapes, *config;
	int overwrite, dry_run, quiet;
} options;

/* 0 ok, 2 usage error (already reported), -1 help was asked for (and printed) */
static int parse_args(int argc, char **argv, options *o)
{
	memset(o, 0, sizeof *o);
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		const char *v = i + 1 < argc ? argv[i + 1] : NULL;
		const char **slot = !strcmp(a, "-o") || !strcmp(a, "--output") ? &o->output
		                  : !strcmp(a, "--name")                         ? &o->name
		                  : !strcmp(a, "--bag-weights")                  ? &o->weights
		                  : !strcmp(a, "--check-shapes")                 ? &o->shapes
		                  : !strcmp(a, "--config")                       ? &o->config
		                                                                 : NULL;
		if (slot) {
			if (!v) {
				fprintf(stderr, PROG ": error: %s needs a value\n", a);
				return 2;
			}
			*slot = v;
			i++;
		} else if (!strcmp(a, "--overwrite")) {
			o->overwrite = 1;
		} else if (!strcmp(a, "--dry-run")) {
			o->dry_run = 1;
		} else if (!strcmp(a, "-q") || !strcmp(a, "--quiet")) {
			o->quiet = 1;
		} else if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
			usage(stdout);
			return -1;
		} else if (a[0] == '-' && a[1]) {
			fprintf(stderr, PROG ": error: unknown option '%s' (see --help)\n", a);
			return 2;
		} else if (o->n_inputs == MAX_INPUTS) {
			fprintf(stderr, PROG ": error: more than %d inputs\n", MAX_INPUTS);
			return 2;
		} else {
			o->inputs[o->n_inputs++] = a;
		}
	}
	const char *problem = !o->n_inputs                  ? "no checkpoint given"
	                    : !o->output && !o->dry_run     ? "no output file given (-o FILE)"
	                    : o->weights && o->n_inputs < 2 ? "--bag-weights needs several checkpoints"
	                                                    : NULL;
	if (problem) {
		fprintf(stderr, PROG ": error: %s\n", problem);
		usage(stderr);
		return 2;
	}
	return 0;
}

/* errors and warnings on stderr, what was done on stdout (unless --quiet) */
static void log_cli(void *user, sb_log_level level, const char *msg)
{
	const int quiet = *(const int *)user;
	if (level == SB_LOG_ERROR)
		fprintf(stderr, PROG ": error: %s\n", msg);
	else if (level == SB_LOG_WARNING && !quiet)
		fprintf(stderr, PROG ": warning: %s\n", msg);
	else if (level == SB_LOG_INFO && !quiet)
		printf("%s\n", msg);
}

int main(int argc, char **argv)
{
	options o;
	int rc = parse_args(argc, argv, &o);
	if (rc)
		return rc < 0 ? 0 : rc;
	sb_logger log = {log_cli, &o.quiet};
	sbc_convert_opts co = {
		.inputs = o.inputs,
		.n_inputs = o.n_inputs,
		.output = o.output,
		.name = o.name,
		.weights = o.weights,
		.shapes = o.shapes,
		.config = o.config,
		.overwrite = o.overwrite,
		.dry_run = o.dry_run,
		.log = &log,
	};
	return sbc_convert(&co) == SB_OK ? 0 : 1;
}
