/*
 * test_run_schema.c — the Llama schema (host/run/llama_schema.c) against
 * facts written here by hand from llama.cpp's layout (each tensor's shape
 * for builtin:test, its Megatron axis, whether only MUL_MAT reads it), and
 * every row against what the four places that iterate it produce: the GGUF
 * file a built-in model is saved as, the binder (each required tensor
 * dropped is refused by name; an unknown one is ignored), the split table
 * and the decoder's buffer types.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <backplane/backplane.h>
#include <backplane/bp_meta.h>

#include "decoder.h"
#include "gguf.h"
#include "llama_schema.h"
#include "model.h"
#include "split.h"
#include "suite_main.h"

/* builtin:test: n_embd 256, n_ff 512, 4 heads and 2 kv heads of 64,
 * vocabulary 512. The expectations below are written out, not computed. */
#define SPEC_MIRROR (-1)
static const struct spec {
    const char *name;
    int64_t ne0, ne1;      /* ne1 0: a vector */
    int axis;              /* Megatron: 1 column-parallel, 0 row-parallel, SPEC_MIRROR */
    bool mul_mat_only;
    bool f32;
    int64_t ne2;           /* stacked experts: their count (4 below); 0: a matrix or vector */
} specs[] = {
    { "token_embd.weight", 256, 512, SPEC_MIRROR, false, false, 0 },
    { "rope_freqs.weight", 32, 0, SPEC_MIRROR, false, true, 0 },
    { "rope_factors_long.weight", 32, 0, SPEC_MIRROR, false, true, 0 },
    { "rope_factors_short.weight", 32, 0, SPEC_MIRROR, false, true, 0 },
    { "attn_norm.weight", 256, 0, SPEC_MIRROR, false, true, 0 },
    { "attn_qkv.weight", 256, 256 + 128 + 128, 1, true, false, 0 },
    { "attn_q.weight", 256, 256, 1, true, false, 0 },
    { "attn_k.weight", 256, 128, 1, true, false, 0 },
    { "attn_v.weight", 256, 128, 1, true, false, 0 },
    /* biases are cut along their only axis like their projection's outputs */
    { "attn_qkv.bias", 256 + 128 + 128, 0, 0, false, true, 0 },
    { "attn_q.bias", 256, 0, 0, false, true, 0 },
    { "attn_k.bias", 128, 0, 0, false, true, 0 },
    { "attn_v.bias", 128, 0, 0, false, true, 0 },
    { "attn_q_norm.weight", 64, 0, SPEC_MIRROR, false, true, 0 },
    { "attn_k_norm.weight", 64, 0, SPEC_MIRROR, false, true, 0 },
    { "attn_output.weight", 256, 256, 0, true, false, 0 },
    { "attn_output.bias", 256, 0, SPEC_MIRROR, false, true, 0 },
    { "post_attention_norm.weight", 256, 0, SPEC_MIRROR, false, true, 0 },
    { "ffn_norm.weight", 256, 0, SPEC_MIRROR, false, true, 0 },
    { "ffn_gate.weight", 256, 512, 1, true, false, 0 },
    { "ffn_up.weight", 256, 512, 1, true, false, 0 },
    { "ffn_down.weight", 512, 256, 0, true, false, 0 },
    { "ffn_gate.bias", 512, 0, 0, false, true, 0 },
    { "ffn_up.bias", 512, 0, 0, false, true, 0 },
    { "ffn_down.bias", 256, 0, SPEC_MIRROR, false, true, 0 },
    /* experts (with n_expert 4 and expert_feed_forward_length 128 below) */
    { "ffn_gate_inp.weight", 256, 4, SPEC_MIRROR, true, false, 0 },
    { "ffn_gate_exps.weight", 256, 128, 1, true, false, 4 },
    { "ffn_up_exps.weight", 256, 128, 1, true, false, 4 },
    { "ffn_down_exps.weight", 128, 256, 0, true, false, 4 },
    /* a shared expert (n_ff wide: the hyper-parameters below have no
     * n_ff_shexp): a dense FFN's cut; its gate vector f32 and mirrored */
    { "ffn_gate_inp_shexp.weight", 256, 0, SPEC_MIRROR, false, true, 0 },
    { "ffn_gate_shexp.weight", 256, 512, 1, true, false, 0 },
    { "ffn_up_shexp.weight", 256, 512, 1, true, false, 0 },
    { "ffn_down_shexp.weight", 512, 256, 0, true, false, 0 },
    { "post_ffw_norm.weight", 256, 0, SPEC_MIRROR, false, true, 0 },
    { "output_norm.weight", 256, 0, SPEC_MIRROR, false, true, 0 },
    { "output.weight", 256, 512, 1, true, false, 0 },
    { "output.bias", 512, 0, 0, false, true, 0 },
};
/* The globals: everything else is per layer. */
static bool spec_global(const char *name)
{
    return !strcmp(name, "token_embd.weight") || !strncmp(name, "output", 6) || !strncmp(name, "rope_", 5);
}
#define N_SPECS (sizeof specs / sizeof specs[0])

static const struct spec *spec_of(const struct bp_llama_tensor *r)
{
    for (size_t i = 0; i < N_SPECS; i++)
        if (!strcmp(specs[i].name, r->name)) return &specs[i];
    ck_abort_msg("schema row %s has no spec in this test", r->name);
    return NULL;
}

static struct bp_run_model *builtin(enum bp_type t, bool fused)
{
    char err[512] = "";
    struct bp_run_model *m = NULL;
    struct bp_run_builtin_options o = { .weight_type = t, .seed = 5, .fused_qkv = fused };
    ck_assert_msg(bp_run_model_builtin("test", &o, &m, err, sizeof err) == BP_OK, "%s", err);
    return m;
}

/* m saved as a GGUF file without the tensor called drop (NULL: none) and
 * with extra (if not NULL) appended; loaded back. The status, the sentence
 * in err and the model in *out. */
static bp_status save_and_load(const struct bp_run_model *m, const char *drop, const struct bp_run_weight *extra,
                               struct bp_run_model **out, char *err, size_t cap)
{
    struct bp_run_model copy = *m;
    copy.weights = calloc(m->n_weights + 1, sizeof *copy.weights);
    ck_assert_ptr_nonnull(copy.weights);
    copy.n_weights = 0;
    for (size_t i = 0; i < m->n_weights; i++)
        if (!drop || strcmp(m->weights[i].name, drop)) copy.weights[copy.n_weights++] = m->weights[i];
    if (extra) copy.weights[copy.n_weights++] = *extra;
    char path[] = "/tmp/bp_test_schema_XXXXXX";
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    close(fd);
    ck_assert_int_eq(bp_run_model_save_gguf(&copy, path, 3, 32), BP_OK);
    free(copy.weights);
    err[0] = '\0';
    bp_status s = bp_run_model_load_gguf(path, out, err, cap);
    unlink(path); /* the mapping outlives the name */
    return s;
}

START_TEST(test_schema_rows_match_the_hand_written_llama_layout)
{
    ck_assert_uint_eq(bp_llama_schema_rows, N_SPECS);
    ck_assert_str_eq(bp_llama_vocab_row()->name, "token_embd.weight");
    const struct bp_run_hparams hp = { .n_vocab = 512, .n_embd = 256, .n_ff = 512, .n_layer = 2,
                                       .n_head = 4, .n_head_kv = 2, .head_dim = 64, .n_rot = 64,
                                       .n_expert = 4, .n_ff_exp = 128 };
    for (size_t i = 0; i < bp_llama_schema_rows; i++) {
        const struct bp_llama_tensor *r = &bp_llama_schema[i];
        const struct spec *sp = spec_of(r);
        int64_t ne[4];
        bp_llama_tensor_shape(r, &hp, ne);
        ck_assert_msg(ne[0] == sp->ne0 && ne[1] == (sp->ne1 ? sp->ne1 : 1) &&
                      ne[2] == (sp->ne2 ? sp->ne2 : 1) && ne[3] == 1,
                      "%s: shape [%lld, %lld, %lld]", r->name, (long long)ne[0], (long long)ne[1],
                      (long long)ne[2]);
        ck_assert_int_eq(r->n_dims, sp->ne2 ? 3 : sp->ne1 ? 2 : 1);
        ck_assert_msg(r->mul_mat_only == sp->mul_mat_only, "%s: mul_mat_only", r->name);
        ck_assert_msg(r->f32 == sp->f32, "%s: f32", r->name);
        ck_assert_msg(r->per_layer == !spec_global(r->name), "%s: per_layer", r->name);
    }
}
END_TEST

/* Every present row, in walk order, is the file's next tensor, with the
 * spec's shape and the type the generator promises. */
struct file_walk {
    const struct bp_gguf *g;
    uint64_t next;
    enum bp_type wt;
};

static int check_tensor(void *user, const struct bp_llama_tensor *r, int64_t l)
{
    struct file_walk *fw = user;
    char nm[BP_GGUF_MAX_NAME + 1];
    bp_llama_tensor_name(r, l, nm, sizeof nm);
    ck_assert_msg(fw->next < fw->g->n_tensors, "the file ends before %s", nm);
    const struct bp_gguf_tensor *t = &fw->g->tensors[fw->next++];
    const struct spec *sp = spec_of(r);
    ck_assert_str_eq(t->name, nm);
    ck_assert_msg(t->ne[0] == sp->ne0 && t->ne[1] == (sp->ne1 ? sp->ne1 : 1), "%s: shape", nm);
    ck_assert_int_eq(t->type, sp->f32 ? BP_TYPE_F32 : fw->wt);
    return 0;
}

START_TEST(test_schema_every_row_is_in_the_gguf_a_builtin_model_writes)
{
    const bool fused = _i;
    struct bp_run_model *m = builtin(BP_TYPE_Q8_0, fused);
    char path[] = "/tmp/bp_test_schema_XXXXXX", err[512] = "";
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    close(fd);
    ck_assert_int_eq(bp_run_model_save_gguf(m, path, 3, 32), BP_OK);
    struct bp_gguf *g = NULL;
    ck_assert_msg(bp_gguf_open(path, &g, err, sizeof err) == BP_OK, "%s", err);
    struct file_walk fw = { .g = g, .wt = BP_TYPE_Q8_0 };
    ck_assert_int_eq(bp_llama_schema_walk(&m->hp, fused, false, check_tensor, &fw), 0);
    /* 2 layers of 9 (fused: 7) tensors, the embedding, output norm and output. */
    ck_assert_uint_eq(fw.next, fused ? 17 : 21);
    ck_assert_uint_eq(g->n_tensors, fw.next);
    bp_gguf_close(g);
    unlink(path);
    bp_run_model_free(m);
}
END_TEST

/* The binder's slot of every present row holds the weight of its name,
 * which points back at the row. */
static int check_bound(void *user, const struct bp_llama_tensor *r, int64_t l)
{
    const struct bp_run_model *m = user;
    char nm[BP_GGUF_MAX_NAME + 1];
    bp_llama_tensor_name(r, l, nm, sizeof nm);
    const struct bp_run_weight *w = bp_llama_get(r, m, l);
    ck_assert_msg(w, "%s is not bound", nm);
    ck_assert_str_eq(w->name, nm);
    ck_assert_ptr_eq(w->row, r);
    return 0;
}

START_TEST(test_schema_binder_binds_every_row)
{
    struct bp_run_model *m = builtin(BP_TYPE_F32, false), *l = NULL;
    char err[512];
    ck_assert_msg(save_and_load(m, NULL, NULL, &l, err, sizeof err) == BP_OK, "%s", err);
    ck_assert_int_eq(bp_llama_schema_walk(&l->hp, false, false, check_bound, l), 0);
    ck_assert_uint_eq(l->n_weights, m->n_weights);
    ck_assert_ptr_null(l->layers[0].wqkv);
    bp_run_model_free(l);
    bp_run_model_free(m);
}
END_TEST

/* A tensor the architecture does not read (a Qwen 3 norm in a llama file,
 * or any name) or a mixture of experts' tensor: refused by name, as
 * llama.cpp refuses "wrong number of tensors". */
START_TEST(test_schema_binder_refuses_a_tensor_no_row_reads_by_name)
{
    static const struct { const char *name, *says; } cases[] = {
        { "blk.0.attn_q_norm.weight", "does not have and nothing would read" },
        { "blk.1.foo.weight", "does not have and nothing would read" },
        { "blk.0.ffn_gate_exps.weight", "mixture of experts" },
        { "blk.0.ffn_gate_inp.weight", "mixture of experts" },
    };
    struct bp_run_model *m = builtin(BP_TYPE_F32, false), *l = NULL;
    const float zeros[256] = { 0 };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const struct bp_run_weight extra = { .type = BP_TYPE_F32, .n_dims = 1, .ne = { 256, 1, 1, 1 },
                                             .data = zeros, .size = sizeof zeros };
        struct bp_run_weight x = extra;
        snprintf(x.name, sizeof x.name, "%s", cases[i].name);
        char err[512];
        ck_assert_int_eq(save_and_load(m, NULL, &x, &l, err, sizeof err), BP_ERR_UNSUPPORTED);
        ck_assert_ptr_null(l);
        char want[96];
        snprintf(want, sizeof want, "'%s'", cases[i].name);
        ck_assert_msg(strstr(err, want) && strstr(err, cases[i].says), "%s: %s", cases[i].name, err);
    }
    bp_run_model_free(m);
}
END_TEST

/* Each required tensor of layer 0, of the last layer and of the globals,
 * left out of a file: refused with a sentence that names it. */
static int check_refused_without(void *user, const struct bp_llama_tensor *r, int64_t l)
{
    const struct bp_run_model *m = user;
    if (r->presence == BP_LLAMA_UNTIED || (l > 0 && l < m->hp.n_layer - 1)) return 0;
    char nm[BP_GGUF_MAX_NAME + 1], err[512], want[BP_GGUF_MAX_NAME + 8];
    bp_llama_tensor_name(r, l, nm, sizeof nm);
    struct bp_run_model *out = NULL;
    ck_assert_int_eq(save_and_load(m, nm, NULL, &out, err, sizeof err), BP_ERR_NOT_FOUND);
    ck_assert_ptr_null(out);
    snprintf(want, sizeof want, "'%s'", nm);
    ck_assert_msg(strstr(err, want), "dropping %s: '%s' does not name it", nm, err);
    return 0;
}

START_TEST(test_schema_binder_refuses_each_missing_required_tensor_by_name)
{
    struct bp_run_model *m = builtin(BP_TYPE_F32, false);
    ck_assert_int_eq(bp_llama_schema_walk(&m->hp, false, false, check_refused_without, m), 0);
    bp_run_model_free(m);
}
END_TEST

START_TEST(test_schema_fused_qkv_replaces_its_parts_and_output_is_optional)
{
    struct bp_run_model *m = builtin(BP_TYPE_F32, true), *l = NULL;
    char err[512];
    /* Without the fused tensor, its parts are what the layer lacks. */
    ck_assert_int_eq(save_and_load(m, "blk.1.attn_qkv.weight", NULL, &l, err, sizeof err), BP_ERR_NOT_FOUND);
    ck_assert_msg(strstr(err, "'blk.1.attn_q.weight'"), "%s", err);
    /* Without output.weight, the embedding is the output projection. */
    ck_assert_msg(save_and_load(m, "output.weight", NULL, &l, err, sizeof err) == BP_OK, "%s", err);
    ck_assert(l->tied_output);
    ck_assert_ptr_eq(l->output, l->tok_embd);
    ck_assert_ptr_nonnull(l->layers[1].wqkv);
    ck_assert_ptr_null(l->layers[1].wq);
    bp_run_model_free(l);
    bp_run_model_free(m);
}
END_TEST

START_TEST(test_schema_split_table_cuts_each_row_on_its_megatron_axis)
{
    const bool tied = _i;
    struct bp_run_model *m = builtin(BP_TYPE_F32, false);
    if (tied) { /* as a file without output.weight binds */
        m->n_weights--;
        m->output = m->tok_embd;
        m->tied_output = true;
    }
    struct bp_run_split_table t;
    bp_run_split_table_init(&t, m);
    for (size_t i = 0; i < N_SPECS; i++) {
        char nm[BP_GGUF_MAX_NAME + 1];
        snprintf(nm, sizeof nm, spec_global(specs[i].name) ? "%s" : "blk.1.%s", specs[i].name);
        struct bp_meta_split sp;
        const int matched = bp_meta_rules_match(&t.table, nm, &sp);
        /* rows llama lacks (output.bias, Q/K and post norms) and a dense
         * model's absent experts have no rule */
        bool in_llama = false;
        for (size_t j = 0; j < bp_llama_schema_rows; j++)
            if (!strcmp(bp_llama_schema[j].name, specs[i].name))
                in_llama = bp_llama_row_use(NULL, &bp_llama_schema[j]) != BP_LLAMA_ABSENT &&
                           bp_llama_row_use_hp(&m->hp, &bp_llama_schema[j]) != BP_LLAMA_ABSENT;
        const int axis = (tied && !strcmp(specs[i].name, "output.weight")) || !in_llama ? SPEC_MIRROR
                                                                                         : specs[i].axis;
        ck_assert_msg(matched == (axis != SPEC_MIRROR), "%s: matched %d", nm, matched);
        if (matched) ck_assert_msg(sp.state == axis, "%s: state %d, not axis %d", nm, sp.state, axis);
    }
    /* Q | K V in whole GQA groups: 2 query heads of 64 per kv head. */
    struct bp_meta_split qkv;
    ck_assert(bp_meta_rules_match(&t.table, "blk.0.attn_qkv.weight", &qkv));
    ck_assert_int_eq(qkv.n_segments, 2);
    ck_assert(qkv.seg[0].ne == 256 && qkv.seg[0].repeat == 1 && qkv.seg[0].granularity == 128);
    ck_assert(qkv.seg[1].ne == 128 && qkv.seg[1].repeat == 2 && qkv.seg[1].granularity == 64);
    /* The scheduler's copies of the row-parallel weights' inputs: by rows. */
    const char *inputs[2] = { "blk.0.attn_out_in#1", "blk.1.ffn_down_in#0" };
    for (int i = 0; i < 2; i++) {
        struct bp_meta_split sp;
        ck_assert_msg(bp_meta_rules_match(&t.table, inputs[i], &sp) && sp.state == BP_META_SPLIT_AXIS_0, "%s",
                      inputs[i]);
    }
    bp_run_model_free(m);
}
END_TEST

/* On the cpu with q4_0 weights (which it repacks), exactly the weights only
 * MUL_MAT reads live in its weight buffer type. */
START_TEST(test_schema_mul_mat_only_weights_live_in_the_device_weight_layout)
{
    struct bp_device *cpu = bp_device_by_name("cpu");
    ck_assert_ptr_nonnull(cpu);
    struct bp_buffer_type *own = bp_device_weight_buffer_type(cpu, BP_TYPE_Q4_0);
    ck_assert_ptr_ne(own, bp_device_buffer_type(cpu));
    struct bp_run_model *m = builtin(BP_TYPE_Q4_0, false);
    struct bp_run_session *s = NULL;
    struct bp_run_session_options so = { .n_ctx = 8 };
    char err[512] = "";
    ck_assert_msg(bp_run_session_new(m, cpu, &so, &s, err, sizeof err) == BP_OK, "%s", err);
    for (size_t i = 0; i < m->n_weights; i++) {
        const struct bp_tensor *t = bp_run_session_weight(s, m->weights[i].name);
        ck_assert_ptr_nonnull(t);
        const char *suffix = strncmp(m->weights[i].name, "blk.", 4) ? m->weights[i].name
                                                                     : strchr(m->weights[i].name + 4, '.') + 1;
        bool want = false;
        for (size_t k = 0; k < N_SPECS; k++)
            if (!strcmp(specs[k].name, suffix)) want = specs[k].mul_mat_only;
        ck_assert_msg((t->buffer->buft == own) == want, "%s: in the weight layout %d, expected %d",
                      m->weights[i].name, t->buffer->buft == own, want);
    }
    bp_run_session_free(s);
    bp_run_model_free(m);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("run_schema");
    TCase *tc = tcase_create("schema");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_schema_rows_match_the_hand_written_llama_layout);
    tcase_add_loop_test(tc, test_schema_every_row_is_in_the_gguf_a_builtin_model_writes, 0, 2);
    tcase_add_test(tc, test_schema_binder_binds_every_row);
    tcase_add_test(tc, test_schema_binder_refuses_a_tensor_no_row_reads_by_name);
    tcase_add_test(tc, test_schema_binder_refuses_each_missing_required_tensor_by_name);
    tcase_add_test(tc, test_schema_fused_qkv_replaces_its_parts_and_output_is_optional);
    tcase_add_loop_test(tc, test_schema_split_table_cuts_each_row_on_its_megatron_axis, 0, 2);
    tcase_add_test(tc, test_schema_mul_mat_only_weights_live_in_the_device_weight_layout);
    suite_add_tcase(s, tc);
    return run_suite(s);
}
