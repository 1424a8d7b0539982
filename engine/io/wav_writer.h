/* 32-bit float WAV files, written by us rather than libsndfile, so that every common reader
 * takes them without a warning: libsndfile writes a 16-byte "fmt " chunk for IEEE float, which
 * the format's definition extends by cbSize (18 bytes) and which sox reports ("wave header
 * missing extended part of fmt chunk"); it also adds a PEAK chunk that carries a time stamp, so
 * two runs would differ.
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
#ifndef SB_WAV_WRITER_H
#define SB_WAV_WRITER_H

#include "sb_common.h"

typedef struct sb_wav_writer sb_wav_writer;

/* fd: an open, empty, seekable file (the caller closes it after finish or free). The header
 * is written at once. timeline_start < 0: no bext chunk. SB_ERR_NOSPACE / SB_ERR_IO with errno
 * set when the header cannot be written. */
sb_status sb_wav_writer_new(int fd, int channels, int rate, int64_t timeline_start,
                            const char *description, sb_wav_writer **out);
/* Appends frames (interleaved, 'channels' wide). On failure errno says why. */
sb_status sb_wav_writer_write(sb_wav_writer *w, const float *data, int64_t frames);
/* Writes what is buffered and patches the sizes (RF64 past 4 GiB). Does not sync or close. */
sb_status sb_wav_writer_finish(sb_wav_writer *w);
void sb_wav_writer_free(sb_wav_writer *w);

#endif
