/* layout.c — turning a split state into slices: how many elements of each
 * segment every device gets (granularity, ratios, remainder rotation), and
 * small operations on the resulting piece lists. */
#include <stdio.h>
#include <string.h>

#include "meta_internal.h"

const char *meta_state_name(int32_t state)
{
    switch (state) {
    case BP_META_SPLIT_AXIS_0: return "AXIS_0";
    case BP_META_SPLIT_AXIS_1: return "AXIS_1";
    case BP_META_SPLIT_AXIS_2: return "AXIS_2";
    case BP_META_SPLIT_AXIS_3: return "AXIS_3";
    case BP_META_SPLIT_MIRRORED: return "MIRRORED";
    case BP_META_SPLIT_PARTIAL: return "PARTIAL";
    default: return "UNKNOWN";
    }
}

static int64_t gcd64(int64_t a, int64_t b)
{
    while (b) { int64_t t = a % b; a = b; b = t; }
    return a;
}

void meta_layout_simple(struct meta_layout *l, int32_t state)
{
    l->state = state;
    l->n_pieces = 0;
    memset(l->local_ne, 0, sizeof l->local_ne);
}

bool meta_layout_is_axis(const struct meta_layout *l)
{
    return l->state >= BP_META_SPLIT_AXIS_0 && l->state <= BP_META_SPLIT_AXIS_3;
}

/* Merge neighbouring pieces of one device and drop empty ones, then sum the
 * local extents. */
void meta_layout_finish(struct meta_layout *l, size_t n_dev)
{
    int32_t w = 0;
    for (int32_t i = 0; i < l->n_pieces; i++) {
        if (l->piece[i].len == 0) continue;
        if (w > 0 && l->piece[w - 1].dev == l->piece[i].dev) l->piece[w - 1].len += l->piece[i].len;
        else l->piece[w++] = l->piece[i];
    }
    l->n_pieces = w;
    memset(l->local_ne, 0, sizeof l->local_ne);
    for (int32_t i = 0; i < w; i++) l->local_ne[l->piece[i].dev] += l->piece[i].len;
    (void)n_dev;
}

bool meta_layout_same(const struct meta_layout *a, const struct meta_layout *b)
{
    if (a->state != b->state) return false;
    if (!meta_layout_is_axis(a)) return true;
    if (a->n_pieces != b->n_pieces) return false;
    for (int32_t i = 0; i < a->n_pieces; i++)
        if (a->piece[i].len != b->piece[i].len || a->piece[i].dev != b->piece[i].dev) return false;
    return true;
}

bool meta_layout_rescale(struct meta_layout *l, int64_t mul, int64_t div)
{
    for (int32_t i = 0; i < l->n_pieces; i++) {
        int64_t v = l->piece[i].len * mul;
        if (v % div) return false;
        l->piece[i].len = v / div;
    }
    for (size_t d = 0; d < META_MAX_DEV; d++) {
        int64_t v = l->local_ne[d] * mul;
        if (v % div) return false;
        l->local_ne[d] = v / div;
    }
    return true;
}

/* Units of one segment over the devices: each device's ratio share rounded
 * down, then the remainder one unit at a time from the "last" device
 * backwards, where rotation moves "last" around. */
static void share_units(int64_t units, size_t n, const float *ratio, int32_t rotation,
                        int64_t *count)
{
    double sum = 0;
    for (size_t d = 0; d < n; d++) sum += ratio[d] > 0 ? ratio[d] : 0;
    int64_t given = 0;
    for (size_t d = 0; d < n; d++) {
        double share = sum > 0 ? (double)units * (ratio[d] > 0 ? ratio[d] : 0) / sum : 0;
        count[d] = (int64_t)(share + 1e-9);
        if (count[d] > units - given) count[d] = units - given;
        given += count[d];
    }
    int64_t rest = units - given;
    size_t last = (n - 1 + (size_t)(rotation < 0 ? -rotation : rotation)) % n;
    for (size_t k = 0; rest > 0; k = (k + 1) % n) {
        size_t d = (last + n - k) % n;
        if (ratio[d] <= 0 && sum > 0) continue; /* a zero ratio means none */
        count[d]++;
        rest--;
    }
}

bp_status meta_layout_place(const struct bp_meta_split *split, const struct bp_tensor *t,
                            size_t n_dev, const float *ratio, struct meta_layout *out)
{
    meta_layout_simple(out, split->state);
    if (split->state == BP_META_SPLIT_MIRRORED || split->state == BP_META_SPLIT_PARTIAL) return BP_OK;
    if (split->state < 0 || split->state > BP_META_SPLIT_PARTIAL) {
        meta_log(BP_LOG_ERROR, "tensor '%s' was given split state %d, which is not a bp_meta_split_state.",
                 t->name, (int)split->state);
        return BP_ERR_INVALID_ARGUMENT;
    }
    int axis = split->state;
    int64_t extent = t->ne[axis];
    struct bp_meta_segment one = {extent, 1, 0};
    const struct bp_meta_segment *seg = split->n_segments > 0 ? split->seg : &one;
    int32_t n_seg = split->n_segments > 0 ? split->n_segments : 1;
    if (n_seg > BP_META_MAX_SEGMENTS) {
        meta_log(BP_LOG_ERROR, "tensor '%s' has %d segments; at most %d are allowed.", t->name, (int)n_seg,
                 BP_META_MAX_SEGMENTS);
        return BP_ERR_INVALID_ARGUMENT;
    }
    int64_t total = 0;
    for (int32_t s = 0; s < n_seg; s++) total += seg[s].ne * (seg[s].repeat > 0 ? seg[s].repeat : 1);
    if (total != extent) {
        meta_log(BP_LOG_ERROR, "the segments of tensor '%s' cover %lld elements of axis %d but it has %lld; "
                 "make the segment sizes times their repeats add up to the axis.", t->name,
                 (long long)total, axis, (long long)extent);
        return BP_ERR_SHAPE;
    }
    int64_t bs = axis == 0 ? bp_type_block_size((enum bp_type)t->type) : 1;
    for (int32_t s = 0; s < n_seg; s++) {
        int64_t g = seg[s].granularity > 0 ? seg[s].granularity : (split->granularity > 0 ? split->granularity : 1);
        g = g / gcd64(g, bs) * bs; /* lcm with the block size */
        if (seg[s].ne % g != 0) {
            meta_log(BP_LOG_ERROR, "segment %d of tensor '%s' has %lld elements, not a multiple of its "
                     "granularity %lld (block size included); fix the split rule.", (int)s, t->name,
                     (long long)seg[s].ne, (long long)g);
            return BP_ERR_SHAPE;
        }
        int64_t count[META_MAX_DEV];
        share_units(seg[s].ne / g, n_dev, ratio, split->rotation, count);
        int64_t rep = seg[s].repeat > 0 ? seg[s].repeat : 1;
        for (int64_t r = 0; r < rep; r++) {
            for (size_t d = 0; d < n_dev; d++) {
                if (out->n_pieces == META_MAX_PIECES) {
                    meta_log(BP_LOG_ERROR, "tensor '%s' would need more than %d slices; use fewer "
                             "segments or repeats.", t->name, META_MAX_PIECES);
                    return BP_ERR_UNSUPPORTED;
                }
                out->piece[out->n_pieces++] = (struct meta_piece){count[d] * g, (int32_t)d};
            }
        }
    }
    meta_layout_finish(out, n_dev);
    return BP_OK;
}

