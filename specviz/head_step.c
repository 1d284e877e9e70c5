/* One draft-head step in one call: a feature head's layer (specviz/drafters/head_net.py, DraftHead.step) over a few
 * new rows, in fp32 arithmetic over the head's bf16 weights on the panels.
 *
 *   x = fc([norm_e(e), norm_f(f)]) + bias
 *   q, k, v = (attn_norm(x) Wq, Wk, Wv), RoPE on q and k; k and v written into the head's cache
 *   x = x + attention(q, cache) Wo
 *   y = mlp_norm(x);  x = x + (silu(y Wgate) * (y Wup)) Wdown
 *   out = out_norm(x)
 *
 * The products are the panels' (specviz/panels.c) and the attention the few-row kernel's (specviz/attention.c), both
 * handed over as function pointers from their own builds, so this file holds only what lies between them: the norms,
 * the rotation, the layouts, SiLU and the residuals. Taken one torch operation at a time, those cost more than the
 * products: a step is about forty small operations, each tens of microseconds right after a target forward has
 * pushed torch's code and data out of the caches.
 *
 * specviz/head_step.py builds it (cc -O3 -march=native -fopenmp, no -ffast-math) and calls it through ctypes.
 */
#include <math.h>
#include <string.h>

typedef void (*product_fn)(const float *x, const void *packed, float *y, long m, long n, long k);
typedef int (*attend_fn)(const float *q, const float *k, const float *v, long k_stride, long v_stride,
                         const unsigned char *mask, float *out, float *work, long kv, long rows, long length, long dim,
                         float scale);

/* The head: its shape, its packed bf16 weights and fp32 norm weights, the two kernels. */
typedef struct {
    long hidden, heads, kv_heads, dim, intermediate;
    float eps;
    const void *fc, *q, *k, *v, *o, *gate, *up, *down; /* packed bf16 panels */
    const float *fc_bias, *norm_e, *norm_f, *attn_norm, *mlp_norm, *out_norm;
    product_fn product;
    attend_fn attend;
} head_t;

/* Scratch for m rows (specviz_head_step_scratch floats), laid out in this order. */
typedef struct {
    float *a, *x, *y, *q, *k, *v, *grouped, *attended, *joined, *gate, *up;
} scratch_t;

long specviz_head_step_scratch(long m, long hidden, long heads, long kv_heads, long dim, long intermediate) {
    return m * (2 * hidden + 2 * hidden + 3 * heads * dim + 2 * kv_heads * dim + heads * dim + 2 * intermediate);
}

static scratch_t carve(float *s, long m, const head_t *h) {
    scratch_t t;
    long width = h->heads * h->dim, kv_width = h->kv_heads * h->dim;
    t.a = s, s += m * 2 * h->hidden;
    t.x = s, s += m * h->hidden;
    t.y = s, s += m * h->hidden;
    t.q = s, s += m * width;
    t.k = s, s += m * kv_width;
    t.v = s, s += m * kv_width;
    t.grouped = s, s += m * width;
    t.attended = s, s += m * width;
    t.joined = s, s += m * width;
    t.gate = s, s += m * h->intermediate;
    t.up = s;
    return t;
}

/* out[0 .. n) = x / sqrt(mean(x^2) + eps) * w, the mean summed in order. */
static void rms_norm(const float *x, const float *w, float *out, long n, float eps) {
    float sum = 0.0f;
    for (long i = 0; i < n; i++) sum += x[i] * x[i];
    float r = 1.0f / sqrtf(sum / (float)n + eps);
    for (long i = 0; i < n; i++) out[i] = x[i] * r * w[i];
}

/* RoPE on one head's row x [dim] at cos and sin [dim]: x cos + rotate_half(x) sin. */
static void rotate(float *x, const float *cos, const float *sin, long dim) {
    long half = dim / 2;
    for (long i = 0; i < half; i++) {
        float a = x[i], b = x[i + half];
        x[i] = a * cos[i] - b * sin[i];
        x[i + half] = b * cos[i + half] + a * sin[i + half];
    }
}

/* Read m rows (embeddings e and lifted features f, [m][hidden]) at `positions` after the cache's `length` entries.
 * cos and sin: RoPE tables [>= max position + 1][dim]. k_cache and v_cache: [kv_heads][capacity][dim], room for
 * length + m. visible: [heads/kv_heads * m][length + m] (1: read) or NULL (every entry). out: [m][hidden].
 * Returns what the attention kernel returns (0: done). */
int specviz_head_step(const head_t *h, const float *e, const float *f, const long *positions, long m,
                      const float *cos, const float *sin, float *k_cache, float *v_cache, long capacity, long length,
                      const unsigned char *visible, float *out, float *scratch, float *work) {
    scratch_t t = carve(scratch, m, h);
    long H = h->hidden, D = h->dim, NH = h->heads, KV = h->kv_heads, I = h->intermediate, g = NH / KV;
    long width = NH * D, kv_width = KV * D;

    for (long r = 0; r < m; r++) { /* inputs: both halves normed, side by side */
        rms_norm(e + r * H, h->norm_e, t.a + r * 2 * H, H, h->eps);
        rms_norm(f + r * H, h->norm_f, t.a + r * 2 * H + H, H, h->eps);
    }
    h->product(t.a, h->fc, t.x, m, H, 2 * H);
    for (long r = 0; r < m; r++)
        for (long i = 0; i < H; i++) t.x[r * H + i] += h->fc_bias[i];

    for (long r = 0; r < m; r++) rms_norm(t.x + r * H, h->attn_norm, t.y + r * H, H, h->eps);
    h->product(t.y, h->q, t.q, m, width, H);
    h->product(t.y, h->k, t.k, m, kv_width, H);
    h->product(t.y, h->v, t.v, m, kv_width, H);
    for (long r = 0; r < m; r++) {
        const float *c = cos + positions[r] * D, *s = sin + positions[r] * D;
        for (long n = 0; n < NH; n++) { /* rotated, into the kernel's layout: [kv][g * m][dim], head by head */
            float *row = t.grouped + (n * m + r) * D;
            memcpy(row, t.q + r * width + n * D, D * sizeof(float));
            rotate(row, c, s, D);
        }
        for (long n = 0; n < KV; n++) {
            float *key = k_cache + (n * capacity + length + r) * D;
            memcpy(key, t.k + r * kv_width + n * D, D * sizeof(float));
            rotate(key, c, s, D);
            memcpy(v_cache + (n * capacity + length + r) * D, t.v + r * kv_width + n * D, D * sizeof(float));
        }
    }
    int failed = h->attend(t.grouped, k_cache, v_cache, capacity * D, capacity * D, visible, t.attended, work, KV,
                           g * m, length + m, D, 1.0f / sqrtf((float)D));
    if (failed) return failed;
    for (long r = 0; r < m; r++) /* [heads][m][dim] back to [m][heads * dim] */
        for (long n = 0; n < NH; n++) memcpy(t.joined + r * width + n * D, t.attended + (n * m + r) * D,
                                                  D * sizeof(float));
    h->product(t.joined, h->o, t.y, m, H, width);
    for (long i = 0; i < m * H; i++) t.x[i] += t.y[i];

    for (long r = 0; r < m; r++) rms_norm(t.x + r * H, h->mlp_norm, t.y + r * H, H, h->eps);
    h->product(t.y, h->gate, t.gate, m, I, H);
    h->product(t.y, h->up, t.up, m, I, H);
    for (long i = 0; i < m * I; i++) t.gate[i] = t.gate[i] / (1.0f + expf(-t.gate[i])) * t.up[i];
    h->product(t.gate, h->down, t.y, m, H, I);
    for (long i = 0; i < m * H; i++) t.x[i] += t.y[i];

    for (long r = 0; r < m; r++) rms_norm(t.x + r * H, h->out_norm, out + r * H, H, h->eps);
    return 0;
}

/* The target's features of several layers, [m][layers * hidden]: each layer's part RMS-normed and scaled by its own
 * weights (norms: [layers * hidden]), then fused by one product (fuse: packed, hidden x layers * hidden) into
 * out [m][hidden]. scratch: m * layers * hidden floats. */
void specviz_head_lift(const head_t *h, const float *features, long m, long layers, const float *norms,
                       const void *fuse, float *out, float *scratch) {
    long H = h->hidden;
    for (long r = 0; r < m; r++)
        for (long l = 0; l < layers; l++)
            rms_norm(features + (r * layers + l) * H, norms + l * H, scratch + (r * layers + l) * H, H, h->eps);
    h->product(scratch, fuse, out, m, H, layers * H);
}
