/* Audition: a finished take's stems, read back from the files the engine wrote into memory
 * that run() plays from (handed over through audition_pending, freed here when run() retires
 * it), so that run() never reads a file.
 *
 * Threads: the service thread, and cleanup. Never run().
 */
#include "service.h"

#include <sndfile.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void sb_audition_free(sb_audition *a)
{
	if (!a)
		return;
	for (int s = 0; s < SB_PLUGIN_STEMS; s++)
		free(a->stem[s]);
	free(a);
}

/* Audition keeps every stem of the take in memory, as float: bounded, so a long take does not
 * take the host's memory with it (the stems are still written and announced). */
#define SB_AUDITION_MAX_BYTES ((int64_t)1 << 30)

/* Reads a finished take's stems into memory and offers them to run(). */
void sb_audition_load(sb_instance *self, int64_t start, int64_t frames,
                      char paths[SB_PLUGIN_STEMS][SB_TEXT])
{
	int n = 0;
	for (int s = 0; s < SB_PLUGIN_STEMS; s++)
		n += paths[s][0] != '\0';
	if (frames * self->channels * (int64_t)sizeof(float) * n > SB_AUDITION_MAX_BYTES) {
		lv2_log_note(&self->logger, "stembridge: take too long to audition in memory (%lld "
		             "frames); its stems are on disk\n", (long long)frames);
		return;
	}
	sb_audition *a = calloc(1, sizeof *a);
	if (!a)
		return;
	a->start = start;
	a->frames = frames;
	a->channels = self->channels;
	for (int s = 0; s < SB_PLUGIN_STEMS; s++) {
		if (!paths[s][0])
			continue;
		SF_INFO info;
		memset(&info, 0, sizeof info);
		SNDFILE *f = sf_open(paths[s], SFM_READ, &info);
		if (!f) {
			lv2_log_warning(&self->logger, "stembridge: cannot read %s for audition: %s\n",
			                paths[s], sf_strerror(NULL));
			continue;
		}
		if (info.channels == a->channels) {
			a->stem[s] = calloc((size_t)a->frames * a->channels, sizeof(float));
			if (a->stem[s])
				sf_readf_float(f, a->stem[s], a->frames);
		} else {
			lv2_log_warning(&self->logger, "stembridge: %s has %d channels, expected %d\n",
			                paths[s], info.channels, a->channels);
		}
		sf_close(f);
	}
	sb_audition_free(atomic_exchange(&self->audition_pending, a));
}
