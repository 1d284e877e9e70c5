/* An experiment, not used by SpecViz yet: fp32 attention for a few query rows over a long cache on a CPU
 * (benchmarks/few_row_attention.py builds it and times it against torch's SDPA).
 *
 * A verification forward attends with 1 + N query rows per head (a tree of N nodes); SDPA's CPU kernel spends on them
 * what it spends on hundreds. Here the rows of one key/value head (its g query heads' rows side by side, as
 * specviz.fast_path.grouped_attention lays them out) share every load of a key or value:
 * - the keys are split into SPLITS ranges, one work item per (head, range), each with its own max and sum; the ranges
 *   are merged at the end (the log-sum-exp of split attention);
 * - scores: 16 keys at a time, transposed once into [D][16], each multiplied into up to 9 rows' accumulators;
 * - values: each value row is loaded once for up to 6 rows' outputs.
 * Each row's arithmetic depends on L, not on how many rows are there, so a row gets the same bits alone as among
 * others (the script checks it).
 */
#include <math.h>
#include <string.h>

#define D 64      /* head size (SmolLM2-135M's) */
#define KC 16     /* keys per score vector */
#define MAXR 64   /* query rows per key/value head, at most */
#define MAXKV 64  /* key/value heads, at most */
#define SPLITS 2  /* key ranges per head: work items for both cores with 3 key/value heads */

typedef float vec __attribute__((vector_size(64), aligned(4)));

static float part_out[MAXKV][SPLITS][MAXR][D] __attribute__((aligned(64)));
static float part_max[MAXKV][SPLITS][MAXR], part_sum[MAXKV][SPLITS][MAXR];

/* q [KV][R][D]; k, v [KV][>= L][D], heads `stride` floats apart; mask [R][L] (1: visible); out [KV][R][D] */
int specviz_few_row_attention(const float *q, const float *k, const float *v, long stride,
                              const unsigned char *mask, float *out, long KV, long R, long L, float scale) {
    if (R > MAXR || KV > MAXKV || L < 1) return 1;
    long per = ((L + SPLITS - 1) / SPLITS + KC - 1) / KC * KC;
#pragma omp parallel for schedule(static)
    for (long item = 0; item < KV * SPLITS; item++) {
        long h = item / SPLITS, sp = item % SPLITS;
        long a = sp * per, e = a + per < L ? a + per : L, len = e - a;
        float (*po)[D] = part_out[h][sp];
        if (len <= 0) {
            for (long i = 0; i < R; i++) part_max[h][sp][i] = -INFINITY, part_sum[h][sp][i] = 0.f;
            memset(po, 0, sizeof(float) * D * R);
            continue;
        }
        float scores[R][per + KC] __attribute__((aligned(64)));
        float kt[D][KC] __attribute__((aligned(64)));
        const float *kh = k + h * stride, *vh = v + h * stride, *qh = q + h * R * D;
        for (long l0 = a; l0 < e; l0 += KC) {
            long n = e - l0 < KC ? e - l0 : KC;
            for (long j = 0; j < KC; j++)
                for (int d = 0; d < D; d++) kt[d][j] = j < n ? kh[(l0 + j) * D + d] : 0.f;
            for (long r0 = 0; r0 < R; r0 += 9) {
                int m = R - r0 < 9 ? (int)(R - r0) : 9;
                vec acc[9];
                memset(acc, 0, sizeof acc);
                for (int d = 0; d < D; d++) {
                    vec kd = *(vec *)kt[d];
                    for (int i = 0; i < m; i++) acc[i] += kd * qh[(r0 + i) * D + d];
                }
                for (int i = 0; i < m; i++) *(vec *)&scores[r0 + i][l0 - a] = acc[i] * scale;
            }
        }
        for (long i = 0; i < R; i++) {
            const unsigned char *visible = mask + i * L + a;
            float *s = scores[i], top = -INFINITY, sum = 0.f;
            for (long l = 0; l < len; l++) {
                s[l] = visible[l] ? s[l] : -INFINITY;
                top = s[l] > top ? s[l] : top;
            }
            if (top == -INFINITY)
                for (long l = 0; l < len; l++) s[l] = 0.f;
            else
                for (long l = 0; l < len; l++) s[l] = expf(s[l] - top), sum += s[l];
            part_max[h][sp][i] = top, part_sum[h][sp][i] = sum;
        }
        for (long r0 = 0; r0 < R; r0 += 6) {
            int m = R - r0 < 6 ? (int)(R - r0) : 6;
            vec o[6][4];
            memset(o, 0, sizeof o);
            for (long l = 0; l < len; l++) {
                const vec *row = (const vec *)(vh + (a + l) * D);
                vec v0 = row[0], v1 = row[1], v2 = row[2], v3 = row[3];
                for (int i = 0; i < m; i++) {
                    float p = scores[r0 + i][l];
                    o[i][0] += v0 * p, o[i][1] += v1 * p, o[i][2] += v2 * p, o[i][3] += v3 * p;
                }
            }
            for (int i = 0; i < m; i++) memcpy(po[r0 + i], o[i], sizeof o[i]);
        }
    }
    for (long h = 0; h < KV; h++)
        for (long i = 0; i < R; i++) {
            float top = -INFINITY, total = 0.f, w[SPLITS];
            for (int sp = 0; sp < SPLITS; sp++) top = part_max[h][sp][i] > top ? part_max[h][sp][i] : top;
            for (int sp = 0; sp < SPLITS; sp++) {
                w[sp] = part_sum[h][sp][i] > 0.f ? expf(part_max[h][sp][i] - top) : 0.f;
                total += w[sp] * part_sum[h][sp][i];
            }
            for (int d = 0; d < D; d++) {
                float acc = 0.f;
                for (int sp = 0; sp < SPLITS; sp++) acc += w[sp] * part_out[h][sp][i][d];
                out[(h * R + i) * D + d] = acc / total;
            }
        }
    return 0;
}
