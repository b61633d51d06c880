/* crashinit.c — a plugin that dies of SIGSEGV in its init: `backplane devices`
 * must list it as CRASHED and go on (the probe runs in a child process). */
#include <signal.h>

#include "checkplug.h"

static bp_status crash_init(const struct bp_host_services *host, struct bp_registry **out)
{
    (void)host;
    *out = NULL;
    raise(SIGSEGV);
    return BP_ERR_INTERNAL;
}

BP_PLUGIN_DEFINE(crash_init)
