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

/* sb_source_file() and sb_audio_info: stembridge.h. */

/* The length of the audio in 'path' in seconds, from its header; 0 when it cannot be read
 * (nothing is logged: the job that opens it says why). For the scheduler's estimates. */
double sb_audio_file_seconds(const char *path);

#endif
