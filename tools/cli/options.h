/* The options `separate` and `batch` share: what to run (model, stems, device, format) and how
 * files are named. One parser, so a batch takes every option a single run does. */
#ifndef SB_CLI_OPTIONS_H
#define SB_CLI_OPTIONS_H

#include "stembridge.h"

typedef struct {
	const char *out_dir, *model, *tmpl, *device_arg;
	const char *model_path[8]; /* NULL-terminated */
	int n_model_path;
	unsigned stems;
	int flac, bits, overwrite, threads, quiet, shifts, model_other, batch, bf16;
	double overlap;
	long long timeline_start;        /* the first (or only) --timeline-start value, -1 none */
	long long *timelines;            /* every --timeline-start value, in order (malloc'd) */
	int n_timelines;
	sb_mode mode;
	const char *ensemble;      /* --ensemble a,b: the models combined */
	int ensemble_mode;         /* --ensemble-mode */
	double ensemble_weights[SB_ENSEMBLE_MAX];
	int quality_best;          /* --quality best */
} sb_cli_opts;

void sb_cli_opts_init(sb_cli_opts *o);

/* Looks at argv[*i]: 1 when it was one of the shared options (its value consumed, *i moved
 * past it), 0 when it is not one, -1 for a bad value (the message is printed: exit 2). */
int sb_cli_parse_option(sb_cli_opts *o, int argc, char **argv, int *i);

/* The region position of input i of n: one --timeline-start value is every input's, a list gives
 * one each (its length checked by sb_cli_timelines_fit), none is -1. */
long long sb_cli_timeline_of(const sb_cli_opts *o, int i);

/* 1 when the --timeline-start list fits n inputs (none, one, or n values); else prints why. */
int sb_cli_timelines_fit(const sb_cli_opts *o, int n_inputs);

void sb_cli_opts_free(sb_cli_opts *o);

/* SIGINT and SIGTERM call handler once (it sets a flag the command checks); SA_RESETHAND lets
 * a second one end the process as usual. */
void sb_cli_catch_stop(void (*handler)(int));

sb_format sb_cli_format(const sb_cli_opts *o);

/* A job spec with the options' settings; input, device and folder are the caller's. */
void sb_cli_job_spec(const sb_cli_opts *o, sb_job_spec *spec);

/* The help text of the shared options. */
extern const char sb_cli_options_help[];

/* "1:23" or "1:02:03" */
void sb_cli_clock(double s, char *out, size_t len);

#endif
