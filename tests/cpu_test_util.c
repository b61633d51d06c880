/* cpu_test_util.c — see cpu_test_util.h. */
#include <check.h>
#include <dlfcn.h>
#include <stdio.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_test_util.h"

struct bp_device *cpu_device(void)
{
    struct bp_device *d = bp_device_by_name("cpu");
    ck_assert_msg(d != NULL, "no cpu device: %s", bp_last_error());
    return d;
}

void fx_init(struct fx *f)
{
    memset(f, 0, sizeof *f);
    ck_assert_int_eq(bp_context_new(64, &f->ctx), BP_OK);
    ck_assert_msg(bp_backend_init(cpu_device(), NULL, &f->be) == BP_OK, "backend: %s", bp_last_error());
}

void fx_alloc(struct fx *f)
{
    ck_assert_msg(bp_context_status(f->ctx) == BP_OK, "building the graph failed: %s", bp_last_error());
    ck_assert_msg(bp_context_alloc_tensors(f->ctx, bp_device_buffer_type(cpu_device()), NULL,
                                           &f->buf) == BP_OK, "alloc: %s", bp_last_error());
}

bp_status fx_compute(struct fx *f, struct bp_tensor *out)
{
    if (!f->g)
        ck_assert_int_eq(bp_graph_new(64, &f->g), BP_OK);
    ck_assert_msg(bp_graph_build(f->g, out) == BP_OK, "graph: %s", bp_last_error());
    return bp_backend_graph_compute(f->be, f->g);
}

void fx_free(struct fx *f)
{
    bp_graph_free(f->g);
    bp_backend_free(f->be);
    if (f->buf)
        bp_buffer_free(f->buf);
    bp_context_free(f->ctx);
    memset(f, 0, sizeof *f);
}

double rnd(unsigned *seed)
{
    *seed = *seed * 1103515245u + 12345u;
    return (double)((*seed >> 8) & 0xffffu) / 32768.0 - 1.0;
}

static void encode(enum bp_type t, double v, void *p)
{
    switch (t) {
    case BP_TYPE_F32: { float x = (float)v; memcpy(p, &x, 4); break; }
    case BP_TYPE_F16: { uint16_t h = bp_f32_to_f16((float)v); memcpy(p, &h, 2); break; }
    case BP_TYPE_BF16: { uint16_t h = bp_f32_to_bf16((float)v); memcpy(p, &h, 2); break; }
    case BP_TYPE_I32: { int32_t i = (int32_t)lrint(v); memcpy(p, &i, 4); break; }
    default: ck_abort_msg("type %s has no test encoding", bp_type_name(t));
    }
}

static double decode(enum bp_type t, const void *p)
{
    switch (t) {
    case BP_TYPE_F32: { float x; memcpy(&x, p, 4); return x; }
    case BP_TYPE_F16: { uint16_t h; memcpy(&h, p, 2); return bp_f16_to_f32(h); }
    case BP_TYPE_BF16: { uint16_t h; memcpy(&h, p, 2); return bp_bf16_to_f32(h); }
    case BP_TYPE_I32: { int32_t i; memcpy(&i, p, 4); return i; }
    default: ck_abort_msg("type %s has no test decoding", bp_type_name(t)); return 0;
    }
}

double round_to(enum bp_type t, double v)
{
    unsigned char b[4];
    encode(t, v, b);
    return decode(t, b);
}

void store_values(struct bp_tensor *t, double *vals)
{
    ck_assert(bp_is_contiguous(t));
    const int64_t n = bp_nelements(t);
    const size_t ts = bp_type_size((enum bp_type)t->type);
    unsigned char *bytes = malloc((size_t)n * ts + 1);
    for (int64_t i = 0; i < n; i++) {
        encode((enum bp_type)t->type, vals[i], bytes + (size_t)i * ts);
        vals[i] = decode((enum bp_type)t->type, bytes + (size_t)i * ts);
    }
    ck_assert_msg(bp_tensor_set(t, bytes, 0, (size_t)n * ts) == BP_OK, "set: %s", bp_last_error());
    free(bytes);
}

double *fill(struct bp_tensor *t, unsigned seed, double amp)
{
    const int64_t n = bp_nelements(t);
    double *v = malloc((size_t)n * sizeof *v + 1);
    for (int64_t i = 0; i < n; i++)
        v[i] = rnd(&seed) * amp;
    store_values(t, v);
    return v;
}

double *fetch(const struct bp_tensor *t)
{
    const size_t nbytes = bp_nbytes(t);
    unsigned char *bytes = malloc(nbytes + 1);
    ck_assert_msg(bp_tensor_get(t, bytes, 0, nbytes) == BP_OK, "get: %s", bp_last_error());
    double *v = malloc((size_t)bp_nelements(t) * sizeof *v + 1);
    int64_t k = 0;
    for (int64_t i3 = 0; i3 < t->ne[3]; i3++)
        for (int64_t i2 = 0; i2 < t->ne[2]; i2++)
            for (int64_t i1 = 0; i1 < t->ne[1]; i1++)
                for (int64_t i0 = 0; i0 < t->ne[0]; i0++)
                    v[k++] = decode((enum bp_type)t->type,
                                    bytes + i0 * t->nb[0] + i1 * t->nb[1] + i2 * t->nb[2] +
                                        i3 * t->nb[3]);
    free(bytes);
    return v;
}

void expect_close(const double *got, const double *want, int64_t n, double atol, double rtol,
                  const char *what)
{
    for (int64_t i = 0; i < n; i++) {
        double err = fabs(got[i] - want[i]);
        ck_assert_msg(err <= atol + rtol * fabs(want[i]) && !isnan(got[i]),
                      "%s: element %lld is %.9g, expected %.9g", what, (long long)i, got[i], want[i]);
    }
}

double type_atol(enum bp_type t)
{
    return t == BP_TYPE_F32 ? 1e-6 : t == BP_TYPE_F16 ? 1e-3 : 1e-2;
}

double type_rtol(enum bp_type t)
{
    return t == BP_TYPE_F32 ? 1e-6 : t == BP_TYPE_F16 ? 1e-3 : 8e-3;
}

int variant_file_score(const char *dir, const char *variant)
{
    char path[512];
    snprintf(path, sizeof path, "%s/libbackplane-cpu-%s.so", dir, variant);
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h) return -1;
    bp_plugin_score_fn score;
    void *p = dlsym(h, BP_PLUGIN_SCORE_SYMBOL);
    memcpy(&score, &p, sizeof p);
    int s = score ? score() : -2;
    dlclose(h);
    return s;
}
