/* Attention in one pass (backend.h: attention), the scores never written out; cl_ops.c builds
 * this program on the first attention a device runs this way, and takes the products' way
 * if it does not build there.
 * After FlashAttention (Dao et al., 2022): a work-group holds ATT_BQ query rows of one head of
 * one item, a row a work-item, its query (times the scale) and its output in registers; the
 * keys and values stream by ATT_BK rows at a time; each tile's scores stay in registers, and
 * the running maximum and sum of the row's softmax rescale the output when the maximum grows
 * (the "online softmax" of Milakov and Gimelshein, 2018). The three launches of the products'
 * way write and read heads x nq x nk scores an item; this reads each key and value row once a
 * work-group. HDM: head sizes up to it (zeros pad the rest; hd a multiple of 4), a constant
 * after inlining, so that the rows stay in registers.
 * ATT_LOCAL 1 (a GPU): each tile is copied to local memory first, every work-item reading it
 * from there; 0 (a CPU driver, whose caches serve the rows as well and which runs a
 * work-group's items as loops between barriers): the rows are read where they are, with no
 * barrier. Grid: (query rows rounded up to ATT_BQ, heads, items). */
#define ATT_BQ 64
#define ATT_BK 32
/* a product and a sum, which the compiler fuses where the device has fused multiply-adds
 * (FP_CONTRACT is on by default in OpenCL C; fma() would be emulated where it has not) */
#define ATT_FMA(a, b, c) ((a) * (b) + (c))
#ifndef ATT_LOCAL
#define ATT_LOCAL 1
#endif

static inline void attention_rows(__global const float *q, int ldq, __global const float *k,
                                  __global const float *v, int ldkv, int nq, int nk, int hd,
                                  float scale, __global float *o, int ldo,
                                  __local float4 *Ks, __local float4 *Vs, const int HDM)
{
	const int l = get_local_id(0), i = get_group_id(0) * ATT_BQ + l, H4 = HDM / 4;
	const __global float *qi = q + (long)(i < nq ? i : nq - 1) * ldq;
	float4 qr[16], acc[16];
	#pragma unroll
	for (int c = 0; c < H4; c++) {
		qr[c] = 4 * c < hd ? vload4(c, qi) * scale : (float4)(0.f);
		acc[c] = (float4)(0.f);
	}
	float m = -INFINITY, sum = 0.f;
	for (int k0 = 0; k0 < nk; k0 += ATT_BK) {
#if ATT_LOCAL
		barrier(CLK_LOCAL_MEM_FENCE);
		for (int e = l; e < ATT_BK * H4; e += ATT_BQ) {
			const int r = e / H4, c = e % H4;
			const int in = k0 + r < nk && 4 * c < hd;
			const long at = (long)(k0 + r) * ldkv;
			Ks[e] = in ? vload4(c, k + at) : (float4)(0.f);
			Vs[e] = in ? vload4(c, v + at) : (float4)(0.f);
		}
		barrier(CLK_LOCAL_MEM_FENCE);
#define ATT_ROW(X, j) (X##s + (j) * H4)
#else
#define ATT_ROW(X, j) ((X) + (long)min(k0 + (j), nk - 1) * ldkv)
#endif
		float s[ATT_BK];
		float mt = m;
		#pragma unroll
		for (int j = 0; j < ATT_BK; j++) {
			float4 d = (float4)(0.f);
			#pragma unroll
			for (int c = 0; c < H4; c++)
#if ATT_LOCAL
				d = ATT_FMA(qr[c], ATT_ROW(K, j)[c], d);
#else
				d = ATT_FMA(qr[c], 4 * c < hd ? vload4(c, ATT_ROW(k, j)) : (float4)(0.f), d);
#endif
			s[j] = k0 + j < nk ? (d.x + d.y) + (d.z + d.w) : -INFINITY;
			mt = fmax(mt, s[j]);
		}
		const float corr = exp(m - mt);
		sum *= corr;
		#pragma unroll
		for (int c = 0; c < H4; c++)
			acc[c] *= corr;
		#pragma unroll
		for (int j = 0; j < ATT_BK; j++) {
			const float p = exp(s[j] - mt);
			sum += p;
			#pragma unroll
			for (int c = 0; c < H4; c++)
#if ATT_LOCAL
				acc[c] = ATT_FMA((float4)(p), ATT_ROW(V, j)[c], acc[c]);
#else
				acc[c] = ATT_FMA((float4)(p), 4 * c < hd ? vload4(c, ATT_ROW(v, j)) : (float4)(0.f),
				             acc[c]);
#endif
		}
		m = mt;
	}
	if (i >= nq)
		return;
	__global float *oi = o + (long)i * ldo;
	const float inv = 1.f / sum;
	#pragma unroll
	for (int c = 0; c < H4; c++)
		if (4 * c < hd)
			vstore4(acc[c] * inv, c, oi);
}

#define ATTENTION_KERNEL(NAME, HDM)                                                            \
__kernel __attribute__((reqd_work_group_size(ATT_BQ, 1, 1)))                                   \
void NAME(__global const float *q, ulong qoff, int ldq, long sq, __global const float *k,      \
          ulong koff, __global const float *v, ulong voff, int ldkv, long skv, int nq, int nk, \
          int hd, float scale, __global float *o, ulong ooff, int ldo, long so)                \
{                                                                                              \
	__local float4 Ks[ATT_LOCAL ? ATT_BK * HDM / 4 : 1], Vs[ATT_LOCAL ? ATT_BK * HDM / 4 : 1]; \
	const int h = get_group_id(1);                                                             \
	const long b = get_group_id(2);                                                            \
	attention_rows(q + qoff + b * sq + (long)h * hd, ldq, k + koff + b * skv + (long)h * hd,   \
	               v + voff + b * skv + (long)h * hd, ldkv, nq, nk, hd, scale,                 \
	               o + ooff + b * so + (long)h * hd, ldo, Ks, Vs, HDM);                        \
}
ATTENTION_KERNEL(attention_16, 16)
ATTENTION_KERNEL(attention_32, 32)
ATTENTION_KERNEL(attention_64, 64)
