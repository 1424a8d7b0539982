/* The stems' file formats, named once for the writer (io/stem_writer.h), the engine's job
 * options (jobs/engine.h) and the callers that choose one (the plugin's state, the CLI). */
#ifndef SB_FORMAT_H
#define SB_FORMAT_H

typedef enum { SB_FORMAT_WAV16 = 0, SB_FORMAT_WAV24, SB_FORMAT_WAVF32, SB_FORMAT_FLAC } sb_format;

#endif
