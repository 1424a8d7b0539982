/* The streaming driver of the built-in separator: cuts the input into chunks of STFT frames,
 * hands each to the device's classic operations (classic_ops.h), overlap-adds the half frame
 * that spans two chunks,
 * forms "other" as input minus the three masked stems and writes final samples to the sink.
 *
 * Memory is bounded by the chunk (nt frames of H samples plus 2Kt+1 frames of context), never
 * by the input length. Because every output frame sees exactly the same STFT frames whatever
 * the chunk length, and the overlap-add adds the same two numbers, the stems do not depend on
 * where chunks are cut.
 */
#include "models/classic/classic_ops.h"

#include <stdlib.h>
#include <string.h>

#define DEFAULT_CHUNK_FRAMES 128

sb_status sb_classic_run(const sb_exec *dev, const sb_classic_params *p, const sb_run_ctx *ctx,
                         sb_source *in, sb_sink *out)
{
	const sb_logger *log = ctx ? ctx->log : NULL;
	if (!dev || !dev->be || !p || !in || !out)
		return SB_ERR_INVALID;
	const sb_classic_ops *ops = dev->be->classic;
	if (!ops) {
		/* the group is optional (backend.h): the job runner places the model only where it
		 * is (job_run.c: place_model), so only a caller of its own meets this */
		sb_log(log, SB_LOG_WARNING, "builtin: %s has no operations for the built-in model; "
		       "it runs on the CPU", dev->props ? dev->props->label : dev->be->name);
		return SB_ERR_DEVICE;
	}
	const int C = in->channels;
	const int64_t len = in->frames;
	if (C < 1 || C > 8 || in->rate <= 0) {
		sb_log(log, SB_LOG_ERROR, "builtin: unsupported input (%d channels, %g Hz)", C, in->rate);
		return SB_ERR_INVALID;
	}
	if (len <= 0)
		return SB_ERR_EMPTY;
	if (out->n_stems < SB_N_STEMS || out->channels != C) {
		sb_log(log, SB_LOG_ERROR, "builtin: sink takes %d stems of %d channels, need 4 of %d",
		       out->n_stems, out->channels, C);
		return SB_ERR_INVALID;
	}

	sb_classic_geom g;
	sb_classic_geometry(p, in->rate, &g);
	const int h = g.hop, kt = g.kt;
	int64_t nt_max = DEFAULT_CHUNK_FRAMES;
	if (ctx && ctx->chunk_frames > 0)
		nt_max = ctx->chunk_frames / h;
	if (nt_max < 1)
		nt_max = 1;
	const int64_t total = (len - 1) / h + 2; /* frames 0 .. (len-1)/H + 1 */
	if (nt_max > total)
		nt_max = total;

	sb_status st = SB_OK;
	float *inbuf = NULL, *obuf = NULL, *tail = NULL, *other = NULL;
	g.channels = C;
	g.max_frames = (int)nt_max;
	float *tables = malloc(sizeof(float) * ((size_t)g.n_fft + 2 * (size_t)g.bins));
	if (!tables)
		return SB_ERR_NOMEM;
	sb_classic_tables(p, in->rate, g.n_fft, tables, tables + g.n_fft, tables + g.n_fft + g.bins);
	g.win = tables;
	g.bass_w = tables + g.n_fft;
	g.voice_w = tables + g.n_fft + g.bins;
	sb_classic_state *state = NULL;
	st = ops->create(dev->d, &g, &state);
	free(tables); /* create() keeps its own copy */
	if (st != SB_OK) {
		sb_log(log, SB_LOG_ERROR, "builtin: cannot start on %s (%s)", dev->props->label,
		       sb_status_str(st));
		return st;
	}
	const size_t win_frames = (size_t)(nt_max + 2 * kt + 1) * h;
	const size_t stem_len = (size_t)(nt_max + 1) * h * C;
	inbuf = malloc(sizeof(float) * win_frames * C);
	obuf = malloc(sizeof(float) * 3 * stem_len);
	tail = calloc((size_t)3 * h * C, sizeof(float));
	other = malloc(sizeof(float) * stem_len);
	if (!inbuf || !obuf || !tail || !other) {
		st = SB_ERR_NOMEM;
		goto done;
	}

	int64_t written = 0;
	for (int64_t t0 = 0; t0 < total; t0 += nt_max) {
		if (ctx && ctx->cancel && atomic_load(ctx->cancel)) {
			st = SB_ERR_CANCELLED;
			goto done;
		}
		const int nt = (int)(total - t0 < nt_max ? total - t0 : nt_max);
		const int last = t0 + nt >= total;
		st = in->read(in, (t0 - kt - 1) * h, (int64_t)(nt + 2 * kt + 1) * h, inbuf);
		if (st != SB_OK)
			goto done;
		st = dev->be->begin_chunk(dev->d);
		if (st == SB_OK)
			st = ops->process(state, nt, inbuf, obuf);
		if (st != SB_OK)
			goto done;
		const size_t cur = (size_t)(nt + 1) * h * C; /* this chunk's stem length */
		for (int s = 0; s < 3; s++) {
			float *o = obuf + s * cur, *tl = tail + (size_t)s * h * C;
			for (size_t i = 0; i < (size_t)h * C; i++)
				o[i] += tl[i];
		}
		/* Samples [(t0-1)H, (t0+nt-1)H) are final; the last chunk finishes the file. */
		int64_t first = (t0 - 1) * h;
		int64_t end = last ? (t0 + nt) * h : (t0 + nt - 1) * h;
		if (end > len)
			end = len;
		if (!last) {
			for (int s = 0; s < 3; s++)
				memcpy(tail + (size_t)s * h * C, obuf + s * cur + (size_t)nt * h * C,
				       sizeof(float) * h * C);
		}
		int64_t from = written > first ? written : first;
		if (end > from) {
			size_t off = (size_t)(from - first) * C, cnt = (size_t)(end - from);
			const float *x = inbuf + (size_t)kt * h * C + off; /* input at sample 'from' */
			for (size_t i = 0; i < cnt * C; i++)
				other[i] = x[i] - (obuf[off + i] + obuf[cur + off + i] + obuf[2 * cur + off + i]);
			for (int s = 0; s < 3 && st == SB_OK; s++)
				st = out->write(out, s, obuf + s * cur + off, (int64_t)cnt);
			if (st == SB_OK)
				st = out->write(out, SB_STEM_OTHER, other, (int64_t)cnt);
			if (st != SB_OK)
				goto done;
			written = end;
		}
		if (ctx && ctx->progress)
			ctx->progress(ctx->progress_user, (double)(t0 + nt) / (double)total, "separating");
	}
	if (written != len) { /* an internal invariant: every sample is written exactly once */
		sb_log(log, SB_LOG_ERROR, "builtin: wrote %lld of %lld frames", (long long)written,
		       (long long)len);
		st = SB_ERR_INVALID;
	}
done:
	free(inbuf);
	free(obuf);
	free(tail);
	free(other);
	ops->destroy(state);
	return st;
}
