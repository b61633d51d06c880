/*
 * model.c — hyper-parameters from GGUF metadata, weight binding by name
 * (the rows of llama_schema.c), and the checks that turn a wrong file into
 * one sentence: architecture, missing tensors, unsupported types and shapes
 * that disagree with the metadata (both shapes named).
 */
#include "model.h"
#include "arch.h"
#include "llama_schema.h"
#include "run_error.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>


void bp_run_model_free(struct bp_run_model *m)
{
    if (!m) return;
    bp_gguf_close(m->gguf);
    free(m->owned);
    free(m->weights);
    free(m->layers);
    free(m);
}

static const struct bp_run_weight *find_weight(const struct bp_run_model *m, const char *name)
{
    for (size_t i = 0; i < m->n_weights; i++)
        if (!strcmp(m->weights[i].name, name)) return &m->weights[i];
    return NULL;
}

static const char *shape_str(const int64_t *ne, int n, char *buf, size_t cap)
{
    size_t used = 0;
    used += (size_t)snprintf(buf, cap, "[");
    for (int i = 0; i < n && used < cap; i++)
        used += (size_t)snprintf(buf + used, cap - used, "%s%" PRId64, i ? ", " : "", ne[i]);
    if (used < cap) snprintf(buf + used, cap - used, "]");
    return buf;
}

/* The weight called name with exactly the shape want[0..n) (unused dims 1). */
static bp_status need(struct bp_run_model *m, const char *name, int n, const int64_t *want,
                      bool optional, const struct bp_run_weight **out, char *err, size_t cap)
{
    *out = find_weight(m, name);
    if (!*out) {
        const struct bp_gguf_tensor *gt = m->gguf ? bp_gguf_find_tensor(m->gguf, name) : NULL;
        if (gt && gt->type < 0)
            return bp_run_fail(err, cap, BP_ERR_UNSUPPORTED,
                        "tensor '%s' has type %s (ggml type %u), which backplane does not "
                        "support; requantize the model to one it does: f32, f16, bf16, q4_0, "
                        "q4_1, q5_0, q5_1, q8_0, q2_K, q3_K, q4_K, q5_K, q6_K, iq4_nl or iq4_xs.",
                        name, bp_gguf_ggml_type_name(gt->ggml_type), gt->ggml_type);
        if (optional) return BP_OK;
        return bp_run_fail(err, cap, BP_ERR_NOT_FOUND,
                    "the model has no tensor '%s', which a %s model needs; the file is "
                    "incomplete or of another layout.", name,
                    (m->hp.arch ? m->hp.arch : &bp_arch_llama)->name);
    }
    int64_t full[4] = {1, 1, 1, 1};
    for (int i = 0; i < n; i++) full[i] = want[i];
    bool same = true;
    for (int i = 0; i < 4; i++) same = same && (*out)->ne[i] == full[i];
    if (!same) {
        char a[96], b[96];
        return bp_run_fail(err, cap, BP_ERR_SHAPE,
                    "tensor '%s' has shape %s but the model's metadata implies %s; the file's "
                    "metadata and tensors disagree.", name,
                    shape_str((*out)->ne, (*out)->n_dims, a, sizeof a), shape_str(full, n, b, sizeof b));
    }
    return BP_OK;
}

/* Bind row r in layer l (-1: global) to the weight of its name. A fused
 * row or an untied output is optional; a part is skipped when its layer's
 * fused row is bound. */
static bp_status bind_row(struct bp_run_model *m, const struct bp_llama_tensor *r, int64_t l, char *err,
                          size_t cap)
{
    const enum bp_llama_presence use = bp_llama_row_use_hp(&m->hp, r);
    if (use == BP_LLAMA_ABSENT) return BP_OK;
    const struct bp_llama_tensor *fused = bp_llama_fused_of(r);
    if (fused && bp_llama_get(fused, m, l)) return BP_OK;
    char nm[BP_GGUF_MAX_NAME + 1];
    int64_t ne[4];
    bp_llama_tensor_shape(r, &m->hp, ne);
    const struct bp_run_weight **slot = bp_llama_slot(r, m, l);
    const bool optional = use == BP_LLAMA_FUSED || use == BP_LLAMA_UNTIED || use == BP_LLAMA_OPTIONAL;
    bp_status s = need(m, bp_llama_tensor_name(r, l, nm, sizeof nm), r->n_dims, ne, optional, slot, err,
                       cap);
    if (s == BP_OK && *slot) m->weights[*slot - m->weights].row = r;
    return s;
}

/* True when name is one of a mixture-of-experts layer's tensors
 * (blk.N.ffn_gate_inp, ffn_{gate,up,down}_exps, shared experts, or the
 * per-expert tensors of old Mixtral files). */
static bool moe_tensor(const char *name)
{
    return strstr(name, ".ffn_gate_inp") || strstr(name, "_exps.") || strstr(name, "_shexp.") ||
           (!strncmp(name, "blk.", 4) && (strstr(name, ".ffn_gate.") || strstr(name, ".ffn_up.") ||
                                          strstr(name, ".ffn_down.")) &&
            strchr(strstr(name, ".ffn_") + 5, '.') != strrchr(name, '.'));
}

/* Every tensor of the file is read by the architecture, or the file is
 * refused naming it (llama.cpp: "wrong number of tensors"): a tensor no
 * code reads means the file holds something the graph does not compute.
 * Also the RoPE factor tensors that the scaling type does not read. */
static bp_status account(struct bp_run_model *m, char *err, size_t cap)
{
    const struct bp_arch *a = m->hp.arch ? m->hp.arch : &bp_arch_llama;
    const bool longrope = m->hp.rope_scaling == BP_RUN_ROPE_LONGROPE;
    if (!(a->flags & BP_ARCH_FACTORS_BY_SCALING)) {
        if ((m->rope_long != NULL) != (m->rope_short != NULL))
            return bp_run_fail(err, cap, BP_ERR_NOT_FOUND,
                        "the model has '%s' without '%s'; the file is incomplete.",
                        m->rope_long ? "rope_factors_long.weight" : "rope_factors_short.weight",
                        m->rope_long ? "rope_factors_short.weight" : "rope_factors_long.weight");
    } else if ((longrope && m->rope_freqs) || (!longrope && (m->rope_long || m->rope_short)))
        return bp_run_fail(err, cap, BP_ERR_UNSUPPORTED,
                    "the model has tensor '%s' but its RoPE scaling is %s, which does not read it "
                    "(llama.cpp refuses the file too); the file was converted wrongly.",
                    longrope ? "rope_freqs.weight" : m->rope_long ? "rope_factors_long.weight"
                                                                  : "rope_factors_short.weight",
                    longrope ? "longrope" : "not longrope");
    else if (longrope && (!m->rope_long || !m->rope_short))
        return bp_run_fail(err, cap, BP_ERR_NOT_FOUND,
                    "the model's RoPE scaling is longrope but it lacks '%s'; the file is incomplete.",
                    m->rope_long ? "rope_factors_short.weight" : "rope_factors_long.weight");
    const struct bp_gguf *g = m->gguf;
    for (size_t i = 0; i < m->n_weights; i++) {
        const struct bp_run_weight *w = &m->weights[i];
        if (w->row) continue;
        if (moe_tensor(w->name))
            return bp_run_fail(err, cap, BP_ERR_UNSUPPORTED,
                        "the model has expert tensor '%s', but %s: nothing would read it, so "
                        "the file is converted wrongly (per-expert tensors of old Mixtral files "
                        "must be re-converted to stacked ffn_*_exps ones).", w->name,
                        m->hp.n_expert > 0 ? "no row of its mixture of experts reads a tensor of that name"
                                           : "its metadata does not make it a mixture of experts "
                                             "(no expert_count)");
        return bp_run_fail(err, cap, BP_ERR_UNSUPPORTED,
                    "the model has tensor '%s', which a %s model does not have and nothing would "
                    "read (llama.cpp refuses the file too); the file is of another architecture or "
                    "converted wrongly.", w->name, a->name);
    }
    /* Tensors of a type backplane lacks were left out of m->weights; one
     * that no row bound is as unread as any. */
    for (uint64_t i = 0; g && i < g->n_tensors; i++)
        if (g->tensors[i].type < 0)
            return bp_run_fail(err, cap, BP_ERR_UNSUPPORTED,
                        "tensor '%s' has type %s (ggml type %u), which backplane does not support; "
                        "requantize the model to one it does: f32, f16, bf16, q4_0, q4_1, q5_0, "
                        "q5_1, q8_0, q2_K, q3_K, q4_K, q5_K, q6_K, iq4_nl or iq4_xs.",
                        g->tensors[i].name, bp_gguf_ggml_type_name(g->tensors[i].ggml_type),
                        g->tensors[i].ggml_type);
    return BP_OK;
}

/* Global rows first, then the layers' in order: the first missing tensor
 * named is the same for any file. */
bp_status bp_run_model_bind(struct bp_run_model *m, char *err, size_t cap)
{
    const struct bp_run_hparams *hp = &m->hp;
    bp_status s;
    free(m->layers);
    m->layers = calloc((size_t)hp->n_layer, sizeof *m->layers);
    if (!m->layers) return bp_run_fail(err, cap, BP_ERR_OUT_OF_MEMORY, "out of memory binding weights.");
    for (size_t i = 0; i < m->n_weights; i++) m->weights[i].row = NULL;
    for (size_t i = 0; i < bp_llama_schema_rows; i++)
        if (!bp_llama_schema[i].per_layer && (s = bind_row(m, &bp_llama_schema[i], -1, err, cap)) != BP_OK)
            return s;
    m->tied_output = m->output == NULL;
    if (m->tied_output) m->output = m->tok_embd;
    for (int64_t l = 0; l < hp->n_layer; l++)
        for (size_t i = 0; i < bp_llama_schema_rows; i++)
            if (bp_llama_schema[i].per_layer && (s = bind_row(m, &bp_llama_schema[i], l, err, cap)) != BP_OK)
                return s;
    return account(m, err, cap);
}

/* --------------------------------------------------------------- GGUF */

static bp_status read_hparams(const struct bp_gguf *g, const struct bp_arch *a, struct bp_run_hparams *hp,
                              char *err, size_t cap)
{
    bp_status s = (bp_status)bp_arch_read_hparams(a, g, hp, err, cap);
    if (s != BP_OK) return s;
    /* The vocabulary is the one hyper-parameter read off a tensor: the
     * required row whose dim 1 is the vocabulary (the embedding). */
    const char *vname = bp_llama_vocab_row()->name;
    const struct bp_gguf_tensor *te = bp_gguf_find_tensor(g, vname);
    if (!te)
        return bp_run_fail(err, cap, BP_ERR_NOT_FOUND,
                    "the model has no tensor '%s', which a %s model needs; the file is "
                    "incomplete or of another layout.", vname, a->name);
    hp->n_vocab = te->ne[1];
    char key[96];
    snprintf(key, sizeof key, "%s.vocab_size", a->name);
    uint64_t vs;
    if (bp_gguf_kv_uint(bp_gguf_find_kv(g, key), &vs) && (int64_t)vs != hp->n_vocab)
        return bp_run_fail(err, cap, BP_ERR_SHAPE,
                    "tensor '%s' has %" PRId64 " rows but %s says %" PRIu64 "; the file's metadata "
                    "and tensors disagree.", vname, hp->n_vocab, key, vs);
    return BP_OK;
}

bp_status bp_run_model_from_gguf(struct bp_gguf *g, const char *name, struct bp_run_model **out,
                                 char *err, size_t cap)
{
    *out = NULL;
    const struct bp_gguf_kv *arch = bp_gguf_find_kv(g, "general.architecture");
    if (!arch || arch->type != BP_GGUF_STRING)
        return bp_run_fail(err, cap, BP_ERR_INVALID_ARGUMENT,
                    "the GGUF file has no general.architecture string; it is not a model file "
                    "backplane can run.");
    const struct bp_arch *a = bp_arch_find(arch->v.s.ptr, arch->v.s.len);
    if (!a) {
        char known[160] = "";
        for (size_t i = 0; bp_archs[i]; i++)
            snprintf(known + strlen(known), sizeof known - strlen(known), "%s%s", i ? ", " : "",
                     bp_archs[i]->name);
        return bp_run_fail(err, cap, BP_ERR_UNSUPPORTED,
                    "the model's architecture is '%.*s', which backplane does not run; it runs %s.",
                    (int)(arch->v.s.len > 64 ? 64 : arch->v.s.len), arch->v.s.ptr, known);
    }
    struct bp_run_model *m = calloc(1, sizeof *m);
    if (!m) return bp_run_fail(err, cap, BP_ERR_OUT_OF_MEMORY, "out of memory loading a model.");
    snprintf(m->name, sizeof m->name, "%s", name ? name : "gguf");
    bp_status s = read_hparams(g, a, &m->hp, err, cap);
    if (s != BP_OK) goto fail;
    m->weights = calloc(g->n_tensors ? (size_t)g->n_tensors : 1, sizeof *m->weights);
    if (!m->weights) {
        s = bp_run_fail(err, cap, BP_ERR_OUT_OF_MEMORY, "out of memory loading a model.");
        goto fail;
    }
    for (uint64_t i = 0; i < g->n_tensors; i++) {
        const struct bp_gguf_tensor *t = &g->tensors[i];
        if (t->type < 0) continue; /* named by need() or account() */
        struct bp_run_weight *w = &m->weights[m->n_weights++];
        snprintf(w->name, sizeof w->name, "%s", t->name);
        w->type = (enum bp_type)t->type;
        w->n_dims = (int)t->n_dims;
        memcpy(w->ne, t->ne, sizeof w->ne);
        w->data = t->data;
        w->size = t->size;
    }
    m->gguf = g;
    s = bp_run_model_bind(m, err, cap);
    if (s != BP_OK) {
        m->gguf = NULL; /* the caller still owns g on failure */
        goto fail;
    }
    *out = m;
    return BP_OK;
fail:
    bp_run_model_free(m);
    return s;
}

bp_status bp_run_model_load_gguf(const char *path, struct bp_run_model **out, char *err, size_t cap)
{
    *out = NULL;
    struct bp_gguf *g;
    bp_status s = bp_gguf_open(path, &g, err, cap);
    if (s != BP_OK) return s;
    const char *base = strrchr(path, '/');
    s = bp_run_model_from_gguf(g, base ? base + 1 : path, out, err, cap);
    if (s != BP_OK) bp_gguf_close(g);
    return s;
}

bp_status bp_run_model_save_gguf(const struct bp_run_model *m, const char *path, uint32_t version,
                                 uint32_t alignment)
{
    struct bp_gguf_writer *w;
    bp_status s = bp_gguf_writer_new(version, alignment, &w);
    if (s != BP_OK) return s;
    const struct bp_run_hparams *hp = &m->hp;
    if ((s = (bp_status)bp_arch_write_hparams(hp, w)) ||
        (s = bp_gguf_add_string(w, "general.name", m->name)) ||
        (m->mix && (s = bp_gguf_add_u32(w, "general.file_type", m->mix->ftype))))
        goto out;
    for (size_t i = 0; i < m->n_weights; i++) {
        const struct bp_run_weight *wt = &m->weights[i];
        if ((s = bp_gguf_add_tensor(w, wt->name, (int)wt->type, wt->n_dims, wt->ne, wt->data)))
            goto out;
    }
    s = bp_gguf_writer_save(w, path);
out:
    bp_gguf_writer_free(w);
    return s;
}

size_t bp_run_model_weight_bytes(const struct bp_run_model *m)
{
    size_t n = 0;
    for (size_t i = 0; i < m->n_weights; i++) n += m->weights[i].size;
    return n;
}

size_t bp_run_model_decode_bytes(const struct bp_run_model *m)
{
    size_t n = bp_run_model_weight_bytes(m);
    for (size_t i = 0; m->hp.n_expert > 0 && i < m->n_weights; i++) {
        const struct bp_run_weight *w = &m->weights[i];
        if (w->row && w->row->moe == BP_LLAMA_MOE_ONLY && w->n_dims == 3 && w->ne[2] == m->hp.n_expert)
            n -= w->size - w->size / (size_t)m->hp.n_expert * (size_t)m->hp.n_expert_used;
    }
    if (!m->tied_output && m->tok_embd)
        n -= m->tok_embd->size - m->tok_embd->size / (size_t)m->tok_embd->ne[1];
    return n;
}

int64_t bp_run_model_param_count(const struct bp_run_model *m)
{
    int64_t n = 0;
    for (size_t i = 0; i < m->n_weights; i++)
        n += m->weights[i].ne[0] * m->weights[i].ne[1] * m->weights[i].ne[2] * m->weights[i].ne[3];
    return n;
}

size_t bp_run_model_matrix_types(const struct bp_run_model *m, enum bp_type *types, size_t *counts,
                                 size_t cap)
{
    size_t per[BP_TYPE_COUNT] = {0}, n = 0;
    for (size_t i = 0; i < m->n_weights; i++)
        if (m->weights[i].n_dims >= 2 && (int)m->weights[i].type >= 0 && m->weights[i].type < BP_TYPE_COUNT)
            per[m->weights[i].type]++;
    for (;;) { /* selection by count: there are a handful of types */
        int best = -1;
        for (int t = 0; t < BP_TYPE_COUNT; t++)
            if (per[t] && (best < 0 || per[t] > per[best])) best = t;
        if (best < 0) return n;
        if (n < cap) {
            types[n] = (enum bp_type)best;
            counts[n] = per[best];
        }
        n++;
        per[best] = 0;
    }
}
