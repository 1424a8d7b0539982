/* The cross-domain transformer of HTDemucs (demucs/transformer.py CrossTransformerEncoder) in
 * eval mode, over B segments: layers alternate between self-attention within each branch and
 * cross-attention of each branch to the other, after the input norms and the sine position
 * embeddings, which are computed on the host and uploaded before the first pass's work.
 */
#include "models/demucs/htdemucs_internal.h"

#include <math.h>
#include <stdlib.h>

/* attention of q [nq] to k, v [nk] (row strides ldq, ldkv), all heads, into o [nq][D], for
 * B segments at strides sq, skv, so */
static void attention(sb_htdemucs_on *r, sb_dv q, int ldq, sb_dv k, sb_dv v, int ldkv, long nq,
                      long nk, int heads, int D, sb_dv o, int B, long sq, long skv, long so)
{
	const int hd = D / heads;
	OP(r)->attention(r->p.x.d, q, ldq, k, v, ldkv, (int)nq, (int)nk, heads, hd,
	                 1.f / sqrtf((float)hd), o, D, B, sq, skv, so, (sb_dv){NULL, 0});
}

/* one layer over B segments of n tokens at x [B][n][D]; kv: the other branch's tokens */
static void layer(sb_htdemucs_on *r, const hd_tlayer *L, sb_dv x, long n, int B, const sb_dv *kv,
                  long nkv)
{
	const sb_htdemucs *net = r->net;
	const int D = net->dim, Hd = net->hidden, heads = net->cfg.t_heads;
	const size_t all = (size_t)B * n;
	sb_dv h = buffer(r, all * D);
	OP(r)->layernorm(r->p.x.d, x, h, all, D, weight(r, L->n1w), weight(r, L->n1b));
	if (!kv) {
		sb_dv qkv = buffer(r, all * 3 * D);
		hd_linear(r, h, all, D, L->in_w, L->in_b, 3 * D, qkv, SB_ACT_NONE);
		attention(r, qkv, 3 * D, sb_dv_at(qkv, (size_t)D), sb_dv_at(qkv, (size_t)2 * D), 3 * D, n,
		          n, heads, D, h, B, n * 3 * D, n * 3 * D, n * D);
		give_back(r, qkv);
	} else {
		const size_t allkv = (size_t)B * nkv;
		sb_dv hk = buffer(r, allkv * D);
		sb_dv qb = buffer(r, all * D);
		sb_dv kvp = buffer(r, allkv * 2 * D);
		OP(r)->layernorm(r->p.x.d, *kv, hk, allkv, D, weight(r, L->n2w), weight(r, L->n2b));
		hd_linear(r, h, all, D, L->in_w, L->in_b, D, qb, SB_ACT_NONE);
		hd_linear(r, hk, allkv, D, L->in_w + (size_t)D * D, L->in_b + D, 2 * D, kvp, SB_ACT_NONE);
		attention(r, qb, D, kvp, sb_dv_at(kvp, (size_t)D), 2 * D, n, nkv, heads, D, h, B, n * D,
		          nkv * 2 * D, n * D);
		give_back(r, hk);
		give_back(r, qb);
		give_back(r, kvp);
	}
	/* x += gamma_1 (h W^T + b): gamma_1 is in W and b (load_tlayer), x the product's beta */
	hd_gemm_bias(r, (int)all, D, D, h, D, 0, weight(r, L->out_w), D, 0, 1, 1.f, x, D, 0, 1, 1, 0,
	             0, 0, L->out_b, 1, SB_ACT_NONE);
	OP(r)->layernorm(r->p.x.d, x, h, all, D, weight(r, kv ? L->n3w : L->n2w),
	                 weight(r, kv ? L->n3b : L->n2b));
	sb_dv f = buffer(r, all * Hd);
	hd_linear(r, h, all, D, L->l1w, L->l1b, Hd, f, SB_ACT_GELU);
	hd_gemm_bias(r, (int)all, D, Hd, f, Hd, 0, weight(r, L->l2w), Hd, 0, 1, 1.f, x, D, 0, 1, 1, 0,
	             0, 0, L->l2b, 1, SB_ACT_NONE);
	for (int b = 0; b < B; b++)
		OP(r)->groupnorm_tokens(r->p.x.d, sb_dv_at(x, (size_t)b * n * D), (size_t)n, D,
		                        weight(r, L->now), weight(r, L->nob));
	give_back(r, f);
	give_back(r, h);
}

/* transformer.py create_2d_sin_embedding, in float as the reference computes it */
static void hd_pos_2d(float *x, int D, int Fr, int T1)
{
	const int half = D / 2;
	const float k = (float)(-(log(10000.0) / half));
	for (int t = 0; t < T1; t++)
		for (int f = 0; f < Fr; f++) {
			float *row = x + ((size_t)t * Fr + f) * D;
			for (int i = 0; i < half / 2; i++) {
				const float div = expf((float)(2 * i) * k);
				row[2 * i] += sinf((float)t * div);
				row[2 * i + 1] += cosf((float)t * div);
				row[half + 2 * i] += sinf((float)f * div);
				row[half + 2 * i + 1] += cosf((float)f * div);
			}
		}
}

/* transformer.py create_sin_embedding (shift 0): [cos(phase), sin(phase)] */
static void hd_pos_1d(float *x, int D, int T2)
{
	const int half = D / 2;
	for (int i = 0; i < half; i++) {
		const float p = powf(10000.f, (float)i / (float)(half - 1));
		for (int t = 0; t < T2; t++) {
			const float ph = (float)t / p;
			x[(size_t)t * D + i] += cosf(ph);
			x[(size_t)t * D + half + i] += sinf(ph);
		}
	}
}

/* The sine embeddings, computed on the host and uploaded before the first pass's first
 * operation, kept while the sizes hold: a backend may upload blocking (OpenCL does without
 * memory for its copy), and a blocking upload in the middle of a pass would wait for the
 * pass's work so far (a pass nobody wants any more could not end at once then: resident.h,
 * sb_resident_drain). */
void hd_pos_place(sb_htdemucs_on *r, int Fr, int T1, int T2)
{
	const int D = r->net->dim;
	const size_t n1 = (size_t)Fr * T1 * D, n2 = (size_t)T2 * D;
	if (pass_status(r) != SB_OK || (r->pos && r->pos_n == n1 + n2))
		return;
	if (r->pos)
		r->p.x.be->release(r->p.x.d, r->pos);
	r->pos = NULL;
	float *pe = calloc(n1 + n2, sizeof(float));
	sb_status st = pe ? r->p.x.be->alloc(r->p.x.d, n1 + n2, &r->pos) : SB_ERR_NOMEM;
	if (st != SB_OK) {
		free(pe);
		r->pos = NULL;
		fail(r, st);
		return;
	}
	r->pos_n = n1 + n2;
	hd_pos_2d(pe, D, Fr, T1);
	hd_pos_1d(pe + n1, D, T2);
	const sb_dv d = {r->pos, 0};
	r->p.x.be->upload(r->p.x.d, d, pe, n1 + n2);
	free(pe);
	if (pass_status(r) != SB_OK) { /* not kept half-written */
		r->p.x.be->release(r->p.x.d, r->pos);
		r->pos = NULL;
	}
}

/* the embeddings hd_pos_place() put on the device, added to every segment */
static void add_pos(sb_htdemucs_on *r, sb_dv x, int D, int Fr, int T1, sb_dv xt, int T2, int B)
{
	const size_t n1 = (size_t)Fr * T1 * D, n2 = (size_t)T2 * D;
	if (pass_status(r) != SB_OK)
		return;
	if (!r->pos || r->pos_n != n1 + n2) {
		fail(r, SB_ERR_INVALID); /* the pass placed them for other sizes: a bug */
		return;
	}
	const sb_dv d = {r->pos, 0};
	for (int b = 0; b < B; b++) {
		OP(r)->add(r->p.x.d, sb_dv_at(x, (size_t)b * n1), d, n1);
		OP(r)->add(r->p.x.d, sb_dv_at(xt, (size_t)b * n2), sb_dv_at(d, n1), n2);
	}
}

void hd_transformer(sb_htdemucs_on *r, sb_dv x, int Fr, int T1, sb_dv xt, int T2, int B)
{
	const sb_htdemucs *net = r->net;
	const int D = net->dim;
	const long n1 = (long)Fr * T1, n2 = T2;
	OP(r)->layernorm(r->p.x.d, x, x, (size_t)B * n1, D, weight(r, net->nin_w),
	                 weight(r, net->nin_b));
	OP(r)->layernorm(r->p.x.d, xt, xt, (size_t)B * n2, D, weight(r, net->nint_w),
	                 weight(r, net->nint_b));
	add_pos(r, x, D, Fr, T1, xt, T2, B);
	sb_dv old = buffer(r, (size_t)B * n1 * D);
	for (int i = 0; i < net->cfg.t_layers && !stopped(r) && pass_status(r) == SB_OK; i++) {
		if (i % 2 == 0) {
			layer(r, &net->layers[i], x, n1, B, NULL, 0);
			layer(r, &net->layers_t[i], xt, n2, B, NULL, 0);
		} else {
			OP(r)->copy(r->p.x.d, old, x, (size_t)B * n1 * D);
			layer(r, &net->layers[i], x, n1, B, &xt, n2);
			layer(r, &net->layers_t[i], xt, n2, B, &old, n1);
		}
	}
	give_back(r, old);
}
