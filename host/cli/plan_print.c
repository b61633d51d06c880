/* plan_print.c — `backplane run --plan [--json]`: the memory plan for people
 * and for tools (compiled into the CLI, beside cmd_run.c). */
#include <stdio.h>

#include "json.h"
#include "plan.h"

void bp_run_plan_print(const struct bp_run_plan *p, const struct bp_run_model *m, bool json)
{
    char why[512] = "";
    bool fits = bp_run_plan_fits(p, why, sizeof why);
    if (json) {
        struct json_writer w;
        json_init(&w, stdout);
        json_object_begin(&w, NULL);
        json_string(&w, "model", m->name);
        json_int(&w, "n_ctx", p->n_ctx);
        json_int(&w, "n_prompt", p->n_prompt);
        json_int(&w, "offload_layers", p->offload_layers);
        json_array_begin(&w, "devices");
        for (size_t i = 0; i < p->n_devices; i++) {
            const struct bp_run_plan_device *d = &p->d[i];
            json_object_begin(&w, NULL);
            json_string(&w, "device", bp_device_name(d->dev));
            json_uint(&w, "weights", d->weights);
            json_uint(&w, "output_copy", d->output_copy);
            json_uint(&w, "kv_cache", d->kv_cache);
            json_uint(&w, "decode_buffers", d->decode);
            json_uint(&w, "prefill_buffer", d->prefill);
            json_uint(&w, "peak", d->peak);
            json_uint(&w, "memory_free", d->mem_free);
            json_uint(&w, "memory_total", d->mem_total);
            json_object_end(&w);
        }
        json_array_end(&w);
        json_bool(&w, "fits", fits);
        json_string(&w, "problem", fits ? NULL : why);
        json_object_end(&w);
        json_finish(&w);
        return;
    }
    printf("memory plan: %s, %lld positions, prefill of %lld tokens, %lld of %lld layers on %s\n",
           m->name, (long long)p->n_ctx, (long long)p->n_prompt, (long long)p->offload_layers,
           (long long)p->n_layer, bp_device_name(p->d[0].dev));
    for (size_t i = 0; i < p->n_devices; i++) {
        const struct bp_run_plan_device *d = &p->d[i];
        char a[32], b[32], c[32], e[32], f[32], g[32], h[32];
        printf("  %-10s weights %s (tied output copy %s), KV cache %s, decode buffers %s, "
               "prefill buffer %s\n", bp_device_name(d->dev), bp_format_bytes(d->weights, a, sizeof a),
               bp_format_bytes(d->output_copy, b, sizeof b), bp_format_bytes(d->kv_cache, c, sizeof c),
               bp_format_bytes(d->decode, e, sizeof e), bp_format_bytes(d->prefill, f, sizeof f));
        printf("  %-10s peak %s of %s free\n", "", bp_format_bytes(d->peak, g, sizeof g),
               bp_format_bytes(d->mem_free, h, sizeof h));
    }
    printf("%s\n", fits ? "fits." : why);
}
