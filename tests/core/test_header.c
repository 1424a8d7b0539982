/* The public header stands alone (as zix's test_headers builds each of its headers by itself):
 * this file is compiled with engine/ as its only include folder, no dependency, every warning
 * an error and _GNU_SOURCE undefined, so stembridge.h may include nothing but system headers
 * and lean on nothing but C11; run, it checks that its constants are what front ends expect. */
#include "stembridge.h"

#include <stdio.h>
#include <string.h>

/* every type a front end names, so that a declaration the header lost fails the build */
static size_t sizes(void)
{
	return sizeof(sb_logger) + sizeof(sb_engine_opts) + sizeof(sb_job_spec) +
	       sizeof(sb_job_progress) + sizeof(sb_job_result) + sizeof(sb_device_resolution) +
	       sizeof(sb_device_set) + sizeof(sb_catalog_model) + sizeof(sb_install_opts) +
	       sizeof(sb_install_progress) + sizeof(sbc_convert_opts) + sizeof(sb_audio_info) +
	       sizeof(sb_temp) + sizeof(sb_format) + sizeof(sb_mode) + sizeof(sb_job_id);
}

int main(void)
{
	sb_engine *e = NULL;
	sb_device_list *l = NULL;
	const sb_device *d = NULL;
	sb_catalog *c = NULL;
	sb_source *s = NULL;
	sb_wav_writer *w = NULL;
	(void)e, (void)l, (void)d, (void)c, (void)s, (void)w;
	if (sizes() == 0 || SB_N_STEMS != 4 || !(SB_SILENT_PEAK > 0)) {
		puts("FAIL: the header's sizes or constants");
		return 1;
	}
	puts("stembridge.h compiles alone with every warning an error");
	return 0;
}
