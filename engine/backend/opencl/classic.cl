/* Kernels of the built-in separator's OpenCL path (cl_classic.c drives them; classic.h and
 * classic_ops.h fix the algorithm and the arithmetic, classic_cpu.c is the reference).
 *
 * Every kernel is one-dimensional over a flat index with a bounds check, so the host can round
 * the global size up to any work-group size. Layouts (n = N/2, B = n + 1 bins, C channels):
 *   z    [batch][n]        float2  half-length complex FFT data (real FFT via packing)
 *   spec [nt][C][B]        float2  X of the output frames
 *   mag  [nf][B]           float   M, frame-major so neighbouring work-items read neighbours
 *   hmed [nt][B]           float   time median
 *   mask [3][nt][B]        float   vocals, drums, bass
 *
 * Contraction into fused multiply-adds is off: the same frame then gives the same bits whatever
 * work-group or vector lane it lands in, which keeps the stems independent of the chunk length.
 */
#pragma OPENCL FP_CONTRACT OFF

static float2 cmul(float2 a, float2 b)
{
	return (float2)(a.x * b.x - a.y * b.y, a.x * b.y + a.y * b.x);
}

static float2 conj2(float2 a)
{
	return (float2)(a.x, -a.y);
}

/* Step 1: window frame f of channel c and pack even/odd samples as one complex sequence of
 * length n (the usual real-FFT-through-half-length-complex trick). Frame f starts at input
 * frame f*H. */
kernel void stft_pack(global const float *in, global const float *win, global float2 *z,
                      int channels, int hop, int n, int total)
{
	int gid = get_global_id(0);
	if (gid >= total)
		return;
	int m = gid % n;
	int fc = gid / n;
	int c = fc % channels;
	int f = fc / channels;
	int i = 2 * m;
	int base = (f * hop + i) * channels + c;
	z[gid] = (float2)(in[base] * win[i], in[base + channels] * win[i + 1]);
}

/* One radix-2 Stockham pass over 'batch' transforms of length n (Bainville's formulation):
 * p is the length of the sub-transforms already done. tw[m] = exp(-2 pi i m / N), N = 2n,
 * computed on the host in double precision; inv = 1 conjugates it (unnormalised inverse). */
kernel void fft_radix2(global const float2 *x, global float2 *y, global const float2 *tw, int n,
                       int p, int inv, int total)
{
	int gid = get_global_id(0);
	if (gid >= total)
		return;
	int hn = n >> 1;
	int b = gid / hn, i = gid % hn;
	int k = i & (p - 1);
	global const float2 *xb = x + b * n;
	global float2 *yb = y + b * n;
	float2 w = tw[k * (n / p)];
	if (inv)
		w = conj2(w);
	float2 u0 = xb[i];
	float2 u1 = cmul(xb[i + hn], w);
	int j = ((i - k) << 1) + k;
	yb[j] = u0 + u1;
	yb[j + p] = u0 - u1;
}

/* One radix-4 Stockham pass: four inputs a quarter apart, twiddled by exp(-+2 pi i r k/(4p)),
 * a 4-point DFT, written p apart. Half as many passes over memory as radix 2. */
kernel void fft_radix4(global const float2 *x, global float2 *y, global const float2 *tw, int n,
                       int p, int inv, int total)
{
	int gid = get_global_id(0);
	if (gid >= total)
		return;
	int quarter = n >> 2;
	int b = gid / quarter, i = gid % quarter;
	int k = i & (p - 1);
	global const float2 *xb = x + b * n;
	global float2 *yb = y + b * n;
	int step = k * (n / (2 * p)); /* exp(-2 pi i k / (4p)) = tw[k * N / (4p)] */
	float2 w1 = tw[step], w2 = tw[2 * step], w3 = tw[3 * step];
	if (inv) {
		w1 = conj2(w1);
		w2 = conj2(w2);
		w3 = conj2(w3);
	}
	float2 v0 = xb[i];
	float2 v1 = cmul(xb[i + quarter], w1);
	float2 v2 = cmul(xb[i + 2 * quarter], w2);
	float2 v3 = cmul(xb[i + 3 * quarter], w3);
	float2 s02 = v0 + v2, d02 = v0 - v2, s13 = v1 + v3, d13 = v1 - v3;
	/* -i * d13 forward, +i * d13 inverse */
	float2 rot = inv ? (float2)(-d13.y, d13.x) : (float2)(d13.y, -d13.x);
	int j = ((i - k) << 2) + k;
	yb[j] = s02 + s13;
	yb[j + p] = d02 + rot;
	yb[j + 2 * p] = s02 - s13;
	yb[j + 3 * p] = d02 - rot;
}

/* Unpack Z = FFT_n(x_even + i x_odd) into the real spectrum X[0..n] of each channel, and
 * step 2: M = sqrt(mean over channels |X|^2). One work-item per (frame, bin). X is kept only
 * for the output frames kt .. kt+nt-1. The imaginary parts of DC and Nyquist are exactly zero,
 * as a real FFT gives them. */
kernel void r2c_mag(global const float2 *z, global const float2 *tw, global float2 *spec,
                    global float *mag, int channels, int n, int kt, int nt, int total)
{
	int gid = get_global_id(0);
	if (gid >= total)
		return;
	int bins = n + 1;
	int k = gid % bins, f = gid / bins;
	int out_f = f - kt;
	float acc = 0.f;
	for (int c = 0; c < channels; c++) {
		global const float2 *zc = z + (f * channels + c) * n;
		float2 x;
		if (k == 0 || k == n) {
			float2 z0 = zc[0];
			x = (float2)(k == 0 ? z0.x + z0.y : z0.x - z0.y, 0.f);
		} else {
			float2 a = zc[k], b = conj2(zc[n - k]);
			float2 e = 0.5f * (a + b);
			float2 d = 0.5f * (a - b);
			float2 o = (float2)(d.y, -d.x); /* (a - b) / (2i) */
			x = e + cmul(tw[k], o);
		}
		acc += x.x * x.x + x.y * x.y;
		if (out_f >= 0 && out_f < nt)
			spec[(out_f * channels + c) * bins + k] = x;
	}
	mag[f * bins + k] = sqrt(acc / (float)channels);
}

/* The element of rank r (0-based, ascending) among v[0], v[stride], ... (count values): the
 * value with fewer than r+1 values below it and more than r values at or below it. Exact for
 * ties and needs no scratch array, so any window length works. */
static float select_rank(global const float *v, int stride, int count, int r)
{
	for (int a = 0; a < count; a++) {
		float x = v[a * stride];
		int lt = 0, le = 0;
		for (int b = 0; b < count; b++) {
			float y = v[b * stride];
			lt += y < x;
			le += y <= x;
		}
		if (lt <= r && r < le)
			return x;
	}
	return v[0]; /* unreachable for finite values */
}

/* Step 3a: Hm = median of M over frames j .. j+2Kt (output frame j's window). */
kernel void median_time(global const float *mag, global float *hmed, int bins, int kt,
                        int total)
{
	int gid = get_global_id(0);
	if (gid >= total)
		return;
	int k = gid % bins, j = gid / bins;
	hmed[gid] = select_rank(mag + j * bins + k, bins, 2 * kt + 1, kt);
}

/* Steps 3b-6: Pm = median of M over bins k-Kf..k+Kf (clamped), then the three masks. */
kernel void masks(global const float *mag, global const float *hmed, global const float2 *spec,
                  global const float *bass_w, global const float *voice_w, global float *mask,
                  int bins, int kt, int kf, int nt, int channels, float eps, float gamma,
                  float c_mono, int kf_lo, int k_lo, float beta, int total)
{
	int gid = get_global_id(0);
	if (gid >= total)
		return;
	int k = gid % bins, j = gid / bins;
	int K = k < k_lo ? kf_lo : kf;
	int lo = max(0, k - K), hi = min(bins - 1, k + K);
	int count = hi - lo + 1;
	float pm = select_rank(mag + (j + kt) * bins + lo, 1, count, count / 2);
	float hm = hmed[gid];
	float hb = beta * hm;
	float mp = pm * pm / (hb * hb + pm * pm + eps);
	float mh = 1.f - mp;
	float bw = bass_w[k];
	float cw;
	if (channels >= 2) {
		float2 a = spec[(j * channels) * bins + k], q = spec[(j * channels + 1) * bins + k];
		float cre = a.x * q.x + a.y * q.y, cim = a.y * q.x - a.x * q.y;
		float pa = a.x * a.x + a.y * a.y, pq = q.x * q.x + q.y * q.y;
		float psi = 2.f * sqrt(cre * cre + cim * cim) / (pa + pq + eps);
		if (psi > 1.f)
			psi = 1.f;
		cw = pow(psi, gamma);
	} else {
		cw = c_mono;
	}
	mask[gid] = mh * (1.f - bw) * voice_w[k] * cw;
	mask[nt * bins + gid] = mp;
	mask[2 * nt * bins + gid] = mh * bw;
}

/* Step 7, first half: the masked spectrum Y = X * m of (stem, frame, channel) packed for a
 * half-length complex inverse FFT whose result is y[2m] + i y[2m+1], y = N * IDFT_N(Y):
 * Z[k] = (Y[k] + conj Y[n-k]) + i exp(+2 pi i k/N) (Y[k] - conj Y[n-k]). */
kernel void c2r_pack(global const float2 *spec, global const float *mask,
                     global const float2 *tw, global float2 *z, int channels, int n, int nt,
                     int total)
{
	int gid = get_global_id(0);
	if (gid >= total)
		return;
	int bins = n + 1;
	int k = gid % n;
	int rest = gid / n;
	int c = rest % channels;
	rest /= channels;
	int j = rest % nt, s = rest / nt;
	global const float2 *x = spec + (j * channels + c) * bins;
	global const float *m = mask + (s * nt + j) * bins;
	float2 ya = x[k] * m[k];
	float2 yb = conj2(x[n - k] * m[n - k]);
	float2 sum = ya + yb, diff = cmul(ya - yb, conj2(tw[k]));
	z[gid] = (float2)(sum.x - diff.y, sum.y + diff.x);
}

/* Step 7, second half: synthesis window, 1/N and the overlap-add of this chunk's frames into
 * out (overwritten). Output sample p of a stem gets frame p/H - 1 then frame p/H, each when it
 * is inside the chunk: the same two additions, in the same order, as the CPU path. */
kernel void overlap_add(global const float2 *z, global const float *win, global float *out,
                        int channels, int hop, int n, int nt, float inv_n, int total)
{
	int gid = get_global_id(0);
	if (gid >= total)
		return;
	int c = gid % channels;
	int rest = gid / channels;
	int len = (nt + 1) * hop;
	int p = rest % len, s = rest / len;
	float acc = 0.f;
	for (int j = p / hop - 1; j <= p / hop; j++) {
		if (j < 0 || j >= nt)
			continue;
		int i = p - j * hop;
		float2 v = z[((s * nt + j) * channels + c) * n + (i >> 1)];
		acc += ((i & 1) ? v.y : v.x) * win[i] * inv_n;
	}
	out[gid] = acc;
}
