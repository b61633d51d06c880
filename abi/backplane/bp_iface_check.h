/*
 * bp_iface_check.h — the floor every interface table must reach: its
 * required fields, as data, and one check that both the host and composing
 * plugins (meta) run on a table the first time they see it. Header-only;
 * included by bp_plugin.h.
 *
 * A table passes when its `size` is plausible (at most BP_IFACE_MAX_SIZE),
 * covers every required field, and no required field is NULL. Optional
 * fields are then read through BP_IFACE_GET. Added in ABI 1.1.
 */
#ifndef BP_IFACE_CHECK_H
#define BP_IFACE_CHECK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "bp_plugin.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A `size` beyond this is garbage, not a table from a newer minor. */
#define BP_IFACE_MAX_SIZE 65536u

/* One required field: its name and the bytes it occupies. */
struct bp_iface_field {
    const char *name;
    size_t offset;
    size_t end;
};
#define BP_IFACE_FIELD(type, f) {#f, offsetof(type, f), offsetof(type, f) + sizeof(((type *)0)->f)}

/* The verdict on a table: field NULL means usable. Otherwise `field` names
 * what is wrong ("size" for a missing table or an implausible size) and
 * beyond_size tells a table too short for it from a NULL slot. */
struct bp_iface_problem {
    const char *field;
    bool beyond_size;
    size_t size;          /* the size the table claims (0 for a missing table) */
};

/* Check tbl (any interface table, size first) against req[0..n). Reads the
 * table only inside the bytes its size claims. */
static inline struct bp_iface_problem bp_iface_check_fields(const void *tbl,
                                                            const struct bp_iface_field *req,
                                                            size_t n)
{
    struct bp_iface_problem p = {NULL, false, 0};
    if (!tbl) {
        p.field = "size";
        p.beyond_size = true;
        return p;
    }
    memcpy(&p.size, tbl, sizeof p.size);
    if (p.size > BP_IFACE_MAX_SIZE) {
        p.field = "size";
        return p;
    }
    for (size_t i = 0; i < n; i++) {
        if (p.size < req[i].end) {
            p.field = req[i].name;
            p.beyond_size = true;
            return p;
        }
        const unsigned char *slot = (const unsigned char *)tbl + req[i].offset;
        bool null = true;
        for (size_t b = 0; b < req[i].end - req[i].offset; b++) null = null && slot[b] == 0;
        if (null) {
            p.field = req[i].name;
            return p;
        }
    }
    return p;
}

/* One sentence fragment for a problem, e.g. "ends at byte 8, before its
 * required field get_name" or "leaves its required field graph_compute
 * NULL"; writes "" when there is none. Returns buf. */
static inline const char *bp_iface_problem_text(struct bp_iface_problem p, char *buf, size_t cap)
{
    if (!p.field)
        snprintf(buf, cap, "%s", "");
    else if (!strcmp(p.field, "size") && p.beyond_size)
        snprintf(buf, cap, "is missing (NULL interface table)");
    else if (!strcmp(p.field, "size"))
        snprintf(buf, cap, "claims size %zu, more than any table (%u); its size field is garbage",
                 p.size, BP_IFACE_MAX_SIZE);
    else if (p.beyond_size)
        snprintf(buf, cap, "ends at byte %zu, before its required field %s", p.size, p.field);
    else
        snprintf(buf, cap, "leaves its required field %s NULL", p.field);
    return buf;
}

/* The required fields of each table, in slot order, as bp_plugin.h marks
 * them; the last one is the table's size floor. */
#define BP_IFACE_CHECKER(fn, type, ...)                                               \
    static inline struct bp_iface_problem fn(const type *tbl)                         \
    {                                                                                 \
        static const struct bp_iface_field req[] = {__VA_ARGS__};                     \
        return bp_iface_check_fields(tbl, req, sizeof req / sizeof req[0]);           \
    }

BP_IFACE_CHECKER(bp_registry_iface_check, struct bp_registry_iface,
                 BP_IFACE_FIELD(struct bp_registry_iface, get_name),
                 BP_IFACE_FIELD(struct bp_registry_iface, get_device_count),
                 BP_IFACE_FIELD(struct bp_registry_iface, get_device))
BP_IFACE_CHECKER(bp_device_iface_check, struct bp_device_iface,
                 BP_IFACE_FIELD(struct bp_device_iface, get_name),
                 BP_IFACE_FIELD(struct bp_device_iface, get_type),
                 BP_IFACE_FIELD(struct bp_device_iface, init_backend),
                 BP_IFACE_FIELD(struct bp_device_iface, get_buffer_type),
                 BP_IFACE_FIELD(struct bp_device_iface, supports_op))
BP_IFACE_CHECKER(bp_buffer_type_iface_check, struct bp_buffer_type_iface,
                 BP_IFACE_FIELD(struct bp_buffer_type_iface, get_name),
                 BP_IFACE_FIELD(struct bp_buffer_type_iface, alloc_buffer),
                 BP_IFACE_FIELD(struct bp_buffer_type_iface, get_alignment))
BP_IFACE_CHECKER(bp_buffer_iface_check, struct bp_buffer_iface,
                 BP_IFACE_FIELD(struct bp_buffer_iface, free_buffer),
                 BP_IFACE_FIELD(struct bp_buffer_iface, get_base),
                 BP_IFACE_FIELD(struct bp_buffer_iface, set_tensor),
                 BP_IFACE_FIELD(struct bp_buffer_iface, get_tensor))
BP_IFACE_CHECKER(bp_backend_iface_check, struct bp_backend_iface,
                 BP_IFACE_FIELD(struct bp_backend_iface, free),
                 BP_IFACE_FIELD(struct bp_backend_iface, graph_compute))
BP_IFACE_CHECKER(bp_event_iface_check, struct bp_event_iface,
                 BP_IFACE_FIELD(struct bp_event_iface, free),
                 BP_IFACE_FIELD(struct bp_event_iface, synchronize))

/* The sizes of the tables as ABI 1.0 defined them: a plugin built against
 * the 1.0 headers declares exactly these, and a 1.x host must accept them. */
#define BP_REGISTRY_IFACE_SIZE_1_0    BP_IFACE_SLOT(6)
#define BP_DEVICE_IFACE_SIZE_1_0      BP_IFACE_SLOT(12)
#define BP_BUFFER_TYPE_IFACE_SIZE_1_0 BP_IFACE_SLOT(7)
#define BP_BUFFER_IFACE_SIZE_1_0      BP_IFACE_SLOT(8)
#define BP_BACKEND_IFACE_SIZE_1_0     BP_IFACE_SLOT(10)
#define BP_EVENT_IFACE_SIZE_1_0       BP_IFACE_SLOT(3)
static_assert(BP_DEVICE_IFACE_SIZE_1_0 <= sizeof(struct bp_device_iface) &&
              BP_BACKEND_IFACE_SIZE_1_0 <= sizeof(struct bp_backend_iface) &&
              BP_BUFFER_IFACE_SIZE_1_0 <= sizeof(struct bp_buffer_iface),
              "tables only grow within major 1");

#ifdef __cplusplus
}
#endif
#endif /* BP_IFACE_CHECK_H */
