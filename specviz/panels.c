/* SpecViz's panel products: y = x W^T for a few rows of x (a decoding step, a verification), in fp32 arithmetic over
 * an fp32 weight (the target's) or a bf16 one (a draft head's).
 *
 * The weight W (N x K) is packed once as panels of PW columns: panel q holds W's rows q*PW .. q*PW+PW-1 transposed,
 * K lines of PW floats, one after the other in memory. A product then streams each panel once, front to back, and
 * multiplies every line by each row's x[k] (a broadcast) into PW accumulators per row: no horizontal sums, and the
 * weight is read once for up to MAXMC rows (nine with AVX-512, six with AVX2; more rows are taken in even groups
 * that read the panel again from the core's cache). Every output is the sum over k in order 0 .. K-1, whatever the
 * number of rows, so a row gets the same bits alone (a step) as among others (a verification).
 *
 * specviz/panels.py compiles this file on the machine that runs it (cc -O3 -march=native -fopenmp) and calls it
 * through ctypes after torch has loaded its OpenMP runtime, so both share one pool of threads.
 */
#include <string.h>
#if defined(__AVX2__) || defined(__AVX512F__)
#include <immintrin.h>
#endif

#ifdef __AVX512F__
#define VW 16    /* floats in a vector register */
#define NB 3     /* vectors across a panel: PW = 48 columns */
#define MAXMC 9  /* rows a pass over a panel serves: 32 registers hold 9 x 3 accumulators, 3 weights, a broadcast */
#else
#define VW 8
#define NB 2     /* 16 registers: 6 rows x 2 accumulators, 2 weights, a broadcast */
#define MAXMC 6
#endif
/* Lines of the panel fetched ahead of the one being read. With 9 rows a line takes 27 multiply-adds, so 16 lines
 * ahead were about 130 ns: no more than the memory's latency. On an AMD EPYC (Zen 4) 32 took 9 rows' products over
 * the target's weights from 18.0 to 14.6 ms, and 16 rows' from 27.5 to 23.1 (one row: 11.6 and 11.2 ms). */
#ifndef AHEAD /* benchmarks/panel_prefetch.py builds others with -DAHEAD=N */
#define AHEAD 32
#endif
#define PW (VW * NB)

typedef float vec __attribute__((vector_size(VW * 4), aligned(4)));

int specviz_panel_width(void) { return PW; }

/* A bf16 weight (a draft head's beside an fp32 target) is widened to fp32 exactly, its 16 bits a float's high half, and
 * multiplied as an fp32 one: a row's output is the fp32 panel product over the bf16-rounded weight, with the same bits
 * alone as among others, from half the bytes. */
typedef unsigned short half_vec __attribute__((vector_size(VW * 2), aligned(2)));
typedef int int_vec __attribute__((vector_size(VW * 4)));

/* An int8 weight (a draft head's output rows, each row scaled to 127 at its largest) is widened to fp32 exactly; the
 * caller multiplies each output by its row's scale. A quarter of the fp32 bytes: the rows are read cold every round. */

static inline vec load_float(const float *p) { return *(const vec *)p; }
static inline vec load_byte(const signed char *p) { /* GCC's own vector conversion goes byte by byte here */
#ifdef __AVX512F__
    return (vec)_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)p)));
#elif defined(__AVX2__)
    return (vec)_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)p)));
#else
    vec out;
    for (int i = 0; i < VW; i++) out[i] = (float)p[i];
    return out;
#endif
}
static inline vec load_half(const unsigned short *p) {
    return (vec)(__builtin_convertvector(*(const half_vec *)p, int_vec) << 16);
}

/* out[i, 0 .. PW) = sum over k of x[i, k] * panel[k, 0 .. PW), for MC rows i; the panel's weights of type WT, read by
 * LOAD */
#define BLOCK_OF(NAME, WT, LOAD, MC)                                                                         \
    static void NAME##_##MC(const float *x, long ldx, const WT *panel, float *out, long ldo, long K) {      \
        vec acc[MC][NB];                                                                                     \
        memset(acc, 0, sizeof acc);                                                                          \
        for (long k = 0; k < K; k++) {                                                                       \
            const WT *line = panel + k * PW;                                                                 \
            vec w[NB];                                                                                       \
            for (int j = 0; j < NB; j++) __builtin_prefetch(line + AHEAD * PW + j * VW, 0, 2);               \
            for (int j = 0; j < NB; j++) w[j] = LOAD(line + j * VW);                                         \
            for (int i = 0; i < MC; i++) {                                                                   \
                float xi = x[i * ldx + k];                                                                   \
                for (int j = 0; j < NB; j++) acc[i][j] += w[j] * xi;                                         \
            }                                                                                                \
        }                                                                                                    \
        for (int i = 0; i < MC; i++)                                                                         \
            for (int j = 0; j < NB; j++) *(vec *)(out + i * ldo + j * VW) = acc[i][j];                       \
    }
#define BLOCK(MC)                                                                                            \
    BLOCK_OF(block, float, load_float, MC)                                                                   \
    BLOCK_OF(block16, unsigned short, load_half, MC) BLOCK_OF(block8, signed char, load_byte, MC)
BLOCK(1)
BLOCK(2)
BLOCK(3)
BLOCK(4)
BLOCK(5)
BLOCK(6)
#if MAXMC > 6
BLOCK(7)
BLOCK(8)
BLOCK(9)
#endif

typedef void (*block_fn)(const float *, long, const float *, float *, long, long);
static const block_fn blocks[MAXMC + 1] = {0, block_1, block_2, block_3, block_4, block_5, block_6,
#if MAXMC > 6
                                           block_7, block_8, block_9
#endif
};
typedef void (*block16_fn)(const float *, long, const unsigned short *, float *, long, long);
static const block16_fn blocks16[MAXMC + 1] = {0, block16_1, block16_2, block16_3, block16_4, block16_5, block16_6,
#if MAXMC > 6
                                               block16_7, block16_8, block16_9
#endif
};

typedef void (*block8_fn)(const float *, long, const signed char *, float *, long, long);
static const block8_fn blocks8[MAXMC + 1] = {0, block8_1, block8_2, block8_3, block8_4, block8_5, block8_6,
#if MAXMC > 6
                                             block8_7, block8_8, block8_9
#endif
};

/* y (M x N) = x (M x K) W^T, W packed by panels (its N rounded up to whole panels, the extra columns zero) with weights
 * of type WT, multiplied by the blocks of TABLE. */
#define PRODUCT_OF(NAME, WT, TABLE)                                                                          \
    void NAME(const float *x, const WT *packed, float *y, long M, long N, long K) {                          \
        long panels = (N + PW - 1) / PW;                                                                     \
        long groups = (M + MAXMC - 1) / MAXMC;                                                               \
        _Pragma("omp parallel for schedule(static)")                                                         \
        for (long q = 0; q < panels; q++) {                                                                  \
            const WT *panel = packed + q * K * PW;                                                           \
            long n0 = q * PW, width = N - n0 < PW ? N - n0 : PW;                                             \
            float tail[MAXMC * PW];                                                                          \
            long m0 = 0;                                                                                     \
            for (long g = 0; g < groups; g++) {                                                              \
                int mc = (int)((M - m0) / (groups - g)); /* groups as even as can be */                      \
                if (width == PW) {                                                                           \
                    TABLE[mc](x + m0 * K, K, panel, y + m0 * N + n0, N, K);                                  \
                } else { /* the last, partial panel: through a buffer */                                     \
                    TABLE[mc](x + m0 * K, K, panel, tail, PW, K);                                            \
                    for (int i = 0; i < mc; i++)                                                             \
                        memcpy(y + (m0 + i) * N + n0, tail + i * PW, width * sizeof(float));                 \
                }                                                                                            \
                m0 += mc;                                                                                    \
            }                                                                                                \
        }                                                                                                    \
    }
PRODUCT_OF(specviz_panel_product, float, blocks)
PRODUCT_OF(specviz_panel_product_bf16, unsigned short, blocks16)
PRODUCT_OF(specviz_panel_product_int8, signed char, blocks8)
