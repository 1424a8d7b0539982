/* Vectorised element-wise maths for the CPU backend's operations: the loops that run exp and erf
 * on every activation (softmax, GELU, GLU's sigmoid) are a third of the time with libm's scalar
 * calls. Here they are branch-free polynomials that the compiler vectorises, each loop built
 * for AVX-512, AVX2+FMA and the baseline, picked at load time (target_clones).
 *
 * exp: Cephes expf (S. L. Moshier): round x/ln2 to n, reduce by n ln2 in two parts, degree-6
 * polynomial, scale by 2^n; within 2 ulp over [-87, 88]. erf for GELU: Abramowitz & Stegun
 * 7.1.26 (|error| <= 1.5e-7), written as erfc so that the negative tail keeps its sign. tanh
 * (the RoFormers' mask estimators) from the same exp, a polynomial near 0. The
 * golden tests bound what these approximations cost: the output stays within 2e-7 of the
 * reference.
 */
#include "backend/cpu/vmath.h"

#include <stdint.h>
#include <string.h>

/* ifunc resolvers run before a sanitizer runtime starts: no clones in sanitizer builds */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && \
    !defined(__SANITIZE_THREAD__) && !defined(__SANITIZE_ADDRESS__)
#define SB_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define SB_CLONES
#endif

static inline __attribute__((always_inline)) float exp_poly(float x)
{
	x = x < -87.3f ? -87.3f : x;
	x = x > 88.3f ? 88.3f : x;
	/* round to nearest through the 1.5 * 2^23 trick: no rounding instruction needed */
	const float n = (x * 1.44269504088896341f + 12582912.f) - 12582912.f;
	const float r = (x - n * 0.693359375f) + n * 2.12194440e-4f;
	const float r2 = r * r;
	float y = 1.9875691500e-4f;
	y = y * r + 1.3981999507e-3f;
	y = y * r + 8.3334519073e-3f;
	y = y * r + 4.1665795894e-2f;
	y = y * r + 1.6666665459e-1f;
	y = y * r + 5.0000001201e-1f;
	y = y * r2 + r + 1.f;
	union {
		uint32_t u;
		float f;
	} p;
	p.u = (uint32_t)((int32_t)n + 127) << 23;
	return y * p.f;
}

static inline __attribute__((always_inline)) float gelu_poly(float x)
{
	const float z = (x < 0 ? -x : x) * 0.70710678118654752f;
	const float t = 1.f / (1.f + 0.3275911f * z);
	float p = 1.061405429f;
	p = p * t - 1.453152027f;
	p = p * t + 1.421413741f;
	p = p * t - 0.284496736f;
	p = p * t + 0.254829592f;
	const float erfc = p * t * exp_poly(-z * z);
	const float h = 0.5f * x * erfc;
	return x >= 0 ? x - h : h;
}

static inline __attribute__((always_inline)) float sigmoid_poly(float x)
{
	return 1.f / (1.f + exp_poly(-x));
}

SB_CLONES float sb_vmax(const float *x, int64_t n)
{
	float m[8];
	for (int k = 0; k < 8; k++)
		m[k] = x[0];
	int64_t i = 0;
	for (; i + 8 <= n; i += 8)
		for (int k = 0; k < 8; k++)
			m[k] = x[i + k] > m[k] ? x[i + k] : m[k];
	for (; i < n; i++)
		m[0] = x[i] > m[0] ? x[i] : m[0];
	float r = m[0];
	for (int k = 1; k < 8; k++)
		r = m[k] > r ? m[k] : r;
	return r;
}

SB_CLONES float sb_vexp_sum(float *x, int64_t n, float sub)
{
	float s[16] = {0};
	int64_t i = 0;
	for (; i + 16 <= n; i += 16)
		for (int k = 0; k < 16; k++) {
			const float e = exp_poly(x[i + k] - sub);
			x[i + k] = e;
			s[k] += e;
		}
	for (; i < n; i++) {
		x[i] = exp_poly(x[i] - sub);
		s[0] += x[i];
	}
	float r = 0;
	for (int k = 0; k < 16; k++)
		r += s[k];
	return r;
}

SB_CLONES void sb_vscale(float *x, int64_t n, float s)
{
	for (int64_t i = 0; i < n; i++)
		x[i] *= s;
}

/* tanh: an odd polynomial (Taylor to x^9) below |x| = 0.25, where 1 - 2 / (e^2x + 1) would
 * lose its relative accuracy to cancellation, that form above (exact to 4e-7 relative) */
static inline __attribute__((always_inline)) float tanh_poly(float x)
{
	const float a = x < 0 ? -x : x, a2 = a * a;
	float p = 62.f / 2835.f;
	p = p * a2 - 17.f / 315.f;
	p = p * a2 + 2.f / 15.f;
	p = p * a2 - 1.f / 3.f;
	const float small = a + a * a2 * p;
	const float big = 1.f - 2.f / (exp_poly(2.f * a) + 1.f);
	const float t = a < 0.25f ? small : big;
	return x < 0 ? -t : t;
}

SB_CLONES void sb_vbias_tanh(float *x, int64_t n, float b)
{
	for (int64_t i = 0; i < n; i++)
		x[i] = tanh_poly(x[i] + b);
}

SB_CLONES void sb_vbias_tanh_cols(float *x, int64_t n, const float *b)
{
	for (int64_t i = 0; i < n; i++)
		x[i] = tanh_poly(x[i] + b[i]);
}

SB_CLONES void sb_vbias_gelu(float *x, int64_t n, float b)
{
	for (int64_t i = 0; i < n; i++)
		x[i] = gelu_poly(x[i] + b);
}

SB_CLONES void sb_vbias_gelu_cols(float *x, int64_t n, const float *b)
{
	for (int64_t i = 0; i < n; i++)
		x[i] = gelu_poly(x[i] + b[i]);
}

SB_CLONES void sb_vnorm_affine(float *x, int64_t n, float m, float a, float c, int gelu)
{
	if (gelu)
		for (int64_t i = 0; i < n; i++)
			x[i] = gelu_poly((x[i] - m) * a + c);
	else
		for (int64_t i = 0; i < n; i++)
			x[i] = (x[i] - m) * a + c;
}

SB_CLONES void sb_vglu(const float *a, const float *g, float *out, int64_t n)
{
	for (int64_t i = 0; i < n; i++)
		out[i] = a[i] * sigmoid_poly(g[i]);
}

SB_CLONES void sb_vglu_add(float *x, const float *a, const float *g, float s, int64_t n)
{
	for (int64_t i = 0; i < n; i++)
		x[i] += s * (a[i] * sigmoid_poly(g[i]));
}

SB_CLONES void sb_vsum_sq(const float *x, int64_t n, double *sum, double *sq)
{
	/* float partials over short runs (exact enough: 64 terms), double across them */
	double s = 0, q = 0;
	int64_t i = 0;
	for (; i + 64 <= n; i += 64) {
		float ps[16] = {0}, pq[16] = {0};
		for (int j = 0; j < 64; j += 16)
			for (int k = 0; k < 16; k++) {
				const float v = x[i + j + k];
				ps[k] += v;
				pq[k] += v * v;
			}
		for (int k = 0; k < 16; k++) {
			s += ps[k];
			q += pq[k];
		}
	}
	for (; i < n; i++) {
		s += x[i];
		q += (double)x[i] * x[i];
	}
	*sum = s;
	*sq = q;
}

/* an LSTM's gates of one sequence and direction at one step: z = [i | f | g | o] (H each,
 * pre-activations), c = sigmoid(f) c + sigmoid(i) tanh(g), h = sigmoid(o) tanh(c) */
SB_CLONES void sb_vlstm_cell(const float *z, float *c, float *h, int64_t H)
{
	for (int64_t i = 0; i < H; i++) {
		const float cn =
		    sigmoid_poly(z[H + i]) * c[i] + sigmoid_poly(z[i]) * tanh_poly(z[2 * H + i]);
		c[i] = cn;
		h[i] = sigmoid_poly(z[3 * H + i]) * tanh_poly(cn);
	}
}
