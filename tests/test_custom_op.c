/*
 * test_custom_op.c — the vendor's route (ABI 1.1): BP_OP_CUSTOM built with
 * bp_custom and declined by every device that does not know its name; the
 * host helpers (host-memory buffer type, element accessor) as a plugin gets
 * them; and `backplane check` running a plugin's custom op against its
 * reference. The plugin is tests/custom_op_plugin/customop.c ("customop0",
 * op "test.axpby": alpha * x + beta * y, y repeating over x).
 */
#include <check.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <backplane/backplane.h>
#include <backplane/bp_meta.h>

#include "cli_util.h"
#include "suite_main.h"

static struct bp_device *device(const char *name)
{
    struct bp_device *d = bp_device_by_name(name);
    ck_assert_msg(d != NULL, "no device %s: %s", name, bp_last_error());
    return d;
}

static int32_t f32_word(float f)
{
    int32_t w;
    memcpy(&w, &f, sizeof w);
    return w;
}

/* An axpby node over fresh leaves x [8,3,2] f32 and y [8] f32. */
static struct bp_tensor *axpby_node(struct bp_context *ctx, const char *name, float alpha, float beta)
{
    struct bp_tensor *src[2] = {bp_tensor_new_4d(ctx, BP_TYPE_F32, 8, 3, 2, 1),
                                bp_tensor_new_4d(ctx, BP_TYPE_F32, 8, 1, 1, 1)};
    const int32_t params[2] = {f32_word(alpha), f32_word(beta)};
    return bp_custom(ctx, name, src, 2, params, 2, BP_TYPE_F32, 3, (const int64_t[]){8, 3, 2});
}

/* ---- bp_custom: the node's form ---- */

START_TEST(test_custom_node_carries_name_params_sources_and_shape)
{
    struct bp_context *ctx;
    ck_assert_int_eq(bp_context_new(16, &ctx), BP_OK);
    struct bp_tensor *t = axpby_node(ctx, "test.axpby", 0.5f, -2.0f);
    ck_assert_ptr_nonnull(t);
    ck_assert_int_eq(t->op, BP_OP_CUSTOM);
    ck_assert_str_eq(bp_op_name(BP_OP_CUSTOM), "CUSTOM");
    ck_assert_str_eq(bp_custom_op_name(t), "test.axpby");
    ck_assert(bp_custom_op_is(t, "test.axpby"));
    ck_assert(!bp_custom_op_is(t, "test.axpb"));
    /* The name field is zero-padded to its end. */
    const unsigned char *field = (const unsigned char *)t->op_params;
    for (size_t i = strlen("test.axpby"); i < BP_CUSTOM_NAME_MAX; i++) ck_assert_uint_eq(field[i], 0);
    ck_assert_float_eq(bp_custom_op_param_f32(t, 0), 0.5f);
    ck_assert_float_eq(bp_custom_op_param_f32(t, 1), -2.0f);
    for (int i = 2; i < BP_CUSTOM_MAX_PARAMS; i++) ck_assert_int_eq(bp_custom_op_param_i32(t, i), 0);
    ck_assert_int_eq(t->type, BP_TYPE_F32);
    ck_assert(bp_shape_is(t, 8, 3, 2, 1));
    ck_assert(bp_is_contiguous(t));
    ck_assert_ptr_nonnull(t->src[0]);
    ck_assert_ptr_nonnull(t->src[1]);
    ck_assert_ptr_null(t->src[2]);
    ck_assert(!bp_op_shapes_ok(t)); /* a custom op's rules are its vendor's */
    ck_assert_int_eq(bp_context_status(ctx), BP_OK);
    bp_context_free(ctx);
}
END_TEST

static const char *const bad_names[] = {
    "", "nodot", ".lead", ".lead.twice", "trail.", "a..", "Acme.thing", "acme.fused-thing", "acme thing.x",
    "acme.a_name_of_thirty_two_bytes_", /* 32 bytes: one more than fits with its NUL */
};

START_TEST(test_custom_refuses_a_malformed_name)
{
    const char *name = bad_names[_i];
    struct bp_context *ctx;
    ck_assert_int_eq(bp_context_new(16, &ctx), BP_OK);
    ck_assert_ptr_null(axpby_node(ctx, name, 1.0f, 1.0f));
    ck_assert_int_eq(bp_context_status(ctx), BP_ERR_INVALID_ARGUMENT);
    ck_assert_msg(strstr(bp_last_error(), "custom-op name") != NULL, "'%s': %s", name, bp_last_error());
    bp_context_free(ctx);
}
END_TEST

START_TEST(test_custom_accepts_the_longest_name_and_refuses_null)
{
    struct bp_context *ctx;
    ck_assert_int_eq(bp_context_new(16, &ctx), BP_OK);
    const char *longest = "acme.a_name_of_thirty_one_bytes"; /* 31 bytes + NUL = the field */
    ck_assert_uint_eq(strlen(longest), BP_CUSTOM_NAME_MAX - 1);
    struct bp_tensor *t = axpby_node(ctx, longest, 1.0f, 1.0f);
    ck_assert_ptr_nonnull(t);
    ck_assert_str_eq(bp_custom_op_name(t), longest);
    ck_assert_ptr_null(axpby_node(ctx, NULL, 1.0f, 1.0f));
    ck_assert_int_eq(bp_context_status(ctx), BP_ERR_INVALID_ARGUMENT);
    bp_context_free(ctx);
}
END_TEST

START_TEST(test_custom_refuses_bad_counts_and_arrays)
{
    struct bp_context *ctx;
    ck_assert_int_eq(bp_context_new(16, &ctx), BP_OK);
    struct bp_tensor *x = bp_tensor_new_1d(ctx, BP_TYPE_F32, 4);
    struct bp_tensor *five[5] = {x, x, x, x, x};
    const int32_t p[9] = {0};
    const int64_t ne[4] = {4, 1, 1, 1};
    struct {
        struct bp_tensor *const *srcs;
        int n_src;
        const int32_t *params;
        int n_params, n_dims;
        const int64_t *ne;
        const char *says;
    } bad[] = {
        {five, 5, NULL, 0, 1, ne, "sources"},
        {five, -1, NULL, 0, 1, ne, "sources"},
        {NULL, 1, NULL, 0, 1, ne, "srcs is NULL"},
        {five, 1, p, 9, 1, ne, "parameter words"},
        {five, 1, NULL, 2, 1, ne, "params is NULL"},
        {five, 1, NULL, 0, 0, ne, "dimensions"},
        {five, 1, NULL, 0, 5, ne, "dimensions"},
        {five, 1, NULL, 0, 1, NULL, "ne is NULL"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        struct bp_context *c2;
        ck_assert_int_eq(bp_context_new(4, &c2), BP_OK);
        ck_assert_ptr_null(bp_custom(c2, "acme.op", bad[i].srcs, bad[i].n_src, bad[i].params,
                                     bad[i].n_params, BP_TYPE_F32, bad[i].n_dims, bad[i].ne));
        ck_assert_int_eq(bp_context_status(c2), BP_ERR_INVALID_ARGUMENT);
        ck_assert_msg(strstr(bp_last_error(), bad[i].says) != NULL, "case %zu: %s", i, bp_last_error());
        bp_context_free(c2);
    }
    /* A NULL source is an earlier constructor's failure: NULL, no new error. */
    struct bp_tensor *holes[2] = {x, NULL};
    ck_assert_ptr_null(bp_custom(ctx, "acme.op", holes, 2, NULL, 0, BP_TYPE_F32, 1, ne));
    ck_assert_int_eq(bp_context_status(ctx), BP_OK);
    /* Zero sources and zero parameters are a valid form. */
    ck_assert_ptr_nonnull(bp_custom(ctx, "acme.op", NULL, 0, NULL, 0, BP_TYPE_F32, 1, ne));
    bp_context_free(ctx);
}
END_TEST

/* ---- who computes a custom op ---- */

START_TEST(test_only_the_device_that_knows_the_name_supports_it)
{
    struct bp_context *ctx;
    ck_assert_int_eq(bp_context_new(16, &ctx), BP_OK);
    struct bp_tensor *known = axpby_node(ctx, "test.axpby", 1.0f, 2.0f);
    struct bp_tensor *unknown = axpby_node(ctx, "test.other", 1.0f, 2.0f);
    ck_assert_ptr_nonnull(known);
    ck_assert_ptr_nonnull(unknown);
    ck_assert(bp_device_supports_op(device("customop0"), known));
    ck_assert(!bp_device_supports_op(device("customop0"), unknown));
    /* Shipped plugins know no custom op: every device but customop0 declines
     * (cpu here; vulkan0 and cudaN too when the suite runs with every plugin). */
    ck_assert(!bp_device_supports_op(device("cpu"), known));
    for (size_t i = 0; i < bp_device_count(); i++) {
        struct bp_device *d = bp_device_get(i);
        const bool is_customop = !strcmp(bp_device_name(d), "customop0");
        ck_assert_msg(bp_device_supports_op(d, known) == is_customop, "%s", bp_device_name(d));
        ck_assert_msg(!bp_device_supports_op(d, unknown), "%s", bp_device_name(d));
    }
    /* Meta declines them even when its only sub-device knows the name (it
     * has no rule to split one). */
    struct bp_device *sub[2] = {device("customop0"), device("customop0")}, *meta = NULL;
    ck_assert_msg(bp_meta_device_new(sub, 2, NULL, NULL, NULL, &meta) == BP_OK, "%s", bp_last_error());
    ck_assert(!bp_device_supports_op(meta, known));
    /* A node whose name field has no NUL is nobody's. */
    memset(known->op_params, 'a', BP_CUSTOM_NAME_MAX);
    ck_assert_ptr_null(bp_custom_op_name(known));
    ck_assert(!bp_device_supports_op(device("customop0"), known));
    bp_context_free(ctx);
}
END_TEST

/* Computes a graph ending in out on dev; inputs set by the caller after alloc. */
struct run_setup {
    struct bp_context *ctx;
    struct bp_buffer *buf;
    struct bp_graph *g;
};

static void alloc_on(struct run_setup *r, struct bp_device *dev, struct bp_tensor *out)
{
    ck_assert_int_eq(bp_context_alloc_tensors(r->ctx, bp_device_buffer_type(dev), NULL, &r->buf), BP_OK);
    ck_assert_int_eq(bp_graph_new(16, &r->g), BP_OK);
    ck_assert_int_eq(bp_graph_build(r->g, out), BP_OK);
}

static void compute_on(struct run_setup *r, struct bp_device *dev)
{
    struct bp_backend *be;
    ck_assert_int_eq(bp_backend_init(dev, NULL, &be), BP_OK);
    ck_assert_msg(bp_backend_graph_compute(be, r->g) == BP_OK, "%s", bp_last_error());
    ck_assert_int_eq(bp_backend_synchronize(be), BP_OK);
    bp_backend_free(be);
}

static void release(struct run_setup *r)
{
    bp_graph_free(r->g);
    bp_buffer_free(r->buf);
    bp_context_free(r->ctx);
}

START_TEST(test_customop_device_computes_axpby_on_strided_f16_and_broadcast_f32)
{
    struct bp_device *dev = device("customop0");
    struct run_setup r = {0};
    ck_assert_int_eq(bp_context_new(16, &r.ctx), BP_OK);
    /* x: the transpose of an f16 [3,5] leaf, so [5,3] with nb[0] = 6 bytes;
     * y: f32 [5,1], repeating over x's rows. */
    struct bp_tensor *xl = bp_tensor_new_2d(r.ctx, BP_TYPE_F16, 3, 5);
    struct bp_tensor *x = bp_transpose(r.ctx, xl);
    struct bp_tensor *y = bp_tensor_new_2d(r.ctx, BP_TYPE_F32, 5, 1);
    struct bp_tensor *src[2] = {x, y};
    const float alpha = 1.5f, beta = -0.25f;
    const int32_t params[2] = {f32_word(alpha), f32_word(beta)};
    struct bp_tensor *out = bp_custom(r.ctx, "test.axpby", src, 2, params, 2, BP_TYPE_F32, 2,
                                      (const int64_t[]){5, 3});
    ck_assert_ptr_nonnull(out);
    ck_assert(!bp_is_contiguous(x));
    alloc_on(&r, dev, out);
    uint16_t xh[15];
    float xv[15], yv[5];
    for (int i = 0; i < 15; i++) {
        xh[i] = bp_f32_to_f16((float)(i - 7) * 0.125f); /* exact in f16 */
        xv[i] = bp_f16_to_f32(xh[i]);
    }
    for (int i = 0; i < 5; i++) yv[i] = (float)i * 0.5f - 1.0f;
    ck_assert_int_eq(bp_tensor_set(xl, xh, 0, sizeof xh), BP_OK);
    ck_assert_int_eq(bp_tensor_set(y, yv, 0, sizeof yv), BP_OK);
    compute_on(&r, dev);
    float got[15];
    ck_assert_int_eq(bp_tensor_get(out, got, 0, sizeof got), BP_OK);
    /* out[i0, i1] = alpha * xl[i1, i0] + beta * y[i0], computed here. */
    for (int i1 = 0; i1 < 3; i1++)
        for (int i0 = 0; i0 < 5; i0++) {
            const float want = alpha * xv[i0 * 3 + i1] + beta * yv[i0];
            ck_assert_msg(fabsf(got[i1 * 5 + i0] - want) <= 1e-6f, "out[%d,%d] = %g, want %g", i0, i1,
                          (double)got[i1 * 5 + i0], (double)want);
        }
    release(&r);
}
END_TEST

/* ---- the host helpers, as the plugin got them ---- */

static const struct bp_host_helpers *helpers(void)
{
    const struct bp_host_helpers *h = bp_device_proc_address(device("customop0"), "customop_host_helpers");
    ck_assert_ptr_nonnull(h);
    ck_assert_ptr_nonnull(h->buffer_type_init);
    ck_assert_ptr_nonnull(h->get);
    ck_assert_ptr_nonnull(h->set);
    return h;
}

START_TEST(test_host_buffer_type_is_aligned_host_memory_bound_to_the_device)
{
    struct bp_device *dev = device("customop0");
    struct bp_buffer_type *bt = bp_device_buffer_type(dev);
    ck_assert_ptr_nonnull(bt);
    ck_assert_ptr_eq(bt->device, dev);
    ck_assert_str_eq(bt->iface->get_name(bt), "host-memory");
    ck_assert_uint_eq(bt->iface->get_alignment(bt), BP_HOST_BUFFER_ALIGNMENT);
    ck_assert(bt->iface->is_host(bt));

    struct bp_context *ctx;
    struct bp_buffer *buf;
    ck_assert_int_eq(bp_context_new(8, &ctx), BP_OK);
    struct bp_tensor *a = bp_tensor_new_1d(ctx, BP_TYPE_F32, 5);
    struct bp_tensor *b = bp_tensor_new_1d(ctx, BP_TYPE_F32, 5);
    ck_assert_int_eq(bp_context_alloc_tensors(ctx, bt, NULL, &buf), BP_OK);
    ck_assert_uint_eq((uintptr_t)buf->iface->get_base(buf) % BP_HOST_BUFFER_ALIGNMENT, 0);
    ck_assert_uint_eq((uintptr_t)b->data % BP_HOST_BUFFER_ALIGNMENT, 0);

    ck_assert_int_eq(bp_buffer_clear(buf, 0x7f), BP_OK);
    unsigned char raw[4];
    ck_assert_int_eq(bp_buffer_read(buf, 0, raw, sizeof raw), BP_OK);
    for (int i = 0; i < 4; i++) ck_assert_uint_eq(raw[i], 0x7f);

    const float v[5] = {1, -2, 3.5f, 4, -5.25f};
    float back[5];
    ck_assert_int_eq(bp_tensor_set(a, v, 0, sizeof v), BP_OK);
    ck_assert_int_eq(bp_tensor_get(a, back, 0, sizeof back), BP_OK);
    ck_assert_mem_eq(back, v, sizeof v);
    /* A range past the tensor's bytes is refused by the buffer itself. */
    ck_assert_int_eq(buf->iface->set_tensor(buf, a, v, 4, sizeof v), BP_ERR_INVALID_ARGUMENT);
    /* copy_tensor: from host memory directly; from a non-host source declined. */
    ck_assert_int_eq(buf->iface->copy_tensor(buf, a, b), BP_OK);
    ck_assert_int_eq(bp_tensor_get(b, back, 0, sizeof back), BP_OK);
    ck_assert_mem_eq(back, v, sizeof v);
    struct bp_tensor orphan = *a;
    orphan.buffer = NULL;
    ck_assert_int_eq(buf->iface->copy_tensor(buf, &orphan, b), BP_ERR_UNSUPPORTED);
    bp_buffer_free(buf);
    bp_context_free(ctx);

    /* A zero-byte buffer is a real, freeable buffer. */
    ck_assert_int_eq(bp_buffer_alloc(bt, 0, &buf), BP_OK);
    ck_assert_ptr_nonnull(buf->iface->get_base(buf));
    bp_buffer_free(buf);

    const struct bp_host_helpers *h = helpers();
    struct bp_buffer_type mine;
    ck_assert_int_eq(h->buffer_type_init(&mine, NULL), BP_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(h->buffer_type_init(NULL, dev), BP_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(h->buffer_type_init(&mine, dev), BP_OK);
    ck_assert_ptr_eq(mine.device, dev);
    ck_assert_ptr_eq(mine.iface, bt->iface);
}
END_TEST

/* A tensor over caller memory: type, shape, contiguous strides. */
static struct bp_tensor over(void *mem, enum bp_type type, int64_t n0, int64_t n1)
{
    struct bp_tensor t;
    memset(&t, 0, sizeof t);
    t.type = type;
    t.ne[0] = n0, t.ne[1] = n1, t.ne[2] = 1, t.ne[3] = 1;
    t.nb[0] = bp_type_size(type);
    t.nb[1] = t.nb[0] * (size_t)n0;
    t.nb[2] = t.nb[3] = t.nb[1] * (size_t)n1;
    t.data = mem;
    return t;
}

START_TEST(test_element_accessor_reads_and_writes_through_strides_and_types)
{
    const struct bp_host_helpers *h = helpers();
    /* F32 [3,2] read as its transpose [2,3] through swapped strides. */
    float m[6] = {0, 1, 2, 10, 11, 12};
    struct bp_tensor t = over(m, BP_TYPE_F32, 3, 2);
    struct bp_tensor tt = t;
    tt.ne[0] = 2, tt.ne[1] = 3, tt.nb[0] = t.nb[1], tt.nb[1] = t.nb[0];
    ck_assert_float_eq(h->get(&tt, 1, 2, 0, 0), 12.0f);
    ck_assert_float_eq(h->get(&tt, 0, 1, 0, 0), 1.0f);
    /* Indices wrap modulo ne, negative ones too: the ADD/MUL broadcast. */
    ck_assert_float_eq(h->get(&t, 4, 0, 0, 0), 1.0f);
    ck_assert_float_eq(h->get(&t, -1, -1, 0, 0), 12.0f);
    ck_assert_float_eq(h->get(&t, 0, 1, 7, -3), 10.0f);
    h->set(&t, 5, 3, 0, 0, -4.0f); /* (2, 1) */
    ck_assert_float_eq(m[5], -4.0f);

    /* F16 and BF16: exact values read back; writes round to nearest even. */
    uint16_t hf[2] = {bp_f32_to_f16(0.75f), 0};
    struct bp_tensor th = over(hf, BP_TYPE_F16, 2, 1);
    ck_assert_float_eq(h->get(&th, 0, 0, 0, 0), 0.75f);
    h->set(&th, 1, 0, 0, 0, 1.0f + 0x1p-11f); /* halfway between 1 and 1 + 2^-10: to 1 */
    ck_assert_uint_eq(hf[1], 0x3c00);
    h->set(&th, 1, 0, 0, 0, 1.0f + 3 * 0x1p-11f); /* halfway to the even 1 + 2^-9 */
    ck_assert_uint_eq(hf[1], 0x3c02);
    uint16_t bf[1] = {0};
    struct bp_tensor tb = over(bf, BP_TYPE_BF16, 1, 1);
    h->set(&tb, 0, 0, 0, 0, 1.0f + 0x1p-8f); /* halfway between 1 and 1 + 2^-7: to 1 */
    ck_assert_uint_eq(bf[0], 0x3f80);
    h->set(&tb, 0, 0, 0, 0, -2.5f);
    ck_assert_float_eq(h->get(&tb, 0, 0, 0, 0), -2.5f);

    /* Other types and empty dimensions: NaN read, nothing written. */
    int32_t iv[2] = {7, 8};
    struct bp_tensor ti = over(iv, BP_TYPE_I32, 2, 1);
    ck_assert(isnan(h->get(&ti, 0, 0, 0, 0)));
    h->set(&ti, 0, 0, 0, 0, 1.0f);
    ck_assert_int_eq(iv[0], 7);
    struct bp_tensor empty = t;
    empty.ne[1] = 0;
    ck_assert(isnan(h->get(&empty, 0, 0, 0, 0)));
    h->set(&empty, 0, 0, 0, 0, 99.0f);
    ck_assert_float_eq(m[0], 0.0f);
    ck_assert(isnan(h->get(NULL, 0, 0, 0, 0)));
}
END_TEST

/* ---- backplane check ---- */

struct check_run {
    int rc;
    char out[1 << 16];
};

static void run_check(struct check_run *r, const char *env, const char *args)
{
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "%s '%s' check %s", env, CLI, args);
    r->rc = cli_run(cmd, CLI_OUT_AND_ERR, r->out, sizeof r->out);
}

START_TEST(test_check_runs_the_custom_op_against_the_plugins_reference)
{
    static struct check_run r;
    run_check(&r, "", "--device customop0");
    ck_assert_msg(r.rc == 0, "check exited %d:\n%s", r.rc, r.out);
    ck_assert_msg(cli_count_lines(r.out, "PASS", "test.axpby") == 2, "%s", r.out);
    ck_assert_msg(cli_count_lines(r.out, "FAIL", "") == 0, "%s", r.out);
    ck_assert_msg(cli_count_lines(r.out, "UNSUP", "MUL_MAT") > 0, "%s", r.out);
    ck_assert_msg(strstr(r.out, "\ncustomop0: 2 passed, 0 failed, ") != NULL, "%s", r.out);

    run_check(&r, "", "--device customop0 --op CUSTOM");
    ck_assert_msg(r.rc == 0, "%s", r.out);
    ck_assert_msg(strstr(r.out, "\ncustomop0: 2 passed, 0 failed, 0 unsupported") != NULL, "%s", r.out);

    /* The cpu device knows no custom op and publishes none: nothing to run. */
    run_check(&r, "", "--device cpu --op CUSTOM");
    ck_assert_msg(r.rc == 0 && strstr(r.out, "\ncpu: 0 passed, 0 failed, 0 unsupported"), "%s", r.out);
}
END_TEST

START_TEST(test_check_fails_a_custom_op_that_disagrees_with_its_reference)
{
    static struct check_run r;
    run_check(&r, "CUSTOMOP_TEST_BREAK=1", "--device customop0 --op CUSTOM");
    ck_assert_msg(r.rc == 1, "check exited %d:\n%s", r.rc, r.out);
    ck_assert_msg(cli_count_lines(r.out, "FAIL", "test.axpby") == 2, "%s", r.out);
    ck_assert_msg(strstr(r.out, "nmse") != NULL, "%s", r.out);
}
END_TEST

START_TEST(test_check_skips_or_reports_each_broken_custom_op_description_and_goes_on)
{
    static struct check_run r;
    run_check(&r, "CUSTOMOP_TEST_BAD_LIST=1", "--device customop0 --op CUSTOM --verbose");
    /* One failing case (the reference that errors) makes exit 1; a crash
     * or an abort would not be an exit at all. */
    ck_assert_msg(r.rc == 1, "check exited %d:\n%s", r.rc, r.out);
    ck_assert_msg(cli_count_lines(r.out, "PASS", "test.axpby ") == 2, "%s", r.out);
    /* NULL entry, a description too short for this ABI, an invalid name. */
    ck_assert_msg(strstr(r.out, "custom op 1 of device customop0 is NULL; it is skipped") != NULL, "%s", r.out);
    ck_assert_msg(strstr(r.out, "custom op 2 of device customop0 has a size too small") != NULL, "%s", r.out);
    ck_assert_msg(strstr(r.out, "custom op 3 of device customop0 has no \"<vendor>.<op>\" name") != NULL,
                  "%s", r.out);
    /* Each unusable input set, by what is wrong with it. */
    ck_assert_msg(cli_count_lines(r.out, "backplane: check: case", "test.axpby_badcases on customop0 is skipped") == 4,
                  "%s", r.out);
    ck_assert_msg(strstr(r.out, "n_src is outside 0..4") && strstr(r.out, "not f32, f16 or bf16") &&
                  strstr(r.out, "n_params is outside 0..8") && strstr(r.out, "max_nmse is not"), "%s", r.out);
    ck_assert_msg(cli_count_lines(r.out, "UNSUP", "test.axpby_noref") == 1, "%s", r.out);
    ck_assert_msg(strstr(r.out, "reference test.axpby_noref: its plugin gives no reference function"),
                  "%s", r.out);
    ck_assert_msg(cli_count_lines(r.out, "FAIL", "test.axpby_refails") == 1, "%s", r.out);
    ck_assert_msg(strstr(r.out, "returned BP_ERR_INTERNAL") != NULL, "%s", r.out);
    ck_assert_msg(strstr(r.out, "custom op 7 of device customop0 counts cases but its cases array is NULL"),
                  "%s", r.out);
    ck_assert_msg(strstr(r.out, "\ncustomop0: 2 passed, 1 failed, 1 unsupported") != NULL, "%s", r.out);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("custom_op");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_custom_node_carries_name_params_sources_and_shape);
    tcase_add_loop_test(tc, test_custom_refuses_a_malformed_name, 0, sizeof bad_names / sizeof bad_names[0]);
    tcase_add_test(tc, test_custom_accepts_the_longest_name_and_refuses_null);
    tcase_add_test(tc, test_custom_refuses_bad_counts_and_arrays);
    tcase_add_test(tc, test_only_the_device_that_knows_the_name_supports_it);
    tcase_add_test(tc, test_customop_device_computes_axpby_on_strided_f16_and_broadcast_f32);
    tcase_add_test(tc, test_host_buffer_type_is_aligned_host_memory_bound_to_the_device);
    tcase_add_test(tc, test_element_accessor_reads_and_writes_through_strides_and_types);
    tcase_add_test(tc, test_check_runs_the_custom_op_against_the_plugins_reference);
    tcase_add_test(tc, test_check_fails_a_custom_op_that_disagrees_with_its_reference);
    tcase_add_test(tc, test_check_skips_or_reports_each_broken_custom_op_description_and_goes_on);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    const int rc = run_suite(suite());
    bp_unload();
    return rc;
}
