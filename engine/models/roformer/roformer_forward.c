/* One forward pass of a RoFormer over B chunks (roformer.h), the STFTs on the host and the
 * network on the device through the backend's operations.
 *
 * Layouts on the device: tokens x [B T][nb][dim] (frame-major: the token of frame t and band k
 * of chunk b is row (b T + t) nb + k). The time transformer's sequences are a band's frames
 * (rows at a stride of nb), the frequency transformer's a frame's bands (consecutive rows):
 * both run in place with strided attention, no transposes. The band split's input is laid out
 * band after band on the host ([nb blocks][B T][din_k]), so each band's RMSNorm reads
 * contiguous rows; its products write their band's columns of x directly. The masks come back
 * as [stems][B T][total], in the gathered order of the input.
 */
#include "models/place.h"
#include "models/roformer/roformer.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

struct sb_roformer_on {
	sb_place p;
	const sb_roformer *net;
	float *env_inv; /* [chunk]: 1 / the iSTFT's window envelope */
};

#define OK(r) (sb_place_status(&(r)->p) == SB_OK)
#define OP(r) if (OK(r)) (r)->p.o

sb_status sb_roformer_place(const sb_roformer *net, const sb_exec *dev, const sb_logger *log,
                            sb_roformer_on **out)
{
	*out = NULL;
	sb_roformer_on *r = calloc(1, sizeof *r);
	const sb_rf_config *c = &net->cfg;
	const int64_t L = c->chunk_size, padded = L + c->n_fft;
	double *env = calloc((size_t)padded, sizeof(double));
	if (r)
		r->env_inv = malloc(sizeof(float) * (size_t)L);
	if (!r || !env || !r->env_inv) {
		free(env);
		if (r)
			free(r->env_inv);
		free(r);
		return SB_ERR_NOMEM;
	}
	for (int t = 0; t < net->frames; t++)
		for (int n = 0; n < c->n_fft; n++)
			env[(int64_t)t * c->hop + n] += (double)net->window[n] * net->window[n];
	for (int64_t i = 0; i < L; i++) {
		const double e = env[i + c->n_fft / 2];
		r->env_inv[i] = e > 1e-11 ? (float)(1.0 / e) : 0.f;
	}
	free(env);
	r->net = net;
	sb_status st = sb_place_init(&r->p, &net->w, dev, log, sb_rf_family_name(c->family));
	if (st != SB_OK) {
		free(r->env_inv);
		free(r);
		return st;
	}
	*out = r;
	return SB_OK;
}

void sb_roformer_unplace(sb_roformer_on *r)
{
	if (!r)
		return;
	sb_place_fini(&r->p);
	free(r->env_inv);
	free(r);
}

const sb_exec *sb_roformer_on_device(const sb_roformer_on *r)
{
	return &r->p.x;
}

void sb_roformer_on_stop(sb_roformer_on *r, const atomic_int *a, const atomic_int *b)
{
	r->p.stop[0] = a;
	r->p.stop[1] = b;
}

/* ---- host: STFT and inverse ---- */

typedef struct {
	const sb_roformer *net;
	const float *in;     /* [B][ch][L] */
	float *spec;         /* [B][ch][bins][T][2] */
	const float *mask;   /* [S][B T][total] */
	float *out;          /* [B][S][ch][L] */
	const float *env_inv;
	int B;
	sb_status st;
} spec_job;

/* STFT of one (chunk, channel): torch.stft(center, reflect padding, window, onesided) */
static void k_stft(void *v, int64_t b, int64_t e, int wk)
{
	(void)wk;
	spec_job *j = v;
	const sb_roformer *net = j->net;
	const sb_rf_config *c = &net->cfg;
	const int64_t L = c->chunk_size;
	const int n = c->n_fft, pad = n / 2, T = net->frames, bins = net->bins;
	float *a = fftwf_alloc_real((size_t)n);
	fftwf_complex *z = fftwf_alloc_complex((size_t)bins);
	if (!a || !z) {
		j->st = SB_ERR_NOMEM;
		fftwf_free(a);
		fftwf_free(z);
		return;
	}
	for (int64_t item = b; item < e; item++) {
		const float *x = j->in + item * L;
		float *o = j->spec + item * (int64_t)bins * T * 2;
		for (int t = 0; t < T; t++) {
			for (int i = 0; i < n; i++) {
				int64_t k = (int64_t)t * c->hop + i - pad;
				if (k < 0)
					k = -k;
				if (k >= L)
					k = 2 * (L - 1) - k;
				a[i] = x[k] * net->window[i];
			}
			fftwf_execute_dft_r2c(net->fwd, a, z);
			for (int f = 0; f < bins; f++) {
				o[((int64_t)f * T + t) * 2] = z[f][0];
				o[((int64_t)f * T + t) * 2 + 1] = z[f][1];
			}
		}
	}
	fftwf_free(a);
	fftwf_free(z);
}

/* Masked spectrum and inverse STFT of one (chunk, stem, channel): the masks of the values
 * (averaged over the bands that cover them), the DC bin zeroed (zero_dc), torch.istft(center,
 * window, length L). */
static void k_istft(void *v, int64_t b, int64_t e, int wk)
{
	(void)wk;
	spec_job *j = v;
	const sb_roformer *net = j->net;
	const sb_rf_config *c = &net->cfg;
	const int64_t L = c->chunk_size;
	const int n = c->n_fft, T = net->frames, bins = net->bins, ch = net->ch, S = net->n_stems;
	const int half = net->total / 2;
	float *a = fftwf_alloc_real((size_t)n);
	fftwf_complex *z = fftwf_alloc_complex((size_t)bins);
	float *m = malloc(sizeof(float) * 2 * (size_t)bins * T); /* this channel's mask [f][t][2] */
	float *ola = malloc(sizeof(float) * (size_t)(L + n));
	if (!a || !z || !m || !ola) {
		j->st = SB_ERR_NOMEM;
		goto out;
	}
	for (int64_t item = b; item < e; item++) {
		const int s = (int)(item % ch), stem = (int)(item / ch % S), bi = (int)(item / ch / S);
		memset(m, 0, sizeof(float) * 2 * (size_t)bins * T);
		for (int t = 0; t < T; t++) {
			const float *row = j->mask + ((int64_t)stem * j->B * T + (int64_t)bi * T + t) * net->total;
			for (int q = 0; q < half; q++) {
				const int src = net->src[q];
				if (src % ch != s)
					continue;
				float *d = m + ((int64_t)(src / ch) * T + t) * 2;
				d[0] += row[2 * q];
				d[1] += row[2 * q + 1];
			}
		}
		const float *sp = j->spec + ((int64_t)bi * ch + s) * (int64_t)bins * T * 2;
		memset(ola, 0, sizeof(float) * (size_t)(L + n));
		for (int t = 0; t < T; t++) {
			for (int f = 0; f < bins; f++) {
				const float w = net->inv_count[f * ch + s];
				const float mr = m[((int64_t)f * T + t) * 2] * w,
				            mi = m[((int64_t)f * T + t) * 2 + 1] * w;
				const float xr = sp[((int64_t)f * T + t) * 2], xi = sp[((int64_t)f * T + t) * 2 + 1];
				z[f][0] = xr * mr - xi * mi;
				z[f][1] = xr * mi + xi * mr;
			}
			if (c->zero_dc)
				z[0][0] = z[0][1] = 0.f;
			fftwf_execute_dft_c2r(net->inv, z, a);
			const float scale = 1.f / (float)n;
			float *o = ola + (int64_t)t * c->hop;
			for (int i = 0; i < n; i++)
				o[i] += a[i] * scale * net->window[i];
		}
		float *y = j->out + (((int64_t)bi * S + stem) * ch + s) * L;
		for (int64_t i = 0; i < L; i++)
			y[i] = ola[i + n / 2] * j->env_inv[i];
	}
out:
	fftwf_free(a);
	fftwf_free(z);
	free(m);
	free(ola);
}

/* ---- device: the network ---- */

static sb_dv W(sb_roformer_on *r, const float *host)
{
	return sb_place_w(&r->p, host);
}

static void gemm(sb_roformer_on *r, int M, int N, int K, sb_dv a, int lda, sb_dv w, int ldw,
                 float beta, sb_dv c, int ldc)
{
	if (M > 0 && N > 0 && OK(r))
		r->p.o->gemm(r->p.x.d, M, N, K, 1.f, a, lda, 0, w, ldw, 0, 1, beta, c, ldc, 0, 1, 1, 0, 0,
		             0);
}

/* one transformer layer over all n tokens of x [n][dim]; time: sequences along frames */
static void layer(sb_roformer_on *r, const rf_layer *L, sb_dv x, int B, int time)
{
	const sb_roformer *net = r->net;
	const sb_rf_config *c = &net->cfg;
	const int dim = c->dim, H = c->heads, hd = c->dim_head, inner = net->inner, T = net->frames,
	          nb = net->nb;
	const int ld = 3 * inner + (net->gates ? H : 0);
	const size_t n = (size_t)B * T * nb;
	sb_dv h = sb_place_a(&r->p, n * dim);
	sb_dv qkv = sb_place_a(&r->p, n * ld);
	sb_dv att = sb_place_a(&r->p, n * inner);
	OP(r)->rmsnorm(r->p.x.d, x, h, n, dim, W(r, L->norm));
	gemm(r, (int)n, ld, dim, h, dim, W(r, L->qkvg), dim, 0.f, qkv, ld);
	if (net->gates)
		OP(r)->bias_cols(r->p.x.d, qkv, n * ld, ld, W(r, L->qkvg_b), SB_ACT_NONE);
	/* rotary positions: a token's frame (time) or band (frequency), on q and k at once */
	if (time) {
		OP(r)->rope(r->p.x.d, qkv, n, ld, 2 * inner, hd, W(r, net->rope_t), nb, T);
	} else {
		OP(r)->rope(r->p.x.d, qkv, n, ld, 2 * inner, hd, W(r, net->rope_f), 1, nb);
	}
	const float scale = 1.f / sqrtf((float)hd);
	if (time) {
		for (int b = 0; b < B && OK(r); b++) {
			const sb_dv q = sb_dv_at(qkv, (size_t)b * T * nb * ld);
			r->p.o->attention(r->p.x.d, q, nb * ld, sb_dv_at(q, (size_t)inner),
			                  sb_dv_at(q, (size_t)2 * inner), nb * ld, T, T, H, hd, scale,
			                  sb_dv_at(att, (size_t)b * T * nb * inner), nb * inner, nb, ld, ld,
			                  inner);
		}
	} else {
		OP(r)->attention(r->p.x.d, qkv, ld, sb_dv_at(qkv, (size_t)inner),
		                 sb_dv_at(qkv, (size_t)2 * inner), ld, nb, nb, H, hd, scale, att, inner,
		                 B * T, (long)nb * ld, (long)nb * ld, (long)nb * inner);
	}
	if (net->gates)
		OP(r)->head_gate(r->p.x.d, att, inner, sb_dv_at(qkv, (size_t)3 * inner), ld, n, H, hd);
	gemm(r, (int)n, dim, inner, att, inner, W(r, L->out), inner, 1.f, x, dim);
	sb_place_r(&r->p, qkv);
	sb_place_r(&r->p, att);
	/* feed-forward */
	sb_dv f = sb_place_a(&r->p, n * net->hidden);
	OP(r)->rmsnorm(r->p.x.d, x, h, n, dim, W(r, L->ff_norm));
	gemm(r, (int)n, net->hidden, dim, h, dim, W(r, L->ff1), dim, 0.f, f, net->hidden);
	OP(r)->bias_cols(r->p.x.d, f, n * net->hidden, net->hidden, W(r, L->ff1_b), SB_ACT_GELU);
	gemm(r, (int)n, dim, net->hidden, f, net->hidden, W(r, L->ff2), net->hidden, 1.f, x, dim);
	OP(r)->bias_cols(r->p.x.d, x, n * dim, dim, W(r, L->ff2_b), SB_ACT_NONE);
	sb_place_r(&r->p, f);
	sb_place_r(&r->p, h);
}

sb_status sb_roformer_forward(sb_roformer_on *r, sb_pool *pool, int B, const float *in,
                              float *out)
{
	const sb_roformer *net = r->net;
	const sb_rf_config *c = &net->cfg;
	const int T = net->frames, nb = net->nb, dim = c->dim, ch = net->ch, bins = net->bins,
	          S = net->n_stems, total = net->total;
	const size_t rows = (size_t)B * T;
	if (B < 1)
		return SB_ERR_INVALID;
	sb_status st = sb_place_begin(&r->p);
	if (st != SB_OK)
		return st;
	float *spec = malloc(sizeof(float) * (size_t)B * ch * bins * T * 2);
	float *xb = malloc(sizeof(float) * rows * total);
	float *mask = malloc(sizeof(float) * (size_t)S * rows * total);
	if (!spec || !xb || !mask) {
		st = SB_ERR_NOMEM;
		goto out;
	}
	spec_job j = {net, in, spec, mask, out, r->env_inv, B, SB_OK};
	sb_pool_for(pool, (int64_t)B * ch, 1, k_stft, &j);
	if (j.st != SB_OK) {
		st = j.st;
		goto out;
	}
	/* gather the bands' values, band after band */
	for (int k = 0; k < nb; k++)
		for (size_t bt = 0; bt < rows; bt++) {
			const int b = (int)(bt / T), t = (int)(bt % T);
			float *o = xb + rows * net->off[k] + bt * net->din[k];
			for (int q = 0; q < net->din[k] / 2; q++) {
				const int src = net->src[net->off[k] / 2 + q], f = src / ch, s = src % ch;
				const float *v = spec + ((((size_t)b * ch + s) * bins + f) * T + t) * 2;
				o[2 * q] = v[0];
				o[2 * q + 1] = v[1];
			}
		}
	/* band split */
	sb_dv dx = sb_place_a(&r->p, rows * total);
	sb_dv x = sb_place_a(&r->p, rows * nb * dim);
	if (OK(r))
		r->p.x.be->upload(r->p.x.d, dx, xb, rows * total);
	for (int k = 0; k < nb; k++) {
		const sb_dv xk = sb_dv_at(dx, rows * net->off[k]);
		OP(r)->rmsnorm(r->p.x.d, xk, xk, rows, net->din[k], W(r, net->split_norm + net->off[k]));
		gemm(r, (int)rows, dim, net->din[k], xk, net->din[k], W(r, net->split_w[k]), net->din[k],
		     0.f, sb_dv_at(x, (size_t)k * dim), nb * dim);
	}
	OP(r)->bias_cols(r->p.x.d, x, rows * nb * dim, nb * dim, W(r, net->split_b), SB_ACT_NONE);
	sb_place_r(&r->p, dx);
	/* the axial transformer; with skip_connection each block's input adds every earlier
	 * block's output (kept in 'store') */
	sb_dv store = {NULL, 0};
	const size_t nx = rows * nb * dim;
	if (c->skip)
		store = sb_place_a(&r->p, (size_t)c->depth * nx);
	for (int d = 0, li = 0; d < c->depth; d++) {
		for (int e = 0; c->skip && e < d; e++)
			OP(r)->add(r->p.x.d, x, sb_dv_at(store, (size_t)e * nx), nx);
		for (int l = 0; l < c->time_depth; l++)
			layer(r, &net->layers[li++], x, B, 1);
		if (net->tnorm)
			OP(r)->rmsnorm(r->p.x.d, x, x, rows * nb, dim, W(r, net->tnorm[2 * d]));
		for (int l = 0; l < c->freq_depth; l++)
			layer(r, &net->layers[li++], x, B, 0);
		if (net->tnorm)
			OP(r)->rmsnorm(r->p.x.d, x, x, rows * nb, dim, W(r, net->tnorm[2 * d + 1]));
		if (c->skip)
			OP(r)->copy(r->p.x.d, sb_dv_at(store, (size_t)d * nx), x, nx);
		if (sb_place_stopped(&r->p))
			break;
	}
	if (net->final_norm)
		OP(r)->rmsnorm(r->p.x.d, x, x, rows * nb, dim, W(r, net->final_norm));
	/* the mask estimators: per stem and group of bands of one width, each MLP layer as one
	 * strided-batched product over the group's bands (their inputs are columns of x, their
	 * weights back to back, their outputs [rows][band][width]), then a GLU per band into the
	 * band's columns of the mask */
	sb_dv m = sb_place_a(&r->p, (size_t)S * rows * total);
	int widest = 0;
	for (int k = 0; k < nb; k++)
		widest = net->din[k] > widest ? net->din[k] : widest;
	const int gmax = RF_GROUP_MAX;
	sb_dv h1 = sb_place_a(&r->p, rows * gmax * net->mlp_hidden);
	sb_dv h2 = sb_place_a(&r->p, rows * gmax * net->mlp_hidden);
	sb_dv z = sb_place_a(&r->p, rows * gmax * 2 * widest);
	const int nl = sb_rf_mask_layers(c);
	for (int s = 0; s < S && !sb_place_stopped(&r->p); s++)
		for (int gi = 0; gi < net->n_groups; gi++) {
			const rf_group *gr = &net->group[gi];
			const int gn = gr->n, din = net->din[gr->k0];
			const rf_mlp *mp = &net->mask[(size_t)s * nb + gr->k0];
			sb_dv a = sb_dv_at(x, (size_t)gr->k0 * dim);
			int lda = nb * dim, in = dim;
			long sa = dim;
			for (int l = 0; l < nl; l++) {
				const int last = l == nl - 1;
				const int o = last ? 2 * din : net->mlp_hidden;
				const sb_dv y = last ? z : (l % 2 ? h2 : h1);
				if (OK(r))
					r->p.o->gemm(r->p.x.d, (int)rows, o, in, 1.f, a, lda, sa, W(r, mp->w[l]), in,
					             (long)o * in, 1, 0.f, y, gn * o, o, gn, 1, 0, 0, 0);
				OP(r)->bias_cols(r->p.x.d, y, rows * gn * o, gn * o, W(r, mp->b[l]),
				                 last ? SB_ACT_NONE : SB_ACT_TANH);
				a = y;
				lda = gn * o;
				sa = o;
				in = o;
			}
			for (int j = 0; j < gn; j++)
				OP(r)->glu(r->p.x.d, sb_dv_at(z, (size_t)j * 2 * din), (long)gn * 2 * din,
				           sb_dv_at(m, (size_t)s * rows * total + net->off[gr->k0 + j]), total,
				           din, (int)rows);
		}
	if (OK(r))
		r->p.x.be->download(r->p.x.d, mask, m, (size_t)S * rows * total);
	st = sb_place_status(&r->p);
	if (st == SB_OK) {
		const sb_status fst = r->p.x.be->finish(r->p.x.d);
		st = fst != SB_OK ? fst : st;
	}
	if (st == SB_OK) {
		sb_pool_for(pool, (int64_t)B * S * ch, 1, k_istft, &j);
		st = j.st;
	}
out:
	if (st != SB_OK && r->p.x.d)
		r->p.x.be->finish(r->p.x.d);
	free(spec);
	free(xb);
	free(mask);
	return st;
}
