/* stembridge models: the installed models and where the others would come from. */
#include "commands.h"

#include "models/model.h"

#include <dirent.h>
#include <stdio.h>
#include <string.h>

int sb_cli_models(int argc, char **argv)
{
	const char *extra[8] = {0};
	int n_extra = 0;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--model-path") && i + 1 < argc && n_extra < 7) {
			extra[n_extra++] = argv[++i];
		} else {
			fprintf(stderr, "stembridge: models: unknown option '%s'\n", argv[i]);
			return 2;
		}
	}
	printf("Installed models:\n");
	printf("  builtin: classic signal processing (median-filter HPSS, centre panning, low band);\n"
	       "           4 stems, any rate, CPU and OpenCL; no download\n");
	char dirs[16][4096];
	size_t nd = sb_model_dirs(extra, dirs, 16);
	int files = 0;
	for (size_t i = 0; i < nd; i++) {
		DIR *d = opendir(dirs[i]);
		if (!d)
			continue;
		struct dirent *e;
		while ((e = readdir(d))) {
			const char *dot = strrchr(e->d_name, '.');
			if (dot && !strcmp(dot, ".safetensors")) {
				printf("  %.*s: %s/%s (needs the Demucs engine, not in this build)\n",
				       (int)(dot - e->d_name), e->d_name, dirs[i], e->d_name);
				files++;
			}
		}
		closedir(d);
	}
	printf("\nModel folders searched, in order:\n");
	for (size_t i = 0; i < nd; i++)
		printf("  %s\n", dirs[i]);
	printf("\nNot installed: htdemucs, htdemucs_ft, htdemucs_6s (Hybrid Transformer Demucs v4).\n"
	       "This build runs the built-in model only; the Demucs engine is planned.\n");
	return 0;
}
