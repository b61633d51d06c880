/*
 * model_info.c — `backplane info --model M`: what a model file is, as the
 * runner reads it (architecture, sizes, RoPE, types per tensor class, chat
 * template family), or the sentence the runner refuses it with.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "arch.h"
#include "chat_family.h"
#include "cli.h"
#include "json.h"
#include "llama_schema.h"
#include "model.h"

#define MAX_TYPES 8

/* How many tensors of each type one schema row has across the layers. */
struct class_types {
    const struct bp_llama_tensor *row;
    int n;
    enum bp_type type[MAX_TYPES];
    int count[MAX_TYPES];
};

static void count_types(const struct bp_run_model *m, struct class_types *ct)
{
    for (size_t i = 0; i < bp_llama_schema_rows; i++) {
        struct class_types *c = &ct[i];
        c->row = &bp_llama_schema[i];
        c->n = 0;
        for (int64_t l = 0; l < (c->row->per_layer ? m->hp.n_layer : 1); l++) {
            const struct bp_run_weight *w = bp_llama_get(c->row, m, c->row->per_layer ? l : -1);
            if (!w) continue;
            int k = 0;
            while (k < c->n && c->type[k] != w->type) k++;
            if (k == c->n) {
                if (c->n == MAX_TYPES) continue;
                c->type[c->n] = w->type;
                c->count[c->n++] = 0;
            }
            c->count[k]++;
        }
    }
}

static const char *scaling_name(enum bp_run_rope_scaling s)
{
    switch (s) {
    case BP_RUN_ROPE_NONE: return "none";
    case BP_RUN_ROPE_LINEAR: return "linear";
    case BP_RUN_ROPE_YARN: return "yarn";
    case BP_RUN_ROPE_LONGROPE: return "longrope";
    }
    return "?";
}

static const char *factors_name(const struct bp_run_model *m)
{
    if (m->rope_freqs) return "rope_freqs.weight";
    if (m->rope_long) return "rope_factors_long/short.weight";
    return "none";
}

static void print_text(const struct bp_run_model *m, const struct class_types *ct, const char *chat)
{
    const struct bp_run_hparams *hp = &m->hp;
    const struct bp_arch *a = hp->arch ? hp->arch : &bp_arch_llama;
    printf("model:         %s\n", m->name);
    printf("architecture:  %s\n", a->name);
    printf("parameters:    %" PRId64 " (%.2f B)\n", bp_run_model_param_count(m),
           (double)bp_run_model_param_count(m) / 1e9);
    printf("layers:        %" PRId64 ", embedding %" PRId64 ", feed-forward %" PRId64 ", vocabulary %"
           PRId64 "\n", hp->n_layer, hp->n_embd, hp->n_ff, hp->n_vocab);
    printf("attention:     %" PRId64 " heads, %" PRId64 " kv heads, head size %" PRId64 "%s%s\n", hp->n_head,
           hp->n_head_kv, hp->head_dim, hp->attn_softcap > 0.0f ? ", softcap " : "",
           hp->attn_softcap > 0.0f ? "on" : "");
    if (hp->n_swa > 0 && hp->swa_period > 0)
        printf("window:        %" PRId64 " positions on %" PRId64 " of every %" PRId64 " layers\n", hp->n_swa,
               hp->swa_period - 1, hp->swa_period);
    printf("context:       %" PRId64 " (trained)\n", hp->n_ctx_train);
    printf("rope:          %s pairs over %" PRId64 " dims, base %g, scaling %s", a->rope_mode ? "neox" : "normal",
           hp->n_rot, (double)hp->rope_base, scaling_name(hp->rope_scaling));
    if (hp->rope_factor > 0.0f) printf(" x%g", (double)hp->rope_factor);
    if (hp->n_ctx_orig) printf(", original context %" PRId64, hp->n_ctx_orig);
    if (hp->rope_attn_factor > 0.0f) printf(", attn_factor %g", (double)hp->rope_attn_factor);
    printf(", factors %s\n", factors_name(m));
    if (hp->final_softcap > 0.0f) printf("logit softcap: %g\n", (double)hp->final_softcap);
    printf("output:        %s\n", m->tied_output ? "tied to the embedding" : "its own matrix");
    printf("chat template: %s\n", chat);
    printf("tensor types:\n");
    for (size_t i = 0; i < bp_llama_schema_rows; i++) {
        if (!ct[i].n) continue;
        printf("  %-28s", ct[i].row->name);
        for (int k = 0; k < ct[i].n; k++)
            printf("%s%s x%d", k ? ", " : "", bp_type_name(ct[i].type[k]), ct[i].count[k]);
        printf("\n");
    }
}

static void print_json(const struct bp_run_model *m, const struct class_types *ct, const char *chat)
{
    const struct bp_run_hparams *hp = &m->hp;
    const struct bp_arch *a = hp->arch ? hp->arch : &bp_arch_llama;
    struct json_writer w;
    json_init(&w, stdout);
    json_object_begin(&w, NULL);
    json_string(&w, "model", m->name);
    json_string(&w, "architecture", a->name);
    json_int(&w, "parameters", bp_run_model_param_count(m));
    json_int(&w, "n_layer", hp->n_layer);
    json_int(&w, "n_embd", hp->n_embd);
    json_int(&w, "n_ff", hp->n_ff);
    json_int(&w, "n_vocab", hp->n_vocab);
    json_int(&w, "n_head", hp->n_head);
    json_int(&w, "n_head_kv", hp->n_head_kv);
    json_int(&w, "head_dim", hp->head_dim);
    json_int(&w, "context_length", hp->n_ctx_train);
    json_int(&w, "sliding_window", hp->n_swa > 0 && hp->swa_period > 0 ? hp->n_swa : 0);
    json_double(&w, "attn_softcap", hp->attn_softcap);
    json_double(&w, "final_softcap", hp->final_softcap);
    json_object_begin(&w, "rope");
    json_string(&w, "pairs", a->rope_mode ? "neox" : "normal");
    json_int(&w, "n_rot", hp->n_rot);
    json_double(&w, "freq_base", hp->rope_base);
    json_string(&w, "scaling", scaling_name(hp->rope_scaling));
    json_double(&w, "factor", hp->rope_factor);
    json_int(&w, "original_context_length", hp->n_ctx_orig);
    json_double(&w, "attn_factor", hp->rope_attn_factor > 0.0f ? hp->rope_attn_factor : 1.0f);
    json_string(&w, "factors", factors_name(m));
    json_object_end(&w);
    json_bool(&w, "tied_output", m->tied_output);
    json_string(&w, "chat_template", chat);
    json_object_begin(&w, "tensor_types");
    for (size_t i = 0; i < bp_llama_schema_rows; i++) {
        if (!ct[i].n) continue;
        json_object_begin(&w, ct[i].row->name);
        for (int k = 0; k < ct[i].n; k++) json_int(&w, bp_type_name(ct[i].type[k]), ct[i].count[k]);
        json_object_end(&w);
    }
    json_object_end(&w);
    json_object_end(&w);
    json_finish(&w);
}

int cli_model_info(const char *path, bool as_json)
{
    char err[512] = "";
    struct bp_run_model *m = NULL;
    bp_status s;
    if (!strncmp(path, "builtin:", 8)) {
        struct bp_run_builtin_options bo = { .weight_type = BP_TYPE_Q8_0, .seed = 1 };
        s = bp_run_model_builtin(path + 8, &bo, &m, err, sizeof err);
    } else {
        s = bp_run_model_load_gguf(path, &m, err, sizeof err);
    }
    if (s != BP_OK) {
        cli_error("%s: %s", path, err);
        return CLI_EXIT_FAIL;
    }
    static struct class_types ct[BP_ARCH_MAX_ROWS];
    count_types(m, ct);
    char chat[160];
    cli_chat_family(m->gguf, chat, sizeof chat);
    if (as_json) print_json(m, ct, chat);
    else print_text(m, ct, chat);
    bp_run_model_free(m);
    return CLI_EXIT_OK;
}
