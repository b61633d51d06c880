/*
 * fuzzplug.c — a plugin whose every answer to the loader is scripted by the
 * loader fuzzer (fuzz_loader.c): the ABI version it exports, what init
 * returns, the registry's abi_version, table size and which of its fields
 * are NULL, its family name, how many devices it claims and which it
 * really has, and their names (NULL, empty, duplicated, very long, bytes
 * that are not text).
 *
 * Device tables are whole and valid: reading a device table past its size
 * is covered by the fault plugins of the table-size checks; this target
 * holds the loader to the promises it already makes about the registry.
 *
 * The harness dlopen()s this file first and calls fuzzplug_set_script; the
 * loader's later dlopen of the same path gets the same instance.
 */
#include <stdio.h>
#include <string.h>

#include <backplane/bp_abi.h>

#define FUZZPLUG_MAX_DEV 4

static struct plan {
    uint32_t abi_symbol;         /* what bp_plugin_abi_version returns */
    bp_status init_status;
    bool out_null;               /* init returns BP_OK and no registry */
    uint32_t reg_abi;
    size_t reg_size;
    uint8_t reg_null;            /* bit i: registry field i (after size) is NULL */
    const char *reg_name;
    size_t claimed;              /* get_device_count's answer */
    size_t n_dev;                /* devices that exist (get_device returns them) */
    bool dev_null[FUZZPLUG_MAX_DEV];
    const char *dev_name[FUZZPLUG_MAX_DEV];
} plan;

static char long_name[400];
static char raw_name[FUZZPLUG_MAX_DEV + 1][16];

static const uint8_t *in;
static size_t in_len, in_pos;

static uint8_t take8(void) { return in_pos < in_len ? in[in_pos++] : 0; }

static uint32_t take32(void)
{
    uint32_t v = 0;
    for (int i = 0; i < 4; i++) v |= (uint32_t)take8() << (8 * i);
    return v;
}

/* A name: the interesting shapes first, then raw bytes of the input. */
static const char *take_name(size_t slot, const char *own, const char *prev)
{
    switch (take8() % 8) {
    case 0: return own;
    case 1: return NULL;
    case 2: return "";
    case 3: return prev ? prev : own; /* a duplicate */
    case 4: return long_name;
    case 5: return "cpu";
    case 6: return "fuzzplug";
    default:
        for (size_t i = 0; i < sizeof raw_name[slot] - 1; i++) raw_name[slot][i] = (char)take8();
        raw_name[slot][sizeof raw_name[slot] - 1] = '\0';
        return raw_name[slot];
    }
}

static const bp_status statuses[] = {BP_OK, BP_ERR_INVALID_ARGUMENT, BP_ERR_UNSUPPORTED,
                                     BP_ERR_OUT_OF_MEMORY, BP_ERR_PLUGIN, (bp_status)12345};

BP_PLUGIN_EXPORT void fuzzplug_set_script(const uint8_t *data, size_t size);
BP_PLUGIN_EXPORT void fuzzplug_set_script(const uint8_t *data, size_t size)
{
    memset(long_name, 'n', sizeof long_name - 1);
    in = data;
    in_len = size;
    in_pos = 0;
    memset(&plan, 0, sizeof plan);
    const uint8_t abi = take8();
    plan.abi_symbol = abi < 200 ? BP_ABI_VERSION : abi < 220 ? BP_ABI_VERSION + 1
                    : abi < 240 ? BP_ABI_VERSION + (1u << 16) : take32();
    const uint8_t st = take8();
    plan.init_status = st < 200 ? BP_OK : statuses[st % (sizeof statuses / sizeof statuses[0])];
    plan.out_null = take8() == 0xff;
    const uint8_t rabi = take8();
    plan.reg_abi = rabi < 200 ? BP_ABI_VERSION : rabi < 230 ? BP_ABI_VERSION + (1u << 16) : take32();
    const size_t full = sizeof(struct bp_registry_iface);
    const size_t sizes[] = {full, full, full, full - sizeof(void *), sizeof(size_t), 0, 65536, 65537,
                            (size_t)-1};
    plan.reg_size = sizes[take8() % (sizeof sizes / sizeof sizes[0])];
    const uint8_t nulls = take8();
    plan.reg_null = nulls < 128 ? 0 : nulls;
    plan.reg_name = take_name(FUZZPLUG_MAX_DEV, "fuzzplug", NULL);
    plan.n_dev = take8() % (FUZZPLUG_MAX_DEV + 1);
    const uint8_t claim = take8();
    plan.claimed = claim < 200 ? plan.n_dev : claim < 230 ? claim % 8 : (size_t)take32() << 16;
    for (size_t d = 0; d < plan.n_dev; d++) {
        static char own[FUZZPLUG_MAX_DEV][16];
        snprintf(own[d], sizeof own[d], "fuzz%zu", d);
        plan.dev_null[d] = take8() == 0xff;
        plan.dev_name[d] = take_name(d, own[d], d ? plan.dev_name[d - 1] : NULL);
    }
}

/* ---- device: every field valid; only the name is scripted ---- */

static struct bp_registry registry;
static struct bp_device devices[FUZZPLUG_MAX_DEV];

static size_t dev_index(struct bp_device *d) { return (size_t)(d - devices); }
static const char *dev_name(struct bp_device *d) { return plan.dev_name[dev_index(d)]; }
static const char *dev_desc(struct bp_device *d) { (void)d; return "loader fuzz device"; }
static enum bp_device_type dev_type(struct bp_device *d) { (void)d; return BP_DEVICE_TYPE_ACCEL; }

static void dev_memory(struct bp_device *d, size_t *free_b, size_t *total)
{
    (void)d;
    *free_b = 1u << 20;
    *total = 1u << 20;
}

static void dev_caps(struct bp_device *d, struct bp_device_caps *caps)
{
    (void)d;
    size_t size = caps->size;
    memset(caps, 0, size < sizeof *caps ? size : sizeof *caps);
    caps->size = size;
}

static bp_status dev_backend(struct bp_device *d, const char *params, struct bp_backend **out)
{
    (void)d, (void)params;
    *out = NULL;
    return BP_ERR_UNSUPPORTED;
}

static struct bp_buffer_type *dev_buft(struct bp_device *d) { (void)d; return NULL; }
static bool dev_supports_op(struct bp_device *d, const struct bp_tensor *n) { (void)d, (void)n; return false; }
static bool dev_supports_buft(struct bp_device *d, struct bp_buffer_type *b) { (void)d, (void)b; return false; }

static const struct bp_device_iface device_iface = {
    .size = sizeof(struct bp_device_iface),
    .get_name = dev_name,
    .get_description = dev_desc,
    .get_type = dev_type,
    .get_memory = dev_memory,
    .get_caps = dev_caps,
    .init_backend = dev_backend,
    .get_buffer_type = dev_buft,
    .supports_op = dev_supports_op,
    .supports_buft = dev_supports_buft,
};

/* ---- registry: size, NULL fields, name and device count scripted ---- */

static const char *reg_name(struct bp_registry *r) { (void)r; return plan.reg_name; }
static size_t reg_count(struct bp_registry *r) { (void)r; return plan.claimed; }

static struct bp_device *reg_device(struct bp_registry *r, size_t i)
{
    (void)r;
    return i < plan.n_dev && !plan.dev_null[i] ? &devices[i] : NULL;
}

static void *reg_proc(struct bp_registry *r, const char *name) { (void)r, (void)name; return NULL; }
static void reg_shutdown(struct bp_registry *r) { (void)r; }

static struct bp_registry_iface registry_iface;

static bp_status fuzzplug_init(const struct bp_host_services *host, struct bp_registry **out)
{
    (void)host;
    *out = NULL;
    if (plan.init_status != BP_OK) return plan.init_status;
    if (plan.out_null) return BP_OK;
    registry_iface = (struct bp_registry_iface){
        .size = plan.reg_size,
        .get_name = (plan.reg_null & 1) ? NULL : reg_name,
        .get_device_count = (plan.reg_null & 2) ? NULL : reg_count,
        .get_device = (plan.reg_null & 4) ? NULL : reg_device,
        .get_proc_address = (plan.reg_null & 8) ? NULL : reg_proc,
        .shutdown = (plan.reg_null & 16) ? NULL : reg_shutdown,
    };
    registry = (struct bp_registry){.iface = &registry_iface, .abi_version = plan.reg_abi};
    for (size_t d = 0; d < FUZZPLUG_MAX_DEV; d++)
        devices[d] = (struct bp_device){.iface = &device_iface, .reg = &registry};
    *out = &registry;
    return BP_OK;
}

BP_PLUGIN_EXPORT uint32_t bp_plugin_abi_version(void) { return plan.abi_symbol; }
BP_PLUGIN_EXPORT bp_status bp_plugin_init(const struct bp_host_services *host, struct bp_registry **out)
{
    return fuzzplug_init(host, out);
}
