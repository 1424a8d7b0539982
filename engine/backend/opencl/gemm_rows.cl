/* What the product kernels share (ops.cl's own one, gemm.cl's fp32 tiles, mma.cl's tensor-core
 * ones): joined in front of each at build time (meson.build). */

/* 4 floats of a row from p[0..3] where they are all inside (n of them are), else 0 past n */
inline float4 row4(__global const float *p, int n, int vec)
{
	if (vec && n >= 4)
		return *(__global const float4 *)p;
	return (float4)(n > 0 ? p[0] : 0.f, n > 1 ? p[1] : 0.f, n > 2 ? p[2] : 0.f,
	                n > 3 ? p[3] : 0.f);
}

inline float gelu(float x)
{
	return 0.5f * x * (1.f + erf(x * 0.70710678118654752f));
}

/* gemm_bias's epilogue (backend.h) on the value v of row r, column c of an item: ep bit 0 adds
 * bias[r], bit 1 bias[c]; ep >> 2 is the activation after it (1 GELU, 2 tanh). 0: v. */
inline float epi(float v, __global const float *bias, int ep, int r, int c)
{
	if (ep & 1)
		v += bias[r];
	else if (ep & 2)
		v += bias[c];
	const int act = ep >> 2;
	return act == 1 ? gelu(v) : act == 2 ? tanh(v) : v;
}
