/* The CPU backend's LSTM group (SB_OPS_LSTM, backend.h): the input products of every step and
 * both directions as one product each, then the recurrence step by step: per step and
 * direction one product of the previous states (all sequences at once) added onto that step's
 * input products, and the gates' element-wise update split over the pool. */
#include "backend/cpu/cpu_internal.h"
#include "backend/cpu/vmath.h"

typedef struct {
	float *xg, *c, *o;
	int n, S, H, dirs, k;
} cell_job;

/* step k of each direction for sequences [b, e) of n dirs (sequence q, direction r) */
static void k_cell(void *v, int64_t b, int64_t e, int w)
{
	(void)w;
	cell_job *j = v;
	const int H = j->H, S = j->S;
	const int64_t G = 4L * H;
	for (int64_t qr = b; qr < e; qr++) {
		const int64_t q = qr / j->dirs, r = qr % j->dirs;
		const int64_t s = r ? S - 1 - j->k : j->k;
		const float *z = j->xg + r * (int64_t)j->n * S * G + (q * S + s) * G;
		float *c = j->c + (r * (int64_t)j->n + q) * H;
		float *h = j->o + (q * S + s) * j->dirs * H + r * H;
		sb_vlstm_cell(z, c, h, H);
	}
}

void sb_cpu_op_lstm(sb_bdev *d, sb_dv x, int n, int S, int D, int H, int dirs, sb_dv wih,
                    sb_dv whh, sb_dv b, sb_dv o, sb_dv work)
{
	const double t0 = prof_t0(d);
	const long G = 4L * H, rows = (long)n * S;
	/* work: the input products [dirs][n S][4H], then the cell states [dirs][n][H] */
	for (int r = 0; r < dirs; r++) {
		const sb_bias e = {sb_dv_at(b, (size_t)r * G), 0, 1, SB_ACT_NONE};
		sb_cpu_op_gemm_bias(d, (int)rows, (int)G, D, 1.f, x, D, 0, sb_dv_at(wih, (size_t)r * G * D),
		                    D, 0, 1, 0.f, sb_dv_at(work, (size_t)r * rows * G), (int)G, 0, 1, 1, 0, 0,
		                    0, &e);
	}
	float *c = P(work) + (size_t)dirs * rows * G;
	for (size_t i = 0; i < (size_t)dirs * n * H; i++)
		c[i] = 0.f;
	cell_job j = {P(work), c, P(o), n, S, H, dirs, 0};
	for (int k = 0; k < S; k++) {
		for (int r = 0; k && r < dirs; r++) {
			const long s = r ? S - 1 - k : k, prev = r ? s + 1 : s - 1;
			sb_cpu_op_gemm(d, n, (int)G, H, 1.f, sb_dv_at(o, (size_t)(prev * dirs * H + r * H)),
			               S * dirs * H, 0, sb_dv_at(whh, (size_t)r * G * H), H, 0, 1, 1.f,
			               sb_dv_at(work, (size_t)(r * rows * G + s * G)), (int)(S * G), 0, 1,
			               1, 0, 0, 0);
		}
		j.k = k;
		sb_pool_for(d->pool, (int64_t)n * dirs, sb_cpu_grain(8L * H), k_cell, &j);
	}
	prof_add(d, OP_LSTM, t0, 2.0 * rows * dirs * G * (D + H));
}
