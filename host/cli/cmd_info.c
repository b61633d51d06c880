/* cmd_info.c — `backplane info DEVICE`: what one device is and can do. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <backplane/bp_dist.h>

#include "check_harness.h"
#include "cli.h"
#include "identity_print.h"
#include "json.h"

static void help(void)
{
    puts("usage: backplane info DEVICE [--json]\n"
         "       backplane info --model PATH|builtin:NAME [--json]\n\n"
         "Shows the device's type, memory, capabilities, buffer type, the plugin\n"
         "that provides it, which ops and element types it supports (asked of the\n"
         "device with the same small graphs `backplane check` runs), and the\n"
         "optional features its plugin offers by proc-address name. A meta device\n"
         "also shows the all-reduce path it takes per message size (under\n"
         "BACKPLANE_META_ALLREDUCE=auto measured now; `check --comm` shows the times).\n\n"
         "With --model, shows a model file as `backplane run` reads it instead:\n"
         "architecture, parameter count, sizes, context length, RoPE settings,\n"
         "the element types of each tensor class and the chat template family,\n"
         "or the sentence the runner refuses the file with.");
}

static const char *const known_procs[] = {
    BP_PROC_COMM_INIT, BP_PROC_COMM_ALLREDUCE_TENSOR, BP_PROC_COMM_FREE,
    BP_PROC_SET_N_THREADS, BP_PROC_GET_FEATURES, BP_PROC_WEIGHT_BUFFER_TYPE, BP_PROC_CUSTOM_OPS,
    BP_PROC_DEVICE_IDENTITY,
    BP_PROC_COMM_GET_UNIQUE_ID, BP_PROC_COMM_INIT_RANK, BP_PROC_COMM_PATHS,
};
#define N_PROCS (sizeof known_procs / sizeof known_procs[0])

/* Per op and type: how many check cases exist and how many the device takes. */
struct op_matrix {
    int cases[BP_OP_COUNT][BP_TYPE_COUNT];
    int supported[BP_OP_COUNT][BP_TYPE_COUNT];
};

static void probe_ops(struct bp_device *dev, struct op_matrix *m)
{
    memset(m, 0, sizeof *m);
    for (size_t i = 0; i < check_case_count(); i++) {
        const struct check_case *c = check_case_get(i);
        struct check_builder b;
        struct bp_graph *g;
        if (!check_case_build(c, &b, &g)) continue; /* unbuildable: says nothing about dev */
        m->cases[c->op][c->type]++;
        if (!check_first_unsupported(dev, g)) m->supported[c->op][c->type]++;
        check_case_release(&b, g);
    }
}

struct device_facts {
    struct bp_device *dev;
    size_t mem_free, mem_total;
    struct bp_device_caps caps;
    struct bp_buffer_type *buft;
    const char *buft_name;
    size_t alignment, max_size;
    bool is_host;
    const struct bp_plugin_info *plugin;
    bool procs[N_PROCS];
    const struct bp_feature *features;
    bool has_allreduce;  /* a meta device: its all-reduce path per size class */
    char allreduce[BP_META_ALLREDUCE_CLASSES][BP_META_ALLREDUCE_PATH_LEN];
};

static void gather(struct bp_device *dev, struct device_facts *f)
{
    memset(f, 0, sizeof *f);
    f->dev = dev;
    bp_device_memory(dev, &f->mem_free, &f->mem_total);
    f->caps.size = sizeof f->caps;
    bp_device_caps(dev, &f->caps);
    f->buft = bp_device_buffer_type(dev);
    if (f->buft && f->buft->iface) {
        const struct bp_buffer_type_iface *it = f->buft->iface;
        f->buft_name = BP_IFACE_HAS(it, get_name) && it->get_name ? it->get_name(f->buft) : NULL;
        f->alignment = BP_IFACE_HAS(it, get_alignment) && it->get_alignment ? it->get_alignment(f->buft) : 0;
        f->max_size = BP_IFACE_HAS(it, get_max_size) && it->get_max_size ? it->get_max_size(f->buft) : 0;
        f->is_host = BP_IFACE_HAS(it, is_host) && it->is_host ? it->is_host(f->buft) : false;
    }
    f->plugin = cli_plugin_of(dev);
    for (size_t i = 0; i < N_PROCS; i++) f->procs[i] = bp_device_proc_address(dev, known_procs[i]) != NULL;
    bp_get_features_fn get_features = (bp_get_features_fn)bp_device_proc_address(dev, BP_PROC_GET_FEATURES);
    if (get_features) f->features = get_features(dev->reg);
    f->has_allreduce = comm_choices(dev, f->allreduce);
}

static const char *yes_no(bool b) { return b ? "yes" : "no"; }

static void print_text(const struct device_facts *f, const struct op_matrix *m)
{
    char fb[32], tb[32], abi[16];
    printf("Device %s\n", bp_device_name(f->dev));
    printf("  description:  %s\n", bp_device_description(f->dev));
    printf("  type:         %s\n", bp_device_type_name(bp_device_type(f->dev)));
    char ident[256];
    if (*cli_identity_text(f->dev, ident, sizeof ident)) printf("  identity:     %s\n", ident);
    printf("  memory:       %s free of %s\n", bp_format_bytes(f->mem_free, fb, sizeof fb),
           bp_format_bytes(f->mem_total, tb, sizeof tb));
    printf("  caps:         async=%s host_buffer=%s events=%s buffer_from_host_ptr=%s\n",
           yes_no(f->caps.async), yes_no(f->caps.host_buffer), yes_no(f->caps.events),
           yes_no(f->caps.buffer_from_host_ptr));
    printf("  buffer type:  %s, alignment %zu, %s memory", f->buft_name ? f->buft_name : "?",
           f->alignment, f->is_host ? "host" : "device");
    if (f->max_size) printf(", at most %s per buffer", bp_format_bytes(f->max_size, fb, sizeof fb));
    putchar('\n');
    if (f->plugin)
        printf("  plugin:       %s%s%s (ABI %s) %s\n", f->plugin->family,
               f->plugin->variant && *f->plugin->variant ? " variant " : "",
               f->plugin->variant ? f->plugin->variant : "",
               cli_abi_string(f->plugin->abi_version, abi, sizeof abi), f->plugin->path);

    printf("\nSupported ops (by element type; n/m = shapes of the check accepted):\n");
    for (int op = 1; op < BP_OP_COUNT; op++) {
        bool any_case = false;
        for (int t = 0; t < BP_TYPE_COUNT; t++) any_case |= m->cases[op][t] > 0;
        if (!any_case) continue;
        printf("  %-15s", bp_op_name((enum bp_op)op));
        bool any = false;
        for (int t = 0; t < BP_TYPE_COUNT; t++) {
            int n = m->cases[op][t], s = m->supported[op][t];
            if (!n || !s) continue;
            any = true;
            if (s == n) printf(" %s", bp_type_name((enum bp_type)t));
            else printf(" %s(%d/%d)", bp_type_name((enum bp_type)t), s, n);
        }
        printf("%s\n", any ? "" : " unsupported");
    }

    printf("\nFeatures (proc-address names):\n");
    for (size_t i = 0; i < N_PROCS; i++)
        printf("  %-26s %s\n", known_procs[i], f->procs[i] ? "offered" : "-");
    if (f->features) {
        printf("\nFeature list (%s):\n", BP_PROC_GET_FEATURES);
        for (const struct bp_feature *x = f->features; x->name; x++)
            printf("  %-20s %s\n", x->name, x->value ? x->value : "");
    }
    if (f->has_allreduce) {
        const char *mode = getenv("BACKPLANE_META_ALLREDUCE");
        printf("\nAll-reduce path per message size (BACKPLANE_META_ALLREDUCE=%s; `check --comm` has the times):\n",
               mode && *mode ? mode : "auto");
        for (int k = 0; k < BP_META_ALLREDUCE_CLASSES; k++)
            printf("  %-8s %s\n", bp_format_bytes(bp_meta_allreduce_class_bytes(k), fb, sizeof fb), f->allreduce[k]);
    }
}

static void print_json(const struct device_facts *f, const struct op_matrix *m)
{
    struct json_writer w;
    char abi[16];
    json_init(&w, stdout);
    json_object_begin(&w, NULL);
    json_string(&w, "name", bp_device_name(f->dev));
    json_string(&w, "description", bp_device_description(f->dev));
    json_string(&w, "type", bp_device_type_name(bp_device_type(f->dev)));
    json_uint(&w, "memory_free", f->mem_free);
    json_uint(&w, "memory_total", f->mem_total);
    cli_identity_json(&w, f->dev);
    json_object_begin(&w, "caps");
    json_bool(&w, "async", f->caps.async);
    json_bool(&w, "host_buffer", f->caps.host_buffer);
    json_bool(&w, "events", f->caps.events);
    json_bool(&w, "buffer_from_host_ptr", f->caps.buffer_from_host_ptr);
    json_object_end(&w);
    json_object_begin(&w, "buffer_type");
    json_string(&w, "name", f->buft_name);
    json_uint(&w, "alignment", f->alignment);
    json_uint(&w, "max_size", f->max_size);
    json_bool(&w, "is_host", f->is_host);
    json_object_end(&w);
    if (f->plugin) {
        json_object_begin(&w, "plugin");
        json_string(&w, "family", f->plugin->family);
        json_string(&w, "variant", f->plugin->variant ? f->plugin->variant : "");
        json_string(&w, "path", f->plugin->path);
        json_string(&w, "abi_version", cli_abi_string(f->plugin->abi_version, abi, sizeof abi));
        json_object_end(&w);
    } else {
        json_null(&w, "plugin");
    }
    json_object_begin(&w, "ops");
    for (int op = 1; op < BP_OP_COUNT; op++) {
        bool any_case = false;
        for (int t = 0; t < BP_TYPE_COUNT; t++) any_case |= m->cases[op][t] > 0;
        if (!any_case) continue;
        json_object_begin(&w, bp_op_name((enum bp_op)op));
        for (int t = 0; t < BP_TYPE_COUNT; t++) {
            if (!m->cases[op][t]) continue;
            json_object_begin(&w, bp_type_name((enum bp_type)t));
            json_int(&w, "cases", m->cases[op][t]);
            json_int(&w, "supported", m->supported[op][t]);
            json_object_end(&w);
        }
        json_object_end(&w);
    }
    json_object_end(&w);
    json_object_begin(&w, "procs");
    for (size_t i = 0; i < N_PROCS; i++) json_bool(&w, known_procs[i], f->procs[i]);
    json_object_end(&w);
    json_object_begin(&w, "features");
    for (const struct bp_feature *x = f->features; x && x->name; x++)
        json_string(&w, x->name, x->value ? x->value : "");
    json_object_end(&w);
    if (f->has_allreduce) {
        json_object_begin(&w, "allreduce");
        for (int k = 0; k < BP_META_ALLREDUCE_CLASSES; k++) {
            char key[24];
            snprintf(key, sizeof key, "%zu", bp_meta_allreduce_class_bytes(k));
            json_string(&w, key, f->allreduce[k]);
        }
        json_object_end(&w);
    }
    json_object_end(&w);
    json_finish(&w);
}

int cmd_info(int argc, char **argv)
{
    bool as_json = false;
    const char *name = NULL, *model = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--json")) as_json = true;
        else if (!strcmp(argv[i], "--model")) {
            if (i + 1 >= argc) return cli_usage_error("info", "--model needs a GGUF path or builtin:NAME.");
            model = argv[++i];
        }
        else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) { help(); return CLI_EXIT_OK; }
        else if (argv[i][0] == '-') return cli_usage_error("info", "unknown option '%s' for 'info'.", argv[i]);
        else if (name) return cli_usage_error("info", "'info' takes one device name, got '%s' and '%s'.", name, argv[i]);
        else name = argv[i];
    }
    if (model && name)
        return cli_usage_error("info", "'info' shows a device or a model (--model), not both.");
    if (model) return cli_model_info(model, as_json);
    if (!name) return cli_usage_error("info", "'info' needs a device name, for example 'backplane info cpu'.");
    if (!cli_load()) return CLI_EXIT_FAIL;
    struct bp_device *dev = cli_find_device(name);
    if (!dev) return CLI_EXIT_FAIL;
    struct device_facts f;
    static struct op_matrix m;
    gather(dev, &f);
    probe_ops(dev, &m);
    if (as_json) print_json(&f, &m);
    else print_text(&f, &m);
    return CLI_EXIT_OK;
}
