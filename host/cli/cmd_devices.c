/* cmd_devices.c — `backplane devices`: devices, loaded plugins, refused plugins. */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "identity_print.h"
#include "json.h"

static void help(void)
{
    puts("usage: backplane devices [--json]\n\n"
         "Lists every device, the plugins that were loaded, and the plugins that\n"
         "were refused with the reason and what to do about it. Under each device\n"
         "is its identity (UUID, PCI bus id, software implementation, CPU package\n"
         "and NUMA node) and, when two plugins show one physical device, which\n"
         "device it is the same as. Each plugin is\n"
         "probed in a child process first, so one that crashes or hangs is\n"
         "reported instead of taking the listing down.");
}

static void print_text(void)
{
    size_t nd = bp_device_count();
    printf("Devices (%zu):\n", nd);
    if (nd) printf("  %-3s %-12s %-6s %-21s %s\n", "#", "NAME", "TYPE", "MEMORY FREE/TOTAL", "DESCRIPTION");
    for (size_t i = 0; i < nd; i++) {
        struct bp_device *d = bp_device_get(i);
        size_t free_b = 0, total_b = 0;
        char fb[32], tb[32], mem[72];
        bp_device_memory(d, &free_b, &total_b);
        snprintf(mem, sizeof mem, "%s / %s", bp_format_bytes(free_b, fb, sizeof fb),
                 bp_format_bytes(total_b, tb, sizeof tb));
        printf("  %-3zu %-12s %-6s %-21s %s\n", i, bp_device_name(d),
               bp_device_type_name(bp_device_type(d)), mem, bp_device_description(d));
        char ident[256];
        if (*cli_identity_text(d, ident, sizeof ident)) printf("      %s\n", ident);
    }

    size_t np = bp_plugin_count();
    printf("\nPlugins loaded (%zu):\n", np);
    if (np) printf("  %-10s %-8s %-5s %-5s %s\n", "FAMILY", "VARIANT", "ABI", "SCORE", "FILE");
    for (size_t i = 0; i < np; i++) {
        const struct bp_plugin_info *p = bp_plugin_get(i);
        char abi[16];
        printf("  %-10s %-8s %-5s %-5d %s\n", p->family, p->variant && *p->variant ? p->variant : "-",
               cli_abi_string(p->abi_version, abi, sizeof abi), p->score, p->path);
    }

    size_t nf = bp_plugin_failure_count();
    printf("\nPlugins refused (%zu):\n", nf);
    for (size_t i = 0; i < nf; i++) {
        const struct bp_plugin_failure *f = bp_plugin_failure_get(i);
        printf("  %s [%s] %s\n", f->family && *f->family ? f->family : "?",
               bp_plugin_failure_code_name(f->code), f->path);
        printf("      reason: %s\n", f->reason ? f->reason : "");
        printf("      remedy: %s\n", f->remedy ? f->remedy : "");
    }
}

static void print_json(void)
{
    struct json_writer w;
    json_init(&w, stdout);
    json_object_begin(&w, NULL);
    json_array_begin(&w, "devices");
    for (size_t i = 0; i < bp_device_count(); i++) {
        struct bp_device *d = bp_device_get(i);
        size_t free_b = 0, total_b = 0;
        bp_device_memory(d, &free_b, &total_b);
        const struct bp_plugin_info *p = cli_plugin_of(d);
        json_object_begin(&w, NULL);
        json_uint(&w, "index", i);
        json_string(&w, "name", bp_device_name(d));
        json_string(&w, "type", bp_device_type_name(bp_device_type(d)));
        json_string(&w, "description", bp_device_description(d));
        json_uint(&w, "memory_free", free_b);
        json_uint(&w, "memory_total", total_b);
        json_string(&w, "plugin", p ? p->family : NULL);
        cli_identity_json(&w, d);
        json_object_end(&w);
    }
    json_array_end(&w);
    json_array_begin(&w, "plugins");
    for (size_t i = 0; i < bp_plugin_count(); i++) {
        const struct bp_plugin_info *p = bp_plugin_get(i);
        char abi[16];
        json_object_begin(&w, NULL);
        json_string(&w, "family", p->family);
        json_string(&w, "variant", p->variant ? p->variant : "");
        json_string(&w, "path", p->path);
        json_string(&w, "abi_version", cli_abi_string(p->abi_version, abi, sizeof abi));
        json_int(&w, "score", p->score);
        json_uint(&w, "devices", p->n_devices);
        json_object_end(&w);
    }
    json_array_end(&w);
    json_array_begin(&w, "failures");
    for (size_t i = 0; i < bp_plugin_failure_count(); i++) {
        const struct bp_plugin_failure *f = bp_plugin_failure_get(i);
        json_object_begin(&w, NULL);
        json_string(&w, "path", f->path);
        json_string(&w, "family", f->family ? f->family : "");
        json_string(&w, "code", bp_plugin_failure_code_name(f->code));
        json_string(&w, "reason", f->reason);
        json_string(&w, "remedy", f->remedy);
        json_object_end(&w);
    }
    json_array_end(&w);
    json_object_end(&w);
    json_finish(&w);
}

int cmd_devices(int argc, char **argv)
{
    bool as_json;
    const int done = cli_json_only_args("devices", argc, argv, help, &as_json);
    if (done >= 0) return done;
    if (!cli_load()) return CLI_EXIT_FAIL;
    if (as_json) print_json();
    else print_text();
    return CLI_EXIT_OK;
}
