/* The register-tiled matrix product (SB_CL_GEMM=tiled; cl_gemm_tiled.c builds and launches it):
 * C = alpha * A (M x K) * op(B) + beta * C, row-major, batched over dimension 2; tb = 0: B is
 * K x N, tb = 1: B is N x K; ep: gemm_bias's epilogue (gemm_rows.cl). Offsets and batch
 * strides count floats, as ops.cl's gemm.
 *
 * The scheme of the fast SGEMMs of the CUDA and OpenCL literature (Nugteren's "Tutorial:
 * OpenCL SGEMM tuning for Kepler", myGEMM 6-10, and CLBlast's xgemm, which grew from it):
 *   - a work-group computes a TM x TN tile of C; each of its (TN/WN) x (TM/WM) items keeps a
 *     WM x WN block of it in registers, as WM/4 x WN/4 blocks of 4 x 4 spaced TM/(WM/4) rows
 *     and TN/(WN/4) columns apart, so an item reads its operands from local memory as float4
 *     (a 16-item row of a warp reads 256 contiguous bytes: no bank conflicts) and the items
 *     of a row read the same A values (a broadcast);
 *   - K advances TK at a time through two local buffers: the tile after the current one is
 *     read from global memory into registers before the current one is multiplied, and
 *     stored into the other buffer after, so the global latency hides behind the arithmetic
 *     and a step needs one barrier;
 *   - global reads are float4 where the host says an operand allows it (flags: leading
 *     dimension, offset and batch stride all multiples of 4, so every row starts 16-byte
 *     aligned); otherwise, and on the ragged edges of M, N and K, the same loop reads floats.
 *     C is written as float4 under the same condition (flag 4).
 * The tile is fixed when the program is built (-DTM=... by the per-device table of
 * cl_gemm_tiled.c): TM, TN multiples of 4 * (TM / WM) and 4 * (TN / WN); WM, WN, TK multiples
 * of 4.
 */
#ifndef TM
#define TM 128
#endif
#ifndef TN
#define TN 128
#endif
#ifndef TK
#define TK 16
#endif
#ifndef WM
#define WM 8
#endif
#ifndef WN
#define WN 8
#endif

#define DN (TN / WN)        /* items along n (local dimension 0) */
#define DM (TM / WM)        /* items along m (local dimension 1) */
#define NT (DN * DM)        /* items of a work-group */
#define QM (WM / 4)         /* an item's 4-row blocks, DM * 4 rows apart */
#define QN (WN / 4)         /* its 4-column blocks, DN * 4 columns apart */
#define LDAL (TM + 4)       /* local rows padded (multiples of 4: float4 reads stay aligned) */
#define LDBL (TN + 4)
#define AV (TM * TK / 4)    /* float4s of a tile of A */
#define BV (TN * TK / 4)
#define LA ((AV + NT - 1) / NT) /* of them an item reads */
#define LB ((BV + NT - 1) / NT)

__kernel __attribute__((reqd_work_group_size(DN, DM, 1)))
void gemm_tiled(int M, int N, int K, float alpha,
                __global const float *A, ulong aoff, int lda, long sa,
                __global const float *B, ulong boff, int ldb, long sb, int tb,
                float beta, __global float *C, ulong coff, int ldc, long sc, int flags,
                __global const float *bias, ulong biasoff, long bstride, int ep)
{
	const int tx = get_local_id(0), ty = get_local_id(1), lid = ty * DN + tx;
	const int col0 = get_group_id(0) * TN, row0 = get_group_id(1) * TM;
	const long bt = get_group_id(2);
	A += aoff + bt * sa;
	B += boff + bt * sb;
	C += coff + bt * sc;
	bias += biasoff + bt * bstride;
	const int va = flags & 1, vb = flags & 2, vc = flags & 4;
	__local float As[2][TK][LDAL];
	__local float Bs[2][TK][LDBL];
	float4 ra[LA], rb[LB];
	float acc[WM][WN];
	for (int i = 0; i < WM; i++)
		for (int j = 0; j < WN; j++)
			acc[i][j] = 0.f;

	/* global -> registers: the tile of K starting at k0 (A rows along k; B along n or k) */
#define LOAD(k0)                                                                               \
	for (int l = 0; l < LA; l++) {                                                         \
		const int v = lid + l * NT, m = v / (TK / 4), gk = (k0) + 4 * (v % (TK / 4));  \
		const int gm = row0 + m;                                                       \
		ra[l] = v < AV && gm < M ? row4(A + (long)gm * lda + gk, K - gk, va)            \
		                         : (float4)(0.f);                                      \
	}                                                                                      \
	for (int l = 0; l < LB; l++) {                                                         \
		const int v = lid + l * NT;                                                    \
		if (!tb) {                                                                     \
			const int gk = (k0) + v / (TN / 4), gn = col0 + 4 * (v % (TN / 4));    \
			rb[l] = v < BV && gk < K ? row4(B + (long)gk * ldb + gn, N - gn, vb)   \
			                         : (float4)(0.f);                              \
		} else {                                                                       \
			const int gn = col0 + v / (TK / 4), gk = (k0) + 4 * (v % (TK / 4));    \
			rb[l] = v < BV && gn < N ? row4(B + (long)gn * ldb + gk, K - gk, vb)   \
			                         : (float4)(0.f);                              \
		}                                                                              \
	}
	/* registers -> local buffer s: A transposed to [k][m]; B as [k][n] */
#define STORE(s)                                                                               \
	for (int l = 0; l < LA; l++) {                                                         \
		const int v = lid + l * NT, m = v / (TK / 4), k = 4 * (v % (TK / 4));          \
		if (v < AV) {                                                                  \
			As[s][k][m] = ra[l].x;                                                 \
			As[s][k + 1][m] = ra[l].y;                                             \
			As[s][k + 2][m] = ra[l].z;                                             \
			As[s][k + 3][m] = ra[l].w;                                             \
		}                                                                              \
	}                                                                                      \
	for (int l = 0; l < LB; l++) {                                                         \
		const int v = lid + l * NT;                                                    \
		if (v >= BV)                                                                   \
			continue;                                                              \
		if (!tb) {                                                                     \
			*(__local float4 *)&Bs[s][v / (TN / 4)][4 * (v % (TN / 4))] = rb[l];   \
		} else {                                                                       \
			const int n = v / (TK / 4), k = 4 * (v % (TK / 4));                    \
			Bs[s][k][n] = rb[l].x;                                                 \
			Bs[s][k + 1][n] = rb[l].y;                                             \
			Bs[s][k + 2][n] = rb[l].z;                                             \
			Bs[s][k + 3][n] = rb[l].w;                                             \
		}                                                                              \
	}

	const int steps = (K + TK - 1) / TK;
	LOAD(0)
	STORE(0)
	barrier(CLK_LOCAL_MEM_FENCE);
	for (int t = 0; t < steps; t++) {
		const int cur = t & 1;
		/* the next tile, read while this one is multiplied; past the last one it reads
		 * nothing (every element is past K) and stores zeros nobody reads. Unconditional on
		 * purpose: PoCL 3.1 miscompiled "if (t + 1 < steps)" around it and its store (wrong
		 * sums, correct with -cl-opt-disable), and a GPU loses nothing by it */
		LOAD((t + 1) * TK)
		/* unrolled: the compiler schedules the local reads of step k + 1 under the FMAs of k */
#pragma unroll
		for (int k = 0; k < TK; k++) {
			float a[WM], b[WN];
			for (int i = 0; i < QM; i++) {
				const float4 x = *(__local const float4 *)&As[cur][k][i * DM * 4 + ty * 4];
				a[4 * i] = x.x;
				a[4 * i + 1] = x.y;
				a[4 * i + 2] = x.z;
				a[4 * i + 3] = x.w;
			}
			for (int j = 0; j < QN; j++) {
				const float4 x = *(__local const float4 *)&Bs[cur][k][j * DN * 4 + tx * 4];
				b[4 * j] = x.x;
				b[4 * j + 1] = x.y;
				b[4 * j + 2] = x.z;
				b[4 * j + 3] = x.w;
			}
#pragma unroll
			for (int i = 0; i < WM; i++)
#pragma unroll
				for (int j = 0; j < WN; j++)
					acc[i][j] = fma(a[i], b[j], acc[i][j]);
		}
		STORE(cur ^ 1)
		/* one barrier a step: the buffer stored above was last read a step ago, before
		 * the previous barrier; the one read next was stored before this one */
		barrier(CLK_LOCAL_MEM_FENCE);
	}
#undef LOAD
#undef STORE

	/* every index of acc a constant (both loops unrolled, no early exit): indexed at run time
	 * here, as it was, clang's NVPTX output kept an item's whole block in local memory (128
	 * bytes at 8 x 4; at 8 x 8 every product's sum went through it; tools/cl_kernels.sh) */
#pragma unroll
	for (int i = 0; i < WM; i++) {
		const int gm = row0 + (i / 4) * DM * 4 + ty * 4 + i % 4;
#pragma unroll
		for (int j4 = 0; j4 < QN; j4++) {
			const int gn = col0 + j4 * DN * 4 + tx * 4;
			if (gm >= M || gn >= N)
				continue;
			__global float *c = C + (long)gm * ldc;
			const float4 r = alpha * (float4)(acc[i][4 * j4], acc[i][4 * j4 + 1],
			                                  acc[i][4 * j4 + 2], acc[i][4 * j4 + 3]);
			if (vc && gn + 4 <= N) {
				__global float4 *p = (__global float4 *)(c + gn);
				float4 v = beta != 0.f ? r + beta * *p : r;
				if (ep)
					v = (float4)(epi(v.x, bias, ep, gm, gn), epi(v.y, bias, ep, gm, gn + 1),
					             epi(v.z, bias, ep, gm, gn + 2), epi(v.w, bias, ep, gm, gn + 3));
				*p = v;
				continue;
			}
			for (int e = 0; e < 4 && gn + e < N; e++) {
				const float x = e == 0 ? r.x : e == 1 ? r.y : e == 2 ? r.z : r.w;
				c[gn + e] = epi(beta != 0.f ? x + beta * c[gn + e] : x, bias, ep, gm, gn + e);
			}
		}
	}
}
