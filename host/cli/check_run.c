/*
 * check_run.c — computing one case on one device, with its own backend and
 * buffer, guard bytes around every tensor and a check that inputs survive.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check_harness.h"

static void problem(struct check_output *out, const char *fmt, const char *a, const char *b)
{
    if (out->problem[0]) return; /* keep the first: later ones are usually its echo */
    snprintf(out->problem, sizeof out->problem, fmt, a, b);
}

static const char *tname(const struct bp_tensor *t)
{
    return t->name[0] ? t->name : "(unnamed)";
}

/* t's bytes (raw, laid out by t's strides) as f32 in logical order. */
static void to_f32(const struct bp_tensor *t, const unsigned char *raw, float *v)
{
    size_t k = 0;
    for (int64_t i3 = 0; i3 < t->ne[3]; i3++)
        for (int64_t i2 = 0; i2 < t->ne[2]; i2++)
            for (int64_t i1 = 0; i1 < t->ne[1]; i1++)
                for (int64_t i0 = 0; i0 < t->ne[0]; i0++) {
                    const unsigned char *p = raw + (size_t)i0 * t->nb[0] + (size_t)i1 * t->nb[1] +
                                             (size_t)i2 * t->nb[2] + (size_t)i3 * t->nb[3];
                    uint16_t h;
                    int32_t iv;
                    switch (t->type) {
                    case BP_TYPE_F16: memcpy(&h, p, 2); v[k] = bp_f16_to_f32(h); break;
                    case BP_TYPE_BF16: memcpy(&h, p, 2); v[k] = bp_bf16_to_f32(h); break;
                    case BP_TYPE_I32: memcpy(&iv, p, 4); v[k] = (float)iv; break;
                    default: memcpy(&v[k], p, 4); break;
                    }
                    k++;
                }
}

/* The output as f32: as the device gives it (copy < 0), or sub-device
 * copy's own copy of a mirrored output of a meta device. */
static float *read_values(const struct bp_tensor *t, int copy, struct check_output *out)
{
    size_t nbytes = bp_nbytes(t);
    size_t n = (size_t)bp_nelements(t);
    unsigned char *raw = malloc(nbytes ? nbytes : 1);
    float *v = malloc((n ? n : 1) * sizeof *v);
    if (!raw || !v) {
        problem(out, "%s%s", "out of host memory reading the output", "");
        goto fail;
    }
    bp_status st = copy < 0 ? bp_tensor_get(t, raw, 0, nbytes)
                            : bp_meta_tensor_get_copy(t, (size_t)copy, raw, 0, nbytes);
    if (st != BP_OK) {
        problem(out, "reading the output failed: %s%s", bp_last_error(), "");
        goto fail;
    }
    /* Two runs that both compute nothing would agree perfectly: an output
     * still holding the guard pattern everywhere was never written. */
    if (!t->view_src && nbytes > 0) {
        size_t j = 0;
        while (j < nbytes && raw[j] == CHECK_GUARD_PATTERN) j++;
        char who[48] = "";
        if (copy >= 0) snprintf(who, sizeof who, " (sub-device %d's copy)", copy);
        if (j == nbytes) problem(out, "left its output tensor '%s' unwritten%s", tname(t), who);
    }
    to_f32(t, raw, v);
    free(raw);
    return v;
fail:
    free(raw);
    free(v);
    return NULL;
}

/* On a meta device, every sub-device's copy of a MIRRORED output: a split
 * output is gathered from all of them already. */
static void read_copies(struct bp_device *dev, const struct bp_tensor *t, struct check_output *out)
{
    int32_t state = -1;
    size_t n_sub = 0;
    if (bp_device_type(dev) != BP_DEVICE_TYPE_META || !out->values ||
        bp_meta_tensor_split(t, &state, NULL) != BP_OK || state != BP_META_SPLIT_MIRRORED ||
        bp_meta_device_sub_devices(dev, NULL, 0, &n_sub) != BP_OK || n_sub > BP_META_MAX_DEVICES)
        return;
    out->copies[0] = out->values;
    out->n_copies = 1;
    for (size_t d = 1; d < n_sub; d++) {
        out->copies[d] = read_values(t, (int)d, out);
        if (!out->copies[d]) return;
        out->n_copies = d + 1;
    }
}

/* Bytes a tensor owns in its buffer (the buffer type may pad it). */
static size_t owned_size(struct bp_buffer *buf, const struct bp_tensor *t)
{
    struct bp_buffer_type *buft = buf->buft;
    if (buft && BP_IFACE_HAS(buft->iface, get_alloc_size) && buft->iface->get_alloc_size) {
        size_t s = buft->iface->get_alloc_size(buft, t);
        if (s >= bp_nbytes(t)) return s;
    }
    return bp_nbytes(t);
}

/* Every byte of buf outside the tensors must still hold the guard pattern. */
static void check_guards(struct bp_context *ctx, struct bp_buffer *buf, struct check_output *out)
{
    size_t size = bp_buffer_size(buf);
    unsigned char *bytes = malloc(size ? size : 1);
    unsigned char *owned = calloc(size ? size : 1, 1);
    if (!bytes || !owned) goto done;
    if (bp_buffer_read(buf, 0, bytes, size) != BP_OK) {
        problem(out, "reading the buffer back for the guard check failed: %s%s", bp_last_error(), "");
        goto done;
    }
    const char *base = buf->iface->get_base(buf);
    size_t n_t = bp_context_tensor_count(ctx);
    for (size_t i = 0; i < n_t; i++) {
        const struct bp_tensor *t = bp_context_tensor(ctx, i);
        if (!t || t->view_src || t->buffer != buf) continue;
        size_t off = (size_t)((const char *)t->data - base), len = owned_size(buf, t);
        for (size_t j = off; j < off + len && j < size; j++) owned[j] = 1;
    }
    for (size_t p = 0; p < size; p++) {
        if (owned[p] || bytes[p] == CHECK_GUARD_PATTERN) continue;
        /* Blame the tensor that ends closest before the byte (a write past
         * its end), else the one that starts after it (a write before). */
        const struct bp_tensor *before = NULL, *after = NULL;
        size_t before_end = 0, after_off = SIZE_MAX;
        for (size_t i = 0; i < n_t; i++) {
            const struct bp_tensor *t = bp_context_tensor(ctx, i);
            if (!t || t->view_src || t->buffer != buf) continue;
            size_t off = (size_t)((const char *)t->data - base), end = off + owned_size(buf, t);
            if (end <= p && (!before || end > before_end)) before = t, before_end = end;
            if (off > p && off < after_off) after = t, after_off = off;
        }
        char where[64];
        if (before) {
            size_t n = p - before_end + 1;
            snprintf(where, sizeof where, "byte %zu past its end", n);
            problem(out, "wrote out of bounds of tensor '%s' (%s)", tname(before), where);
        } else if (after) {
            snprintf(where, sizeof where, "byte %zu before its start", after_off - p);
            problem(out, "wrote out of bounds of tensor '%s' (%s)", tname(after), where);
        } else {
            problem(out, "wrote outside every tensor of its buffer%s%s", "", "");
        }
        break;
    }
done:
    free(bytes);
    free(owned);
}

/* Leaves that an op legitimately writes: the roots of views that ops
 * (SET_ROWS, CPY) return. */
static bool leaf_is_written(struct bp_graph *g, const struct bp_tensor *leaf)
{
    for (int32_t i = 0; i < g->n_nodes; i++) {
        const struct bp_tensor *n = g->nodes[i];
        if (bp_op_is_view((enum bp_op)n->op)) continue;
        for (const struct bp_tensor *v = n->view_src; v; v = v->view_src)
            if (v == leaf) return true;
    }
    return false;
}

static void check_inputs_intact(struct check_builder *b, struct bp_graph *g,
                                unsigned char *const *sent, struct check_output *out)
{
    for (int i = 0; i < b->n_inputs; i++) {
        const struct bp_tensor *t = b->inputs[i].t;
        if (!sent[i] || leaf_is_written(g, t)) continue;
        size_t nbytes = bp_nbytes(t);
        unsigned char *now = malloc(nbytes ? nbytes : 1);
        if (!now) return;
        if (bp_tensor_get(t, now, 0, nbytes) == BP_OK && memcmp(now, sent[i], nbytes) != 0)
            problem(out, "modified its input tensor '%s'%s", tname(t), "");
        free(now);
    }
}

static bool buffer_is_host(struct bp_buffer *buf)
{
    struct bp_buffer_type *bt = buf->buft;
    return bt && BP_IFACE_HAS(bt->iface, is_host) && bt->iface->is_host && bt->iface->is_host(bt);
}

/* Computes c on dev's backend, or, when reference is given, by calling it
 * on the tensors in dev's (host-memory) buffer. */
static void run_case(const struct check_case *c, size_t case_index, struct bp_device *dev,
                     enum check_meta_mode mode, bp_custom_op_reference_fn reference,
                     struct check_output *out)
{
    memset(out, 0, sizeof *out);
    struct check_builder b;
    struct bp_graph *g = NULL;
    struct bp_buffer *buf = NULL;
    struct bp_backend *be = NULL;
    unsigned char *sent[CHECK_MAX_INPUTS] = {0};

    struct bp_tensor *t = check_case_build(c, &b, &g);
    if (!t) {
        problem(out, "could not build the case: %s%s", bp_last_error(), "");
        return;
    }
    const struct bp_tensor *declined = reference ? NULL : check_first_unsupported(dev, g);
    if (declined) {
        out->unsupported = true;
        problem(out, "the device declines %s (tensor '%s')", bp_op_name((enum bp_op)declined->op),
                tname(declined));
        goto done;
    }
    /* The callback is asked when the leaves are placed (allocation below);
     * the CLI owns the device, so there is no application callback to keep. */
    if (mode == CHECK_SPLIT && bp_device_type(dev) == BP_DEVICE_TYPE_META) {
        if (bp_meta_set_split_fn(dev, check_split_fn, (void *)c) != BP_OK) {
            problem(out, "could not split the case's inputs: %s%s", bp_last_error(), "");
            goto done;
        }
        out->split = true;
    }
    const struct bp_alloc_options opts = {.guard_bytes = CHECK_GUARD_BYTES};
    if (bp_context_alloc_tensors(b.ctx, bp_device_buffer_type(dev), &opts, &buf) != BP_OK) {
        problem(out, "allocating the tensors failed: %s%s", bp_last_error(), "");
        goto done;
    }
    if (bp_buffer_clear(buf, CHECK_GUARD_PATTERN) != BP_OK) {
        problem(out, "filling the buffer with the guard pattern failed: %s%s", bp_last_error(), "");
        goto done;
    }
    for (int i = 0; i < b.n_inputs; i++) {
        size_t nbytes = bp_nbytes(b.inputs[i].t);
        sent[i] = malloc(nbytes ? nbytes : 1);
        if (!sent[i]) {
            problem(out, "%s%s", "out of host memory filling the inputs", "");
            goto done;
        }
        check_fill_input(&b.inputs[i], (uint64_t)case_index * 16u + (uint64_t)i + 1u, sent[i], nbytes);
        if (bp_tensor_set(b.inputs[i].t, sent[i], 0, nbytes) != BP_OK) {
            problem(out, "setting input '%s' failed: %s", tname(b.inputs[i].t), bp_last_error());
            goto done;
        }
    }
    if (reference) {
        bp_status st = BP_ERR_INVALID_ARGUMENT;
        if (!buffer_is_host(buf))
            problem(out, "the reference needs host memory, but %s's buffers are not%s",
                    bp_device_name(dev), "");
        else if ((st = reference(t)) != BP_OK)
            problem(out, "the plugin's reference returned %s%s", bp_status_name(st), "");
        if (st != BP_OK) goto done;
    } else if (bp_backend_init(dev, NULL, &be) != BP_OK) {
        problem(out, "creating a backend failed: %s%s", bp_last_error(), "");
        goto done;
    } else if (bp_backend_graph_compute(be, g) != BP_OK || bp_backend_synchronize(be) != BP_OK) {
        problem(out, "compute failed: %s%s", bp_last_error(), "");
        goto done;
    }
    out->values = read_values(t, -1, out);
    out->n = out->values ? (size_t)bp_nelements(t) : 0;
    read_copies(dev, t, out);
    int32_t state = -1;
    if (out->split && bp_meta_tensor_split(t, &state, NULL) == BP_OK && state == BP_META_SPLIT_MIRRORED)
        problem(out, "the split of the inputs did not reach the output '%s' (still MIRRORED)%s", tname(t), "");
    check_guards(b.ctx, buf, out);
    check_inputs_intact(&b, g, sent, out);
done:
    for (int i = 0; i < CHECK_MAX_INPUTS; i++) free(sent[i]);
    if (be) bp_backend_free(be);
    if (buf) bp_buffer_free(buf);
    check_case_release(&b, g);
    if (out->split) bp_meta_set_split_fn(dev, NULL, NULL);
}

void check_run_case(const struct check_case *c, size_t case_index, struct bp_device *dev,
                    enum check_meta_mode mode, struct check_output *out)
{
    run_case(c, case_index, dev, mode, NULL, out);
}

void check_run_custom_reference(const struct check_case *c, size_t case_index,
                                struct bp_device *host_dev, struct check_output *out)
{
    if (c->custom && c->custom->reference) {
        run_case(c, case_index, host_dev, CHECK_MIRRORED, c->custom->reference, out);
        return;
    }
    memset(out, 0, sizeof *out);
    out->unsupported = true;
    snprintf(out->problem, sizeof out->problem, "its plugin gives no reference function");
}

void check_output_free(struct check_output *out)
{
    for (size_t d = 1; d < out->n_copies; d++) free(out->copies[d]);
    free(out->values);
    memset(out->copies, 0, sizeof out->copies);
    out->n_copies = 0;
    out->values = NULL;
    out->n = 0;
}
