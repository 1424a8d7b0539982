/* Attention in one pass on the tensor cores, bf16 (--precision bf16 on an NVIDIA GPU: the
 * attention's two products get the products' arithmetic, as the CPU's bf16 runs them) or tf32
 * (MMA_TF32=1: SB_CL_GEMM=tf32, whose products run there too). Built after gemm_rows.cl and
 * mma.cl, whose rounding, MMA() and emulation it uses (cl_attention.c: attention_mma_ready);
 * attention.cl is the fp32 form of the same scheme.
 *
 * THE SCHEME (FlashAttention-2's, Dao 2023, on mma.sync): a work-group of 4 warps holds 64
 * query rows of one head of one item, 16 rows a warp, its query as A fragments in registers
 * (the scale applied before rounding). Keys and values stream 64 rows at a time through local
 * memory as words (bf16 pairs or tf32): the keys as rows along the head (B of S = Q K^T), the
 * values transposed, keys along each of the head's columns (B of O = P V). A warp's 16 x 64
 * scores stay in its registers; the row's running maximum and sum (reduced over the 4 lanes
 * that hold a row, by shuffles) rescale the output when the maximum grows. The scores'
 * accumulators are already laid out as the next product's A fragments: a lane holds keys
 * 2t and 2t + 1 of each tile of 8. In bf16 those of key tiles 2j and 2j + 1, rounded and
 * packed, are the A registers of keys 16j .. 16j + 15. In tf32 a tile is one k-step of 8 whose
 * A registers want keys t and t + 4: the step takes its keys in the order 0 2 4 6 1 3 5 7
 * instead (k t is key 2t, k t + 4 is key 2t + 1), and reads the values' rows in that order.
 *
 * ATT_HD: the head size (16, 32 or 64), a constant, so that everything stays in registers.
 * Grid: (ceil(nq / 64) * 128, heads, items), work-groups of 128.
 */
#define AQ 64                   /* query rows a work-group */
#define AK 64                   /* keys a block */
#define KSTEP (8 * KPW)         /* k of an instruction: 16 in bf16, 8 in tf32 */
#define AHW (ATT_HD / KPW)      /* words of a key row */
#define KLD (AHW + 4)           /* its local row, padded: the fragments' reads in 32 banks */
#if MMA_TF32
#define VLD (AK + 8) /* a value column's local row: a key a word; a lane reads 2 (uint2), a
                      * half-warp's 16 then fall in 32 banks */
#else
#define VLD (AK / 2 + 4) /* a value column's local row: pairs of keys */
#endif

#if MMA_PTX
/* x from the lane lane ^ m of the warp */
inline float shfl_xor(float x, int m)
{
	float r;
	SB_ASM volatile("shfl.sync.bfly.b32 %0, %1, %2, 0x1f, 0xffffffff;" : "=f"(r)
	                : "f"(x), "r"(m));
	return r;
}
#define SHFL_XOR(x, m) shfl_xor(x, m)
#else
/* the shuffle emulated through the work-group's scratch (every item calls it: its barriers) */
inline float shfl_emu(__local float *sx, int lid, float x, int m)
{
	sx[lid] = x;
	barrier(CLK_LOCAL_MEM_FENCE);
	const float r = sx[lid ^ m];
	barrier(CLK_LOCAL_MEM_FENCE);
	return r;
}
#define SHFL_XOR(x, m) shfl_emu(sx, lid, x, m)
#endif

inline uint pack2(float lo, float hi)
{
	return bf16(lo) | bf16(hi) << 16;
}

/* word i of a row of k (its 16 bf16 or 8 tf32), scaled and rounded */
inline uint qword(const __global float *r, float s, int i)
{
#if MMA_TF32
	return tf32(s * r[i]);
#else
	return pack2(s * r[2 * i], s * r[2 * i + 1]);
#endif
}

static inline void attention_mma_rows(__global const float *q, int ldq, __global const float *k,
                                      __global const float *v, int ldkv, int nq, int nk,
                                      float scale, __global float *o, int ldo,
                                      __local uint *Ks, __local uint *Vt,
                                      __local uint (*xs)[32 * 6], __local float *sx,
                                      __global const float *gr, int gated)
{
	const int lid = get_local_id(0), warp = lid >> 5, lane = lid & 31;
	const int g = lane >> 2, t = lane & 3;
	const int r0 = get_group_id(0) * AQ + 16 * warp; /* this warp's first row */
	(void)xs;
	(void)sx;
	/* the query's A fragments: rows g and g + 8, words t and t + 4 of each k-step */
	uint qa[ATT_HD / KSTEP][4];
UNROLL
	for (int kk = 0; kk < ATT_HD / KSTEP; kk++)
UNROLL
		for (int rr = 0; rr < 2; rr++) {
			const int row = r0 + g + 8 * rr;
			const __global float *qr = q + (long)(row < nq ? row : nq - 1) * ldq + KSTEP * kk;
			const float s = row < nq ? scale : 0.f;
			qa[kk][rr] = qword(qr, s, t);
			qa[kk][rr + 2] = qword(qr, s, t + 4);
		}
	float acc[ATT_HD / 8][4];
UNROLL
	for (int d = 0; d < ATT_HD / 8; d++)
UNROLL
		for (int e = 0; e < 4; e++)
			acc[d][e] = 0.f;
	float mx[2] = {-INFINITY, -INFINITY}, sum[2] = {0.f, 0.f}; /* rows g, g + 8 */
	for (int k0 = 0; k0 < nk; k0 += AK) {
		barrier(CLK_LOCAL_MEM_FENCE);
		/* keys: a row of the head as AHW words; values: two keys' rows into 4 columns of
		 * the transposed block */
		for (int u = lid; u < AK * ATT_HD / 4; u += 128) {
			const int key = u / (ATT_HD / 4), c = 4 * (u % (ATT_HD / 4));
			const float4 x = k0 + key < nk ? vload4(0, k + (long)(k0 + key) * ldkv + c)
			                               : (float4)(0.f);
#if MMA_TF32
			*(__local uint4 *)(Ks + key * KLD + c) = pack4(x);
#else
			Ks[key * KLD + c / 2] = pack2(x.x, x.y);
			Ks[key * KLD + c / 2 + 1] = pack2(x.z, x.w);
#endif
		}
		/* a warp's 32 units: 16 pairs of keys by 2 groups of 4 columns, so that two lanes
		 * read 32 bytes of a row and the transposed stores fall in 32 banks */
		for (int u = lid; u < AK / 2 * ATT_HD / 4; u += 128) {
			const int lo = u % 32, hi = u / 32;
			const int p = lo % 16 + 16 * (hi % 2), c = 4 * (lo / 16 + 2 * (hi / 2));
			const int k1 = k0 + 2 * p;
			const float4 x0 = k1 < nk ? vload4(0, v + (long)k1 * ldkv + c) : (float4)(0.f);
			const float4 x1 = k1 + 1 < nk ? vload4(0, v + (long)(k1 + 1) * ldkv + c)
			                              : (float4)(0.f);
#if MMA_TF32
			*(__local uint2 *)(Vt + c * VLD + 2 * p) = (uint2)(tf32(x0.x), tf32(x1.x));
			*(__local uint2 *)(Vt + (c + 1) * VLD + 2 * p) = (uint2)(tf32(x0.y), tf32(x1.y));
			*(__local uint2 *)(Vt + (c + 2) * VLD + 2 * p) = (uint2)(tf32(x0.z), tf32(x1.z));
			*(__local uint2 *)(Vt + (c + 3) * VLD + 2 * p) = (uint2)(tf32(x0.w), tf32(x1.w));
#else
			Vt[c * VLD + p] = pack2(x0.x, x1.x);
			Vt[(c + 1) * VLD + p] = pack2(x0.y, x1.y);
			Vt[(c + 2) * VLD + p] = pack2(x0.z, x1.z);
			Vt[(c + 3) * VLD + p] = pack2(x0.w, x1.w);
#endif
		}
		barrier(CLK_LOCAL_MEM_FENCE);
		/* S = Q K^T: 8 tiles of 8 keys, each 4 floats a lane (rows g, g, g+8, g+8; keys 2t,
		 * 2t + 1 of the tile) */
		float s[AK / 8][4];
UNROLL
		for (int j = 0; j < AK / 8; j++) {
UNROLL
			for (int e = 0; e < 4; e++)
				s[j][e] = 0.f;
UNROLL
			for (int kk = 0; kk < ATT_HD / KSTEP; kk++)
				MMA(s[j], qa[kk][0], qa[kk][1], qa[kk][2], qa[kk][3],
				    Ks[(8 * j + g) * KLD + 8 * kk + t], Ks[(8 * j + g) * KLD + 8 * kk + t + 4]);
		}
		/* the rows' maxima over this block (keys past nk out), over the 4 lanes of a row */
		float bm[2] = {mx[0], mx[1]};
UNROLL
		for (int j = 0; j < AK / 8; j++)
UNROLL
			for (int e = 0; e < 4; e++) {
				if (k0 + 8 * j + 2 * t + (e & 1) >= nk)
					s[j][e] = -INFINITY;
				bm[e >> 1] = fmax(bm[e >> 1], s[j][e]);
			}
UNROLL
		for (int rr = 0; rr < 2; rr++) {
			bm[rr] = fmax(bm[rr], SHFL_XOR(bm[rr], 1));
			bm[rr] = fmax(bm[rr], SHFL_XOR(bm[rr], 2));
		}
		const float corr[2] = {exp(mx[0] - bm[0]), exp(mx[1] - bm[1])};
		float bs[2] = {0.f, 0.f};
UNROLL
		for (int j = 0; j < AK / 8; j++)
UNROLL
			for (int e = 0; e < 4; e++) {
				s[j][e] = exp(s[j][e] - bm[e >> 1]);
				bs[e >> 1] += s[j][e];
			}
UNROLL
		for (int rr = 0; rr < 2; rr++) {
			bs[rr] += SHFL_XOR(bs[rr], 1);
			bs[rr] += SHFL_XOR(bs[rr], 2);
			sum[rr] = sum[rr] * corr[rr] + bs[rr];
			mx[rr] = bm[rr];
		}
UNROLL
		for (int d = 0; d < ATT_HD / 8; d++)
UNROLL
			for (int e = 0; e < 4; e++)
				acc[d][e] *= corr[e >> 1];
#if MMA_TF32
		/* O += P V: key tile j is a k-step, its keys in the order 0 2 4 6 1 3 5 7 (k t is key
		 * 2t, k t + 4 key 2t + 1), which the values' reads follow */
UNROLL
		for (int j = 0; j < AK / 8; j++) {
			const uint a0 = tf32(s[j][0]), a1 = tf32(s[j][2]), a2 = tf32(s[j][1]),
			           a3 = tf32(s[j][3]);
UNROLL
			for (int d = 0; d < ATT_HD / 8; d++) {
				const uint2 b = *(__local const uint2 *)(Vt + (8 * d + g) * VLD + 8 * j + 2 * t);
				MMA(acc[d], a0, a1, a2, a3, b.x, b.y);
			}
		}
#else
		/* O += P V: the scores of key tiles 2j, 2j + 1 are the A fragment of keys 16j.. */
UNROLL
		for (int j = 0; j < AK / 16; j++) {
			const uint a0 = pack2(s[2 * j][0], s[2 * j][1]), a1 = pack2(s[2 * j][2], s[2 * j][3]);
			const uint a2 = pack2(s[2 * j + 1][0], s[2 * j + 1][1]);
			const uint a3 = pack2(s[2 * j + 1][2], s[2 * j + 1][3]);
UNROLL
			for (int d = 0; d < ATT_HD / 8; d++)
				MMA(acc[d], a0, a1, a2, a3, Vt[(8 * d + g) * VLD + 8 * j + t],
				    Vt[(8 * d + g) * VLD + 8 * j + t + 4]);
		}
#endif
	}
UNROLL
	for (int rr = 0; rr < 2; rr++) {
		const int row = r0 + g + 8 * rr;
		if (row >= nq)
			continue;
		__global float *orow = o + (long)row * ldo;
		const float inv = (gated ? 1.f / (1.f + exp(-gr[(long)row * ldq])) : 1.f) / sum[rr];
UNROLL
		for (int d = 0; d < ATT_HD / 8; d++) {
			orow[8 * d + 2 * t] = acc[d][2 * rr] * inv;
			orow[8 * d + 2 * t + 1] = acc[d][2 * rr + 1] * inv;
		}
	}
}

#if MMA_PTX
#define ATT_SCRATCH __local uint (*xs)[32 * 6] = 0; __local float *sx = 0;
#else
#define ATT_SCRATCH __local uint xs[NW][32 * 6]; __local float sx[128];
#endif

__kernel __attribute__((reqd_work_group_size(128, 1, 1)))
void attention_mma(__global const float *q, ulong qoff, int ldq, long sq, __global const float *k,
                   ulong koff, __global const float *v, ulong voff, int ldkv, long skv, int nq,
                   int nk, int hd, float scale, __global float *o, ulong ooff, int ldo, long so,
                   __global const float *g, ulong goff, int gated)
{
	__local uint Ks[AK * KLD] __attribute__((aligned(16)));
	__local uint Vt[ATT_HD * VLD] __attribute__((aligned(16)));
	ATT_SCRATCH
	const int h = get_group_id(1);
	const long b = get_group_id(2);
	attention_mma_rows(q + qoff + b * sq + (long)h * hd, ldq, k + koff + b * skv + (long)h * hd,
	                   v + voff + b * skv + (long)h * hd, ldkv, nq, nk, scale,
	                   o + ooff + b * so + (long)h * hd, ldo, Ks, Vt, xs, sx,
	                   g + goff + b * sq + h, gated);
}
