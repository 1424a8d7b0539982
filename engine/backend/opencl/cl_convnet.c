/* The OpenCL backend's convolution nets' group and the LSTM's gates (cl_convnet.h): one launch
 * each over the base, a work-item an element (the norms: a work-group a group for the
 * statistics, then a work-item an element). */
#include "backend/opencl/cl_convnet.h"

void sb_cl_op_copy_rows(sb_bdev *c, sb_dv dst, long ldd, long ldi, sb_dv src, long lds,
                        long lsi, int rows, long n, int batch)
{
	if (c->st != SB_OK || n < 1 || rows < 1 || batch < 1)
		return;
	kargs a = args(c, K_COPY_ROWS);
	a_db(&a, dst);
	a_i64(&a, ldd);
	a_i64(&a, ldi);
	a_db(&a, src);
	a_i64(&a, lds);
	a_i64(&a, lsi);
	a_i64(&a, n);
	const size_t g[3] = {(size_t)n, (size_t)rows, (size_t)batch}, l[3] = {64, 1, 1};
	sb_cl_run(&a, 3, g, l);
}

void sb_cl_op_permute(sb_bdev *c, sb_dv x, const int dims[4], const long os[4], sb_dv o)
{
	if (c->st != SB_OK || dims[0] < 1 || dims[1] < 1 || dims[2] < 1 || dims[3] < 1)
		return;
	kargs a = args(c, K_PERMUTE);
	a_db(&a, x);
	a_db(&a, o);
	a_i32(&a, dims[1]);
	a_i32(&a, dims[2]);
	a_i32(&a, dims[3]);
	for (int k = 0; k < 4; k++)
		a_i64(&a, os[k]);
	const size_t g[3] = {(size_t)dims[3], (size_t)dims[2], (size_t)dims[0] * (size_t)dims[1]};
	const size_t l[3] = {dims[3] >= 32 ? 32 : 8, dims[3] >= 32 ? 1 : 4, 1};
	sb_cl_run(&a, 3, g, l);
}

void sb_cl_op_norm_groups(sb_bdev *c, sb_dv x, const sb_norm_geom *g, sb_dv w, sb_dv b,
                          int act, sb_dv o)
{
	const size_t groups = (size_t)g->n1 * g->n2 * g->G;
	if (c->st != SB_OK || !groups)
		return;
	sb_cl_need_stats(c, groups);
	kargs a = args(c, K_NG_STATS);
	a_db(&a, x);
	a_i32(&a, g->n2);
	a_i32(&a, g->G);
	a_i32(&a, g->C / g->G);
	a_i32(&a, g->F);
	a_i32(&a, g->T);
	a_i64(&a, g->s1);
	a_i64(&a, g->s2);
	a_i64(&a, g->sc);
	a_i64(&a, g->sf);
	a_mem(&a, c->stats);
	const size_t gs[1] = {groups * c->red_wg}, ls[1] = {c->red_wg};
	sb_cl_run(&a, 1, gs, ls);
	kargs p = args(c, K_NG_APPLY);
	a_db(&p, x);
	a_db(&p, o);
	a_i32(&p, g->n2);
	a_i32(&p, g->C);
	a_i32(&p, g->G);
	a_i32(&p, g->F);
	a_i32(&p, g->T);
	a_i64(&p, g->s1);
	a_i64(&p, g->s2);
	a_i64(&p, g->sc);
	a_i64(&p, g->sf);
	a_mem(&p, c->stats);
	a_db(&p, w);
	a_db(&p, b);
	a_i32(&p, act);
	const size_t ga[3] = {(size_t)g->T, (size_t)g->C * g->F, (size_t)g->n1 * g->n2};
	const size_t la[3] = {g->T >= 32 ? 32 : 8, 1, 1};
	sb_cl_run(&p, 3, ga, la);
}

void sb_cl_op_dwconv(sb_bdev *c, sb_dv x, int rows, int C, int T, int k, sb_dv w, sb_dv b,
                     sb_dv o)
{
	if (c->st != SB_OK || rows < 1 || C < 1 || T < 1)
		return;
	kargs a = args(c, K_DWCONV);
	a_db(&a, x);
	a_i32(&a, C);
	a_i32(&a, T);
	a_i32(&a, k);
	a_db(&a, w);
	a_db(&a, b);
	a_db(&a, o);
	a.flops = 2.0 * rows * C * T * k;
	const size_t g[3] = {(size_t)T, (size_t)C, (size_t)rows}, l[3] = {T >= 32 ? 32 : 8, 1, 1};
	sb_cl_run(&a, 3, g, l);
}

void sb_cl_op_mul(sb_bdev *c, sb_dv x, sb_dv y, size_t n)
{
	if (c->st != SB_OK || !n)
		return;
	kargs a = args(c, K_MUL);
	a_db(&a, x);
	a_db(&a, y);
	a_u64(&a, n);
	const size_t g[1] = {n};
	sb_cl_run(&a, 1, g, NULL);
}

void sb_cl_lstm_cell(sb_bdev *c, sb_dv z, sb_dv cs, sb_dv o, int n, int S, int H, int dirs,
                     int k)
{
	if (c->st != SB_OK)
		return;
	kargs a = args(c, K_LSTM_CELL);
	a_db(&a, z);
	a_db(&a, cs);
	a_db(&a, o);
	a_i32(&a, n);
	a_i32(&a, S);
	a_i32(&a, H);
	a_i32(&a, dirs);
	a_i32(&a, k);
	const size_t g[3] = {(size_t)H, (size_t)n, (size_t)dirs}, l[3] = {H >= 32 ? 32 : 8, 1, 1};
	sb_cl_run(&a, 3, g, l);
}
