/*
 * test_cpu_abi.c — the CPU plugin driven through the ABI alone: dlopen the
 * .so, hand it a host-services table written here, build bp_tensor structs
 * by hand. Proves the plugin independent of libbackplane (it links only
 * abi/) and checks the words it logs on refusal.
 */
#include <check.h>
#include <dlfcn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <backplane/bp_abi.h>

#include "suite_main.h"

#define PLUGIN_PATH BP_TEST_PLUGIN_DIR "/libbackplane-cpu-scalar.so"

static char last_log[1024];
static int n_errors;

static void host_log(enum bp_log_level level, const char *who, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last_log, sizeof last_log, fmt, ap);
    va_end(ap);
    if (level >= BP_LOG_ERROR)
        n_errors++;
    (void)who;
}

static const char *host_get_env(const char *name) { return getenv(name); }
static size_t host_device_count(void) { return 0; }
static struct bp_device *host_device_get(size_t i) { (void)i; return NULL; }
static struct bp_device *host_device_by_name(const char *n) { (void)n; return NULL; }
static void *host_proc(const char *n) { (void)n; return NULL; }

static const struct bp_host_services host = {
    .size = sizeof(struct bp_host_services),
    .abi_version = BP_ABI_VERSION,
    .log = host_log,
    .get_env = host_get_env,
    .device_count = host_device_count,
    .device_get = host_device_get,
    .device_by_name = host_device_by_name,
    .get_proc_address = host_proc,
};

static void *so;
static struct bp_registry *reg;
static struct bp_device *dev;

static void plugin_open(void)
{
    so = dlopen(PLUGIN_PATH, RTLD_NOW | RTLD_LOCAL);
    ck_assert_msg(so != NULL, "dlopen: %s", dlerror());
    bp_plugin_abi_version_fn ver;
    bp_plugin_init_fn init;
    void *p = dlsym(so, BP_PLUGIN_ABI_VERSION_SYMBOL);
    memcpy(&ver, &p, sizeof p);
    p = dlsym(so, BP_PLUGIN_INIT_SYMBOL);
    memcpy(&init, &p, sizeof p);
    ck_assert_ptr_nonnull((void *)ver);
    ck_assert_ptr_nonnull((void *)init);
    ck_assert_uint_eq(BP_ABI_VERSION_MAJOR(ver()), BP_ABI_MAJOR);
    reg = NULL;
    ck_assert_int_eq(init(&host, &reg), BP_OK);
    ck_assert_ptr_nonnull(reg);
    dev = reg->iface->get_device(reg, 0);
    ck_assert_ptr_nonnull(dev);
    n_errors = 0;
    last_log[0] = '\0';
}

static void plugin_close(void)
{
    reg->iface->shutdown(reg);
    dlclose(so);
}

/* A contiguous tensor over data (NULL data for a node filled later). */
static void mk(struct bp_tensor *t, enum bp_type type, int64_t ne0, int64_t ne1, void *data,
               const char *name)
{
    memset(t, 0, sizeof *t);
    t->type = type;
    t->ne[0] = ne0; t->ne[1] = ne1; t->ne[2] = 1; t->ne[3] = 1;
    t->nb[0] = bp_type_size(type);
    t->nb[1] = t->nb[0] * (size_t)ne0;
    t->nb[2] = t->nb[3] = t->nb[1] * (size_t)ne1;
    t->data = data;
    snprintf(t->name, sizeof t->name, "%s", name);
}

static bp_status compute_one(struct bp_tensor *node)
{
    struct bp_backend *be;
    ck_assert_int_eq(dev->iface->init_backend(dev, NULL, &be), BP_OK);
    struct bp_tensor *nodes[1] = { node };
    struct bp_graph g = { .n_nodes = 1, .capacity = 1, .nodes = nodes };
    bp_status st = be->iface->graph_compute(be, &g);
    be->iface->free(be);
    return st;
}

START_TEST(test_plugin_registers_one_cpu_device)
{
    plugin_open();
    ck_assert_str_eq(reg->iface->get_name(reg), "cpu");
    ck_assert_uint_eq(reg->abi_version, BP_ABI_VERSION);
    ck_assert_uint_eq(reg->iface->get_device_count(reg), 1);
    ck_assert_ptr_null(reg->iface->get_device(reg, 1));
    ck_assert_str_eq(dev->iface->get_name(dev), "cpu");
    ck_assert_int_eq(dev->iface->get_type(dev), BP_DEVICE_TYPE_CPU);
    struct bp_buffer_type *bt = dev->iface->get_buffer_type(dev);
    ck_assert_str_eq(bt->iface->get_name(bt), "CPU");
    ck_assert(bt->iface->is_host(bt));
    ck_assert_uint_eq(bt->iface->get_alignment(bt), 64);
    ck_assert(dev->iface->supports_buft(dev, bt));
    plugin_close();
}
END_TEST

START_TEST(test_buffer_is_aligned_and_round_trips_bytes)
{
    plugin_open();
    struct bp_buffer_type *bt = dev->iface->get_buffer_type(dev);
    struct bp_buffer *buf;
    ck_assert_int_eq(bt->iface->alloc_buffer(bt, 100, &buf), BP_OK);
    char *base = buf->iface->get_base(buf);
    ck_assert_uint_eq((uintptr_t)base % 64, 0);
    ck_assert_int_eq(buf->iface->clear(buf, 0xAB), BP_OK);
    ck_assert_uint_eq((unsigned char)base[99], 0xAB);
    struct bp_tensor t;
    float in[4] = { 1, 2, 3, 4 }, out[4] = { 0 };
    mk(&t, BP_TYPE_F32, 4, 1, base + 64, "t");
    t.buffer = buf;
    ck_assert_int_eq(buf->iface->set_tensor(buf, &t, in, 0, sizeof in), BP_OK);
    ck_assert_int_eq(buf->iface->get_tensor(buf, &t, out, 4, 8), BP_OK);
    ck_assert_float_eq(out[0], 2.0f);
    ck_assert_float_eq(out[1], 3.0f);
    ck_assert_int_eq(buf->iface->set_tensor(buf, &t, in, 8, 16), BP_ERR_INVALID_ARGUMENT);
    buf->iface->free_buffer(buf);
    plugin_close();
}
END_TEST

START_TEST(test_mul_mat_on_hand_made_tensors_gives_known_values)
{
    plugin_open();
    /* W rows (1,2,3) and (0,-1,1); X columns (1,1,1) and (2,0,-1). */
    float w[6] = { 1, 2, 3, 0, -1, 1 }, x[6] = { 1, 1, 1, 2, 0, -1 }, y[4] = { 0 };
    struct bp_tensor tw, tx, ty;
    mk(&tw, BP_TYPE_F32, 3, 2, w, "w");
    mk(&tx, BP_TYPE_F32, 3, 2, x, "x");
    mk(&ty, BP_TYPE_F32, 2, 2, y, "y");
    ty.op = BP_OP_MUL_MAT;
    ty.src[0] = &tw;
    ty.src[1] = &tx;
    ck_assert(dev->iface->supports_op(dev, &ty));
    ck_assert_int_eq(compute_one(&ty), BP_OK);
    ck_assert_float_eq(y[0], 6.0f);
    ck_assert_float_eq(y[1], 0.0f);
    ck_assert_float_eq(y[2], -1.0f);
    ck_assert_float_eq(y[3], -1.0f);
    tx.ne[0] = 2; /* K of X no longer matches W */
    tx.nb[1] = 8;
    ck_assert(!dev->iface->supports_op(dev, &ty));
    plugin_close();
}
END_TEST

START_TEST(test_get_rows_bad_id_is_refused_with_a_sentence_naming_it)
{
    plugin_open();
    float table[6] = { 1, 2, 3, 4, 5, 6 }, out[4];
    int32_t ids[2] = { 1, 5 };
    struct bp_tensor tt, ti, ty;
    mk(&tt, BP_TYPE_F32, 2, 3, table, "embeddings");
    mk(&ti, BP_TYPE_I32, 2, 1, ids, "tokens");
    mk(&ty, BP_TYPE_F32, 2, 2, out, "rows");
    ty.op = BP_OP_GET_ROWS;
    ty.src[0] = &tt;
    ty.src[1] = &ti;
    ck_assert_int_eq(compute_one(&ty), BP_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(n_errors, 1);
    ck_assert_msg(strstr(last_log, "tokens") && strstr(last_log, " 5 ") && strstr(last_log, "GET_ROWS"),
                  "log does not name ids and id: %s", last_log);
    ids[1] = 2;
    ck_assert_int_eq(compute_one(&ty), BP_OK);
    ck_assert_float_eq(out[2], 5.0f);
    ck_assert_float_eq(out[3], 6.0f);
    plugin_close();
}
END_TEST

START_TEST(test_unsupported_node_is_refused_with_op_and_tensor_named)
{
    plugin_open();
    int32_t wq[32 * 2] = { 0 };
    float x[32] = { 0 }, y[2];
    struct bp_tensor tw, tx, ty;
    /* I32 weights: no mul_mat kernel takes integers */
    mk(&tw, BP_TYPE_I32, 32, 2, wq, "wq");
    mk(&tx, BP_TYPE_F32, 32, 1, x, "x");
    mk(&ty, BP_TYPE_F32, 2, 1, y, "logits");
    ty.op = BP_OP_MUL_MAT;
    ty.src[0] = &tw;
    ty.src[1] = &tx;
    ck_assert(!dev->iface->supports_op(dev, &ty));
    ck_assert_int_eq(compute_one(&ty), BP_ERR_UNSUPPORTED);
    ck_assert_msg(strstr(last_log, "MUL_MAT") && strstr(last_log, "logits"), "log: %s", last_log);
    ty.op = 1000; /* an op from a future ABI */
    ck_assert(!dev->iface->supports_op(dev, &ty));
    ck_assert_int_eq(compute_one(&ty), BP_ERR_UNSUPPORTED);
    plugin_close();
}
END_TEST

START_TEST(test_node_without_memory_is_refused)
{
    plugin_open();
    float x[4] = { 0 };
    struct bp_tensor tx, ty;
    mk(&tx, BP_TYPE_F32, 4, 1, x, "x");
    mk(&ty, BP_TYPE_F32, 4, 1, NULL, "y");
    ty.op = BP_OP_SILU;
    ty.src[0] = &tx;
    ck_assert_int_eq(compute_one(&ty), BP_ERR_INVALID_ARGUMENT);
    ck_assert_msg(strstr(last_log, "'y'"), "log: %s", last_log);
    plugin_close();
}
END_TEST

START_TEST(test_shutdown_frees_backends_and_buffers_left_behind)
{
    plugin_open();
    struct bp_backend *be[2];
    struct bp_buffer *buf;
    ck_assert_int_eq(dev->iface->init_backend(dev, "n_threads=3", &be[0]), BP_OK);
    ck_assert_int_eq(dev->iface->init_backend(dev, NULL, &be[1]), BP_OK);
    struct bp_buffer_type *bt = dev->iface->get_buffer_type(dev);
    ck_assert_int_eq(bt->iface->alloc_buffer(bt, 0, &buf), BP_OK);
    ck_assert_ptr_nonnull(buf->iface->get_base(buf));
    bp_set_n_threads_fn set_n;
    void *p = reg->iface->get_proc_address(reg, BP_PROC_SET_N_THREADS);
    memcpy(&set_n, &p, sizeof p);
    ck_assert_ptr_nonnull((void *)set_n);
    ck_assert_int_eq(set_n(be[1], 2), BP_OK);
    ck_assert_int_eq(set_n(be[1], 0), BP_ERR_INVALID_ARGUMENT);
    plugin_close(); /* leak checkers see the rest */
}
END_TEST

/* bp_plugin_check_host as the plugin runs it: a host of another major, a
 * table too short to carry log, no host and no out are refused, the major
 * with a sentence, and nothing is registered. */
START_TEST(test_init_refuses_foreign_or_broken_hosts)
{
    void *h = dlopen(PLUGIN_PATH, RTLD_NOW | RTLD_LOCAL);
    ck_assert_msg(h != NULL, "dlopen: %s", dlerror());
    bp_plugin_init_fn init;
    void *p = dlsym(h, BP_PLUGIN_INIT_SYMBOL);
    memcpy(&init, &p, sizeof p);
    ck_assert_ptr_nonnull((void *)init);
    struct bp_host_services other = host;
    other.abi_version = (uint32_t)(BP_ABI_MAJOR + 1) << 16;
    struct bp_registry *r = (struct bp_registry *)&other; /* must be reset to NULL */
    n_errors = 0;
    ck_assert_int_eq(init(&other, &r), BP_ERR_ABI);
    ck_assert_ptr_null(r);
    ck_assert_int_eq(n_errors, 1);
    ck_assert_ptr_nonnull(strstr(last_log, "ABI major"));
    struct bp_host_services short_tbl = host;
    short_tbl.size = offsetof(struct bp_host_services, log);
    ck_assert_int_eq(init(&short_tbl, &r), BP_ERR_INVALID_ARGUMENT);
    ck_assert_ptr_null(r);
    ck_assert_int_eq(init(NULL, &r), BP_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(init(&host, NULL), BP_ERR_INVALID_ARGUMENT);
    dlclose(h);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("cpu_abi");
    TCase *tc = tcase_create("abi");
    tcase_add_test(tc, test_plugin_registers_one_cpu_device);
    tcase_add_test(tc, test_buffer_is_aligned_and_round_trips_bytes);
    tcase_add_test(tc, test_mul_mat_on_hand_made_tensors_gives_known_values);
    tcase_add_test(tc, test_get_rows_bad_id_is_refused_with_a_sentence_naming_it);
    tcase_add_test(tc, test_unsupported_node_is_refused_with_op_and_tensor_named);
    tcase_add_test(tc, test_node_without_memory_is_refused);
    tcase_add_test(tc, test_shutdown_frees_backends_and_buffers_left_behind);
    tcase_add_test(tc, test_init_refuses_foreign_or_broken_hosts);
    suite_add_tcase(s, tc);
    return run_suite(s);
}
