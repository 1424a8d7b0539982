/* Audio files through libsndfile: the input source of a job, and the probe the CLI uses to
 * reject bad input before any work starts.
 *
 * Every format libsndfile reads (WAV, RF64, FLAC, OGG, AIFF, ...; 8 to 32-bit integer and
 * float; 1 to 8 channels; 8 kHz to 192 kHz) reads as float. A file whose header promises more
 * audio than it holds (a truncated recording or copy) is refused, not silently shortened.
 */
#ifndef SB_AUDIO_FILE_H
#define SB_AUDIO_FILE_H

#include "io/stream.h"

typedef struct {
	int channels;
	double rate;
	int64_t frames;
	int format;          /* SF_FORMAT_* of the file */
	char format_name[64];/* "WAV 24-bit", "FLAC 16-bit", ... */
} sb_audio_info;

/* Opens 'path' as a source. Errors (logged with the path and the reason):
 * SB_ERR_IO (missing, unreadable), SB_ERR_FORMAT (not audio, truncated, unsupported channel
 * count or rate), SB_ERR_EMPTY (zero frames). NaN/Inf samples are found while reading:
 * read() returns SB_ERR_FORMAT naming the frame. */
sb_status sb_source_file(const char *path, const sb_logger *log, sb_source **out,
                         sb_audio_info *info);

/* The length of the audio in 'path' in seconds, from its header; 0 when it cannot be read
 * (nothing is logged: the job that opens it says why). For the scheduler's estimates. */
double sb_audio_file_seconds(const char *path);

#endif
