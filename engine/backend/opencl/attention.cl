/* Attention in one pass (backend.h: attention), the scores never written out; cl_attention.c
 * builds it at the first attention a device runs this way (for all three head sizes at once
 * where the way is measured, to check them), and takes the products' way if it does not build
 * there.
 * After FlashAttention (Dao et al., 2022): a work-group holds ATT_BQ query rows of one head of
 * one item, a row a work-item, its query (times the scale) and its output in registers; the
 * keys and values stream by ATT_BK rows at a time; each tile's scores stay in registers, and
 * the running maximum and sum of the row's softmax rescale the output when the maximum grows
 * (the "online softmax" of Milakov and Gimelshein, 2018). The three launches of the products'
 * way write and read heads x nq x nk scores an item; this reads each key and value row once a
 * work-group. HDM: head sizes up to it (zeros pad the rest; hd a multiple of 4).
 * On a GPU (ATT_LOCAL 1) the program is built per head size (ATT_HD 16, 32 or 64, its one
 * kernel attention_ATT_HD), so that a row's loops run to a constant and its arrays stay in
 * registers. One program of three kernels sharing the function, HDM a constant only once it
 * was inlined, was not enough: clang (the compiler of AMD's and Mesa's drivers) kept the
 * function out of line, or, made to inline it, had settled its loops first, so the rows went
 * to private memory: about 1.2 KB of scratch a work-item on AMD GPUs, 512 bytes of local
 * memory in NVPTX (tools/cl_kernels.sh). On a CPU driver (ATT_LOCAL 0: PoCL, which runs 16
 * work-items' rows side by side in vector registers) that one program of three is what ran
 * fastest: built per size there, in every form tried, a RoFormer chunk's attention took
 * 6.1-10.8 s against 4.5-6.5 s (ep_317 at depth 1, dim 64), so it stays.
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
#if ATT_LOCAL
#ifndef ATT_HD
#define ATT_HD 64
#endif
#define ATT_H4 (ATT_HD / 4) /* float4s in a row */
/* inlined by the front end: PoCL 3.1's own inliner crashed on this program (where the tests
 * run the GPU form) */
#define ATT_INLINE __attribute__((always_inline))
#else
#define ATT_H4 16 /* float4s in a row, at most (the three kernels share the function) */
#define ATT_INLINE
#endif

static inline ATT_INLINE void attention_rows(__global const float *q, int ldq,
                                             __global const float *k, __global const float *v,
                                             int ldkv, int nq, int nk, int hd, float scale,
                                             __global float *o, int ldo, __local float4 *Ks,
                                             __local float4 *Vs, const int HDM,
                                             __global const float *gr, int gated)
{
	const int l = get_local_id(0), i = get_group_id(0) * ATT_BQ + l;
	const int H4 = ATT_LOCAL ? ATT_H4 : HDM / 4;
	const __global float *qi = q + (long)(i < nq ? i : nq - 1) * ldq;
	float4 qr[ATT_H4], acc[ATT_H4];
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
	/* the head's gate for the row (a RoFormer's), in the softmax's scaling */
	const float inv = (gated ? 1.f / (1.f + exp(-gr[(long)i * ldq])) : 1.f) / sum;
	#pragma unroll
	for (int c = 0; c < H4; c++)
		if (4 * c < hd)
			vstore4(acc[c] * inv, c, oi);
}

#define ATTENTION_KERNEL(NAME, HDM)                                                            \
__kernel __attribute__((reqd_work_group_size(ATT_BQ, 1, 1)))                                   \
void NAME(__global const float *q, ulong qoff, int ldq, long sq, __global const float *k,      \
          ulong koff, __global const float *v, ulong voff, int ldkv, long skv, int nq, int nk, \
          int hd, float scale, __global float *o, ulong ooff, int ldo, long so,                \
          __global const float *g, ulong goff, int gated)                                      \
{                                                                                              \
	__local float4 Ks[ATT_LOCAL ? ATT_BK * HDM / 4 : 1], Vs[ATT_LOCAL ? ATT_BK * HDM / 4 : 1]; \
	const int h = get_group_id(1);                                                             \
	const long b = get_group_id(2);                                                            \
	attention_rows(q + qoff + b * sq + (long)h * hd, ldq, k + koff + b * skv + (long)h * hd,   \
	               v + voff + b * skv + (long)h * hd, ldkv, nq, nk, hd, scale,                 \
	               o + ooff + b * so + (long)h * hd, ldo, Ks, Vs, HDM, g + goff + b * sq + h,  \
	               gated);                                                                     \
}
#if ATT_LOCAL
#define ATT_NAME_(h) attention_##h
#define ATT_NAME(h) ATT_NAME_(h)
ATTENTION_KERNEL(ATT_NAME(ATT_HD), ATT_HD) /* attention_16, _32 or _64 */
#else
ATTENTION_KERNEL(attention_16, 16)
ATTENTION_KERNEL(attention_32, 32)
ATTENTION_KERNEL(attention_64, 64)
#endif
