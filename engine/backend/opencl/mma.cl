/* Matrix products on NVIDIA's tensor cores with bf16 inputs and fp32 sums (--precision bf16 on
 * an OpenCL GPU; cl_gemm_mma.c builds and launches it): C = alpha * A (M x K) * op(B) + beta * C,
 * row-major, batched over dimension 2, with the arguments of gemm.cl's gemm_tiled.
 *
 * WHY INLINE PTX: NVIDIA's OpenCL has no cl_khr_fp16 and no matrix extension, so its tensor
 * cores are reached only through the PTX instruction the CUDA libraries use, written inline
 * (NVIDIA's OpenCL compiler passes asm() through, as Leela Zero's OpenCL tensor-core path
 * did): mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32, compute capability 8.0 and
 * later. On the H100 this is 16x the fp32 FMA rate on paper (bf16 dense 989 against 67
 * TFLOP/s); the products of a pass were 2/3 of its time at 20 TFLOP/s.
 *
 * THE SCHEME: a work-group of 4 warps (128 items, one dimension, so items 32w .. 32w+31 are
 * warp w's lanes as NVIDIA runs them) computes a BM x BN tile of C; warp (wm, wn) of a 2 x 2
 * grid holds a (BM/2) x (BN/2) block as MI x NI fragments of 16 x 8 in registers (4 floats a
 * lane each). K advances 32 at a time through two local buffers, as gemm.cl does: the next
 * tile read from global memory into registers (rounded to bf16 there, packed two along k in
 * a uint) while the current one is multiplied, one barrier a step. Both operands sit in local
 * memory row by row along k (A as [m][k], B as [n][k]) with rows padded to 20 uints, so the
 * 32 lanes of a fragment read (row g, pair t) for g < 8, t < 4 fall in 32 different banks.
 *
 * THE FRAGMENTS (PTX ISA, "matrix fragments for mma.m16n8k16 with floating point type"): lane
 * = 4 g + t; A's four registers hold rows g, g+8, g, g+8 at k pairs t, t, t+4, t+4 (even k in
 * the low half); B's two hold column g at k pairs t and t+4; C's four floats are rows g, g,
 * g+8, g+8 at columns 2t, 2t+1, 2t, 2t+1.
 *
 * MMA_PTX=0 (any other device, for the tests): the same kernel with the instruction emulated
 * through local memory (each lane posts its registers, the warp's 16 x 8 x 16 product is
 * formed from them by the layout above): PoCL checks the tiling, the edges and the fragment
 * mapping, and the stems' change from bf16, in every test run. Only the asm line itself is
 * left to a GPU (bench/gpu's check step).
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

#define BK 32                /* k per step: two instructions of 16 */
#define NW 4                 /* warps, 2 x 2 */
#define NT (32 * NW)         /* items */
#define WTM (BM / 2)         /* a warp's block */
#define WTN (BN / 2)
#define MI (WTM / 16)        /* its fragments */
#define NI (WTN / 8)
#define LDP (BK / 2 + 4)     /* local row: 16 pairs + 4 of padding */
#define AV (BM * BK / 4)     /* float4s of a tile of A */
#define BV (BN * BK / 4)     /* of B */
#define LA ((AV + NT - 1) / NT)
#define LB ((BV + NT - 1) / NT)
/* B as K x N (tb = 0): unit v reads 4 columns of two rows of K (a pair). BCH units run along
 * a row (up to 128 contiguous bytes, whole sectors), the next BCH the next pair: their stores
 * into [n][pair] then fall in 4 bank groups rather than 2 */
#define BCH (BN / 4 < 8 ? BN / 4 : 8)
#define BPAIR(v) (((v) / BCH) % (BK / 2))
#define BCOL4(v) ((v) % BCH + BCH * ((v) / (BCH * (BK / 2))))

/* x rounded to bf16, to nearest even (as the CPU's bf16 products), in the low 16 bits */
inline uint bf16(float x)
{
	const uint u = as_uint(x);
	return (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
}

inline uint2 pack4(float4 v)
{
	return (uint2)(bf16(v.x) | bf16(v.y) << 16, bf16(v.z) | bf16(v.w) << 16);
}

#if MMA_PTX
#define MMA(d, a0, a1, a2, a3, b0, b1)                                                         \
	SB_ASM volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "                     \
	             "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%10,%11,%12,%13};"                 \
	             : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])                            \
	             : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1), "f"(d[0]),          \
	               "f"(d[1]), "f"(d[2]), "f"(d[3]))
#else
inline float lo16(uint r, int hi)
{
	return as_float(hi ? r & 0xffff0000u : r << 16);
}

/* The warp's instruction, emulated: x is the warp's scratch (32 lanes x 6 registers). Every
 * item of the work-group calls it the same number of times (its barriers). */
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
		for (int k = 0; k < 16; k++) {
			const uint ra = x[((row & 7) * 4 + (k & 7) / 2) * 6 + (row >> 3) + 2 * (k >> 3)];
			const uint rb = x[(col * 4 + (k & 7) / 2) * 6 + 4 + (k >> 3)];
			s = fma(lo16(ra, k & 1), lo16(rb, k & 1), s);
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
              float beta, __global float *C, ulong coff, int ldc, long sc, int flags)
{
	const int lid = get_local_id(0), warp = lid >> 5, lane = lid & 31;
	const int g = lane >> 2, t = lane & 3;
	const int wm = warp >> 1, wn = warp & 1;
	const int col0 = get_group_id(0) * BN, row0 = get_group_id(1) * BM;
	const long bt = get_group_id(2);
	A += aoff + bt * sa;
	B += boff + bt * sb;
	C += coff + bt * sc;
	const int va = flags & 1, vb = flags & 2;
	__local uint As[2][BM][LDP];
	__local uint Bs[2][BN][LDP];
#if !MMA_PTX
	__local uint xs[NW][32 * 6];
#endif
	uint2 ra[LA], rb[2 * LB];
	float acc[MI][NI][4];
UNROLL
	for (int i = 0; i < MI; i++)
UNROLL
		for (int j = 0; j < NI; j++)
UNROLL
			for (int e = 0; e < 4; e++)
				acc[i][j][e] = 0.f;

	/* global -> registers, rounded and packed: A's rows along k, 4 at a time; B's the same
	 * when it is N x K (tb), else two rows of K (k, k + 1) of 4 columns, packed per column */
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
			/* v: (k pair, 4 columns); BV float4s are BV / 2 such units */         \
			const int gk = (k0) + 2 * BPAIR(v), gn = col0 + 4 * BCOL4(v);          \
			const int in = v < BV / 2;                                             \
			const float4 x0 = in && gk < K ? row4(B + (long)gk * ldb + gn, N - gn, vb) \
			                               : (float4)(0.f);                        \
			const float4 x1 = in && gk + 1 < K                                     \
			                  ? row4(B + (long)(gk + 1) * ldb + gn, N - gn, vb)    \
			                  : (float4)(0.f);                                     \
			rb[2 * l] = (uint2)(bf16(x0.x) | bf16(x1.x) << 16,                     \
			                    bf16(x0.y) | bf16(x1.y) << 16);                    \
			rb[2 * l + 1] = (uint2)(bf16(x0.z) | bf16(x1.z) << 16,                 \
			                        bf16(x0.w) | bf16(x1.w) << 16);                \
		}                                                                              \
	}
	/* registers -> local buffer s: pairs along k at [row][k / 2] */
#define STORE(s)                                                                               \
	UNROLL                                                                                \
	for (int l = 0; l < LA; l++) {                                                         \
		const int v = lid + l * NT;                                                    \
		if (v < AV)                                                                    \
			*(__local uint2 *)&As[s][v / (BK / 4)][2 * (v % (BK / 4))] = ra[l];    \
	}                                                                                      \
	UNROLL                                                                                \
	for (int l = 0; l < LB; l++) {                                                         \
		const int v = lid + l * NT;                                                    \
		if (tb) {                                                                      \
			if (v < BV)                                                            \
				*(__local uint2 *)&Bs[s][v / (BK / 4)][2 * (v % (BK / 4))] =   \
					rb[l];                                                 \
		} else if (v < BV / 2) {                                                       \
			const int p = BPAIR(v), n = 4 * BCOL4(v);                              \
			Bs[s][n][p] = rb[2 * l].x;                                             \
			Bs[s][n + 1][p] = rb[2 * l].y;                                         \
			Bs[s][n + 2][p] = rb[2 * l + 1].x;                                     \
			Bs[s][n + 3][p] = rb[2 * l + 1].y;                                     \
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
					MMA(acc[i][j], af[i][0], af[i][1], af[i][2], af[i][3], bfr[j][0],
					    bfr[j][1]);
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
						c[gn + q] = beta != 0.f ? x + beta * c[gn + q] : x;
				}
			}
		}
}
