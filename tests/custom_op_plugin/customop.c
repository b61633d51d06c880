/*
 * customop.c — a test plugin with one vendor-defined op, built on the host
 * helpers (bp_host_helpers.h) the way a vendor would: family "customop", one
 * device "customop0" that computes only CUSTOM "test.axpby":
 *
 *   src0 x [n0..n3] (F32, F16 or BF16, any strides), src1 y (the same types,
 *   x.ne[i] % y.ne[i] == 0: y repeats over x) -> F32 [n0..n3],
 *   out = alpha * x + beta * y; params: f32 alpha, f32 beta.
 *
 * It publishes the op through BP_PROC_CUSTOM_OPS with a reference written
 * independently of the device path (plain loops over contiguous memory, not
 * the host's accessor) and the cases `backplane check` runs. Test knobs:
 * CUSTOMOP_TEST_BREAK=1 makes the device compute a wrong result (check must
 * fail it); CUSTOMOP_TEST_BAD_LIST=1 publishes, besides test.axpby, the
 * mistakes a vendor can make in the list (check must skip or report each and
 * go on); the registry proc "customop_host_helpers" returns the helpers the
 * plugin got from the host, so a test can call them directly.
 */
#include <stdlib.h>
#include <string.h>

#include <backplane/bp_abi.h>

#define AXPBY "test.axpby"

static const struct bp_host_services *host;
static struct bp_host_helpers H;
static struct bp_buffer_type co_buft;
static struct bp_registry co_registry;
static bool broken, bad_list;

/* Names the device computes as axpby besides AXPBY when bad_list is set:
 * their published descriptions are the broken ones. */
static const char *const bad_list_aliases[] = {"test.axpby_noref", "test.axpby_refails",
                                               "test.axpby_badcases"};

static bool knows_name(const struct bp_tensor *n)
{
    if (bp_custom_op_is(n, AXPBY)) return true;
    for (size_t i = 0; bad_list && i < sizeof bad_list_aliases / sizeof bad_list_aliases[0]; i++)
        if (bp_custom_op_is(n, bad_list_aliases[i])) return true;
    return false;
}

static bool is_float(int32_t t) { return t == BP_TYPE_F32 || t == BP_TYPE_F16 || t == BP_TYPE_BF16; }

static bool supports_op(struct bp_device *dev, const struct bp_tensor *n)
{
    (void)dev;
    if (n->op != BP_OP_CUSTOM) return bp_op_is_view((enum bp_op)n->op) && bp_op_shapes_ok(n);
    if (!knows_name(n)) return false;
    const struct bp_tensor *x = n->src[0], *y = n->src[1];
    if (!x || !y || n->src[2] || n->type != BP_TYPE_F32 || !is_float(x->type) || !is_float(y->type) ||
        !bp_shape_same(n, x) || !bp_shape_positive(y))
        return false;
    for (int d = 0; d < BP_MAX_DIMS; d++)
        if (x->ne[d] % y->ne[d] != 0) return false;
    return true;
}

/* The device path: the host's accessor reads any strides and wraps y's
 * indices, which is the broadcast. */
static void compute_axpby(struct bp_tensor *n)
{
    const float alpha = bp_custom_op_param_f32(n, 0), beta = bp_custom_op_param_f32(n, 1);
    const float skew = broken ? 0.1f : 0.0f;
    for (int64_t i3 = 0; i3 < n->ne[3]; i3++)
        for (int64_t i2 = 0; i2 < n->ne[2]; i2++)
            for (int64_t i1 = 0; i1 < n->ne[1]; i1++)
                for (int64_t i0 = 0; i0 < n->ne[0]; i0++)
                    H.set(n, i0, i1, i2, i3,
                          alpha * H.get(n->src[0], i0, i1, i2, i3) +
                              beta * H.get(n->src[1], i0, i1, i2, i3) + skew);
}

/* ---- the reference: contiguous host memory, its own conversions ---- */

static float load(const struct bp_tensor *t, int64_t i)
{
    const char *p = (const char *)t->data;
    float f;
    uint16_t h;
    switch (t->type) {
    case BP_TYPE_F16: memcpy(&h, p + 2 * i, 2); return bp_f16_to_f32(h);
    case BP_TYPE_BF16: memcpy(&h, p + 2 * i, 2); return bp_bf16_to_f32(h);
    default: memcpy(&f, p + 4 * i, 4); return f;
    }
}

static bp_status reference_axpby(struct bp_tensor *n)
{
    const struct bp_tensor *x = n->src[0], *y = n->src[1];
    if (!supports_op(NULL, n) || !bp_is_contiguous(n) || !bp_is_contiguous(x) || !bp_is_contiguous(y)) {
        host->log(BP_LOG_ERROR, "customop", "the reference of " AXPBY " takes contiguous "
                  "well-formed nodes only; '%s' is not one.", n->name);
        return BP_ERR_INVALID_ARGUMENT;
    }
    const float alpha = bp_custom_op_param_f32(n, 0), beta = bp_custom_op_param_f32(n, 1);
    float *out = n->data;
    int64_t k = 0;
    for (int64_t i3 = 0; i3 < n->ne[3]; i3++)
        for (int64_t i2 = 0; i2 < n->ne[2]; i2++)
            for (int64_t i1 = 0; i1 < n->ne[1]; i1++)
                for (int64_t i0 = 0; i0 < n->ne[0]; i0++, k++) {
                    const int64_t j = i0 % y->ne[0] +
                                      y->ne[0] * (i1 % y->ne[1] +
                                                  y->ne[1] * (i2 % y->ne[2] + y->ne[2] * (i3 % y->ne[3])));
                    out[k] = alpha * load(x, k) + beta * load(y, j);
                }
    return BP_OK;
}

/* The params (alpha, beta) are floats stored bit-for-bit: set in init. */
static struct bp_custom_op_case axpby_cases[] = {
    {.n_src = 2, .src_type = {BP_TYPE_F32, BP_TYPE_F32}, .src_ne = {{7, 5, 3, 1}, {7, 5, 3, 1}},
     .type = BP_TYPE_F32, .ne = {7, 5, 3, 1}, .n_params = 2, .max_nmse = 1e-7},
    {.n_src = 2, .src_type = {BP_TYPE_F16, BP_TYPE_F32}, .src_ne = {{16, 4, 2, 1}, {16, 1, 1, 1}},
     .type = BP_TYPE_F32, .ne = {16, 4, 2, 1}, .n_params = 2, .max_nmse = 1e-7},
};
static const float axpby_case_params[][2] = {{0.5f, -2.0f}, {1.5f, 0.25f}};

static const struct bp_custom_op_info axpby_info = {
    .size = sizeof(struct bp_custom_op_info),
    .name = AXPBY,
    .description = "alpha * x + beta * y, y broadcast over x",
    .reference = reference_axpby,
    .cases = axpby_cases,
    .n_cases = sizeof axpby_cases / sizeof axpby_cases[0],
};

static const struct bp_custom_op_info *const custom_ops[] = {&axpby_info};

/* ---- CUSTOMOP_TEST_BAD_LIST: what a vendor can get wrong ---- */

static bp_status reference_fails(struct bp_tensor *n)
{
    (void)n;
    return BP_ERR_INTERNAL;
}

static const struct bp_custom_op_case bad_cases[] = {
    {.n_src = 9, .type = BP_TYPE_F32, .ne = {4, 1, 1, 1}},
    {.n_src = 1, .src_type = {BP_TYPE_I32}, .src_ne = {{4, 1, 1, 1}}, .type = BP_TYPE_F32,
     .ne = {4, 1, 1, 1}},
    {.n_src = 0, .type = BP_TYPE_F32, .ne = {4, 1, 1, 1}, .n_params = 9},
    {.n_src = 0, .type = BP_TYPE_F32, .ne = {4, 1, 1, 1}, .max_nmse = -1.0},
};

static const struct bp_custom_op_info short_info = {
    .size = offsetof(struct bp_custom_op_info, description), /* ends after name */
    .name = "test.short",
};
static const struct bp_custom_op_info badname_info = {
    .size = sizeof(struct bp_custom_op_info), .name = "Not A Name", .reference = reference_axpby,
    .cases = axpby_cases, .n_cases = 1,
};
static const struct bp_custom_op_info noref_info = {
    .size = sizeof(struct bp_custom_op_info), .name = "test.axpby_noref", .cases = axpby_cases,
    .n_cases = 1,
};
static const struct bp_custom_op_info refails_info = {
    .size = sizeof(struct bp_custom_op_info), .name = "test.axpby_refails",
    .reference = reference_fails, .cases = axpby_cases, .n_cases = 1,
};
static const struct bp_custom_op_info badcases_info = {
    .size = sizeof(struct bp_custom_op_info), .name = "test.axpby_badcases",
    .reference = reference_axpby, .cases = bad_cases,
    .n_cases = sizeof bad_cases / sizeof bad_cases[0],
};
static const struct bp_custom_op_info nocases_info = {
    .size = sizeof(struct bp_custom_op_info), .name = "test.nocases",
    .reference = reference_axpby, .cases = NULL, .n_cases = 5,
};

static const struct bp_custom_op_info *const bad_custom_ops[] = {
    &axpby_info, NULL, &short_info, &badname_info, &noref_info, &refails_info, &badcases_info,
    &nocases_info,
};

static const struct bp_custom_op_info *const *get_custom_ops(struct bp_registry *reg, size_t *n)
{
    (void)reg;
    if (bad_list) {
        *n = sizeof bad_custom_ops / sizeof bad_custom_ops[0];
        return bad_custom_ops;
    }
    *n = sizeof custom_ops / sizeof custom_ops[0];
    return custom_ops;
}

/* ---- backend, device, registry ---- */

static const char *be_name(struct bp_backend *b) { (void)b; return "customop0"; }
static void be_free(struct bp_backend *b) { free(b); }
static bp_status be_sync(struct bp_backend *b) { (void)b; return BP_OK; }

static bp_status be_compute(struct bp_backend *b, struct bp_graph *g)
{
    for (int32_t i = 0; i < g->n_nodes; i++) {
        struct bp_tensor *n = g->nodes[i];
        if (bp_op_is_view((enum bp_op)n->op)) continue;
        if (!supports_op(b->device, n)) {
            host->log(BP_LOG_ERROR, "customop", "customop0 cannot compute %s node '%s'; it computes "
                      "only " AXPBY ".", bp_op_name((enum bp_op)n->op), n->name);
            return BP_ERR_UNSUPPORTED;
        }
        compute_axpby(n);
    }
    return BP_OK;
}

static const struct bp_backend_iface be_iface = {
    .size = sizeof(struct bp_backend_iface),
    .get_name = be_name,
    .free = be_free,
    .synchronize = be_sync,
    .graph_compute = be_compute,
};

static const char *dev_name(struct bp_device *d) { (void)d; return "customop0"; }
static const char *dev_desc(struct bp_device *d) { (void)d; return "test plugin: custom op " AXPBY; }
static enum bp_device_type dev_type(struct bp_device *d) { (void)d; return BP_DEVICE_TYPE_ACCEL; }
static void dev_memory(struct bp_device *d, size_t *f, size_t *t) { (void)d; *f = *t = 0; }
static struct bp_buffer_type *dev_buft(struct bp_device *d) { (void)d; return &co_buft; }
static bool dev_supports_buft(struct bp_device *d, struct bp_buffer_type *b) { (void)d; return b == &co_buft; }

static void dev_caps(struct bp_device *d, struct bp_device_caps *caps)
{
    (void)d;
    if (BP_IFACE_HAS(caps, async)) caps->async = false;
    if (BP_IFACE_HAS(caps, host_buffer)) caps->host_buffer = false;
    if (BP_IFACE_HAS(caps, events)) caps->events = false;
    if (BP_IFACE_HAS(caps, buffer_from_host_ptr)) caps->buffer_from_host_ptr = false;
}

static bp_status dev_backend(struct bp_device *d, const char *params, struct bp_backend **out)
{
    (void)params;
    *out = calloc(1, sizeof **out);
    if (*out) **out = (struct bp_backend){.iface = &be_iface, .device = d};
    return *out ? BP_OK : BP_ERR_OUT_OF_MEMORY;
}

static const struct bp_device_iface dev_iface = {
    .size = sizeof(struct bp_device_iface),
    .get_name = dev_name,
    .get_description = dev_desc,
    .get_type = dev_type,
    .get_memory = dev_memory,
    .get_caps = dev_caps,
    .init_backend = dev_backend,
    .get_buffer_type = dev_buft,
    .supports_op = supports_op,
    .supports_buft = dev_supports_buft,
};

static struct bp_device co_device = {.iface = &dev_iface, .reg = &co_registry};

static const char *reg_name(struct bp_registry *r) { (void)r; return "customop"; }
static size_t reg_count(struct bp_registry *r) { (void)r; return 1; }
static struct bp_device *reg_device(struct bp_registry *r, size_t i) { (void)r; return i ? NULL : &co_device; }

static void *reg_proc(struct bp_registry *r, const char *name)
{
    (void)r;
    if (name && !strcmp(name, BP_PROC_CUSTOM_OPS)) return (void *)(bp_custom_ops_fn)get_custom_ops;
    if (name && !strcmp(name, "customop_host_helpers")) return &H;
    return NULL;
}

static const struct bp_registry_iface reg_iface = {
    .size = sizeof(struct bp_registry_iface),
    .get_name = reg_name,
    .get_device_count = reg_count,
    .get_device = reg_device,
    .get_proc_address = reg_proc,
};

static struct bp_registry co_registry = {.iface = &reg_iface, .abi_version = BP_ABI_VERSION};

static bp_status customop_init(const struct bp_host_services *services, struct bp_registry **out)
{
    bp_status st = bp_plugin_check_host(services, "customop", out);
    if (st == BP_OK && !bp_host_helpers_get(services, "customop", &H)) st = BP_ERR_ABI;
    if (st == BP_OK) st = H.buffer_type_init(&co_buft, &co_device);
    if (st != BP_OK) return st;
    host = services;
    const char *b = getenv("CUSTOMOP_TEST_BREAK");
    broken = b && !strcmp(b, "1");
    b = getenv("CUSTOMOP_TEST_BAD_LIST");
    bad_list = b && !strcmp(b, "1");
    for (size_t i = 0; i < sizeof axpby_cases / sizeof axpby_cases[0]; i++)
        memcpy(axpby_cases[i].params, axpby_case_params[i], sizeof axpby_case_params[i]);
    *out = &co_registry;
    return BP_OK;
}

BP_PLUGIN_DEFINE(customop_init)
