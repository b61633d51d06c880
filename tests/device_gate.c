/* device_gate.c — see device_gate.h. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <backplane/backplane.h>

#include "device_gate.h"

int device_gate(const char *family, const char *name)
{
    bp_load_plugins(NULL);
    const bool have_plugin = bp_registry_by_name(family) != NULL;
    const bool have_device = bp_device_by_name(name) != NULL;
    bp_unload();
    if (!have_plugin) {
        printf("FAIL: the %s plugin is not loaded (is it built? BACKPLANE_LOG=info says why "
               "not), so %s cannot be tested.\n", family, name);
        return 1;
    }
    if (!have_device) {
        printf("SKIP: this machine has no %s device (the %s plugin found none).\n", name, family);
        return 77;
    }
    return 0;
}

int device_gate_for_tag(const char *family, const char *name)
{
    const char *tags = getenv("CK_INCLUDE_TAGS");
    return tags && !strcmp(tags, name) ? device_gate(family, name) : 0;
}
