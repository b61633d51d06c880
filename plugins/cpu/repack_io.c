/*
 * repack_io.c — which tensors of a CPU_REPACK buffer are in the x8 layout,
 * and set/get of any byte range of them: every 8-row group the range
 * touches is converted (a partly written group is read back, patched and
 * packed again), the plain tail rows are copied as they are. Views resolve
 * to the bytes of the tensor they alias.
 */
#include <stdlib.h>
#include <string.h>

#include "cpu_internal.h"
#include "kernels/repack.h"
#include "ops.h"

bool cpu_tensor_repacked(const struct bp_tensor *t)
{
    if (!t || t->view_src || !t->buffer || !t->buffer->buft ||
        t->buffer->buft->iface != &cpu_repack_buffer_type_iface)
        return false;
    const enum bp_type type = (enum bp_type)t->type;
    if (!cpu_repack_type_ok(type) || t->ne[0] % bp_type_block_size(type) != 0 ||
        t->ne[1] < CPU_REPACK_ROWS)
        return false;
    return t->nb[0] == bp_type_size(type) && t->nb[1] == bp_row_size(type, t->ne[0]) &&
           t->nb[2] == t->nb[1] * (size_t)t->ne[1] && t->nb[3] == t->nb[2] * (size_t)t->ne[2];
}

const struct bp_tensor *cpu_view_root(const struct bp_tensor *t)
{
    while (t && t->view_src) t = t->view_src;
    return t;
}

bool cpu_tensor_touches_repacked(const struct bp_tensor *t)
{
    return t && cpu_tensor_repacked(cpu_view_root(t));
}

bp_status cpu_repack_io(const struct cpu_plugin *pl, struct bp_tensor *t, void *host, size_t offset,
                        size_t size, bool to_tensor)
{
    const struct bp_tensor *root = cpu_view_root(t);
    if (!cpu_tensor_repacked(root)) {
        if (to_tensor)
            memcpy((char *)t->data + offset, host, size);
        else
            memcpy(host, (const char *)t->data + offset, size);
        return BP_OK;
    }
    const enum bp_type type = (enum bp_type)root->type;
    const size_t rs = root->nb[1], gbytes = CPU_REPACK_ROWS * rs, slice = root->nb[2];
    const int64_t packed_rows = root->ne[1] / CPU_REPACK_ROWS * CPU_REPACK_ROWS;
    char *base = root->data;
    const size_t begin = (size_t)((char *)t->data - base) + offset, end = begin + size;
    char *tmp = NULL;
    for (size_t pos = begin; pos < end;) {
        const size_t s0 = pos / slice * slice;
        const int64_t row = (int64_t)((pos - s0) / rs);
        const bool group = row < packed_rows;
        const size_t u0 = s0 + (group ? (size_t)(row / CPU_REPACK_ROWS) * gbytes : (size_t)row * rs);
        const size_t u1 = u0 + (group ? gbytes : rs);
        const size_t a = pos, b = end < u1 ? end : u1;
        char *h = (char *)host + (a - begin);
        if (!group) {
            if (to_tensor)
                memcpy(base + a, h, b - a);
            else
                memcpy(h, base + a, b - a);
        } else if (to_tensor && a == u0 && b == u1) {
            cpu_repack_pack(type, base + u0, h, rs, root->ne[0]);
        } else {
            if (!tmp && !(tmp = malloc(gbytes))) {
                cpu_log(pl, BP_LOG_ERROR,
                        "could not allocate %zu bytes to convert rows of tensor '%s'; free memory "
                        "or set whole groups of 8 rows.", gbytes, root->name);
                return BP_ERR_OUT_OF_MEMORY;
            }
            cpu_repack_unpack(type, tmp, base + u0, rs, root->ne[0]);
            if (to_tensor) {
                memcpy(tmp + (a - u0), h, b - a);
                cpu_repack_pack(type, base + u0, tmp, rs, root->ne[0]);
            } else {
                memcpy(h, tmp + (a - u0), b - a);
            }
        }
        pos = b;
    }
    free(tmp);
    return BP_OK;
}
