/* identity.c — device identity: the BP_PROC_DEVICE_IDENTITY call, the
 * "same physical device" test, and selection by "uuid:<prefix>" or
 * "pci:<bus id>" so scripts survive a change of enumeration order. */
#include <ctype.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "loader_internal.h"

#define UUID_PREFIX "uuid:"
#define PCI_PREFIX "pci:"

bp_status bp_device_identity(struct bp_device *dev, struct bp_device_identity *out)
{
    if (!out || out->size < sizeof out->size)
        return bp__fail(BP_ERR_INVALID_ARGUMENT,
                        "bp_device_identity needs out with size set to sizeof(*out).");
    /* Copy through a full local struct so a caller built against an older,
     * shorter struct gets exactly its `size` bytes. */
    struct bp_device_identity id;
    memset(&id, 0, sizeof id);
    id.size = out->size < sizeof id ? out->size : sizeof id;
    id.cpu_package = id.numa_node = -1;
    void *p = dev ? bp_device_proc_address(dev, BP_PROC_DEVICE_IDENTITY) : NULL;
    bp_status st = dev ? BP_ERR_UNSUPPORTED : BP_ERR_INVALID_ARGUMENT;
    if (p) {
        bp_device_identity_fn fn;
        memcpy(&fn, &p, sizeof fn);
        st = fn(dev, &id);
        if (st != BP_OK) {
            bp__log(BP_LOG_WARN, "backplane", "device '%s' failed to report its identity (%s); "
                    "treating it as unknown.", bp_device_name(dev), bp_status_name(st));
            memset(&id, 0, sizeof id);
            id.cpu_package = id.numa_node = -1;
        }
    }
    id.pci_bus_id[sizeof id.pci_bus_id - 1] = '\0';
    size_t keep = out->size < sizeof id ? out->size : sizeof id;
    size_t caller_size = out->size;
    memcpy(out, &id, keep);
    out->size = caller_size;
    return st;
}

char *bp_identity_uuid_string(const struct bp_device_identity *id, char *buf, size_t cap)
{
    if (!buf || !cap) return buf;
    buf[0] = '\0';
    if (!id || !id->has_uuid) return buf;
    size_t used = 0;
    for (int i = 0; i < BP_UUID_BYTES && used < cap; i++) {
        /* 8-4-4-4-12, as nvidia-smi and vulkaninfo print it. */
        int w = snprintf(buf + used, cap - used, "%s%02x",
                         (i == 4 || i == 6 || i == 8 || i == 10) ? "-" : "", id->uuid[i]);
        if (w < 0) break;
        used += (size_t)w;
    }
    return buf;
}

static bool identity_of(struct bp_device *d, struct bp_device_identity *id)
{
    memset(id, 0, sizeof *id);
    id->size = sizeof *id;
    return bp_device_identity(d, id) == BP_OK;
}

struct bp_device *bp_device_same_physical(struct bp_device *dev)
{
    struct bp_device_identity a, b;
    if (!dev || !identity_of(dev, &a)) return NULL;
    for (size_t i = 0; i < bp__devices_count_loaded(); i++) {
        struct bp_device *o = bp__devices_get_loaded(i);
        if (o == dev) return NULL;
        if (identity_of(o, &b) && bp_identity_same(&a, &b)) return o;
    }
    return NULL;
}

/* "0000:65:00.0", "00000000:65:00.0" and "65:00.0" all name one function. */
static bool pci_canonical(const char *s, char *out, size_t cap)
{
    unsigned dom = 0, bus, dev, fn;
    int used = 0;
    if (!(sscanf(s, "%x:%x:%x.%x%n", &dom, &bus, &dev, &fn, &used) == 4 && !s[used])) {
        dom = 0;
        used = 0;
        if (!(sscanf(s, "%x:%x.%x%n", &bus, &dev, &fn, &used) == 3 && !s[used])) return false;
    }
    snprintf(out, cap, "%04x:%02x:%02x.%x", dom, bus, dev, fn);
    return true;
}

/* The UUID's hex digits ("GPU-" and dashes dropped, lower case) for prefix
 * matching; false when a character is neither. */
static bool uuid_hex(const char *s, char *out, size_t cap)
{
    size_t n = 0;
    if (!strncasecmp(s, "GPU-", 4)) s += 4;
    for (; *s; s++) {
        if (*s == '-') continue;
        if (!isxdigit((unsigned char)*s) || n + 1 >= cap) return false;
        out[n++] = (char)tolower((unsigned char)*s);
    }
    out[n] = '\0';
    return n > 0;
}

bool bp__identity_is_selector(const char *name)
{
    return name && (!strncmp(name, UUID_PREFIX, strlen(UUID_PREFIX)) ||
                    !strncmp(name, PCI_PREFIX, strlen(PCI_PREFIX)));
}

struct bp_device *bp__identity_find(const char *sel)
{
    char want[64];
    bool by_uuid = !strncmp(sel, UUID_PREFIX, strlen(UUID_PREFIX));
    const char *arg = sel + (by_uuid ? strlen(UUID_PREFIX) : strlen(PCI_PREFIX));
    if (by_uuid ? !uuid_hex(arg, want, sizeof want) : !pci_canonical(arg, want, sizeof want)) {
        bp__log(BP_LOG_WARN, "backplane", "'%s' is not a valid selector; write uuid:<hex prefix> "
                "or pci:<domain:bus:device.function>.", sel);
        return NULL;
    }
    struct bp_device *found = NULL;
    struct bp_device_identity found_id;
    for (size_t i = 0; i < bp__devices_count_loaded(); i++) {
        struct bp_device *d = bp__devices_get_loaded(i);
        struct bp_device_identity id;
        char hex[2 * BP_UUID_BYTES + 1] = "";
        if (!identity_of(d, &id)) continue;
        if (id.has_uuid)
            for (int k = 0; k < BP_UUID_BYTES; k++) snprintf(hex + 2 * k, 3, "%02x", id.uuid[k]);
        bool match = by_uuid ? id.has_uuid && !strncmp(hex, want, strlen(want))
                             : !strcmp(id.pci_bus_id, want);
        if (!match) continue;
        /* The same GPU through a second plugin is not an ambiguity: the
         * first in list order wins. Two different devices are. */
        if (found && !bp_identity_same(&found_id, &id)) {
            bp__log(BP_LOG_WARN, "backplane", "'%s' matches both '%s' and '%s'; give more digits.",
                    sel, bp_device_name(found), bp_device_name(d));
            return NULL;
        }
        if (!found) { found = d; found_id = id; }
    }
    return found;
}

void bp__identity_warn_same(struct bp_device *const *devs, size_t n, const char *what)
{
    struct bp_device_identity a, b;
    for (size_t j = 1; j < n; j++)
        for (size_t i = 0; i < j; i++)
            if (devs[i] != devs[j] && identity_of(devs[i], &a) && identity_of(devs[j], &b) &&
                bp_identity_same(&a, &b)) {
                bp__log(BP_LOG_WARN, "backplane", "%s names '%s' and '%s', which are the same "
                        "physical device through two plugins; list it once unless that is "
                        "intended.", what, bp_device_name(devs[i]), bp_device_name(devs[j]));
                i = j; /* one warning per later device */
            }
}
