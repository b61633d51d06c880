/* grow.c — the one way libbackplane's growing arrays make room. */
#include <stdint.h>
#include <stdlib.h>

#include "internal.h"

void *bp__grow(void *v, size_t elem, size_t n, size_t *cap, size_t first)
{
    if (n < *cap) return v;
    const size_t c = *cap ? *cap * 2 : first;
    if (c < *cap || c > SIZE_MAX / elem) return NULL;
    void *m = realloc(v, c * elem);
    if (m) *cap = c;
    return m;
}
