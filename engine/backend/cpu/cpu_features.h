/* What the processor can do, read from CPUID and the OS's saved register state (XGETBV), never
 * from a table of processor models: a processor that came out after this code still gets the
 * kernels its instructions allow. The matrix products (gemm.c) choose their kernels from this.
 *
 * SB_CPU_ISA=generic|avx2|avx512|avx512-nobf16 in the environment caps what is used (tests, benches, and a
 * way round a faulty path); it never raises it above what the processor has.
 *
 * Threads: any; the answer is computed once (pthread_once) and never changes.
 */
#ifndef SB_CPU_FEATURES_H
#define SB_CPU_FEATURES_H

typedef enum {
	SB_ISA_GENERIC = 0, /* portable C (SSE2 on x86-64, whatever the compiler makes of it) */
	SB_ISA_AVX2 = 1,    /* AVX2 + FMA3 */
	SB_ISA_AVX512 = 2,  /* AVX-512 F, BW, DQ, VL */
} sb_isa;

typedef struct {
	sb_isa isa;         /* the widest product kernels used (after SB_CPU_ISA) */
	int avx512_bf16;    /* vdpbf16ps usable (and not capped away) */
	int amx_bf16;       /* AMX tiles with bf16 present (reported; no kernel uses them yet) */
	char vendor[16];    /* "GenuineIntel", "AuthenticAMD", ... */
	unsigned family, model;
	char flags[96];     /* the instructions the products rely on, for the device listing */
} sb_cpu_features;

const sb_cpu_features *sb_cpu_features_get(void);


#endif
