/* Matrix products on NVIDIA's tensor cores with bf16 or tf32 inputs and fp32 sums
 * (cl_gemm_mma.c builds and launches it): C = alpha * A (M x K) * op(B) + beta * C, row-major,
 * batched over dimension 2, with the arguments of gemm.cl's gemm_tiled. bf16 is what
 * --precision bf16 runs on an NVIDIA GPU; tf32 (MMA_TF32=1: inputs rounded to 10-bit
 * mantissas, to nearest, ties away, as cvt.rna) is SB_CL_GEMM=tf32, a candidate for the fp32
 * default that bench/gpu measures.
 *
 * WHY INLINE PTX: NVIDIA's OpenCL has no cl_khr_fp16 and no matrix extension, so its tensor
 * cores are reached only through the PTX instruction the CUDA libraries use, written inline
 * (NVIDIA's OpenCL compiler passes asm() through, as Leela Zero's OpenCL tensor-core path
 * did): mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 (or m16n8k8 .tf32), compute
 * capability 8.0 and later. On the H100 this is 16x (bf16) or 8x (tf32) the fp32 FMA rate on
 * paper; the products of a pass were 2/3 of its time at 20 TFLOP/s.
 *
 * THE SCHEME: a work-group of 4 warps (128 items, one dimension, so items 32w .. 32w+31 are
 * warp w's lanes as NVIDIA runs them) computes a BM x BN tile of C; warp (wm, wn) of a 2 x 2
 * grid holds a (BM/2) x (BN/2) block as MI x NI fragments of 16 x 8 in registers (4 floats a
 * lane each). K advances 16 words at a time (32 k of bf16 packed two to a word, 16 of tf32)
 * through two local buffers, as gemm.cl does: the next tile read from global memory into
 * registers (rounded there) while the current one is multiplied, one barrier a step. Both
 * operands sit in local memory row by row along k (A as [m][k], B as [n][k]) with rows padded
 * to 20 words, so the 32 lanes of a fragment read (row g, word t) for g < 8, t < 4 fall in 32
 * different banks.
 *
 * THE FRAGMENTS (PTX ISA, "matrix fragments for mma.m16n8k16 with floating point type" and
 * "for mma.m16n8k8 with .tf32"): lane = 4 g + t; A's four registers hold rows g, g+8, g, g+8 at
 * words t, t, t+4, t+4 of the instruction's k (a word: two bf16, the even k in the low half,
 * or one tf32); B's two hold column g at words t and t+4; C's four floats are rows g, g, g+8,
 * g+8 at columns 2t, 2t+1, 2t, 2t+1. So both types read local memory the same way.
 *
 * MMA_PTX=0 (any other device, for the tests): the same kernel with the instruction emulated
 * through local memory (each lane posts its registers, the warp's product is formed from them
 * by the layout above): PoCL checks the tiling, the edges and the fragment mapping, and the
 * stems' change, in every test run. Only the asm line itself is left to a GPU (bench/gpu's
 * check step).
 */
#ifndef BM
#define BM 128
#endif
#ifndef BN
#define BN 64
#endif
#ifndef MMA_PTX
#define MMA_PTX 0
#endif
#ifndef MMA_TF32
#define MMA_TF32 0
#endif
/* MMA_BREAK=1 (the fault injector's opencl:N:mma): A's second and third registers swapped, a
 * wrong kernel for the tests of the host's check before first use */
#ifndef MMA_BREAK
#define MMA_BREAK 0
#endif
/* how the driver's compiler spells inline assembly: asm (NVIDIA's, as Leela Zero used it), or
 * __asm__ (clang's OpenCL, and the host's second try when asm does not build) */
#ifndef SB_ASM
#define SB_ASM asm
#endif
/* the small loops unrolled on a GPU, where the accumulators must stay in registers; not in
 * the emulation, whose barriers make PoCL's build of unrolled loops take most of a minute */
#if MMA_PTX
#define UNROLL _Pragma("unroll")
#else
#define UNROLL
#endif

#define KPW (MMA_TF32 ? 1 : 2) /* k per word */
#define BK (16 * KPW)        /* k per step: 16 words, two instructions */
#define NW 4                 /* warps, 2 x 2 */
#define NT (32 * NW)         /* items */
#define WTM (BM / 2)         /* a warp's block */
#define WTN (BN / 2)
#define MI (WTM / 16)        /* its fragments */
#define NI (WTN / 8)
#define LDP (16 + 4)         /* local row: 16 words + 4 of padding */
#define AV (BM * BK / 4)     /* float4s of a tile of A */
#define BV (BN * BK / 4)     /* of B */
#define LA ((AV + NT - 1) / NT)
#define LB ((BV + NT - 1) / NT)
#define UB (16 * (BN / 4))   /* units of B as K x N: a word of k by 4 columns */
/* B as K x N (tb = 0): unit v reads 4 columns of the KPW rows of K of a word. BCH units run
 * along a row (up to 128 contiguous bytes, whole sectors), the next BCH the next word: their
 * stores into [n][word] then fall in 4 bank groups rather than 2 */
#define BCH (BN / 4 < 8 ? BN / 4 : 8)
#define BWORD(v) (((v) / BCH) % 16)
#define BCOL4(v) ((v) % BCH + BCH * ((v) / (BCH * 16)))

/* x rounded to bf16, to nearest even (as the CPU's bf16 products), in the low 16 bits */
inline uint bf16(float x)
{
	const uint u = as_uint(x);
	return (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
}

/* x rounded to tf32 (to nearest, ties away from zero: cvt.rna.tf32.f32), as fp32 bits */
inline uint tf32(float x)
{
	return (as_uint(x) + 0x1000u) & 0xffffe000u;
}

/* 4 consecutive k of a row, rounded, as local memory holds them: 2 words of bf16 pairs, or
 * 4 of tf32 (the rest of the uint4 unused) */
inline uint4 pack4(float4 v)
{
#if MMA_TF32
	return (uint4)(tf32(v.x), tf32(v.y), tf32(v.z), tf32(v.w));
#else
	return (uint4)(bf16(v.x) | bf16(v.y) << 16, bf16(v.z) | bf16(v.w) << 16, 0u, 0u);
#endif
}

/* pack4's words into local memory (p: 16-byte aligned for tf32's four, 8 for bf16's two) */
#if MMA_TF32
#define PUT4(p, r) (*(__local uint4 *)(p) = (r))
#else
#define PUT4(p, r) (*(__local uint2 *)(p) = (r).xy)
#endif

/* the word of one column from its KPW rows of k (x0: k, x1: k + 1, bf16 only) */
inline uint word(float x0, float x1)
{
#if MMA_TF32
	return tf32(x0);
#else
	return bf16(x0) | bf16(x1) << 16;
#endif
}

#if MMA_TF32
#define MMA_OP "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 "
#else
#define MMA_OP "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
#endif
#if MMA_PTX
#define MMA(d, a0, a1, a2, a3, b0, b1)                                                         \
	SB_ASM volatile(MMA_OP "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%10,%11,%12,%13};"      \
	                : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])                         \
	                : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1), "f"(d[0]),       \
	                  "f"(d[1]), "f"(d[2]), "f"(d[3]))
#else
/* element e (0 or 1) of a word: a bf16 half, or the tf32 word itself */
inline float half_of(uint r, int e)
{
#if MMA_TF32
	return as_float(r);
#else
	return as_float(e ? r & 0xffff0000u : r << 16);
#endif
}

/* The warp's instruction, emulated: x is the warp's scratch (32 lanes x 6 registers). Every
 * item of the work-group calls it the same number of times (its barriers). k of the
 * instruction: word w = k / KPW of 8, element k % KPW of the word. */
inline void mma_emu(__local uint *x, int lane, float *d, uint a0, uint a1, uint a2, uint a3,
                    uint b0, uint b1)
{
	__local uint *me = x + lane * 6;
	me[0] = a0;
	me[1] = a1;
	me[2] = a2;
	me[3] = a3;
	me[4] = b0;
	me[5] = b1;
	barrier(CLK_LOCAL_MEM_FENCE);
	const int g = lane >> 2, t = lane & 3;
	for (int i = 0; i < 4; i++) {
		const int row = g + 8 * (i >> 1), col = 2 * t + (i & 1);
		float s = d[i];
		for (int k = 0; k < 8 * KPW; k++) {
			const int w = k / KPW, e = k % KPW;
			const uint ra = x[((row & 7) * 4 + (w & 3)) * 6 + (row >> 3) + 2 * (w >> 2)];
			const uint rb = x[(col * 4 + (w & 3)) * 6 + 4 + (w >> 2)];
			s = fma(half_of(ra, e), half_of(rb, e), s);
		}
		d[i] = s;
	}
	barrier(CLK_LOCAL_MEM_FENCE);
}
#define MMA(d, a0, a1, a2, a3, b0, b1) mma_emu(xs[warp], lane, d, a0, a1, a2, a3, b0, b1)
#endif

__kernel __attribute__((reqd_work_group_size(NT, 1, 1)))
void gemm_mma(int M, int N, int K, float alpha,
              __global const float *A, ulong aoff, int lda, long sa,
              __global const float *B, ulong boff, int ldb, long sb, int tb,
              float beta, __global float *C, ulong coff, int ldc, long sc, int flags,
              __global const float *bias, ulong biasoff, long bstride, int ep)
{
	const int lid = get_local_id(0), warp = lid >> 5, lane = lid & 31;
	const int g = lane >> 2, t = lane & 3;
	const int wm = warp >> 1, wn = warp & 1;
	const int col0 = get_group_id(0) * BN, row0 = get_group_id(1) * BM;
	const long bt = get_group_id(2);
	A += aoff + bt * sa;
	B += boff + bt * sb;
	C += coff + bt * sc;
	bias += biasoff + bt * bstride;
	const int va = flags & 1, vb = flags & 2;
	/* 16-byte aligned: PUT4 stores uint4 (tf32) and uint2 (bf16) words into them */
	__local uint As[2][BM][LDP] __attribute__((aligned(16)));
	__local uint Bs[2][BN][LDP] __attribute__((aligned(16)));
#if !MMA_PTX
	__local uint xs[NW][32 * 6];
#endif
	uint4 ra[LA], rb[LB];
	float acc[MI][NI][4];
UNROLL
	for (int i = 0; i < MI; i++)
UNROLL
		for (int j = 0; j < NI; j++)
UNROLL
			for (int e = 0; e < 4; e++)
				acc[i][j][e] = 0.f;

	/* global -> registers, rounded and packed: A's rows along k, 4 at a time; B's the same
	 * when it is N x K (tb), else 4 columns of the KPW rows of K of a word, a word a column */
#define LOAD(k0)                                                                               \
	UNROLL                                                                                \
	for (int l = 0; l < LA; l++) {                                                         \
		const int v = lid + l * NT, m = v / (BK / 4), gk = (k0) + 4 * (v % (BK / 4));  \
		const int gm = row0 + m;                                                       \
		ra[l] = pack4(v < AV && gm < M ? row4(A + (long)gm * lda + gk, K - gk, va)      \
		                               : (float4)(0.f));                               \
	}                                                                                      \
	UNROLL                                                                                \
	for (int l = 0; l < LB; l++) {                                                         \
		const int v = lid + l * NT;                                                    \
		if (tb) {                                                                      \
			const int gn = col0 + v / (BK / 4), gk = (k0) + 4 * (v % (BK / 4));    \
			rb[l] = pack4(v < BV && gn < N ? row4(B + (long)gn * ldb + gk, K - gk, vb) \
			                               : (float4)(0.f));                       \
		} else {                                                                       \
			const int gk = (k0) + KPW * BWORD(v), gn = col0 + 4 * BCOL4(v);        \
			const int in = v < UB;                                                 \
			const float4 x0 = in && gk < K ? row4(B + (long)gk * ldb + gn, N - gn, vb) \
			                               : (float4)(0.f);                        \
			const float4 x1 = KPW == 2 && in && gk + 1 < K                         \
			                  ? row4(B + (long)(gk + 1) * ldb + gn, N - gn, vb)    \
			                  : (float4)(0.f);                                     \
			rb[l] = (uint4)(word(x0.x, x1.x), word(x0.y, x1.y), word(x0.z, x1.z),  \
			                word(x0.w, x1.w));                                     \
		}                                                                              \
	}
	/* registers -> local buffer s: words along k at [row][k / KPW] */
#define STORE(s)                                                                               \
	UNROLL                                                                                \
	for (int l = 0; l < LA; l++) {                                                         \
		const int v = lid + l * NT;                                                    \
		if (v < AV)                                                                    \
			PUT4(&As[s][v / (BK / 4)][4 / KPW * (v % (BK / 4))], ra[l]);           \
	}                                                                                      \
	UNROLL                                                                                \
	for (int l = 0; l < LB; l++) {                                                         \
		const int v = lid + l * NT;                                                    \
		if (tb) {                                                                      \
			if (v < BV)                                                            \
				PUT4(&Bs[s][v / (BK / 4)][4 / KPW * (v % (BK / 4))], rb[l]);  \
		} else if (v < UB) {                                                           \
			const int w = BWORD(v), n = 4 * BCOL4(v);                              \
			Bs[s][n][w] = rb[l].x;                                                 \
			Bs[s][n + 1][w] = rb[l].y;                                             \
			Bs[s][n + 2][w] = rb[l].z;                                             \
			Bs[s][n + 3][w] = rb[l].w;                                             \
		}                                                                              \
	}

	const int steps = (K + BK - 1) / BK;
	LOAD(0)
	STORE(0)
	barrier(CLK_LOCAL_MEM_FENCE);
	for (int s = 0; s < steps; s++) {
		const int cur = s & 1;
		/* unconditional, as in gemm.cl: past the last tile it reads nothing */
		LOAD((s + 1) * BK)
UNROLL
		for (int h = 0; h < 2; h++) {
			const int p = 8 * h + t;
			uint af[MI][4], bfr[NI][2];
UNROLL
			for (int i = 0; i < MI; i++) {
				const int r = wm * WTM + 16 * i + g;
				af[i][0] = As[cur][r][p];
				af[i][1] = As[cur][r + 8][p];
				af[i][2] = As[cur][r][p + 4];
				af[i][3] = As[cur][r + 8][p + 4];
			}
UNROLL
			for (int j = 0; j < NI; j++) {
				const int n = wn * WTN + 8 * j + g;
				bfr[j][0] = Bs[cur][n][p];
				bfr[j][1] = Bs[cur][n][p + 4];
			}
UNROLL
			for (int i = 0; i < MI; i++)
UNROLL
				for (int j = 0; j < NI; j++)
					MMA(acc[i][j], af[i][0], af[i][1 + MMA_BREAK], af[i][2 - MMA_BREAK],
					    af[i][3], bfr[j][0], bfr[j][1]);
		}
		STORE(cur ^ 1)
		barrier(CLK_LOCAL_MEM_FENCE);
	}
#undef LOAD
#undef STORE

UNROLL
	for (int i = 0; i < MI; i++)
UNROLL
		for (int e = 0; e < 4; e += 2) {
			const int gm = row0 + wm * WTM + 16 * i + g + 4 * e;
			if (gm >= M)
				continue;
			__global float *c = C + (long)gm * ldc;
UNROLL
			for (int j = 0; j < NI; j++) {
				const int gn = col0 + wn * WTN + 8 * j + 2 * t;
UNROLL
				for (int q = 0; q < 2; q++) {
					const float x = alpha * acc[i][j][e + q];
					if (gn + q < N)
						c[gn + q] = epi(beta != 0.f ? x + beta * c[gn + q] : x, bias,
						                ep, gm, gn + q);
				}
			}
		}
}
