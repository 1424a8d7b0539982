/* Attention in one pass by tiles (cl_attention.c: the "tiles" way), fp32, for a GPU: the way a
 * device measures per shape beside the other two (attention.cl in one pass, a row a
 * work-item; two products around a softmax). Built per head size (ATT_HD 16, 32 or 64; heads
 * of fewer values, a multiple of 4, padded with zeros), the kernel attention_tiles.
 *
 * WHY: attention.cl gives each work-item a whole query row (its query and output, 2 x ATT_HD
 * floats, in registers: 195 of them on AMD at 64), so HTDemucs's long sequences ran 336
 * work-groups of 64 items on the H100's 132 compute units, a few warps each, at 10.9 TFLOP/s
 * where the products reach 22-30; its two products' way did little better (6.0 ms a segment
 * against 7.8). Here a work-group of 128 items shares 64 query rows, as a product's tile
 * does: each item holds 4 rows by 4 keys of the scores and 4 rows by ATT_HD / 8 columns of the
 * output, so each value it reads from local memory feeds several sums (2 to 8) where one
 * pass's fed one.
 *
 * THE SCHEME (FlashAttention's, Dao et al. 2022, with the online softmax of Milakov and
 * Gimelshein 2018): the 64 queries, scaled, sit in local memory for the whole pass; keys and
 * values stream through it 32 rows at a time. Item (tr, tk) = (id / 8, id % 8) holds rows
 * tr + 16 i (i < 4): its scores for keys tk + 8 j (j < 4) and its output for columns
 * 32 g + 4 tk .. + 3 (g < ATT_HD / 32; 2 tk, 2 tk + 1 at ATT_HD 16). A block's row maxima and
 * sums are reduced over the row's 8 items through local memory; the weights go through local
 * memory to the product with the values. Every item of a row keeps the same running maximum
 * and sum. Four barriers a block.
 * Grid: (ceil(nq / 64) * 128, heads, items), work-groups of 128.
 */
#ifndef ATT_HD
#define ATT_HD 64
#endif
#define TQ 64             /* query rows a work-group */
#define TB 32             /* keys a block */
#define NT 128            /* items: 16 row groups by 8 */
#define RI 4              /* rows an item: tr + 16 i */
#define KJ 4              /* keys an item scores: tk + 8 j */
#define H4 (ATT_HD / 4)   /* float4s of a row */
#define RLD (ATT_HD + 4)  /* a row's place in local memory: float4 reads of 8 rows in 32 banks */
#define PLD (TB + 4)      /* a row of weights' */
/* a product and a sum, fused where the device has fused multiply-adds (FP_CONTRACT, as in
 * attention.cl; fma() would be emulated where it has not) */
#define ATT_FMA(a, b, c) ((a) * (b) + (c))
#if ATT_HD >= 32
#define OG (ATT_HD / 32)  /* an item's output columns: OG float4s of a row */
#define OCOL(g) (32 * (g) + 4 * tk)
typedef float4 ovec;
#define OLOAD(p) vload4(0, p)
#define OSTORE(x, p) vstore4(x, 0, p)
#else
#define OG 1              /* ATT_HD 16: a float2 of a row */
#define OCOL(g) (2 * tk)
typedef float2 ovec;
#define OLOAD(p) vload2(0, p)
#define OSTORE(x, p) vstore2(x, 0, p)
#endif

__kernel __attribute__((reqd_work_group_size(NT, 1, 1)))
void attention_tiles(__global const float *q, ulong qoff, int ldq, long sq,
                     __global const float *k, ulong koff, __global const float *v, ulong voff,
                     int ldkv, long skv, int nq, int nk, int hd, float scale, __global float *o,
                     ulong ooff, int ldo, long so, __global const float *g, ulong goff, int gated)
{
	__local float Qs[TQ * RLD] __attribute__((aligned(16)));
	__local float Ks[TB * RLD] __attribute__((aligned(16)));
	__local float Vs[TB * RLD] __attribute__((aligned(16)));
	__local float Ps[TQ * PLD] __attribute__((aligned(16)));
	__local float Rm[TQ * 8], Rs[TQ * 8]; /* a block's row maxima and sums, by item */
	const int lid = get_local_id(0), tr = lid >> 3, tk = lid & 7;
	const int q0 = get_group_id(0) * TQ, h = get_group_id(1);
	const long b = get_group_id(2);
	const __global float *gr = g + goff + b * sq + h; /* the head's gates (a RoFormer's) */
	q += qoff + b * sq + (long)h * hd;
	k += koff + b * skv + (long)h * hd;
	v += voff + b * skv + (long)h * hd;
	o += ooff + b * so + (long)h * hd;
	/* the queries, scaled (zeros past nq and past hd) */
	for (int e = lid; e < TQ * H4; e += NT) {
		const int r = e / H4, c = e % H4;
		const float4 x = q0 + r < nq && 4 * c < hd ? vload4(c, q + (long)(q0 + r) * ldq)
		                                           : (float4)(0.f);
		vstore4(x * scale, 0, Qs + r * RLD + 4 * c);
	}
	float m[RI], l[RI];
	ovec acc[RI][OG];
	#pragma unroll
	for (int i = 0; i < RI; i++) {
		m[i] = -INFINITY;
		l[i] = 0.f;
		#pragma unroll
		for (int g = 0; g < OG; g++)
			acc[i][g] = (ovec)(0.f);
	}
	for (int k0 = 0; k0 < nk; k0 += TB) {
		/* the block's keys and values (zeros past nk and past hd), once the last block's
		 * weights and values are read */
		barrier(CLK_LOCAL_MEM_FENCE);
		for (int e = lid; e < TB * H4; e += NT) {
			const int r = e / H4, c = e % H4;
			const int in = k0 + r < nk && 4 * c < hd;
			const long at = (long)(k0 + r) * ldkv;
			vstore4(in ? vload4(c, k + at) : (float4)(0.f), 0, Ks + r * RLD + 4 * c);
			vstore4(in ? vload4(c, v + at) : (float4)(0.f), 0, Vs + r * RLD + 4 * c);
		}
		barrier(CLK_LOCAL_MEM_FENCE);
		/* S = Q K^T for rows tr + 16 i, keys tk + 8 j */
		float s[RI][KJ];
		#pragma unroll
		for (int i = 0; i < RI; i++)
			#pragma unroll
			for (int j = 0; j < KJ; j++)
				s[i][j] = 0.f;
		for (int c = 0; c < H4; c++) {
			float4 qv[RI], kv[KJ];
			#pragma unroll
			for (int i = 0; i < RI; i++)
				qv[i] = vload4(0, Qs + (tr + 16 * i) * RLD + 4 * c);
			#pragma unroll
			for (int j = 0; j < KJ; j++)
				kv[j] = vload4(0, Ks + (tk + 8 * j) * RLD + 4 * c);
			#pragma unroll
			for (int i = 0; i < RI; i++)
				#pragma unroll
				for (int j = 0; j < KJ; j++) {
					s[i][j] = ATT_FMA(qv[i].x, kv[j].x, s[i][j]);
					s[i][j] = ATT_FMA(qv[i].y, kv[j].y, s[i][j]);
					s[i][j] = ATT_FMA(qv[i].z, kv[j].z, s[i][j]);
					s[i][j] = ATT_FMA(qv[i].w, kv[j].w, s[i][j]);
				}
		}
		/* each row's maximum over the block: this item's keys (those past nk out), then the
		 * row's 8 items */
		#pragma unroll
		for (int i = 0; i < RI; i++) {
			float mx = -INFINITY;
			#pragma unroll
			for (int j = 0; j < KJ; j++) {
				if (k0 + tk + 8 * j >= nk)
					s[i][j] = -INFINITY;
				mx = fmax(mx, s[i][j]);
			}
			Rm[(tr + 16 * i) * 8 + tk] = mx;
		}
		barrier(CLK_LOCAL_MEM_FENCE);
		float corr[RI];
		#pragma unroll
		for (int i = 0; i < RI; i++) {
			const int row = tr + 16 * i;
			float bm = m[i]; /* finite: key k0 is in every block's first item's keys */
			#pragma unroll
			for (int t = 0; t < 8; t++)
				bm = fmax(bm, Rm[row * 8 + t]);
			corr[i] = exp(m[i] - bm);
			float ps = 0.f;
			#pragma unroll
			for (int j = 0; j < KJ; j++) {
				const float p = exp(s[i][j] - bm);
				ps += p;
				Ps[row * PLD + tk + 8 * j] = p;
			}
			Rs[row * 8 + tk] = ps;
			m[i] = bm;
		}
		barrier(CLK_LOCAL_MEM_FENCE);
		/* O = O corr + P V for rows tr + 16 i, columns OCOL(g) */
		#pragma unroll
		for (int i = 0; i < RI; i++) {
			float bs = 0.f;
			#pragma unroll
			for (int t = 0; t < 8; t++)
				bs += Rs[(tr + 16 * i) * 8 + t];
			l[i] = l[i] * corr[i] + bs;
			#pragma unroll
			for (int g = 0; g < OG; g++)
				acc[i][g] *= corr[i];
		}
		for (int j = 0; j < TB; j++) {
			ovec vv[OG];
			#pragma unroll
			for (int g = 0; g < OG; g++)
				vv[g] = OLOAD(Vs + j * RLD + OCOL(g));
			#pragma unroll
			for (int i = 0; i < RI; i++) {
				const float p = Ps[(tr + 16 * i) * PLD + j];
				#pragma unroll
				for (int g = 0; g < OG; g++)
					acc[i][g] = ATT_FMA((ovec)(p), vv[g], acc[i][g]);
			}
		}
	}
	#pragma unroll
	for (int i = 0; i < RI; i++) {
		const int row = q0 + tr + 16 * i;
		if (row >= nq)
			continue;
		const float inv = (gated ? 1.f / (1.f + exp(-gr[(long)row * ldq])) : 1.f) / l[i];
		#pragma unroll
		for (int g = 0; g < OG; g++)
			if (OCOL(g) < hd)
				OSTORE(acc[i][g] * inv, o + (long)row * ldo + OCOL(g));
	}
}
