/* Rate conversion around a model that runs at a fixed rate (HTDemucs: 44.1 kHz), so stems come
 * back at the input's own rate and exact length, aligned to the sample (libsamplerate's sinc
 * converters, which compensate their own delay).
 *
 * The input side converts the whole source once, streaming, into an unlinked temporary file
 * (float, in $TMPDIR), so a model can read windows at random as from any source while memory
 * stays bounded. The output side converts each stem as it is written and trims or pads the
 * end so every stem has exactly the input's frame count.
 */
#ifndef SB_RESAMPLE_H
#define SB_RESAMPLE_H

#include "io/stream.h"

#include <stdatomic.h>

/* A source at 'rate' over 'in' (which stays owned by the caller and must outlive it). Its
 * length is round(in->frames * rate / in->rate). Polls *cancel while converting. */
sb_status sb_source_resampled(sb_source *in, double rate, const sb_logger *log,
                              const atomic_int *cancel, sb_source **out);

typedef struct sb_resample_sink sb_resample_sink;
/* A sink at 'from_rate' that writes into 'out' at 'to_rate', 'frames' frames per stem. */
sb_status sb_resample_sink_new(sb_sink *out, double from_rate, double to_rate, int64_t frames,
                               sb_resample_sink **rs);
sb_sink *sb_resample_sink_sink(sb_resample_sink *rs);
/* Flushes the converters and pads or trims every stem to exactly 'frames'. */
sb_status sb_resample_sink_finish(sb_resample_sink *rs);
/* Starts over (a retry on another device). */
sb_status sb_resample_sink_reset(sb_resample_sink *rs);
void sb_resample_sink_free(sb_resample_sink *rs);

#endif
