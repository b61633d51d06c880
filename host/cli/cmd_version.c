/* cmd_version.c — `backplane version`. */
#include <dlfcn.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "json.h"

static void help(void)
{
    puts("usage: backplane version [--json]\n\n"
         "Prints the library version, the plugin ABI version it speaks, and where\n"
         "plugins are looked for.");
}

/* The plugin directory next to libbackplane, found from the loaded library
 * itself so it is right for the build tree and the install tree alike. */
static const char *library_plugin_dir(char *buf, size_t cap)
{
    Dl_info info;
    if (!dladdr((void *)bp_version_string, &info) || !info.dli_fname) return NULL;
    char path[4096];
    snprintf(path, sizeof path, "%s", info.dli_fname);
    char *real = realpath(path, NULL);
    const char *src = real ? real : path;
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s", src);
    free(real);
    snprintf(buf, cap, "%s/backplane", dirname(tmp));
    return buf;
}

int cmd_version(int argc, char **argv)
{
    bool as_json;
    const int done = cli_json_only_args("version", argc, argv, help, &as_json);
    if (done >= 0) return done;
    char abi[32], dir[4200];
    cli_abi_string(BP_ABI_VERSION, abi, sizeof abi);
    const char *env = getenv("BACKPLANE_PLUGIN_PATH");
    const char *libdir = library_plugin_dir(dir, sizeof dir);
    if (as_json) {
        struct json_writer w;
        json_init(&w, stdout);
        json_object_begin(&w, NULL);
        json_string(&w, "version", bp_version_string());
        json_string(&w, "abi_version", abi);
        json_string(&w, "plugin_path_env", env && *env ? env : NULL);
        json_string(&w, "library_plugin_dir", libdir);
        json_object_end(&w);
        json_finish(&w);
        return CLI_EXIT_OK;
    }
    printf("backplane %s\n", bp_version_string());
    printf("plugin ABI %s\n", abi);
    printf("plugin search: BACKPLANE_PLUGIN_PATH=%s, then %s, then the install directory\n",
           env && *env ? env : "(unset)", libdir ? libdir : "(the directory next to libbackplane)");
    return CLI_EXIT_OK;
}
