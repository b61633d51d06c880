/* plan_print.c — `backplane run --plan [--json]`: the memory plan for people
 * and for tools (compiled into the CLI, beside cmd_run.c). */
#include <stdio.h>

#include "json.h"
#include "plan.h"

static void json_row(struct json_writer *w, const struct bp_run_plan_device *d)
{
    json_string(w, "device", bp_device_name(d->dev));
    json_uint(w, "weights", d->weights);
    json_uint(w, "experts", d->experts);
    json_uint(w, "output_copy", d->output_copy);
    json_uint(w, "kv_cache", d->kv_cache);
    json_uint(w, "decode_buffers", d->decode);
    json_uint(w, "prefill_buffer", d->prefill);
    json_uint(w, "allreduce_scratch", d->allreduce);
    json_uint(w, "peak", d->peak);
    json_uint(w, "memory_free", d->mem_free);
    json_uint(w, "memory_total", d->mem_total);
}

static void text_row(const struct bp_run_plan_device *d, const char *indent)
{
    char a[32], b[32], c[32], e[32], f[32], g[32], h[32], k[32], scratch[64] = "";
    if (d->allreduce)
        snprintf(scratch, sizeof scratch, ", all-reduce scratch %s", bp_format_bytes(d->allreduce, k, sizeof k));
    printf("%s%-10s weights %s (tied output copy %s), KV cache %s, decode buffers %s, "
           "prefill buffer %s%s\n", indent, bp_device_name(d->dev), bp_format_bytes(d->weights, a, sizeof a),
           bp_format_bytes(d->output_copy, b, sizeof b), bp_format_bytes(d->kv_cache, c, sizeof c),
           bp_format_bytes(d->decode, e, sizeof e), bp_format_bytes(d->prefill, f, sizeof f), scratch);
    printf("%s%-10s peak %s of %s free\n", indent, "", bp_format_bytes(d->peak, g, sizeof g),
           bp_format_bytes(d->mem_free, h, sizeof h));
}

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
        json_int(&w, "cpu_moe_layers", p->cpu_moe_layers);
        json_array_begin(&w, "devices");
        for (size_t i = 0; i < p->n_devices; i++) {
            json_object_begin(&w, NULL);
            json_row(&w, &p->d[i]);
            if (i == 0 && p->n_subs) {
                json_array_begin(&w, "sub_devices");
                for (size_t k = 0; k < p->n_subs; k++) {
                    json_object_begin(&w, NULL);
                    json_row(&w, &p->sub[k]);
                    json_object_end(&w);
                }
                json_array_end(&w);
            }
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
        text_row(&p->d[i], "  ");
        for (size_t k = 0; i == 0 && k < p->n_subs; k++) text_row(&p->sub[k], "    ");
    }
    size_t experts = 0;
    for (size_t i = 0; i < p->n_devices; i++) experts += p->d[i].experts;
    if (experts) {
        char a[32], b[32];
        printf("experts: %s on %s, %s on %s", bp_format_bytes(p->d[0].experts, a, sizeof a),
               bp_device_name(p->d[0].dev),
               bp_format_bytes(p->n_devices > 1 ? p->d[1].experts : 0, b, sizeof b),
               p->n_devices > 1 ? bp_device_name(p->d[1].dev) : "the cpu");
        if (p->cpu_moe_layers > 0)
            printf(" (the first %lld of %lld layers' experts kept there)", (long long)p->cpu_moe_layers,
                   (long long)p->n_layer);
        printf("\n");
    }
    printf("%s\n", fits ? "fits." : why);
}
