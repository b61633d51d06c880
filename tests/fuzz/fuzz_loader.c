/*
 * fuzz_loader.c — libFuzzer harness for the plugin-facing side of the
 * loader: each input scripts a plugin (fuzzplug.c: exported ABI version,
 * init status, registry size, NULL fields, family and device names, claimed
 * and real device counts), the host loads it, and the device list and the
 * refusals are read back as an application would. Any script must end in a
 * loaded plugin or a refusal with a sentence, never a crash, a hang or a
 * leak, and a loaded plugin's devices must have usable names.
 */
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <backplane/backplane.h>

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

typedef void (*set_script_fn)(const uint8_t *data, size_t size);
static set_script_fn set_script;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    /* Only the scripted plugin, found by path, loaded in this process. */
    setenv("BACKPLANE_PLUGIN_PATH", BP_FUZZPLUG_PATH, 1);
    setenv("BACKPLANE_BACKENDS", "fuzzplug", 1);
    setenv("BACKPLANE_LOG", "error", 1);
    /* Held open for the whole run: the loader's dlopen and dlclose of the
     * same path then share this instance and its script. */
    void *h = dlopen(BP_FUZZPLUG_PATH, RTLD_NOW | RTLD_LOCAL);
    set_script = h ? (set_script_fn)dlsym(h, "fuzzplug_set_script") : NULL;
    if (!set_script) {
        fprintf(stderr, "fuzz_loader: cannot open %s: %s\n", BP_FUZZPLUG_PATH, dlerror());
        abort();
    }
    return 0;
}

static void need_sentence(const char *s)
{
    if (!s || !s[0]) __builtin_trap();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    set_script(data, size);
    const struct bp_load_options opts = {0};
    if (bp_load_plugins(&opts) != BP_OK) need_sentence(bp_last_error());
    for (size_t i = 0; i < bp_plugin_failure_count(); i++) {
        const struct bp_plugin_failure *f = bp_plugin_failure_get(i);
        if (!f) __builtin_trap();
        need_sentence(f->reason);
        need_sentence(f->remedy);
        need_sentence(bp_plugin_failure_code_name(f->code));
    }
    for (size_t i = 0; i < bp_device_count(); i++) {
        struct bp_device *d = bp_device_get(i);
        if (!d) __builtin_trap();
        const char *name = bp_device_name(d);
        need_sentence(name);
        /* A listed device's name finds a device of that name. */
        struct bp_device *again = bp_device_by_name(name);
        if (!again || strcmp(bp_device_name(again), name) != 0) __builtin_trap();
        need_sentence(bp_device_description(d));
        size_t free_b = 0, total = 0;
        bp_device_memory(d, &free_b, &total);
        struct bp_device_caps caps = {.size = sizeof caps};
        (void)bp_device_caps(d, &caps);
        (void)bp_device_type(d);
    }
    bp_unload();
    return 0;
}
