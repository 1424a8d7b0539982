/* One forward pass of a RoFormer over B chunks (roformer.h), all of it on the device through
 * the backend's operations: the chunks go up once, the stems come back once.
 *
 * Layouts on the device: tokens x [B T][nb][dim] (frame-major: the token of frame t and band k
 * of chunk b is row (b T + t) nb + k). The time transformer's sequences are a band's frames
 * (rows at a stride of nb), the frequency transformer's a frame's bands (consecutive rows):
 * both run in place with strided attention, no transposes. The spectrum is frame-major, X [B T][bins][ch][re,
 * im]; the band split's input is gathered from it band after band ([nb blocks][B T][din_k]),
 * so each band's RMSNorm reads contiguous rows; its products write their band's columns of x
 * directly. The masks come out as [stems][B T][total], in the gathered order of the input,
 * are gathered back to the spectrum's layout (averaged where bands overlap), multiplied with
 * it, and each (chunk, stem) goes through the inverse STFT.
 */
#include "models/resident.h"
#include "models/roformer/roformer.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

struct sb_roformer_on {
	sb_resident p;
	const sb_roformer *net;
};

#define OK(r) (sb_resident_status(&(r)->p) == SB_OK)
#define OP(r) if (OK(r)) (r)->p.o

sb_status sb_roformer_place(const sb_roformer *net, const sb_exec *dev, const sb_logger *log,
                            sb_roformer_on **out)
{
	*out = NULL;
	sb_roformer_on *r = calloc(1, sizeof *r);
	if (!r)
		return SB_ERR_NOMEM;
	r->net = net;
	sb_status st = sb_resident_init(&r->p, &net->w, dev, log, sb_rf_family_name(net->cfg.family));
	if (st != SB_OK) {
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
	sb_resident_fini(&r->p);
	free(r);
}

void sb_roformer_on_stop(sb_roformer_on *r, const atomic_int *a, const atomic_int *b)
{
	r->p.stop[0] = a;
	r->p.stop[1] = b;
}

static sb_dv W(sb_roformer_on *r, const float *host)
{
	return sb_resident_w(&r->p, host);
}

static void gemm(sb_roformer_on *r, int M, int N, int K, sb_dv a, int lda, sb_dv w, int ldw,
                 float beta, sb_dv c, int ldc)
{
	if (M > 0 && N > 0 && OK(r))
		r->p.o->gemm(r->p.x.d, M, N, K, 1.f, a, lda, 0, w, ldw, 0, 1, beta, c, ldc, 0, 1, 1, 0, 0,
		             0);
}

/* the same, then act(c + b) with b per column (nn.Linear's bias) in the product's pass */
static void linear(sb_roformer_on *r, int M, int N, int K, sb_dv a, int lda, sb_dv w, int ldw,
                   float beta, sb_dv c, int ldc, sb_dv b, int act)
{
	const sb_bias e = {b, 0, 1, act};
	if (M > 0 && N > 0 && OK(r))
		r->p.o->gemm_bias(r->p.x.d, M, N, K, 1.f, a, lda, 0, w, ldw, 0, 1, beta, c, ldc, 0, 1, 1, 0,
		                  0, 0, &e);
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
	sb_dv h = sb_resident_a(&r->p, n * dim);
	sb_dv qkv = sb_resident_a(&r->p, n * ld);
	sb_dv att = sb_resident_a(&r->p, n * inner);
	OP(r)->rmsnorm(r->p.x.d, x, h, n, dim, W(r, L->norm));
	if (net->gates)
		linear(r, (int)n, ld, dim, h, dim, W(r, L->qkvg), dim, 0.f, qkv, ld, W(r, L->qkvg_b),
		       SB_ACT_NONE);
	else
		gemm(r, (int)n, ld, dim, h, dim, W(r, L->qkvg), dim, 0.f, qkv, ld);
	/* rotary positions: a token's frame (time) or band (frequency), on q and k at once */
	if (time) {
		OP(r)->rope(r->p.x.d, qkv, n, ld, 2 * inner, hd, W(r, net->rope_t), nb, T);
	} else {
		OP(r)->rope(r->p.x.d, qkv, n, ld, 2 * inner, hd, W(r, net->rope_f), 1, nb);
	}
	/* the per-head gates, columns 3 inner of the rows q is read from, applied as attention
	 * writes its rows */
	const float scale = 1.f / sqrtf((float)hd);
	const sb_dv none = {NULL, 0};
	if (time) {
		for (int b = 0; b < B && OK(r); b++) {
			const sb_dv q = sb_dv_at(qkv, (size_t)b * T * nb * ld);
			r->p.o->attention(r->p.x.d, q, nb * ld, sb_dv_at(q, (size_t)inner),
			                  sb_dv_at(q, (size_t)2 * inner), nb * ld, T, T, H, hd, scale,
			                  sb_dv_at(att, (size_t)b * T * nb * inner), nb * inner, nb, ld, ld,
			                  inner, net->gates ? sb_dv_at(q, (size_t)3 * inner) : none);
		}
	} else {
		OP(r)->attention(r->p.x.d, qkv, ld, sb_dv_at(qkv, (size_t)inner),
		                 sb_dv_at(qkv, (size_t)2 * inner), ld, nb, nb, H, hd, scale, att, inner,
		                 B * T, (long)nb * ld, (long)nb * ld, (long)nb * inner,
		                 net->gates ? sb_dv_at(qkv, (size_t)3 * inner) : none);
	}
	gemm(r, (int)n, dim, inner, att, inner, W(r, L->out), inner, 1.f, x, dim);
	sb_resident_r(&r->p, qkv);
	sb_resident_r(&r->p, att);
	/* feed-forward */
	sb_dv f = sb_resident_a(&r->p, n * net->hidden);
	OP(r)->rmsnorm(r->p.x.d, x, h, n, dim, W(r, L->ff_norm));
	linear(r, (int)n, net->hidden, dim, h, dim, W(r, L->ff1), dim, 0.f, f, net->hidden,
	       W(r, L->ff1_b), SB_ACT_GELU);
	/* x += f W2^T + b2: the residual is the product's beta */
	linear(r, (int)n, dim, net->hidden, f, net->hidden, W(r, L->ff2), net->hidden, 1.f, x, dim,
	       W(r, L->ff2_b), SB_ACT_NONE);
	sb_resident_r(&r->p, f);
	sb_resident_r(&r->p, h);
}

sb_status sb_roformer_submit(sb_roformer_on *r, int B, const float *in, float *out,
                            sb_resident_pass *pass)
{
	pass->bp = NULL;
	const sb_roformer *net = r->net;
	const sb_rf_config *c = &net->cfg;
	const int T = net->frames, nb = net->nb, dim = c->dim, ch = net->ch, bins = net->bins,
	          S = net->n_stems, total = net->total;
	const int64_t L = c->m.chunk_size;
	const size_t rows = (size_t)B * T, fl = (size_t)bins * ch * 2; /* a frame's spectrum */
	if (B < 1)
		return pass->st = SB_ERR_INVALID;
	sb_status st = sb_resident_begin(&r->p);
	if (st != SB_OK)
		return pass->st = st;
	/* torch.stft(center, reflect padding, window, onesided; normalized scales by
	 * n_fft^-1/2), frame-major */
	const sb_stft g = {c->n_fft, c->hop, T, bins, c->n_fft / 2, 2, 2L * ch, (long)fl, 1};
	const float norm = c->stft_normalized ? 1.f / sqrtf((float)c->n_fft) : 1.f;
	sb_dv mix = sb_resident_a(&r->p, (size_t)B * ch * L), X = sb_resident_a(&r->p, rows * fl);
	if (OK(r))
		r->p.x.be->upload(r->p.x.d, mix, in, (size_t)B * ch * L);
	for (int b = 0; b < B; b++)
		OP(r)->stft(r->p.x.d, &g, sb_dv_at(mix, (size_t)b * ch * L), L, ch, L, W(r, net->window),
		            norm, sb_dv_at(X, (size_t)b * T * fl));
	sb_resident_r(&r->p, mix);
	/* the band split: every band's values gathered [rows][total] and normalised, band by band,
	 * in one launch each; then per group of bands of one width one strided-batched product
	 * with its biases into the bands' columns of x */
	sb_dv dx = sb_resident_a(&r->p, rows * total);
	OP(r)->gather(r->p.x.d, X, (long)fl, dx, total, rows, total, W(r, net->band_ptr),
	              W(r, net->band_idx), W(r, net->ones));
	OP(r)->rmsnorm_seg(r->p.x.d, dx, dx, rows, total, nb, W(r, net->band_seg),
	                   W(r, net->split_norm));
	sb_dv x = sb_resident_a(&r->p, rows * nb * dim);
	for (int gi = 0; gi < net->n_groups && OK(r); gi++) {
		const rf_group *gr = &net->group[gi];
		const int din = net->din[gr->k0];
		const sb_bias e = {W(r, net->split_b + (size_t)gr->k0 * dim), dim, 1, SB_ACT_NONE};
		r->p.o->gemm_bias(r->p.x.d, (int)rows, dim, din, 1.f, sb_dv_at(dx, net->off[gr->k0]), total,
		                  din, W(r, net->split_w[gr->k0]), din, (long)dim * din, 1, 0.f,
		                  sb_dv_at(x, (size_t)gr->k0 * dim), nb * dim, dim, gr->n, 1, 0, 0, 0, &e);
	}
	sb_resident_r(&r->p, dx);
	/* the axial transformer; with skip_connection each block's input adds every earlier
	 * block's output (kept in 'store') */
	sb_dv store = {NULL, 0};
	const size_t nx = rows * nb * dim;
	if (c->skip)
		store = sb_resident_a(&r->p, (size_t)c->depth * nx);
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
		if (sb_resident_stopped(&r->p))
			break;
	}
	if (net->final_norm)
		OP(r)->rmsnorm(r->p.x.d, x, x, rows * nb, dim, W(r, net->final_norm));
	/* the mask estimators: per stem and group of bands of one width, each MLP layer as one
	 * strided-batched product over the group's bands (their inputs are columns of x, their
	 * weights back to back, their outputs [rows][band][width]); the last layer's two halves,
	 * the GLU's values and its gates, as two such products into the bands' columns of z's two
	 * halves [2][rows][total]; then one GLU for every band into the mask [rows][total] */
	sb_dv m = sb_resident_a(&r->p, (size_t)S * rows * total);
	const int gmax = RF_GROUP_MAX;
	sb_dv h1 = sb_resident_a(&r->p, rows * gmax * net->mlp_hidden);
	sb_dv h2 = sb_resident_a(&r->p, rows * gmax * net->mlp_hidden);
	sb_dv z = sb_resident_a(&r->p, 2 * rows * total);
	const int nl = sb_rf_mask_layers(c);
	for (int s = 0; s < S && !sb_resident_stopped(&r->p); s++) {
		for (int gi = 0; gi < net->n_groups && OK(r); gi++) {
			const rf_group *gr = &net->group[gi];
			const int gn = gr->n, din = net->din[gr->k0];
			const rf_mlp *mp = &net->mask[(size_t)s * nb + gr->k0];
			sb_dv a = sb_dv_at(x, (size_t)gr->k0 * dim);
			int lda = nb * dim, in = dim;
			long sa = dim;
			for (int l = 0; l < nl - 1; l++) {
				const int o = net->mlp_hidden;
				const sb_dv y = l % 2 ? h2 : h1;
				/* band j's bias is the j-th o of the group's */
				const sb_bias e = {W(r, mp->b[l]), o, 1, SB_ACT_TANH};
				r->p.o->gemm_bias(r->p.x.d, (int)rows, o, in, 1.f, a, lda, sa, W(r, mp->w[l]), in,
				                  (long)o * in, 1, 0.f, y, gn * o, o, gn, 1, 0, 0, 0, &e);
				a = y;
				lda = gn * o;
				sa = o;
				in = o;
			}
			/* band j's rows of the last layer: its values' din, then its gates' din */
			for (int half = 0; half < 2; half++) {
				const sb_bias e = {W(r, mp->b[nl - 1] + (size_t)half * din), 2L * din, 1,
				                   SB_ACT_NONE};
				r->p.o->gemm_bias(r->p.x.d, (int)rows, din, in, 1.f, a, lda, sa,
				                  W(r, mp->w[nl - 1] + (size_t)half * din * in), in,
				                  2L * din * in, 1, 0.f,
				                  sb_dv_at(z, (size_t)half * rows * total + net->off[gr->k0]),
				                  total, din, gn, 1, 0, 0, 0, &e);
			}
		}
		OP(r)->glu(r->p.x.d, z, 0, sb_dv_at(m, (size_t)s * rows * total), 0,
		           (int)(rows * total), 1);
	}
	sb_resident_r(&r->p, h1);
	sb_resident_r(&r->p, h2);
	sb_resident_r(&r->p, z);
	sb_resident_r(&r->p, x);
	/* the masks on the spectrum's layout, times the spectrum (MSST zeroes the DC bin after:
	 * its mask weight is 0 there), then the inverse STFT of each chunk and stem */
	sb_dv ms = sb_resident_a(&r->p, (size_t)S * rows * fl);
	OP(r)->gather(r->p.x.d, m, total, ms, (long)fl, (size_t)S * rows, (int)fl, W(r, net->mask_ptr),
	              W(r, net->mask_idx), W(r, net->mask_w));
	OP(r)->cmul(r->p.x.d, ms, (long)(rows * fl), X, ms, (long)(rows * fl), rows * fl / 2, S);
	sb_resident_r(&r->p, m);
	sb_resident_r(&r->p, X);
	const float iscale = (c->stft_normalized ? sqrtf((float)c->n_fft) : 1.f) / (float)c->n_fft;
	sb_dv y = sb_resident_a(&r->p, (size_t)B * S * ch * L);
	sb_dv work = sb_resident_a(&r->p, (size_t)ch * T * c->n_fft);
	for (int b = 0; b < B; b++)
		for (int s = 0; s < S; s++)
			OP(r)->istft(r->p.x.d, &g, sb_dv_at(ms, ((size_t)s * B + b) * T * fl), ch, L,
			             W(r, net->window), iscale, 0, 0,
			             sb_dv_at(y, ((size_t)b * S + s) * ch * L), L, 0, work);
	/* the stems come back at the pass's end, its one wait (sb_roformer_collect); a stopped
	 * pass returns without waiting and leaves out untouched (resident.h) */
	sb_resident_fetch(&r->p, out, y, (size_t)B * S * ch * L);
	*pass = sb_resident_end(&r->p);
	return pass->st;
}

sb_status sb_roformer_collect(sb_roformer_on *r, sb_resident_pass *pass)
{
	return sb_resident_wait(&r->p, pass);
}

sb_status sb_roformer_forward(sb_roformer_on *r, int B, const float *in, float *out)
{
	sb_resident_pass pass;
	sb_status st = sb_roformer_submit(r, B, in, out, &pass);
	const sb_status end = sb_roformer_collect(r, &pass);
	return st != SB_OK ? st : end;
}
