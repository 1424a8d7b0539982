/* What the two product kernels share (gemm.cl's fp32 tiles, mma.cl's tensor-core ones): joined
 * in front of each at build time (meson.build). */

/* 4 floats of a row from p[0..3] where they are all inside (n of them are), else 0 past n */
inline float4 row4(__global const float *p, int n, int vec)
{
	if (vec && n >= 4)
		return *(__global const float4 *)p;
	return (float4)(n > 0 ? p[0] : 0.f, n > 1 ? p[1] : 0.f, n > 2 ? p[2] : 0.f,
	                n > 3 ? p[3] : 0.f);
}
