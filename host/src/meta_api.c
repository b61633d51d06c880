/* meta_api.c — the application side of tensor parallelism: each call looks
 * its function up by proc name on whichever registry offers it. */
#include <stdio.h>

#include <backplane/bp_meta.h>

#include "internal.h"

static void *meta_proc(const char *name, const char *what)
{
    bp__ensure_loaded();
    void *fn = bp__any_proc(name);
    if (!fn)
        bp__fail(BP_ERR_NOT_FOUND, "%s needs a plugin that offers %s (libbackplane-meta.so), which "
                 "is not loaded; see `backplane devices`.", what, name);
    return fn;
}

bp_status bp_meta_device_new(struct bp_device *const *devs, size_t n, const float *ratios,
                             bp_meta_split_fn split_cb, void *user, struct bp_device **out)
{
    if (!out || !devs || n == 0)
        return bp__fail(BP_ERR_INVALID_ARGUMENT, "bp_meta_device_new needs a device list and out.");
    *out = NULL;
    bp_meta_device_new_fn fn = (bp_meta_device_new_fn)meta_proc(BP_PROC_META_DEVICE_NEW, "bp_meta_device_new");
    if (!fn) return BP_ERR_NOT_FOUND;
    bp_status st = fn(devs, n, ratios, split_cb, user, out);
    if (st != BP_OK)
        return bp__fail(st, "the meta plugin refused to compose %zu devices (%s); see its message in the log.",
                        n, bp_status_name(st));
    return BP_OK;
}

bp_status bp_meta_set_split_fn(struct bp_device *meta, bp_meta_split_fn split_cb, void *user)
{
    bp_meta_set_split_fn_fn fn = (bp_meta_set_split_fn_fn)meta_proc(BP_PROC_META_SET_SPLIT_FN, "bp_meta_set_split_fn");
    if (!fn) return BP_ERR_NOT_FOUND;
    bp_status st = fn(meta, split_cb, user);
    if (st != BP_OK)
        return bp__fail(st, "bp_meta_set_split_fn: device '%s' is not a meta device.", bp_device_name(meta));
    return BP_OK;
}

bp_status bp_meta_tensor_split(const struct bp_tensor *t, int32_t *state, int64_t *local_ne)
{
    bp_meta_tensor_split_fn fn = (bp_meta_tensor_split_fn)meta_proc(BP_PROC_META_TENSOR_SPLIT, "bp_meta_tensor_split");
    if (!fn) return BP_ERR_NOT_FOUND;
    if (!t || !state) return bp__fail(BP_ERR_INVALID_ARGUMENT, "bp_meta_tensor_split needs a tensor and state.");
    bp_status st = fn(t, state, local_ne);
    if (st != BP_OK)
        return bp__fail(st, "bp_meta_tensor_split: tensor '%s' is not in a meta buffer.", t->name);
    return BP_OK;
}

bp_status bp_meta_backend_stats(struct bp_backend *b, struct bp_meta_stats *out)
{
    bp_meta_get_stats_fn fn = (bp_meta_get_stats_fn)meta_proc(BP_PROC_META_GET_STATS, "bp_meta_backend_stats");
    if (!fn) return BP_ERR_NOT_FOUND;
    if (!out || out->size < sizeof out->size)
        return bp__fail(BP_ERR_INVALID_ARGUMENT, "bp_meta_backend_stats needs out with out->size set "
                                                 "(struct bp_meta_stats st = {.size = sizeof st}).");
    bp_status st = fn(b, out);
    if (st != BP_OK) return bp__fail(st, "bp_meta_backend_stats: the backend is not a meta backend.");
    return BP_OK;
}

bp_status bp_meta_buffer_device_bytes(struct bp_buffer *buf, size_t *bytes)
{
    bp_meta_buffer_device_bytes_fn fn = (bp_meta_buffer_device_bytes_fn)meta_proc(
        BP_PROC_META_BUFFER_DEVICE_BYTES, "bp_meta_buffer_device_bytes");
    if (!fn) return BP_ERR_NOT_FOUND;
    if (!buf || !bytes) return bp__fail(BP_ERR_INVALID_ARGUMENT, "bp_meta_buffer_device_bytes needs a buffer and bytes.");
    bp_status st = fn(buf, bytes);
    if (st != BP_OK) return bp__fail(st, "bp_meta_buffer_device_bytes: the buffer is not a meta buffer.");
    return BP_OK;
}

bp_status bp_meta_device_from_spec(const char *spec, struct bp_device **out)
{
    if (!spec || !out) return bp__fail(BP_ERR_INVALID_ARGUMENT, "bp_meta_device_from_spec needs a spec and out.");
    *out = NULL;
    bp_meta_device_from_spec_fn fn = (bp_meta_device_from_spec_fn)meta_proc(BP_PROC_META_DEVICE_FROM_SPEC,
                                                                             "bp_meta_device_from_spec");
    if (!fn) return BP_ERR_NOT_FOUND;
    bp_status st = fn(spec, out);
    if (st == BP_OK && !*out) st = BP_ERR_PLUGIN;
    if (st != BP_OK)
        return bp__fail(st, "the meta plugin refused the device spec '%s' (%s); check the names of its "
                        "sub-devices with `backplane devices`.", spec, bp_status_name(st));
    return BP_OK;
}

bp_status bp_meta_device_sub_devices(struct bp_device *meta, struct bp_device **subs, size_t cap, size_t *n)
{
    bp_meta_device_sub_devices_fn fn = (bp_meta_device_sub_devices_fn)meta_proc(
        BP_PROC_META_DEVICE_SUB_DEVICES, "bp_meta_device_sub_devices");
    if (!fn) return BP_ERR_NOT_FOUND;
    if (!meta || !n || (cap && !subs))
        return bp__fail(BP_ERR_INVALID_ARGUMENT, "bp_meta_device_sub_devices needs a device, n, and subs when cap is not 0.");
    bp_status st = fn(meta, subs, cap, n);
    if (st != BP_OK)
        return bp__fail(st, "bp_meta_device_sub_devices: device '%s' is not a meta device.", bp_device_name(meta));
    return BP_OK;
}

bp_status bp_meta_tensor_get_copy(const struct bp_tensor *t, size_t device, void *dst, size_t offset,
                                  size_t size)
{
    bp_meta_tensor_get_copy_fn fn = (bp_meta_tensor_get_copy_fn)meta_proc(BP_PROC_META_TENSOR_GET_COPY,
                                                                          "bp_meta_tensor_get_copy");
    if (!fn) return BP_ERR_NOT_FOUND;
    if (!t || (size && !dst)) return bp__fail(BP_ERR_INVALID_ARGUMENT, "bp_meta_tensor_get_copy needs a tensor and dst.");
    bp_status st = fn(t, device, dst, offset, size);
    if (st != BP_OK)
        return bp__fail(st, "bp_meta_tensor_get_copy: tensor '%s' has no copy %zu of those bytes (it is not "
                        "MIRRORED in a meta buffer, or the device has fewer sub-devices).", t->name, device);
    return BP_OK;
}

bp_status bp_meta_measure_tensors(struct bp_device *meta, struct bp_tensor *const *tensors, size_t n,
                                  size_t *bytes)
{
    bp_meta_measure_tensors_fn fn = (bp_meta_measure_tensors_fn)meta_proc(BP_PROC_META_MEASURE_TENSORS,
                                                                          "bp_meta_measure_tensors");
    if (!fn) return BP_ERR_NOT_FOUND;
    if (!meta || !bytes || (n && !tensors))
        return bp__fail(BP_ERR_INVALID_ARGUMENT, "bp_meta_measure_tensors needs a device, the tensors and bytes.");
    bp_status st = fn(meta, tensors, n, bytes);
    if (st != BP_OK)
        return bp__fail(st, "measuring %zu tensors on '%s' failed (%s); see the meta plugin's message.", n,
                        bp_device_name(meta), bp_status_name(st));
    return BP_OK;
}

bp_status bp_meta_measure_graph(struct bp_device *meta, struct bp_graph *g, struct bp_tensor *const *leaves,
                                size_t n_leaves, size_t *bytes, size_t *scratch)
{
    bp_meta_measure_graph_fn fn = (bp_meta_measure_graph_fn)meta_proc(BP_PROC_META_MEASURE_GRAPH,
                                                                      "bp_meta_measure_graph");
    if (!fn) return BP_ERR_NOT_FOUND;
    if (!meta || !g || !bytes || !scratch || (n_leaves && !leaves))
        return bp__fail(BP_ERR_INVALID_ARGUMENT, "bp_meta_measure_graph needs a device, a graph, bytes and scratch.");
    bp_status st = fn(meta, g, leaves, n_leaves, bytes, scratch);
    if (st != BP_OK)
        return bp__fail(st, "measuring a graph of %d nodes on '%s' failed (%s); see the meta plugin's message.",
                        (int)g->n_nodes, bp_device_name(meta), bp_status_name(st));
    return BP_OK;
}
