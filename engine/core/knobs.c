/* The knobs (stembridge.h: sb_knob): every environment variable Stembridge reads, one line
 * each, with what reads it and what it changes. Nothing else calls getenv (the man_knobs test
 * holds the sources to that and man/stembridge.1 to this table). Where the API has an option
 * for the same thing (sb_engine_opts.batch, sb_install_opts.base_url), the option wins. */
#include "sb_common.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

static const sb_knob knobs[] = {
	/* where things are */
	{"HOME", "engine/core, engine/io, plugin", "the base of the XDG folders' defaults", 0},
	{"XDG_DATA_HOME", "engine/core, plugin", "the user's models (and the plugin's takes)", 0},
	{"XDG_DATA_DIRS", "engine/core", "the system's models, catalogue and CLBlast tuning", 0},
	{"XDG_CACHE_HOME", "engine/io, engine/models",
	 "compiled kernels, measured paths, devices' paces, downloads", 0},
	{"TMPDIR", "engine/io", "where a long input converted to a model's rate is spilled", 0},
	{"STEMBRIDGE_CATALOG", "engine/models", "a model catalogue instead of the installed one", 0},
	{"STEMBRIDGE_MODEL_URL", "engine/models",
	 "a mirror to download models from (the install's base URL wins)", 0},
	/* how the devices compute */
	{"SB_BATCH", "engine/jobs", "segments per forward pass (the engine's batch option wins)", 0},
	{"SB_GEMM", "engine/backend/cpu",
	 "the CPU's matrix products: onednn (default), openblas, blis, own, loop", 0},
	{"SB_CPU_ISA", "engine/backend/cpu",
	 "the CPU's instruction set capped: avx512, avx512-nobf16, avx2, generic", 0},
	{"SB_CL_GEMM", "engine/backend/opencl",
	 "OpenCL matrix products: auto, clblast, own, tiled, tf32", 0},
	{"SB_CL_TILE", "engine/backend/opencl", "the tiled product kernel's tilings", 0},
	{"SB_CL_ATTENTION", "engine/backend/opencl",
	 "OpenCL attention: auto, fused, tiles, split", 0},
	{"SB_CLBLAST_TUNING", "engine/backend/opencl", "a folder of CLBlast tuning results", 0},
	/* the batch command on a cluster */
	{"SLURM_ARRAY_TASK_ID", "tools/cli", "batch: this task's shard", 0},
	{"SLURM_ARRAY_TASK_MIN", "tools/cli", "batch: the array's first task", 0},
	{"SLURM_ARRAY_TASK_STEP", "tools/cli", "batch: the array's step", 0},
	{"SLURM_ARRAY_TASK_COUNT", "tools/cli", "batch: the array's tasks", 0},
	{"SLURM_ARRAY_JOB_ID", "tools/cli", "batch: the job named in its log", 0},
	{"SLURM_JOB_ID", "tools/cli", "batch: the job named in its log (no array)", 0},
	{"SLURM_JOB_GPUS", "tools/cli", "batch: the GPUs granted, in its log", 0},
	{"CUDA_VISIBLE_DEVICES", "tools/cli", "batch: the GPUs granted, in its log", 0},
	{"ROCR_VISIBLE_DEVICES", "tools/cli", "batch: the GPUs granted, in its log", 0},
	{"ZE_AFFINITY_MASK", "tools/cli", "batch: the GPUs granted, in its log", 0},
	/* tests and benchmarks */
	{"SB_FAULT_INJECT", "engine/core",
	 "failures injected: opencl:N:..., io:rename:K, io:dirsync:K, job:slow:MS, "
	 "job:slow-write:MS", 1},
	{"SB_PACE_FILE", "engine/models", "the devices' kept paces in another file", 1},
	{"SB_ROW_TILE", "engine/backend/cpu", "rows of a batched layer per CPU operation", 1},
	{"SB_CPU_BESIDE_NICE", "engine/backend/cpu", "the CPU's niceness beside GPUs (10)", 1},
	{"SB_CL_MMA", "engine/backend/opencl", "the tensor-core kernel emulated: emulate", 1},
	{"SB_CL_MMA_TILE", "engine/backend/opencl", "the tensor-core kernel's tiling", 1},
	{"SB_CL_ATT_LOCAL", "engine/backend/opencl", "attention.cl's tiles through local memory", 1},
	{"SB_CL_RED_WG", "engine/backend/opencl", "the reductions' work-group size", 1},
	{"SB_CL_WAIT", "engine/backend/opencl", "how a pass's end is waited for", 1},
};

const sb_knob *sb_knob_at(size_t i)
{
	return i < sizeof knobs / sizeof knobs[0] ? &knobs[i] : NULL;
}

const char *sb_knob_get(const char *name)
{
	for (size_t i = 0; i < sizeof knobs / sizeof knobs[0]; i++)
		if (!strcmp(knobs[i].name, name))
			return getenv(name);
	assert(!"a variable not in the table of knobs");
	return NULL;
}
