/* The encoder and decoder layers of HTDemucs (demucs/htdemucs.py HEncLayer, HDecLayer) on both
 * branches, and the DConv residual branch inside them (demucs/demucs.py), over B segments.
 * Layouts in htdemucs_internal.h: every frequency layer is plain matrix products over
 * contiguous row windows. Rows of frequency layers run in tiles of the backend's row_tile()
 * (0: all at once, a GPU; a few, the CPU, whose cores then keep a row's activations in cache
 * from one operation to the next), each tile through the whole layer.
 */
#include "models/demucs/htdemucs_internal.h"

/* ---- DConv: x (batch items of C x T at stride C T) += DConv(x) ---- */

static void dconv(sb_htdemucs_on *r, const hd_dconv *d, sb_dv x, int T, int batch)
{
	const int C = d->C, H = d->H;
	const long xs = (long)C * T, hs = (long)H * T, zs = 2L * C * T;
	sb_dv h = buffer(r, (size_t)batch * hs);
	sb_dv z = buffer(r, (size_t)batch * zs);
	for (int li = 0; li < d->depth; li++) {
		const hd_dconv_layer *l = &d->l[li];
		/* the middle tap covers every column: it writes h with the bias, the others add */
		for (int j = 0; j < 3; j++) {
			const int k = (j + 1) % 3, s = (k - 1) * l->dil;
			const int t0 = s < 0 ? -s : 0, t1 = s > 0 ? T - s : T;
			const sb_dv w = weight(r, l->w1 + (size_t)k * H * C),
			            in = sb_dv_at(x, (size_t)(t0 + s));
			if (k == 1)
				hd_gemm_bias(r, H, T, C, w, C, 0, in, T, xs, 0, 0.f, h, T, hs, batch, 1, 0, 0, 0,
				             l->b1, 0, SB_ACT_NONE);
			else
				hd_gemm(r, H, t1 - t0, C, 1.f, w, C, 0, in, T, xs, 0, 1.f,
				        sb_dv_at(h, (size_t)t0), T, hs, batch, 1, 0, 0, 0);
		}
		OP(r)->groupnorm(r->p.x.d, h, hs, H, T, batch, weight(r, l->n1w), weight(r, l->n1b),
		                 SB_ACT_GELU);
		hd_gemm_bias(r, 2 * C, T, H, weight(r, l->w2), H, 0, h, T, hs, 0, 0.f, z, T, zs, batch, 1,
		             0, 0, 0, l->b2, 0, SB_ACT_NONE);
		OP(r)->gn_glu_add(r->p.x.d, x, xs, z, zs, C, T, weight(r, l->n2w), weight(r, l->n2b),
		                  weight(r, l->scale), batch);
	}
	give_back(r, h);
	give_back(r, z);
}

/* rows per pass of a frequency layer with F output rows: the backend's tile, or all */
static int tile_rows(const sb_htdemucs_on *r, int F)
{
	const int t = r->p.x.be->row_tile(r->p.x.d);
	return t > 0 && t < F ? t : F;
}

/* ---- frequency encoder: [B][F][cin][T] -> [B][F/4][cout][T] ---- */

void hd_enc_freq(sb_htdemucs_on *r, const hd_enc *l, const dften *in, dften *out)
{
	const int T = in->T, cin = l->cin, cout = l->cout, Fo = in->F / 4, B = in->B;
	hd_dften_new(r, out, B, Fo, cout, T);
	const int tile = tile_rows(r, Fo);
	/* whole layers for every segment at once, or one segment at a time in row tiles */
	const int nb = tile == Fo ? B : 1;
	const long ys = (long)cout * T;
	sb_dv y = buffer(r, (size_t)nb * tile * ys);
	sb_dv z = buffer(r, (size_t)nb * tile * 2 * ys);
	for (int b0 = 0; b0 < B; b0 += nb)
		for (int f0 = 0; f0 < Fo; f0 += tile) {
			const int nt = Fo - f0 < tile ? Fo - f0 : tile;
			/* output row fo reads input rows 4 fo - 2 .. 4 fo + 5: one (8 cin x T) matrix */
			hd_gemm_bias(r, cout, T, 8 * cin, weight(r, l->w), 8 * cin, 0,
			             drow(in, b0, 4 * f0 - 2), T, 4L * cin * T, 0, 0.f, y, T, ys, nt, nb, 0,
			             (long)ften_item(in), (long)nt * ys, l->b, 0, SB_ACT_GELU);
			if (l->has_dconv)
				dconv(r, &l->dc, y, T, nb * nt);
			hd_gemm_bias(r, 2 * cout, T, cout, weight(r, l->rw), cout, 0, y, T, ys, 0, 0.f, z, T,
			             2 * ys, nb * nt, 1, 0, 0, 0, l->rb, 0, SB_ACT_NONE);
			for (int b = 0; b < nb; b++)
				OP(r)->glu(r->p.x.d, sb_dv_at(z, (size_t)b * nt * 2 * ys), 2 * ys,
				           drow(out, b0 + b, f0), ys, (int)ys, nt);
		}
	give_back(r, y);
	give_back(r, z);
}

/* ---- frequency decoder: x [B][F][cin][T] (+= skip, in place) -> [B][4F][cout][T] ---- */

void hd_dec_freq(sb_htdemucs_on *r, const hd_dec *l, dften *x, const dften *skip, dften *out)
{
	const int F = x->F, T = x->T, cin = l->cin, cout = l->cout, B = x->B;
	const long xs = (long)cin * T, zs = 2L * cin * T, os = (long)cout * T;
	/* pad rows of both are zero, so one addition covers every segment */
	OP(r)->add(r->p.x.d, x->base, skip->base, (size_t)B * ften_item(x));
	dften y;
	hd_dften_new(r, &y, B, F, cin, T);
	hd_dften_new(r, out, B, 4 * F, cout, T);
	const int tile = tile_rows(r, F);
	const int nb = tile == F ? B : 1;
	sb_dv z = buffer(r, (size_t)nb * tile * zs);
	/* rows f0 .. f0 + nt of y, then the transposed conv's output rows that depend only on y
	 * rows up to f0 + nt - 1 (with a one-row lag: output rows of phase r read y rows q-1, q) */
	for (int b0 = 0; b0 < B; b0 += nb)
		for (int f0 = 0; f0 < F; f0 += tile) {
			const int nt = F - f0 < tile ? F - f0 : tile;
			/* 3x3 rewrite: rows f-1..f+1 are one (3 cin x T) matrix, one product per time tap;
			 * the middle one, over every column, writes z with the bias, the others add */
			for (int j = 0; j < 3; j++) {
				const int dt = (j + 1) % 3, s = dt - 1;
				const int t0 = s < 0 ? -s : 0, t1 = s > 0 ? T - s : T;
				const sb_dv w = weight(r, l->rw + (size_t)dt * 2 * cin * 3 * cin),
				            in = sb_dv_at(drow(x, b0, f0 - 1), (size_t)(t0 + s));
				if (dt == 1)
					hd_gemm_bias(r, 2 * cin, T, 3 * cin, w, 3 * cin, 0, in, T, xs, 0, 0.f, z, T,
					             zs, nt, nb, 0, (long)ften_item(x), (long)nt * zs, l->rb, 0,
					             SB_ACT_NONE);
				else
					hd_gemm(r, 2 * cin, t1 - t0, 3 * cin, 1.f, w, 3 * cin, 0, in, T, xs, 0, 1.f,
					        sb_dv_at(z, (size_t)t0), T, zs, nt, nb, 0, (long)ften_item(x),
					        (long)nt * zs);
			}
			for (int b = 0; b < nb; b++)
				OP(r)->glu(r->p.x.d, sb_dv_at(z, (size_t)b * nt * zs), zs, drow(&y, b0 + b, f0),
				           xs, (int)xs, nt);
			if (l->has_dconv)
				for (int b = 0; b < nb; b++)
					dconv(r, &l->dc, drow(&y, b0 + b, f0), T, nt);
		}
	give_back(r, z);
	/* transposed conv: output row g is phase (g+2) % 4 of input rows q-1, q (q = (g+2) / 4);
	 * rows of one phase are 4 apart in the output and 1 apart in the input */
	for (int ph = 0; ph < 4; ph++) {
		const int g0 = (ph + 2) % 4, q0 = (g0 + 2) / 4;
		const int count = (4 * F - g0 + 3) / 4;
		hd_gemm_bias(r, cout, T, 2 * cin, weight(r, l->tw + (size_t)ph * cout * 2 * cin), 2 * cin,
		             0, drow(&y, 0, q0 - 1), T, xs, 0, 0.f, drow(out, 0, g0), T, 4 * os, count, B,
		             0, (long)ften_item(&y), (long)ften_item(out), l->tb, 0,
		             l->last ? SB_ACT_NONE : SB_ACT_GELU);
	}
	hd_dften_free(r, &y);
}

/* ---- time encoder: in [B][cin][lin] -> out [B][cout][(lin + 3) / 4] ---- */

void hd_enc_time(sb_htdemucs_on *r, const hd_enc *l, sb_dv in, long lin, int B, sb_dv out)
{
	const long lout = (lin + 3) / 4;
	const int cin = l->cin, cout = l->cout, T = (int)lout;
	const long cs = 8L * cin * lout, ys = (long)cout * lout;
	sb_dv col = buffer(r, (size_t)B * cs);
	sb_dv y = buffer(r, (size_t)B * ys);
	for (int b = 0; b < B; b++)
		OP(r)->im2col_k8s4(r->p.x.d, sb_dv_at(in, (size_t)b * cin * lin), lin, cin,
		                   sb_dv_at(col, (size_t)b * cs), lout);
	hd_gemm_bias(r, cout, T, 8 * cin, weight(r, l->w), 8 * cin, 0, col, T, cs, 0, 0.f, y, T, ys, B,
	             1, 0, 0, 0, l->b, 0, SB_ACT_GELU);
	give_back(r, col);
	if (l->has_dconv)
		dconv(r, &l->dc, y, T, B);
	sb_dv z = buffer(r, (size_t)B * 2 * ys);
	hd_gemm_bias(r, 2 * cout, T, cout, weight(r, l->rw), cout, 0, y, T, ys, 0, 0.f, z, T, 2 * ys,
	             B, 1, 0, 0, 0, l->rb, 0, SB_ACT_NONE);
	OP(r)->glu(r->p.x.d, z, 2 * ys, out, ys, (int)ys, B);
	give_back(r, y);
	give_back(r, z);
}

/* ---- time decoder: x [B][cin][lin] (+= skip, in place) -> out [B][cout][length] ---- */

void hd_dec_time(sb_htdemucs_on *r, const hd_dec *l, sb_dv x, sb_dv skip, long lin,
                 long length, int B, sb_dv out)
{
	const int cin = l->cin, cout = l->cout, T = (int)lin;
	const long xs = (long)cin * lin, zs = 2L * cin * lin, ps = 8L * cout * lin;
	OP(r)->add(r->p.x.d, x, skip, (size_t)B * xs);
	sb_dv z = buffer(r, (size_t)B * zs);
	/* the middle tap, over every column, writes z with the bias; the others add */
	for (int j = 0; j < 3; j++) {
		const int k = (j + 1) % 3, s = k - 1;
		const int t0 = s < 0 ? -s : 0, t1 = s > 0 ? T - s : T;
		const sb_dv w = weight(r, l->rw + (size_t)k * 2 * cin * cin),
		            in = sb_dv_at(x, (size_t)(t0 + s));
		if (k == 1)
			hd_gemm_bias(r, 2 * cin, T, cin, w, cin, 0, in, T, xs, 0, 0.f, z, T, zs, B, 1, 0, 0, 0,
			             l->rb, 0, SB_ACT_NONE);
		else
			hd_gemm(r, 2 * cin, t1 - t0, cin, 1.f, w, cin, 0, in, T, xs, 0, 1.f,
			        sb_dv_at(z, (size_t)t0), T, zs, B, 1, 0, 0, 0);
	}
	sb_dv y = buffer(r, (size_t)B * xs);
	OP(r)->glu(r->p.x.d, z, zs, y, xs, (int)xs, B);
	give_back(r, z);
	if (l->has_dconv)
		dconv(r, &l->dc, y, T, B);
	sb_dv p = buffer(r, (size_t)B * ps);
	hd_gemm(r, 8 * cout, T, cin, 1.f, weight(r, l->tw), cin, 0, y, T, xs, 0, 0.f, p, T, ps, B, 1, 0,
	        0, 0);
	give_back(r, y);
	for (int b = 0; b < B; b++)
		OP(r)->convtr_k8s4(r->p.x.d, sb_dv_at(p, (size_t)b * ps), lin, cout, length,
		                   weight(r, l->tb), l->last ? SB_ACT_NONE : SB_ACT_GELU,
		                   sb_dv_at(out, (size_t)b * cout * length));
	give_back(r, p);
}
