/* See cpu_features.h. Intel SDM vol. 2, CPUID leaves 1 and 7, and XCR0's state bits: an
 * instruction set counts only when the OS saves its registers (a hypervisor or kernel may
 * hide AVX-512 state even where CPUID lists it). */
#include "backend/cpu/cpu_features.h"

#include "sb_common.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#define SB_X86 1
#endif

static sb_cpu_features feats;
static pthread_once_t once = PTHREAD_ONCE_INIT;

#ifdef SB_X86
static unsigned long long xgetbv0(void)
{
	unsigned lo, hi;
	__asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
	return ((unsigned long long)hi << 32) | lo;
}
#endif

static void detect(void)
{
	sb_cpu_features *f = &feats;
	memset(f, 0, sizeof *f);
	snprintf(f->vendor, sizeof f->vendor, "unknown");
#ifdef SB_X86
	unsigned a, b, c, d;
	if (!__get_cpuid(0, &a, &b, &c, &d))
		return;
	const unsigned max_leaf = a;
	memcpy(f->vendor, &b, 4);
	memcpy(f->vendor + 4, &d, 4);
	memcpy(f->vendor + 8, &c, 4);
	f->vendor[12] = 0;
	__get_cpuid(1, &a, &b, &c, &d);
	const unsigned base_family = (a >> 8) & 0xf;
	f->family = base_family + (base_family == 0xf ? (a >> 20) & 0xff : 0);
	f->model = ((a >> 4) & 0xf) | (base_family == 6 || base_family == 0xf ? (a >> 12) & 0xf0 : 0);
	const int fma = (c >> 12) & 1, osxsave = (c >> 27) & 1, avx = (c >> 28) & 1;
	unsigned long long xcr0 = osxsave ? xgetbv0() : 0;
	const int ymm_state = (xcr0 & 0x6) == 0x6;        /* SSE and AVX state */
	const int zmm_state = ymm_state && (xcr0 & 0xe0) == 0xe0; /* opmask, ZMM_Hi256, Hi16_ZMM */
	const int tile_state = (xcr0 & 0x60000) == 0x60000;       /* XTILECFG, XTILEDATA */
	int avx2 = 0, avx512 = 0, bf16 = 0, amx = 0;
	if (max_leaf >= 7) {
		unsigned a1 = 0, b1 = 0, c1 = 0, d1 = 0;
		__cpuid_count(7, 0, a, b, c, d);
		const unsigned eax7 = a;
		avx2 = (b >> 5) & 1;
		const int f512 = (b >> 16) & 1, dq = (b >> 17) & 1, bw = (b >> 30) & 1, vl = (b >> 31) & 1;
		avx512 = f512 && dq && bw && vl;
		amx = (d >> 22) & 1; /* AMX-BF16 */
		if (eax7 >= 1) {
			__cpuid_count(7, 1, a1, b1, c1, d1);
			bf16 = (a1 >> 5) & 1; /* AVX512_BF16 */
		}
	}
	const int has_avx2 = avx && fma && avx2 && ymm_state;
	const int has_avx512 = has_avx2 && avx512 && zmm_state;
	f->isa = has_avx512 ? SB_ISA_AVX512 : has_avx2 ? SB_ISA_AVX2 : SB_ISA_GENERIC;
	f->avx512_bf16 = has_avx512 && bf16;
	f->amx_bf16 = amx && tile_state;
#endif
	const char *cap = sb_knob_get("SB_CPU_ISA");
	if (cap && *cap) {
		const int nobf16 = !strcmp(cap, "avx512-nobf16");
		sb_isa lim = !strcmp(cap, "avx512") || nobf16 ? SB_ISA_AVX512
		             : !strcmp(cap, "avx2") ? SB_ISA_AVX2 : SB_ISA_GENERIC;
		if (lim < f->isa)
			f->isa = lim;
		/* bf16 goes with the AVX-512 kernels; "avx512-nobf16" keeps them without it */
		if (f->isa < SB_ISA_AVX512 || nobf16)
			f->avx512_bf16 = 0;
	}
	snprintf(f->flags, sizeof f->flags, "%s%s%s",
	         f->isa == SB_ISA_AVX512 ? "AVX-512" : f->isa == SB_ISA_AVX2 ? "AVX2+FMA" : "SSE2",
	         f->avx512_bf16 ? ", AVX512_BF16" : "", f->amx_bf16 ? ", AMX-BF16 (unused)" : "");
}

const sb_cpu_features *sb_cpu_features_get(void)
{
	pthread_once(&once, detect);
	return &feats;
}

