/* test_alloc.c — placing tensors in buffers (offsets, alignment, guards,
 * views), reading and writing tensor and buffer bytes, the backend
 * wrappers' checks before a plugin computes, and bp_format_bytes. A small
 * host-memory buffer type and a fake device are defined here: no plugin. */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include <backplane/backplane.h>

#include "suite_main.h"

/* ------------------------------------------------ a host-memory buffer type */

struct test_buft_ctx {
    size_t align;
    size_t pad;            /* get_alloc_size adds this (0: no get_alloc_size) */
    size_t max_size;       /* 0: unlimited */
    int fail_alloc;
    int fail_init_after;   /* init_tensor fails after this many calls (-1: never) */
    int n_init;
    int n_alloc;
    int n_free;
};

static struct test_buft_ctx bctx;

static void buf_free(struct bp_buffer *buf)
{
    bctx.n_free++;
    free(buf->context);
    free(buf);
}
static void *buf_base(struct bp_buffer *buf) { return buf->context; }
static bp_status buf_init(struct bp_buffer *buf, struct bp_tensor *t)
{
    (void)buf;
    if (bctx.fail_init_after >= 0 && bctx.n_init >= bctx.fail_init_after) return BP_ERR_OUT_OF_MEMORY;
    bctx.n_init++;
    t->extra = &bctx; /* what a plugin would do with its private slot */
    return BP_OK;
}
static bp_status buf_set(struct bp_buffer *buf, struct bp_tensor *t, const void *src, size_t off, size_t n)
{
    (void)buf;
    memcpy((char *)t->data + off, src, n);
    return BP_OK;
}
static bp_status buf_get(struct bp_buffer *buf, const struct bp_tensor *t, void *dst, size_t off, size_t n)
{
    (void)buf;
    memcpy(dst, (const char *)t->data + off, n);
    return BP_OK;
}
static bp_status buf_clear(struct bp_buffer *buf, uint8_t v)
{
    memset(buf->context, v, buf->size);
    return BP_OK;
}

static const struct bp_buffer_iface buf_iface = {
    .size = sizeof(struct bp_buffer_iface),
    .free_buffer = buf_free,
    .get_base = buf_base,
    .init_tensor = buf_init,
    .set_tensor = buf_set,
    .get_tensor = buf_get,
    .clear = buf_clear,
};

static const char *buft_name(struct bp_buffer_type *b) { (void)b; return "testhost"; }
static bp_status buft_alloc(struct bp_buffer_type *bt, size_t size, struct bp_buffer **out)
{
    if (bctx.fail_alloc) return BP_ERR_OUT_OF_MEMORY;
    struct bp_buffer *buf = calloc(1, sizeof *buf);
    buf->iface = &buf_iface;
    buf->buft = bt;
    buf->size = size;
    buf->context = calloc(1, size ? size : 1);
    bctx.n_alloc++;
    *out = buf;
    return BP_OK;
}
static size_t buft_align(struct bp_buffer_type *b) { (void)b; return bctx.align; }
static size_t buft_max(struct bp_buffer_type *b) { (void)b; return bctx.max_size ? bctx.max_size : SIZE_MAX; }
static size_t buft_alloc_size(struct bp_buffer_type *b, const struct bp_tensor *t)
{
    (void)b;
    return bp_nbytes(t) + bctx.pad;
}
static bool buft_is_host(struct bp_buffer_type *b) { (void)b; return true; }

/* Without get_alloc_size: the table ends before it (an older plugin). */
static const struct bp_buffer_type_iface buft_iface = {
    .size = offsetof(struct bp_buffer_type_iface, get_alloc_size),
    .get_name = buft_name,
    .alloc_buffer = buft_alloc,
    .get_alignment = buft_align,
    .get_max_size = buft_max,
    .get_alloc_size = buft_alloc_size, /* beyond .size: must not be called */
};
static const struct bp_buffer_type_iface buft_iface_padded = {
    .size = sizeof(struct bp_buffer_type_iface),
    .get_name = buft_name,
    .alloc_buffer = buft_alloc,
    .get_alignment = buft_align,
    .get_max_size = buft_max,
    .get_alloc_size = buft_alloc_size,
    .is_host = buft_is_host,
};

static struct bp_buffer_type buft = {.iface = &buft_iface};
static struct bp_buffer_type buft_padded = {.iface = &buft_iface_padded};

static struct bp_context *ctx;
static int n_computes, n_threads_set, last_threads;
static bool accept_buft = true, offer_threads = true;

static void setup(void)
{
    /* also when CK_FORK=no runs every test in one process (valgrind) */
    n_computes = n_threads_set = last_threads = 0;
    accept_buft = offer_threads = true;
    memset(&bctx, 0, sizeof bctx);
    bctx.align = 64;
    bctx.fail_init_after = -1;
    ck_assert_int_eq(bp_context_new(64, &ctx), BP_OK);
}

static void teardown(void)
{
    bp_context_free(ctx);
}

static size_t offset_of(const struct bp_tensor *t, const struct bp_buffer *buf)
{
    return (size_t)((const char *)t->data - (const char *)buf->context);
}

/* ------------------------------------------------------------- placement */

START_TEST(test_alloc_places_tensors_at_aligned_offsets)
{
    struct bp_tensor *a = bp_tensor_new_1d(ctx, BP_TYPE_F32, 3);   /* 12 bytes */
    struct bp_tensor *b = bp_tensor_new_1d(ctx, BP_TYPE_F16, 5);   /* 10 bytes */
    struct bp_tensor *z = bp_tensor_new_1d(ctx, BP_TYPE_I32, 0);   /* 0 bytes */
    struct bp_tensor *d = bp_tensor_new_2d(ctx, BP_TYPE_F32, 20, 4); /* 320 bytes */
    /* 0 | 64 | 128 (empty) | 128..448 -> 448 */
    ck_assert_uint_eq(bp_context_alloc_size(ctx, &buft, NULL), 448);
    struct bp_buffer *buf;
    ck_assert_int_eq(bp_context_alloc_tensors(ctx, &buft, NULL, &buf), BP_OK);
    ck_assert_ptr_nonnull(buf);
    ck_assert_uint_eq(bp_buffer_size(buf), 448);
    ck_assert_uint_eq(offset_of(a, buf), 0);
    ck_assert_uint_eq(offset_of(b, buf), 64);
    ck_assert_uint_eq(offset_of(z, buf), 128);
    ck_assert_uint_eq(offset_of(d, buf), 128);
    ck_assert_ptr_eq(a->buffer, buf);
    ck_assert_ptr_eq(d->buffer, buf);
    ck_assert_int_eq(bctx.n_init, 4);
    ck_assert_ptr_eq(a->extra, &bctx);
    bp_buffer_free(buf);
    ck_assert_int_eq(bctx.n_free, 1);
}
END_TEST

START_TEST(test_alloc_puts_rounded_guards_around_every_tensor)
{
    struct bp_tensor *a = bp_tensor_new_1d(ctx, BP_TYPE_F32, 3);
    struct bp_tensor *b = bp_tensor_new_1d(ctx, BP_TYPE_F16, 5);
    struct bp_tensor *d = bp_tensor_new_2d(ctx, BP_TYPE_F32, 20, 4);
    struct bp_alloc_options opts = {.guard_bytes = 10}; /* rounds to 64 */
    /* a: 64..128, +64 guard -> 192; b: 256..320 -> 384; d: 448..768 -> 832 */
    ck_assert_uint_eq(bp_context_alloc_size(ctx, &buft, &opts), 832);
    struct bp_buffer *buf;
    ck_assert_int_eq(bp_context_alloc_tensors(ctx, &buft, &opts, &buf), BP_OK);
    ck_assert_uint_eq(offset_of(a, buf), 64);
    ck_assert_uint_eq(offset_of(b, buf), 256);
    ck_assert_uint_eq(offset_of(d, buf), 448);
    ck_assert_uint_eq(bp_buffer_size(buf), 832);
    bp_buffer_free(buf);
}
END_TEST

START_TEST(test_alloc_uses_get_alloc_size_only_when_the_table_has_it)
{
    bctx.pad = 100;
    struct bp_tensor *a = bp_tensor_new_1d(ctx, BP_TYPE_F32, 3); /* 12 (+100 = 112 -> 128) */
    struct bp_tensor *b = bp_tensor_new_1d(ctx, BP_TYPE_F32, 3);
    ck_assert_uint_eq(bp_context_alloc_size(ctx, &buft, NULL), 128);
    ck_assert_uint_eq(bp_context_alloc_size(ctx, &buft_padded, NULL), 256);
    struct bp_buffer *buf;
    ck_assert_int_eq(bp_context_alloc_tensors(ctx, &buft_padded, NULL, &buf), BP_OK);
    ck_assert_uint_eq(offset_of(a, buf), 0);
    ck_assert_uint_eq(offset_of(b, buf), 128);
    bp_buffer_free(buf);
}
END_TEST

START_TEST(test_alloc_resolves_views_and_later_views)
{
    struct bp_tensor *a = bp_tensor_new_2d(ctx, BP_TYPE_F32, 4, 4);
    struct bp_tensor *v = bp_view(ctx, a, 1, (int64_t[]){4}, NULL, 16);
    struct bp_tensor *c = bp_cpy(ctx, bp_tensor_new_1d(ctx, BP_TYPE_F16, 4), v);
    ck_assert_ptr_null(v->data);
    struct bp_buffer *buf;
    ck_assert_int_eq(bp_context_alloc_tensors(ctx, &buft, NULL, &buf), BP_OK);
    /* a at 0, the f16 source at 64; views take no room */
    ck_assert_uint_eq(bp_buffer_size(buf), 128);
    ck_assert_ptr_eq(v->data, (char *)a->data + 16);
    ck_assert_ptr_eq(v->buffer, buf);
    ck_assert_ptr_eq(c->data, (char *)a->data + 16);
    ck_assert_int_eq(bctx.n_init, 4); /* two tensors, two views */
    /* a view made after allocation has memory at once */
    struct bp_tensor *t = bp_transpose(ctx, a);
    ck_assert_ptr_eq(t->data, a->data);
    ck_assert_ptr_eq(t->buffer, buf);
    ck_assert_int_eq(bctx.n_init, 5);
    bp_buffer_free(buf);
}
END_TEST

START_TEST(test_second_alloc_places_only_new_tensors)
{
    struct bp_tensor *a = bp_tensor_new_1d(ctx, BP_TYPE_F32, 8);
    struct bp_buffer *b1, *b2, *b3;
    ck_assert_int_eq(bp_context_alloc_tensors(ctx, &buft, NULL, &b1), BP_OK);
    void *a_data = a->data;
    struct bp_tensor *n = bp_tensor_new_1d(ctx, BP_TYPE_F32, 2);
    ck_assert_uint_eq(bp_context_alloc_size(ctx, &buft, NULL), 64);
    ck_assert_int_eq(bp_context_alloc_tensors(ctx, &buft, NULL, &b2), BP_OK);
    ck_assert_ptr_eq(a->data, a_data);
    ck_assert_ptr_eq(a->buffer, b1);
    ck_assert_ptr_eq(n->buffer, b2);
    ck_assert_uint_eq(offset_of(n, b2), 0);
    /* nothing left to place: OK and no buffer */
    ck_assert_uint_eq(bp_context_alloc_size(ctx, &buft, NULL), 0);
    ck_assert_int_eq(bp_context_alloc_tensors(ctx, &buft, NULL, &b3), BP_OK);
    ck_assert_ptr_null(b3);
    ck_assert_int_eq(bctx.n_alloc, 2);
    bp_buffer_free(b1);
    bp_buffer_free(b2);
}
END_TEST

START_TEST(test_empty_context_allocates_nothing)
{
    struct bp_buffer *buf = (struct bp_buffer *)&bctx;
    ck_assert_int_eq(bp_context_alloc_tensors(ctx, &buft, NULL, &buf), BP_OK);
    ck_assert_ptr_null(buf);
    ck_assert_int_eq(bctx.n_alloc, 0);
}
END_TEST

START_TEST(test_failed_init_leaves_tensors_untouched)
{
    struct bp_tensor *a = bp_tensor_new_1d(ctx, BP_TYPE_F32, 8);
    struct bp_tensor *b = bp_tensor_new_1d(ctx, BP_TYPE_F32, 8);
    bp_tensor_set_name(b, "second");
    bctx.fail_init_after = 1;
    struct bp_buffer *buf = NULL;
    ck_assert_int_eq(bp_context_alloc_tensors(ctx, &buft, NULL, &buf), BP_ERR_OUT_OF_MEMORY);
    ck_assert_ptr_null(buf);
    ck_assert_ptr_nonnull(strstr(bp_last_error(), "'second'"));
    ck_assert_ptr_nonnull(strstr(bp_last_error(), "testhost"));
    ck_assert_ptr_null(a->data);
    ck_assert_ptr_null(a->buffer);
    ck_assert_ptr_null(a->extra);
    ck_assert_ptr_null(b->data);
    ck_assert_int_eq(bctx.n_free, bctx.n_alloc);
}
END_TEST

START_TEST(test_alloc_reports_buffer_type_failures)
{
    bp_tensor_new_1d(ctx, BP_TYPE_F32, 1000);
    struct bp_buffer *buf;
    bctx.fail_alloc = 1;
    ck_assert_int_eq(bp_context_alloc_tensors(ctx, &buft, NULL, &buf), BP_ERR_OUT_OF_MEMORY);
    ck_assert_ptr_nonnull(strstr(bp_last_error(), "testhost"));
    ck_assert_ptr_nonnull(strstr(bp_last_error(), "3.9 KiB"));
    bctx.fail_alloc = 0;
    bctx.max_size = 1024;
    ck_assert_int_eq(bp_context_alloc_tensors(ctx, &buft, NULL, &buf), BP_ERR_OUT_OF_MEMORY);
    ck_assert_ptr_nonnull(strstr(bp_last_error(), "at most 1 KiB"));
    bctx.max_size = 0;
    bctx.align = 48;
    ck_assert_int_eq(bp_context_alloc_tensors(ctx, &buft, NULL, &buf), BP_ERR_PLUGIN);
    ck_assert_ptr_nonnull(strstr(bp_last_error(), "48"));
    ck_assert_uint_eq(bp_context_alloc_size(ctx, &buft, NULL), 0);
    ck_assert_int_eq(bp_context_alloc_tensors(ctx, NULL, NULL, &buf), BP_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(bctx.n_alloc, 0);
}
END_TEST

/* ------------------------------------------------------------ tensor bytes */

START_TEST(test_set_get_round_trip_and_ranges)
{
    struct bp_tensor *a = bp_tensor_new_1d(ctx, BP_TYPE_F32, 8);
    bp_tensor_set_name(a, "w");
    float in[8] = {1, 2, 3, 4, 5, 6, 7, 8}, out[8] = {0};
    ck_assert_int_eq(bp_tensor_set(a, in, 0, sizeof in), BP_ERR_INVALID_ARGUMENT);
    ck_assert_ptr_nonnull(strstr(bp_last_error(), "'w'"));
    ck_assert_ptr_nonnull(strstr(bp_last_error(), "no memory"));
    struct bp_buffer *buf;
    ck_assert_int_eq(bp_context_alloc_tensors(ctx, &buft, NULL, &buf), BP_OK);
    ck_assert_int_eq(bp_tensor_set(a, in, 0, sizeof in), BP_OK);
    ck_assert_int_eq(bp_tensor_get(a, out, 0, sizeof out), BP_OK);
    ck_assert_mem_eq(in, out, sizeof in);
    /* a byte range in the middle */
    float two[2] = {-1, -2};
    ck_assert_int_eq(bp_tensor_set(a, two, 8, sizeof two), BP_OK);
    ck_assert_int_eq(bp_tensor_get(a, out, 0, sizeof out), BP_OK);
    ck_assert_float_eq(out[1], 2);
    ck_assert_float_eq(out[2], -1);
    ck_assert_float_eq(out[3], -2);
    ck_assert_float_eq(out[4], 5);
    /* ranges past the end, including ones that would wrap */
    ck_assert_int_eq(bp_tensor_set(a, in, 4, sizeof in), BP_ERR_INVALID_ARGUMENT);
    ck_assert_ptr_nonnull(strstr(bp_last_error(), "outside tensor 'w'"));
    ck_assert_ptr_nonnull(strstr(bp_last_error(), "32 bytes"));
    ck_assert_int_eq(bp_tensor_get(a, out, 33, 0), BP_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(bp_tensor_get(a, out, 8, SIZE_MAX - 4), BP_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(bp_tensor_get(a, NULL, 0, 4), BP_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(bp_tensor_get(NULL, out, 0, 4), BP_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(bp_tensor_get(a, out, 32, 0), BP_OK);
    bp_buffer_free(buf);
}
END_TEST

START_TEST(test_writing_a_view_writes_its_source)
{
    struct bp_tensor *a = bp_tensor_new_2d(ctx, BP_TYPE_F32, 3, 2); /* rows of 12 bytes */
    struct bp_tensor *col = bp_view(ctx, a, 2, (int64_t[]){1, 2}, (size_t[]){0, 12}, 4); /* column 1 */
    struct bp_buffer *buf;
    ck_assert_int_eq(bp_context_alloc_tensors(ctx, &buft, NULL, &buf), BP_OK);
    float zero[6] = {0}, v = 9, out[6];
    ck_assert_int_eq(bp_tensor_set(a, zero, 0, sizeof zero), BP_OK);
    ck_assert_int_eq(bp_tensor_set(col, &v, 12, sizeof v), BP_OK); /* second row of the column */
    ck_assert_int_eq(bp_tensor_get(a, out, 0, sizeof out), BP_OK);
    for (int i = 0; i < 6; i++) ck_assert_float_eq(out[i], i == 4 ? 9 : 0);
    /* the view spans 16 bytes (4 + 12): past that is out of range */
    ck_assert_int_eq(bp_tensor_set(col, &v, 16, sizeof v), BP_ERR_INVALID_ARGUMENT);
    bp_buffer_free(buf);
}
END_TEST

START_TEST(test_raw_buffer_access_and_clear)
{
    struct bp_buffer *buf;
    ck_assert_int_eq(bp_buffer_alloc(&buft, 13, &buf), BP_OK);
    ck_assert_uint_eq(bp_buffer_size(buf), 13);
    ck_assert_int_eq(bp_buffer_clear(buf, 0xAB), BP_OK);
    unsigned char all[13], pat[3] = {1, 2, 3};
    ck_assert_int_eq(bp_buffer_write(buf, 10, pat, 3), BP_OK);
    ck_assert_int_eq(bp_buffer_read(buf, 0, all, 13), BP_OK);
    for (int i = 0; i < 10; i++) ck_assert_uint_eq(all[i], 0xAB);
    ck_assert_mem_eq(all + 10, pat, 3);
    ck_assert_int_eq(bp_buffer_write(buf, 11, pat, 3), BP_ERR_INVALID_ARGUMENT);
    ck_assert_ptr_nonnull(strstr(bp_last_error(), "13 bytes"));
    ck_assert_int_eq(bp_buffer_read(buf, 14, all, 0), BP_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(bp_buffer_read(NULL, 0, all, 1), BP_ERR_INVALID_ARGUMENT);
    bp_buffer_free(buf);
    bp_buffer_free(NULL);
    ck_assert_int_eq(bp_buffer_alloc(NULL, 4, &buf), BP_ERR_INVALID_ARGUMENT);
    ck_assert_ptr_null(buf);
}
END_TEST

/* ------------------------------------------------ a fake device to compute on */

static const char *dev_get_name(struct bp_device *d) { (void)d; return "testdev"; }
static bool dev_supports_op(struct bp_device *d, const struct bp_tensor *n)
{
    (void)d;
    return n->op != BP_OP_SOFT_MAX;
}
static bool dev_supports_buft(struct bp_device *d, struct bp_buffer_type *bt)
{
    (void)d;
    (void)bt;
    return accept_buft;
}
static bp_status be_compute(struct bp_backend *b, struct bp_graph *g)
{
    (void)b;
    /* the host promises every node and source has memory */
    for (int i = 0; i < g->n_nodes; i++)
        if (!g->nodes[i]->data) return BP_ERR_INTERNAL;
    n_computes++;
    return BP_OK;
}
static void be_free(struct bp_backend *b) { free(b); }
static bp_status be_sync(struct bp_backend *b) { (void)b; return BP_OK; }
static const struct bp_backend_iface be_iface = {
    .size = sizeof(struct bp_backend_iface),
    .free = be_free,
    .synchronize = be_sync,
    .graph_compute = be_compute,
};
static bp_status dev_init_backend(struct bp_device *d, const char *params, struct bp_backend **out)
{
    if (params && strcmp(params, "fail") == 0) return BP_ERR_DEVICE_LOST;
    struct bp_backend *b = calloc(1, sizeof *b);
    b->iface = &be_iface;
    b->device = d;
    *out = b;
    return BP_OK;
}
static const struct bp_device_iface dev_iface = {
    .size = sizeof(struct bp_device_iface),
    .get_name = dev_get_name,
    .init_backend = dev_init_backend,
    .supports_op = dev_supports_op,
    .supports_buft = dev_supports_buft,
};
static bp_status set_threads(struct bp_backend *b, int n)
{
    (void)b;
    n_threads_set++;
    last_threads = n;
    return BP_OK;
}
static void *reg_proc(struct bp_registry *r, const char *name)
{
    (void)r;
    return offer_threads && strcmp(name, BP_PROC_SET_N_THREADS) == 0 ? (void *)set_threads : NULL;
}
static const struct bp_registry_iface reg_iface = {
    .size = sizeof(struct bp_registry_iface),
    .get_proc_address = reg_proc,
};
static struct bp_registry reg = {.iface = &reg_iface};
static struct bp_device dev = {.iface = &dev_iface, .reg = &reg};

static struct bp_backend *backend(void)
{
    struct bp_backend *b = NULL;
    ck_assert_int_eq(bp_backend_init(&dev, NULL, &b), BP_OK);
    return b;
}

START_TEST(test_compute_runs_an_allocated_supported_graph)
{
    struct bp_tensor *x = bp_tensor_new_2d(ctx, BP_TYPE_F32, 4, 3);
    struct bp_tensor *y = bp_silu(ctx, bp_transpose(ctx, x));
    struct bp_graph *g;
    ck_assert_int_eq(bp_graph_new(8, &g), BP_OK);
    ck_assert_int_eq(bp_graph_build(g, y), BP_OK);
    struct bp_buffer *buf;
    ck_assert_int_eq(bp_context_alloc_tensors(ctx, &buft, NULL, &buf), BP_OK);
    struct bp_backend *b = backend();
    ck_assert_int_eq(bp_backend_graph_compute(b, g), BP_OK);
    ck_assert_int_eq(n_computes, 1);
    ck_assert_int_eq(bp_backend_synchronize(b), BP_OK);
    bp_backend_free(b);
    bp_graph_free(g);
    bp_buffer_free(buf);
}
END_TEST

START_TEST(test_compute_refuses_unallocated_tensors_naming_them)
{
    struct bp_tensor *x = bp_tensor_set_name(bp_tensor_new_2d(ctx, BP_TYPE_F32, 4, 3), "inp");
    struct bp_tensor *y = bp_tensor_set_name(bp_silu(ctx, x), "act");
    struct bp_graph *g;
    ck_assert_int_eq(bp_graph_new(8, &g), BP_OK);
    ck_assert_int_eq(bp_graph_build(g, y), BP_OK);
    struct bp_backend *b = backend();
    ck_assert_int_eq(bp_backend_graph_compute(b, g), BP_ERR_INVALID_ARGUMENT);
    ck_assert_ptr_nonnull(strstr(bp_last_error(), "'act'"));
    ck_assert_ptr_nonnull(strstr(bp_last_error(), "no memory"));
    /* with the result allocated elsewhere, the missing one is the input */
    struct bp_context *c2;
    ck_assert_int_eq(bp_context_new(4, &c2), BP_OK);
    struct bp_tensor *y2 = bp_tensor_set_name(bp_gelu(c2, x), "act2");
    struct bp_buffer *buf2;
    ck_assert_int_eq(bp_context_alloc_tensors(c2, &buft, NULL, &buf2), BP_OK);
    struct bp_graph *g2;
    ck_assert_int_eq(bp_graph_new(8, &g2), BP_OK);
    ck_assert_int_eq(bp_graph_build(g2, y2), BP_OK);
    ck_assert_int_eq(bp_backend_graph_compute(b, g2), BP_ERR_INVALID_ARGUMENT);
    ck_assert_ptr_nonnull(strstr(bp_last_error(), "GELU 'act2'"));
    ck_assert_ptr_nonnull(strstr(bp_last_error(), "input 'inp' [4, 3, 1, 1]"));
    ck_assert_int_eq(n_computes, 0);
    bp_backend_free(b);
    bp_graph_free(g);
    bp_graph_free(g2);
    bp_buffer_free(buf2);
    bp_context_free(c2);
}
END_TEST

START_TEST(test_compute_refuses_ops_the_device_declines)
{
    struct bp_tensor *x = bp_tensor_new_2d(ctx, BP_TYPE_F32, 4, 3);
    struct bp_tensor *p = bp_tensor_set_name(bp_soft_max(ctx, x, NULL, 1), "kq");
    struct bp_tensor *s = bp_silu(ctx, x);
    struct bp_graph *g;
    ck_assert_int_eq(bp_graph_new(8, &g), BP_OK);
    ck_assert_int_eq(bp_graph_build(g, p), BP_OK);
    struct bp_buffer *buf;
    ck_assert_int_eq(bp_context_alloc_tensors(ctx, &buft, NULL, &buf), BP_OK);
    struct bp_backend *b = backend();
    ck_assert_int_eq(bp_backend_graph_compute(b, g), BP_ERR_UNSUPPORTED);
    ck_assert_ptr_nonnull(strstr(bp_last_error(), "testdev cannot compute SOFT_MAX 'kq' (f32): the device declines it"));
    accept_buft = false;
    struct bp_graph *g2;
    ck_assert_int_eq(bp_graph_new(8, &g2), BP_OK);
    ck_assert_int_eq(bp_graph_build(g2, s), BP_OK);
    ck_assert_int_eq(bp_backend_graph_compute(b, g2), BP_ERR_UNSUPPORTED);
    ck_assert_ptr_nonnull(strstr(bp_last_error(), "testhost"));
    accept_buft = true;
    ck_assert_int_eq(n_computes, 0);
    bp_backend_free(b);
    bp_graph_free(g);
    bp_graph_free(g2);
    bp_buffer_free(buf);
}
END_TEST

START_TEST(test_compute_resolves_views_of_sources_allocated_later)
{
    /* the view lives in another context and is made before its source has memory */
    struct bp_tensor *cache = bp_tensor_new_2d(ctx, BP_TYPE_F32, 4, 4);
    struct bp_context *c2;
    ck_assert_int_eq(bp_context_new(8, &c2), BP_OK);
    struct bp_tensor *row = bp_view(c2, cache, 1, (int64_t[]){4}, NULL, 32);
    struct bp_tensor *y = bp_silu(c2, row);
    struct bp_buffer *b2, *b1;
    ck_assert_int_eq(bp_context_alloc_tensors(c2, &buft, NULL, &b2), BP_OK);
    ck_assert_ptr_null(row->data);
    ck_assert_int_eq(bp_context_alloc_tensors(ctx, &buft, NULL, &b1), BP_OK);
    struct bp_graph *g;
    ck_assert_int_eq(bp_graph_new(8, &g), BP_OK);
    ck_assert_int_eq(bp_graph_build(g, y), BP_OK);
    struct bp_backend *b = backend();
    ck_assert_int_eq(bp_backend_graph_compute(b, g), BP_OK);
    ck_assert_ptr_eq(row->data, (char *)cache->data + 32);
    ck_assert_ptr_eq(row->buffer, b1);
    bp_backend_free(b);
    bp_graph_free(g);
    bp_buffer_free(b1);
    bp_buffer_free(b2);
    bp_context_free(c2);
}
END_TEST

START_TEST(test_backend_init_and_threads_report_errors)
{
    struct bp_backend *b = (struct bp_backend *)&dev;
    ck_assert_int_eq(bp_backend_init(&dev, "fail", &b), BP_ERR_DEVICE_LOST);
    ck_assert_ptr_null(b);
    ck_assert_ptr_nonnull(strstr(bp_last_error(), "testdev"));
    ck_assert_int_eq(bp_backend_init(NULL, NULL, &b), BP_ERR_INVALID_ARGUMENT);
    b = backend();
    ck_assert_int_eq(bp_backend_set_n_threads(b, 3), BP_OK);
    ck_assert_int_eq(last_threads, 3);
    ck_assert_int_eq(bp_backend_set_n_threads(b, 0), BP_ERR_INVALID_ARGUMENT);
    offer_threads = false;
    ck_assert_int_eq(bp_backend_set_n_threads(b, 2), BP_ERR_UNSUPPORTED);
    ck_assert_ptr_nonnull(strstr(bp_last_error(), "testdev"));
    offer_threads = true;
    ck_assert_int_eq(n_threads_set, 1);
    ck_assert_int_eq(bp_backend_graph_compute(b, NULL), BP_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(bp_backend_graph_compute(NULL, NULL), BP_ERR_INVALID_ARGUMENT);
    bp_backend_free(b);
}
END_TEST

/* ------------------------------------------------------------ format bytes */

START_TEST(test_format_bytes_picks_binary_units)
{
    char buf[32];
    ck_assert_str_eq(bp_format_bytes(0, buf, sizeof buf), "0 B");
    ck_assert_str_eq(bp_format_bytes(1023, buf, sizeof buf), "1023 B");
    ck_assert_str_eq(bp_format_bytes(1024, buf, sizeof buf), "1 KiB");
    ck_assert_str_eq(bp_format_bytes(1536, buf, sizeof buf), "1.5 KiB");
    ck_assert_str_eq(bp_format_bytes(1048575, buf, sizeof buf), "1 MiB"); /* not "1024.0 KiB" */
    ck_assert_str_eq(bp_format_bytes((size_t)3 << 29, buf, sizeof buf), "1.5 GiB");
    ck_assert_str_eq(bp_format_bytes((size_t)10 * 1024 * 1024 + 104858, buf, sizeof buf), "10.1 MiB");
    ck_assert_str_eq(bp_format_bytes(SIZE_MAX, buf, sizeof buf), "16 EiB");
    ck_assert_str_eq(bp_format_bytes(1536, buf, 4), "1.5");
    ck_assert_ptr_eq(bp_format_bytes(1, buf, sizeof buf), buf);
    ck_assert_str_eq(bp_format_bytes(1, NULL, 0), "");
}
END_TEST

static Suite *alloc_suite(void)
{
    Suite *s = suite_create("alloc");
    TCase *tc = tcase_create("alloc");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_alloc_places_tensors_at_aligned_offsets);
    tcase_add_test(tc, test_alloc_puts_rounded_guards_around_every_tensor);
    tcase_add_test(tc, test_alloc_uses_get_alloc_size_only_when_the_table_has_it);
    tcase_add_test(tc, test_alloc_resolves_views_and_later_views);
    tcase_add_test(tc, test_second_alloc_places_only_new_tensors);
    tcase_add_test(tc, test_empty_context_allocates_nothing);
    tcase_add_test(tc, test_failed_init_leaves_tensors_untouched);
    tcase_add_test(tc, test_alloc_reports_buffer_type_failures);
    tcase_add_test(tc, test_set_get_round_trip_and_ranges);
    tcase_add_test(tc, test_writing_a_view_writes_its_source);
    tcase_add_test(tc, test_raw_buffer_access_and_clear);
    suite_add_tcase(s, tc);
    TCase *tb = tcase_create("backend");
    tcase_add_checked_fixture(tb, setup, teardown);
    tcase_add_test(tb, test_compute_runs_an_allocated_supported_graph);
    tcase_add_test(tb, test_compute_refuses_unallocated_tensors_naming_them);
    tcase_add_test(tb, test_compute_refuses_ops_the_device_declines);
    tcase_add_test(tb, test_compute_resolves_views_of_sources_allocated_later);
    tcase_add_test(tb, test_backend_init_and_threads_report_errors);
    tcase_add_test(tb, test_format_bytes_picks_binary_units);
    suite_add_tcase(s, tb);
    return s;
}

int main(void)
{
    return run_suite(alloc_suite());
}
