/* cli_common.c — plugin loading, device lookup and error output for the CLI. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include <backplane/bp_meta.h>

#include "cli.h"

void cli_error(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fflush(stdout); /* keep the sentence after what it refers to */
    fputs("backplane: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

int cli_usage_error(const char *cmd, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("backplane: ", stderr);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\nRun 'backplane %s --help' for usage.\n", cmd ? cmd : "");
    return CLI_EXIT_USAGE;
}

int cli_json_only_args(const char *cmd, int argc, char **argv, void (*help)(void), bool *as_json)
{
    *as_json = false;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--json")) *as_json = true;
        else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) { help(); return CLI_EXIT_OK; }
        else return cli_usage_error(cmd, "unknown option '%s' for '%s'.", argv[i], cmd);
    }
    return -1;
}

bool cli_load(void)
{
    bp_status s = bp_load_plugins(&(struct bp_load_options){.isolate_probe = true});
    if (s != BP_OK) {
        cli_error("loading plugins failed: %s", bp_last_error());
        return false;
    }
    return true;
}

struct bp_device *cli_find_device(const char *name)
{
    struct bp_device *dev = bp_device_by_name(name);
    if (dev) return dev;
    /* "meta:cpu,vulkan0": composed on the spot, as BACKPLANE_DEVICES would. */
    if (!strncmp(name, "meta:", 5)) {
        if (bp_meta_device_from_spec(name, &dev) == BP_OK) return dev;
        cli_error("%s", bp_last_error());
        return NULL;
    }
    size_t n = bp_device_count();
    if (n == 0) {
        cli_error("there is no device named '%s', and no device is available at all; "
                  "run 'backplane devices' to see which plugins failed to load.", name);
        return NULL;
    }
    char list[1024] = "";
    size_t used = 0;
    for (size_t i = 0; i < n && used < sizeof list; i++) {
        int w = snprintf(list + used, sizeof list - used, "%s%s", i ? ", " : "",
                         bp_device_name(bp_device_get(i)));
        if (w < 0) break;
        used += (size_t)w;
    }
    cli_error("there is no device named '%s'; available devices: %s.", name, list);
    return NULL;
}

const struct bp_plugin_info *cli_plugin_of(struct bp_device *dev)
{
    for (size_t i = 0; i < bp_plugin_count(); i++) {
        const struct bp_plugin_info *p = bp_plugin_get(i);
        if (p && p->reg == dev->reg) return p;
    }
    return NULL;
}

const char *cli_abi_string(uint32_t v, char *buf, size_t cap)
{
    snprintf(buf, cap, "%u.%u", (unsigned)BP_ABI_VERSION_MAJOR(v), (unsigned)BP_ABI_VERSION_MINOR(v));
    return buf;
}
