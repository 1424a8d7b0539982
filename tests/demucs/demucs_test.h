/* Shared by the HTDemucs tests (test_demucs.c: the golden vectors; test_demucs_files.c:
 * files, bags and inputs): the golden folder, failure counting, a logger that keeps the last
 * error, and running a model's pipeline on memory. */
#ifndef SB_TEST_DEMUCS_H
#define SB_TEST_DEMUCS_H

#include "models/demucs/demucs.h"
#include "models/demucs/safetensors.h"
#include "mem_sink.h"
#include "models/model.h"
#include "backend/backend.h"

#include <stdio.h>

extern const char *golden;
/* the models the cases run on, in 'golden': a small one with activations and a pipeline clip
 * (htdemucs-tiny in shared/golden, htdemucs-mini in tests/fixtures) and a second one with F16
 * weights and the released transformer depth (htdemucs-mid, htdemucs-mini2) */
extern const char *small_name, *second_name;
/* "<golden>/<name><suffix>" when that file is there, else NULL (and a SKIP line printed) */
const char *golden_file(const char *name, const char *suffix, char *buf, size_t len);
extern int failures;
extern char last_error[2048];
extern const sb_logger logger;
extern const sb_exec *pipeline_cl; /* run_pipeline runs there when set (else the CPU) */
const sb_exec *open_cpu(void);

#define FAIL(...)                                                                                \
	do {                                                                                         \
		printf("FAIL %s:%d: ", __FILE__, __LINE__);                                              \
		printf(__VA_ARGS__);                                                                     \
		printf("\n");                                                                            \
		failures++;                                                                              \
	} while (0)

double rel_l2(const float *a, const float *ref, size_t n);
float *read_all(const sb_safetensors *st, const char *name, int64_t *numel);
sb_status open_golden_model(const char *name, sb_model **m);
float *interleave(const float *x, int ch, int64_t n);
sb_status run_pipeline(sb_model *m, const float *in, int ch, int64_t n, mem_sink *sink,
                       double *seconds);

void errors_case(void);
void bag_case(void);
void inputs_case(void);
void safetensors_case(void);

#endif
