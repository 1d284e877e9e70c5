/* Few-row attention: fp32 attention for a few query rows over a long cache, on a CPU (`specviz/attention.py`).
 *
 * A step attends with one query row per head, a verification of N drafted nodes with 1 + N; torch's SDPA kernel
 * spends on them what it spends on hundreds (on an AMD EPYC, 141 µs a layer for 9 query tokens over 520 keys, 51 µs
 * for one; benchmarks/few_row_attention.py). Here the rows of one key/value head (its g query heads' rows side by
 * side, as specviz.fast_path.grouped_attention lays them out) share every load of a key or a value:
 * - the keys are split into an even number of ranges (two at least, so both cores work with few heads; at most CHUNK
 *   keys each), one work item per (key/value head, range), each with its own maximum and sum; the ranges are merged
 *   at the end (the log-sum-exp of split attention);
 * - softmax: e^x by a polynomial on 16 lanes (`vexp`), sums in one fixed order, no -ffast-math (GCC 12 would link a
 *   start-up file that flushes denormals for the whole process);
 * - scores: KC keys at a time, transposed once into [D][KC], each multiplied into up to SR rows' accumulators;
 * - values: each value row is loaded once for up to VR rows' outputs.
 * A row's arithmetic depends on the number of keys L and its mask, not on the other rows, so a row gets the same bits
 * alone as among others (tests/core/test_attention.py).
 *
 * Thread-safe: every partial result lives in the caller's `work` (specviz_attention_work floats) or on the stack.
 */
#include <float.h>
#include <math.h>
#include <string.h>

#define KC 16      /* keys per score vector */
#define CHUNK 1024 /* keys per work item, at most: its scores live on the stack */
#define MAXR 64    /* query rows per key/value head, at most */
#ifdef __AVX512F__
#define SR 9 /* rows per score block and per value block: what fits the 32 vector registers */
#define VR 6
#else
#define SR 4 /* 16 vector registers */
#define VR 3
#endif

typedef float vec __attribute__((vector_size(64), aligned(4)));
typedef int ivec __attribute__((vector_size(64)));
typedef unsigned char bytes __attribute__((vector_size(KC)));

static inline vec splat(float x) { return (vec){0} + x; }
/* where `when` (a comparison's lanes, or lanes of 1.0 / 0.0) is true: a, else b */
static inline vec pick(vec when, vec a, vec b) {
    ivec m = (ivec)when != 0;
    return (vec)(((ivec)a & m) | ((ivec)b & ~m));
}
static inline float largest(vec x) {
    float m = x[0];
    for (int j = 1; j < KC; j++) m = x[j] > m ? x[j] : m;
    return m;
}
static inline float total(vec x) { /* in one fixed order: a row gets the same bits wherever it runs */
    float t = 0.f;
    for (int j = 0; j < KC; j++) t += x[j];
    return t;
}
/* e^x for x <= 0, lane by lane (Cephes' expf: x = n ln 2 + r, a degree-6 polynomial for e^r, times 2^n); below
 * -87 it gives about 1e-38 where expf gives less (those weights vanish against the largest one's 1). */
static inline vec vexp(vec x) {
    x = pick(x < splat(-87.f), splat(-87.f), x);
    vec t = x * 1.44269504088896341f + 12582912.f; /* round to nearest by the 1.5 * 2^23 trick */
    vec n = t - 12582912.f;
    vec r = x - n * 0.693359375f + n * 2.12194440e-4f;
    vec p = splat(1.9875691500e-4f);
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    vec y = p * r * r + r + 1.f;
    ivec scale = (__builtin_convertvector(n, ivec) + 127) << 23;
    return y * (vec)scale;
}

static long splits_for(long L) { /* an even count: two cores share 3 key/value heads' work evenly */
    long n = (L + CHUNK - 1) / CHUNK;
    return n < 2 ? 2 : n + n % 2;
}

/* Floats of `work` a call needs. */
long specviz_attention_work(long KV, long R, long L, long D) { return KV * splits_for(L) * R * (D + 2); }

/* Scores of m rows (q, D floats apart) against the KC keys transposed in kt [D][KC], scaled, into s (rows `width`
 * floats apart). */
static inline __attribute__((always_inline)) void score_block(const float *kt, const float *q, float *s, long width,
                                                              float scale, const int m, const long D) {
    vec acc[SR];
    for (int i = 0; i < m; i++) acc[i] = splat(0.f);
    for (long d = 0; d < D; d++) {
        vec kd = *(const vec *)(kt + d * KC);
        for (int i = 0; i < m; i++) acc[i] += kd * q[i * D + d];
    }
    for (int i = 0; i < m; i++) *(vec *)(s + i * width) = acc[i] * scale;
}

/* out[i] = Σ_l p[i][l] · v[l] for m rows of weights p (rows `width` floats apart) over `len` value rows of D. */
static inline __attribute__((always_inline)) void value_block(const float *v, const float *p, long width, long len,
                                                              float *out, const int m, const long D) {
    vec o[VR][128 / 16];
    for (int i = 0; i < m; i++)
        for (long c = 0; c < D / 16; c++) o[i][c] = splat(0.f);
    for (long l = 0; l < len; l++) {
        const vec *row = (const vec *)(v + l * D);
        for (int i = 0; i < m; i++) {
            float w = p[i * width + l];
            for (long c = 0; c < D / 16; c++) o[i][c] += row[c] * w;
        }
    }
    for (int i = 0; i < m; i++)
        for (long c = 0; c < D / 16; c++) *(vec *)(out + i * D + 16 * c) = o[i][c];
}

static inline __attribute__((always_inline)) void item(const float *qh, const float *kh, const float *vh,
                                                       const unsigned char *mask, long R, long L, long a, long e,
                                                       float scale, float *po, float *pmax, float *psum,
                                                       const long D) {
    long len = e - a;
    if (len <= 0) {
        for (long i = 0; i < R; i++) pmax[i] = -FLT_MAX, psum[i] = 0.f;
        memset(po, 0, sizeof(float) * D * R);
        return;
    }
    long width = (len + KC - 1) / KC * KC;
    float scores[R][width] __attribute__((aligned(64)));
    float kt[128][KC] __attribute__((aligned(64)));
    for (long l0 = a; l0 < e; l0 += KC) {
        long n = e - l0 < KC ? e - l0 : KC;
        for (long j = 0; j < KC; j++)
            for (long d = 0; d < D; d++) kt[d][j] = j < n ? kh[(l0 + j) * D + d] : 0.f;
        for (long r0 = 0; r0 < R; r0 += SR) {
            /* each row count a constant of its own: the loops unroll and the accumulators stay in registers */
            const float *k0 = &kt[0][0], *q0 = qh + r0 * D;
            float *s0 = &scores[r0][l0 - a];
            switch (R - r0 < SR ? R - r0 : SR) {
            case 1: score_block(k0, q0, s0, width, scale, 1, D); break;
            case 2: score_block(k0, q0, s0, width, scale, 2, D); break;
            case 3: score_block(k0, q0, s0, width, scale, 3, D); break;
            case 4: score_block(k0, q0, s0, width, scale, 4, D); break;
#if SR > 4
            case 5: score_block(k0, q0, s0, width, scale, 5, D); break;
            case 6: score_block(k0, q0, s0, width, scale, 6, D); break;
            case 7: score_block(k0, q0, s0, width, scale, 7, D); break;
            case 8: score_block(k0, q0, s0, width, scale, 8, D); break;
            case 9: score_block(k0, q0, s0, width, scale, 9, D); break;
#endif
            }
        }
    }
    for (long i = 0; i < R; i++) {
        float *s = scores[i];
        for (long l = len; l < width; l++) s[l] = -FLT_MAX; /* the padding after the last key */
        if (mask) {
            const unsigned char *visible = mask + i * L + a;
            for (long b = 0; b < width; b += KC) {
                bytes shown = {0};
                memcpy(&shown, visible + b, (size_t)(len - b < KC ? len - b : KC));
                *(vec *)&s[b] = pick(__builtin_convertvector(shown, vec), *(vec *)&s[b], splat(-FLT_MAX));
            }
        }
        vec top = splat(-FLT_MAX), sum = splat(0.f);
        for (long b = 0; b < width; b += KC) top = pick(*(vec *)&s[b] > top, *(vec *)&s[b], top);
        float m = largest(top);
        for (long b = 0; b < width; b += KC) { /* hidden keys (and the padding) weigh exactly 0 */
            vec x = *(vec *)&s[b];
            vec e = m == -FLT_MAX ? splat(0.f) : pick(x != splat(-FLT_MAX), vexp(x - m), splat(0.f));
            *(vec *)&s[b] = e;
            sum += e;
        }
        pmax[i] = m, psum[i] = total(sum);
    }
    for (long r0 = 0; r0 < R; r0 += VR) {
        const float *v0 = vh + a * D, *p0 = &scores[r0][0];
        float *o0 = po + r0 * D;
        switch (R - r0 < VR ? R - r0 : VR) {
        case 1: value_block(v0, p0, width, len, o0, 1, D); break;
        case 2: value_block(v0, p0, width, len, o0, 2, D); break;
        case 3: value_block(v0, p0, width, len, o0, 3, D); break;
#if VR > 3
        case 4: value_block(v0, p0, width, len, o0, 4, D); break;
        case 5: value_block(v0, p0, width, len, o0, 5, D); break;
        case 6: value_block(v0, p0, width, len, o0, 6, D); break;
#endif
        }
    }
}

typedef void (*item_fn)(const float *, const float *, const float *, const unsigned char *, long, long, long, long,
                        float, float *, float *, float *);
/* One function per head size: D a constant in each, so its arrays and loops are fixed (OpenMP outlines a parallel
 * loop before inlining, so the loop below calls these rather than being specialised itself). */
#define SIZED(size)                                                                                                    \
    static void item##size(const float *qh, const float *kh, const float *vh, const unsigned char *mask, long R,      \
                           long L, long a, long e, float scale, float *po, float *pmax, float *psum) {                 \
        item(qh, kh, vh, mask, R, L, a, e, scale, po, pmax, psum, size);                                               \
    }
SIZED(16)
SIZED(32)
SIZED(64)
SIZED(128)

static void attend(const float *q, const float *k, const float *v, long k_stride, long v_stride,
                   const unsigned char *mask, float *out, float *work, long KV, long R, long L, float scale, long D,
                   item_fn one) {
    long S = splits_for(L), per = ((L + S - 1) / S + KC - 1) / KC * KC;
    float *part_out = work, *part_max = work + KV * S * R * D, *part_sum = part_max + KV * S * R;
#pragma omp parallel for schedule(static)
    for (long it = 0; it < KV * S; it++) {
        long h = it / S, sp = it % S, a = sp * per, e = a + per < L ? a + per : L;
        one(q + h * R * D, k + h * k_stride, v + h * v_stride, mask, R, L, a, e, scale, part_out + it * R * D,
            part_max + it * R, part_sum + it * R);
    }
    for (long h = 0; h < KV; h++)
        for (long i = 0; i < R; i++) {
            float top = -FLT_MAX, sum = 0.f, w[S];
            for (long sp = 0; sp < S; sp++) {
                float m = part_max[(h * S + sp) * R + i];
                top = m > top ? m : top;
            }
            for (long sp = 0; sp < S; sp++) {
                long at = (h * S + sp) * R + i;
                w[sp] = part_sum[at] > 0.f ? expf(part_max[at] - top) : 0.f; /* libm, once a range */
                sum += w[sp] * part_sum[at];
            }
            for (long d = 0; d < D; d++) {
                float acc = 0.f;
                for (long sp = 0; sp < S; sp++) acc += w[sp] * part_out[((h * S + sp) * R + i) * D + d];
                out[(h * R + i) * D + d] = sum > 0.f ? acc / sum : 0.f;
            }
        }
}

/* q [KV][R][D] (contiguous); key and value head h at k + h * k_stride and v + h * v_stride, its L rows D floats apart;
 * mask [R][L] (1: visible) or NULL (every key visible); out [KV][R][D]; work: specviz_attention_work floats.
 * Returns 0, or 1 for shapes it does not take (R > MAXR, L < 1, a head size other than 16, 32, 64 or 128). */
int specviz_few_row_attention(const float *q, const float *k, const float *v, long k_stride, long v_stride,
                              const unsigned char *mask, float *out, float *work, long KV, long R, long L, long D,
                              float scale) {
    if (R < 1 || R > MAXR || L < 1) return 1;
    item_fn one = D == 16 ? item16 : D == 32 ? item32 : D == 64 ? item64 : D == 128 ? item128 : 0;
    if (!one) return 1;
    attend(q, k, v, k_stride, v_stride, mask, out, work, KV, R, L, scale, D, one);
    return 0;
}

/* A round's other softmax: a verification's logits, which the recycle table learns from (specviz/drafters/recycle.py).
 * For each of R rows of V logits: the k largest (values and ids, largest first; among equal values the lower id) and
 * log sum e^x, so the k tokens' probabilities are e^(value - that) without a softmax written over every entry. A row
 * is read three times, from the core's cache: its largest; e^(x - largest) summed in one fixed order; the k largest,
 * skipping every 64 entries none of which beats the k-th so far. Rows are shared among the threads.
 * values [R][k], ids [R][k], normaliser [R]; 0 < k <= V. */
#define GROUP (4 * KC)
void specviz_top_rows(const float *logits, long R, long V, long k, float *values, long *ids, float *normaliser) {
#pragma omp parallel for schedule(static)
    for (long r = 0; r < R; r++) {
        const float *x = logits + r * V;
        float *top = values + r * k;
        long *at = ids + r * k, blocks = V / KC, found = 0;
        vec most = splat(-FLT_MAX);
        for (long b = 0; b < blocks; b++) {
            vec y = *(const vec *)(x + b * KC);
            most = pick(y > most, y, most);
        }
        float m = largest(most), tail = 0.f;
        for (long i = blocks * KC; i < V; i++) m = x[i] > m ? x[i] : m;
        vec sums = splat(0.f);
        for (long b = 0; b < blocks; b++) sums += vexp(*(const vec *)(x + b * KC) - splat(m));
        for (long i = blocks * KC; i < V; i++) tail += expf(x[i] - m);
        normaliser[r] = m + logf(total(sums) + tail);
        float floor = -FLT_MAX; /* the k-th largest so far, once k are found: an entry must beat it */
        for (long g = 0; g < V; g += GROUP) {
            long end = g + GROUP < V ? g + GROUP : V;
            if (found == k && end - g == GROUP) {
                vec y = *(const vec *)(x + g);
                for (long b = 1; b < GROUP / KC; b++) {
                    vec z = *(const vec *)(x + g + b * KC);
                    y = pick(z > y, z, y);
                }
                if (largest(y) <= floor) continue;
            }
            for (long i = g; i < end; i++) {
                float value = x[i];
                if (found == k && value <= floor) continue;
                long j = found < k ? found++ : k - 1; /* insert; when full, the smallest falls off the end */
                while (j > 0 && top[j - 1] < value) {
                    top[j] = top[j - 1], at[j] = at[j - 1];
                    j--;
                }
                top[j] = value, at[j] = i;
                if (found == k) floor = top[k - 1];
            }
        }
    }
}
