/* A main() for the fuzz targets where libFuzzer is not linked (gcc builds): runs the target on
 * every file named, or every file in every folder named, once. The seed corpora run this way
 * in every build as regression tests; a crash is a failed test.
 *
 * usage: fuzz_X FILE|DIR... */
#include "fuzz_common.h"

#include <dirent.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static int run_file(const char *path)
{
	FILE *f = fopen(path, "rb");
	if (!f) {
		fprintf(stderr, "cannot open %s\n", path);
		return 1;
	}
	fseek(f, 0, SEEK_END);
	const long n = ftell(f);
	fseek(f, 0, SEEK_SET);
	uint8_t *buf = malloc(n > 0 ? (size_t)n : 1);
	if (!buf || (n > 0 && fread(buf, 1, (size_t)n, f) != (size_t)n)) {
		fclose(f);
		free(buf);
		fprintf(stderr, "cannot read %s\n", path);
		return 1;
	}
	fclose(f);
	LLVMFuzzerTestOneInput(buf, (size_t)n);
	free(buf);
	return 0;
}

int main(int argc, char **argv)
{
	int ran = 0, bad = 0;
	for (int i = 1; i < argc; i++) {
		struct stat s;
		if (stat(argv[i], &s) != 0) {
			fprintf(stderr, "no %s\n", argv[i]);
			return 1;
		}
		if (!S_ISDIR(s.st_mode)) {
			bad |= run_file(argv[i]);
			ran++;
			continue;
		}
		DIR *d = opendir(argv[i]);
		struct dirent *e;
		while (d && (e = readdir(d))) {
			if (e->d_name[0] == '.')
				continue;
			char p[4096];
			snprintf(p, sizeof p, "%s/%s", argv[i], e->d_name);
			bad |= run_file(p);
			ran++;
		}
		if (d)
			closedir(d);
	}
	printf("%d inputs ran\n", ran);
	return bad || ran == 0;
}
