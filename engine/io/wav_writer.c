/* 32-bit float WAV files (stembridge.h: sb_wav_writer_*), written by us rather than libsndfile, so
 * that every common reader takes them without a warning: libsndfile writes a 16-byte "fmt " chunk
 * for IEEE float, which the format's definition extends by cbSize (18 bytes) and which sox reports
 * ("wave header missing extended part of fmt chunk"); it also adds a PEAK chunk that carries a time
 * stamp, so two runs would differ.
 *
 * Layout (all little-endian, every chunk even-sized):
 *   RIFF <size> WAVE
 *   JUNK 28     reserved; becomes "ds64" (EBU Tech 3306, RF64) when the file passes 4 GiB
 *   fmt  18     WAVE_FORMAT_IEEE_FLOAT (3), channels, rate, bytes/s, block, 32 bits, cbSize 0
 *   fact 4      frames per channel
 *   bext 602    Broadcast-WAV v1, only with a timeline position: its time reference (the
 *               region start in samples), description, originator; no date or time
 *   data <size> interleaved float32
 * Sizes are patched by finish(); a file past 4 GiB turns into RF64 (RIFF -> RF64, sizes
 * 0xFFFFFFFF, the real ones in ds64), which libsndfile and most DAWs read.
 *
 * Threads: one writer, one thread.
 */
#include "sb_common.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#if __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "float samples are written as they are in memory: little-endian only"
#endif

#define BUF_BYTES (64 * 1024)
#define BEXT_BYTES 602

struct sb_wav_writer {
	int fd;
	int channels;
	int64_t frames;
	off_t fact_at, data_at; /* offsets of the fact and data chunk headers */
	size_t used;
	unsigned char buf[BUF_BYTES];
};

static sb_status errno_status(int e)
{
	return e == ENOSPC || e == EFBIG || e == EDQUOT ? SB_ERR_NOSPACE : SB_ERR_IO;
}

/* All n bytes, at the file's offset (at < 0, write) or at byte at (pwrite); a write that
 * makes no progress is a full disk. */
static sb_status write_at(int fd, const void *data, size_t n, off_t at)
{
	const unsigned char *p = data;
	while (n) {
		const ssize_t w = at < 0 ? write(fd, p, n) : pwrite(fd, p, n, at);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0) {
			if (w == 0)
				errno = ENOSPC;
			return errno_status(errno);
		}
		p += w;
		n -= (size_t)w;
		if (at >= 0)
			at += w;
	}
	return SB_OK;
}

static sb_status write_all(int fd, const void *data, size_t n)
{
	return write_at(fd, data, n, -1);
}

static void put16(unsigned char *p, uint32_t v)
{
	p[0] = (unsigned char)v;
	p[1] = (unsigned char)(v >> 8);
}

static void put32(unsigned char *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (unsigned char)(v >> (8 * i));
}

static void put64(unsigned char *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (unsigned char)(v >> (8 * i));
}

sb_status sb_wav_writer_new(int fd, int channels, int rate, int64_t timeline_start,
                            const char *description, sb_wav_writer **out)
{
	*out = NULL;
	if (fd < 0 || channels < 1 || channels > 64 || rate < 1)
		return SB_ERR_INVALID;
	sb_wav_writer *w = calloc(1, sizeof *w);
	if (!w)
		return SB_ERR_NOMEM;
	w->fd = fd;
	w->channels = channels;
	unsigned char h[12 + 36 + 26 + 12 + 8 + BEXT_BYTES + 8];
	memset(h, 0, sizeof h);
	size_t at = 0;
	memcpy(h + at, "RIFF", 4);
	memcpy(h + at + 8, "WAVE", 4);
	at += 12;
	memcpy(h + at, "JUNK", 4);
	put32(h + at + 4, 28);
	at += 8 + 28;
	memcpy(h + at, "fmt ", 4);
	put32(h + at + 4, 18);
	put16(h + at + 8, 3); /* WAVE_FORMAT_IEEE_FLOAT */
	put16(h + at + 10, (uint32_t)channels);
	put32(h + at + 12, (uint32_t)rate);
	put32(h + at + 16, (uint32_t)rate * 4u * (uint32_t)channels);
	put16(h + at + 20, 4u * (uint32_t)channels);
	put16(h + at + 22, 32);
	put16(h + at + 24, 0); /* cbSize */
	at += 8 + 18;
	w->fact_at = (off_t)at;
	memcpy(h + at, "fact", 4);
	put32(h + at + 4, 4);
	at += 8 + 4;
	if (timeline_start >= 0) {
		memcpy(h + at, "bext", 4);
		put32(h + at + 4, BEXT_BYTES);
		unsigned char *b = h + at + 8;
		snprintf((char *)b, 256, "%s", description ? description : "");
		memcpy(b + 256, "Stembridge", 10); /* originator[32] */
		/* originator_reference[32], origination_date[10], origination_time[8] stay empty:
		 * a file depends only on its input and options */
		put32(b + 338, (uint32_t)((uint64_t)timeline_start & 0xFFFFFFFFu));
		put32(b + 342, (uint32_t)((uint64_t)timeline_start >> 32));
		put16(b + 346, 1); /* version */
		at += 8 + BEXT_BYTES;
	}
	w->data_at = (off_t)at;
	memcpy(h + at, "data", 4);
	at += 8;
	const sb_status st = write_all(fd, h, at);
	if (st != SB_OK) {
		free(w);
		return st;
	}
	*out = w;
	return SB_OK;
}

static sb_status flush(sb_wav_writer *w)
{
	if (!w->used)
		return SB_OK;
	const sb_status st = write_all(w->fd, w->buf, w->used);
	w->used = 0;
	return st;
}

sb_status sb_wav_writer_write(sb_wav_writer *w, const float *data, int64_t frames)
{
	size_t bytes = (size_t)frames * (size_t)w->channels * sizeof(float);
	const unsigned char *p = (const unsigned char *)data;
	while (bytes) {
		size_t k = BUF_BYTES - w->used;
		if (k > bytes)
			k = bytes;
		memcpy(w->buf + w->used, p, k);
		w->used += k;
		p += k;
		bytes -= k;
		if (w->used == BUF_BYTES) {
			const sb_status st = flush(w);
			if (st != SB_OK)
				return st;
		}
	}
	w->frames += frames;
	return SB_OK;
}

sb_status sb_wav_writer_finish(sb_wav_writer *w)
{
	sb_status st = flush(w);
	if (st != SB_OK)
		return st;
	const uint64_t data = (uint64_t)w->frames * (uint64_t)w->channels * 4u;
	const uint64_t riff = (uint64_t)w->data_at + 8u + data - 8u;
	unsigned char v[8];
	if (riff <= 0xFFFFFFFFu) {
		put32(v, (uint32_t)riff);
		st = write_at(w->fd, v, 4, 4);
		put32(v, (uint32_t)w->frames);
		if (st == SB_OK)
			st = write_at(w->fd, v, 4, w->fact_at + 8);
		put32(v, (uint32_t)data);
		if (st == SB_OK)
			st = write_at(w->fd, v, 4, w->data_at + 4);
		return st;
	}
	/* RF64: the 32-bit sizes say "see ds64", which takes the JUNK chunk's place */
	unsigned char ds64[8 + 28];
	memcpy(ds64, "ds64", 4);
	put32(ds64 + 4, 28);
	put64(ds64 + 8, riff);
	put64(ds64 + 16, data);
	put64(ds64 + 24, (uint64_t)w->frames);
	put32(ds64 + 32, 0);
	st = write_at(w->fd, "RF64\xff\xff\xff\xff", 8, 0);
	if (st == SB_OK)
		st = write_at(w->fd, ds64, sizeof ds64, 12);
	put32(v, 0xFFFFFFFFu);
	if (st == SB_OK)
		st = write_at(w->fd, v, 4, w->fact_at + 8);
	if (st == SB_OK)
		st = write_at(w->fd, v, 4, w->data_at + 4);
	return st;
}

void sb_wav_writer_free(sb_wav_writer *w)
{
	free(w);
}
