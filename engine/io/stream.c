#include "io/stream.h"

#include <math.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

const char *const sb_stem_names[SB_MAX_STEMS] = {
	"vocals", "drums", "bass", "other", "guitar", "piano", "lead_vocals", "backing_vocals",
	"dry", "reverb", "kick", "snare", "toms", "hihat", "cymbals", "ride", "crash"};

/* other names models' configurations give canonical stems */
static const struct {
	const char *name;
	int stem;
} stem_aliases[] = {
	{"instrumental", SB_STEM_OTHER}, {"lead", SB_STEM_LEAD_VOCALS},
	{"backing", SB_STEM_BACKING_VOCALS}, {"noreverb", SB_STEM_DRY}, {"hh", SB_STEM_HIHAT},
};

int sb_stem_index(const char *name)
{
	for (int i = 0; name && i < SB_N_KNOWN_STEMS; i++)
		if (!strcasecmp(name, sb_stem_names[i]))
			return i;
	for (size_t i = 0; name && i < sizeof stem_aliases / sizeof stem_aliases[0]; i++)
		if (!strcasecmp(name, stem_aliases[i].name))
			return stem_aliases[i].stem;
	return -1;
}

typedef struct {
	const float *data;
} mem_source;

static sb_status mem_read(sb_source *self, int64_t start, int64_t n, float *out)
{
	const mem_source *m = self->impl;
	const int ch = self->channels;
	for (int64_t i = 0; i < n; i++) {
		const int64_t f = start + i;
		if (f < 0 || f >= self->frames) {
			memset(out + i * ch, 0, sizeof(float) * (size_t)ch);
			continue;
		}
		memcpy(out + i * ch, m->data + f * ch, sizeof(float) * (size_t)ch);
	}
	return SB_OK;
}

static void mem_close(sb_source *self)
{
	free(self->impl);
	free(self);
}

sb_status sb_source_memory(const float *data, int64_t frames, int channels, double rate,
                           sb_source **out)
{
	if (!data || frames <= 0 || channels < 1 || channels > 8 || !(rate > 0))
		return frames == 0 ? SB_ERR_EMPTY : SB_ERR_INVALID;
	sb_source *s = calloc(1, sizeof *s);
	mem_source *m = calloc(1, sizeof *m);
	if (!s || !m) {
		free(s);
		free(m);
		return SB_ERR_NOMEM;
	}
	m->data = data;
	s->channels = channels;
	s->rate = rate;
	s->frames = frames;
	s->read = mem_read;
	s->close = mem_close;
	s->impl = m;
	*out = s;
	return SB_OK;
}

void sb_stem_mask_text(unsigned mask, const char *sep, char *buf, size_t len)
{
	size_t at = 0;
	if (len)
		buf[0] = '\0';
	for (int k = 0; k < SB_N_KNOWN_STEMS; k++)
		if (mask & (1u << k))
			at += (size_t)snprintf(buf + at, at < len ? len - at : 0, "%s%s", at ? sep : "",
			                       sb_stem_names[k]);
}

sb_status sb_source_read(sb_source *s, int64_t start, int64_t n, float *out)
{
	return s->read(s, start, n, out);
}

void sb_source_close(sb_source *s)
{
	if (s)
		s->close(s);
}
