/* split_rules.c — tensor-name patterns to split states, so that an
 * application writes its tensor-parallel rules (Megatron: column-parallel
 * then row-parallel) as a table. */
#include <stdlib.h>
#include <string.h>

#include <backplane/bp_meta.h>

#include "internal.h"

/* Glob with '*' only (iterative, no recursion depth to exhaust). */
static int glob_match(const char *p, const char *s)
{
    const char *star = NULL, *back = NULL;
    while (*s) {
        if (*p == '*') { star = p++; back = s; }
        else if (*p == *s) { p++; s++; }
        else if (star) { p = star + 1; s = ++back; }
        else return 0;
    }
    while (*p == '*') p++;
    return *p == '\0';
}

int bp_meta_rules_match(const struct bp_meta_rule_table *table, const char *name, struct bp_meta_split *out)
{
    if (!table || !name || !out) return 0;
    for (size_t i = 0; i < table->n_rules; i++) {
        const struct bp_meta_rule *r = &table->rules[i];
        if (!r->pattern || !glob_match(r->pattern, name)) continue;
        *out = r->split;
        if (!strncmp(name, "blk.", 4)) {
            char *end;
            long layer = strtol(name + 4, &end, 10);
            if (end != name + 4 && *end == '.' && layer >= 0 && layer < (1L << 30)) out->rotation = (int32_t)layer;
        }
        return 1;
    }
    return 0;
}

int bp_meta_rules_split_fn(void *user, const struct bp_tensor *t, struct bp_meta_split *out)
{
    return t ? bp_meta_rules_match(user, t->name, out) : 0;
}
