/*
 * test_run_gguf.c — the GGUF writer and reader against the published layout
 * (offsets computed here by hand), round trips of every metadata encoding in
 * versions 2 and 3 and two alignments, a built-in model saved and loaded
 * back bit for bit, and each malformed file refused with its sentence.
 */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <backplane/backplane.h>

#include "decoder.h"
#include "gguf.h"
#include "model.h"
#include "suite_main.h"

static uint64_t rd64(const uint8_t *p) { uint64_t v; memcpy(&v, p, 8); return v; }
static uint32_t rd32(const uint8_t *p) { uint32_t v; memcpy(&v, p, 4); return v; }

/* ------------------------------------------------------------ layout */

START_TEST(test_gguf_writer_lays_out_header_tensor_info_and_aligned_data_per_spec)
{
    const uint32_t aligns[2] = { 32, 64 };
    for (int v = 2; v <= 3; v++)
        for (int ai = 0; ai < 2; ai++) {
            struct bp_gguf_writer *w;
            ck_assert_int_eq(bp_gguf_writer_new((uint32_t)v, aligns[ai], &w), BP_OK);
            const float data[3] = { 1.5f, -2.0f, 3.25f };
            ck_assert_int_eq(bp_gguf_add_tensor(w, "a", BP_TYPE_F32, 1, (int64_t[]){3}, data), BP_OK);
            const uint8_t b2[2] = { 9, 8 };
            ck_assert_int_eq(bp_gguf_add_tensor_raw(w, "bb", 24 /* i8 */, 1, (int64_t[]){2}, b2, 2), BP_OK);
            uint8_t *img;
            size_t n;
            ck_assert_int_eq(bp_gguf_writer_image(w, &img, &n), BP_OK);
            /* Header: magic, version, tensor count, kv count. */
            ck_assert_int_eq(memcmp(img, "GGUF", 4), 0);
            ck_assert_uint_eq(rd32(img + 4), (uint32_t)v);
            ck_assert_uint_eq(rd64(img + 8), 2);
            size_t pos = 24;
            if (aligns[ai] != 32) { /* general.alignment: u64 len, key, u32 type 4, u32 value */
                ck_assert_uint_eq(rd64(img + 16), 1);
                ck_assert_uint_eq(rd64(img + pos), 17);
                ck_assert_int_eq(memcmp(img + pos + 8, "general.alignment", 17), 0);
                ck_assert_uint_eq(rd32(img + pos + 25), 4);
                ck_assert_uint_eq(rd32(img + pos + 29), aligns[ai]);
                pos += 33;
            } else {
                ck_assert_uint_eq(rd64(img + 16), 0);
            }
            /* Tensor info "a": name, n_dims 1, ne 3, type 0 (f32), offset 0. */
            ck_assert_uint_eq(rd64(img + pos), 1);
            ck_assert_int_eq(img[pos + 8], 'a');
            ck_assert_uint_eq(rd32(img + pos + 9), 1);
            ck_assert_uint_eq(rd64(img + pos + 13), 3);
            ck_assert_uint_eq(rd32(img + pos + 21), 0);
            ck_assert_uint_eq(rd64(img + pos + 25), 0);
            pos += 33;
            /* "bb": its data starts at the next aligned offset after a's 12 bytes. */
            ck_assert_uint_eq(rd64(img + pos), 2);
            ck_assert_uint_eq(rd32(img + pos + 22), 24);
            ck_assert_uint_eq(rd64(img + pos + 26), aligns[ai]);
            pos += 34;
            const size_t data_start = (pos + aligns[ai] - 1) / aligns[ai] * aligns[ai];
            for (size_t i = pos; i < data_start; i++) ck_assert_int_eq(img[i], 0);
            ck_assert_int_eq(memcmp(img + data_start, data, 12), 0);
            ck_assert_int_eq(memcmp(img + data_start + aligns[ai], b2, 2), 0);

            char err[512];
            struct bp_gguf *g;
            ck_assert_msg(bp_gguf_parse(img, n, &g, err, sizeof err) == BP_OK, "%s", err);
            ck_assert_uint_eq(g->data_offset, data_start);
            ck_assert_uint_eq(g->alignment, aligns[ai]);
            const struct bp_gguf_tensor *t = bp_gguf_find_tensor(g, "a");
            ck_assert_ptr_eq(t->data, img + data_start);
            ck_assert_int_eq(t->type, BP_TYPE_F32);
            t = bp_gguf_find_tensor(g, "bb");
            ck_assert_int_eq(t->type, -1); /* i8: no backplane type, but still described */
            ck_assert_uint_eq(t->offset, aligns[ai]);
            bp_gguf_close(g);
            free(img);
            bp_gguf_writer_free(w);
        }
}
END_TEST

START_TEST(test_gguf_every_metadata_encoding_reads_back_in_v2_and_v3)
{
    for (uint32_t v = 2; v <= 3; v++) {
        struct bp_gguf_writer *w;
        ck_assert_int_eq(bp_gguf_writer_new(v, 32, &w), BP_OK);
        const int8_t i8v = -5;
        const uint16_t u16v = 65535;
        const int16_t i16v = -300;
        const int64_t i64v = -(1ll << 40);
        const double f64v = 1.0 / 3.0;
        const uint8_t u8v = 200;
        ck_assert_int_eq(bp_gguf_add_u32(w, "k.u32", 4000000000u), BP_OK);
        ck_assert_int_eq(bp_gguf_add_u64(w, "k.u64", 1ull << 50), BP_OK);
        ck_assert_int_eq(bp_gguf_add_i32(w, "k.i32", -7), BP_OK);
        ck_assert_int_eq(bp_gguf_add_f32(w, "k.f32", 0.5f), BP_OK);
        ck_assert_int_eq(bp_gguf_add_bool(w, "k.bool", true), BP_OK);
        ck_assert_int_eq(bp_gguf_add_string(w, "k.str", "héllo"), BP_OK);
        ck_assert_int_eq(bp_gguf_add_string(w, "k.empty", ""), BP_OK);
        const uint32_t arr[4] = { 1, 2, 3, 4 };
        ck_assert_int_eq(bp_gguf_add_array(w, "k.arr", BP_GGUF_U32, arr, 4), BP_OK);
        ck_assert_int_eq(bp_gguf_add_array(w, "k.i8", BP_GGUF_I8, &i8v, 1), BP_OK);
        ck_assert_int_eq(bp_gguf_add_array(w, "k.u8", BP_GGUF_U8, &u8v, 1), BP_OK);
        ck_assert_int_eq(bp_gguf_add_array(w, "k.u16", BP_GGUF_U16, &u16v, 1), BP_OK);
        ck_assert_int_eq(bp_gguf_add_array(w, "k.i16", BP_GGUF_I16, &i16v, 1), BP_OK);
        ck_assert_int_eq(bp_gguf_add_array(w, "k.i64", BP_GGUF_I64, &i64v, 1), BP_OK);
        ck_assert_int_eq(bp_gguf_add_array(w, "k.f64", BP_GGUF_F64, &f64v, 1), BP_OK);
        const char *strs[3] = { "<s>", "", "tok" };
        ck_assert_int_eq(bp_gguf_add_string_array(w, "tokenizer.ggml.tokens", strs, 3), BP_OK);
        uint8_t *img;
        size_t n;
        ck_assert_int_eq(bp_gguf_writer_image(w, &img, &n), BP_OK);
        struct bp_gguf *g;
        char err[512];
        ck_assert_msg(bp_gguf_parse(img, n, &g, err, sizeof err) == BP_OK, "%s", err);
        ck_assert_uint_eq(g->version, v);
        ck_assert_uint_eq(g->n_kv, 15);
        uint64_t u;
        double f;
        ck_assert(bp_gguf_kv_uint(bp_gguf_find_kv(g, "k.u32"), &u) && u == 4000000000u);
        ck_assert(bp_gguf_kv_uint(bp_gguf_find_kv(g, "k.u64"), &u) && u == 1ull << 50);
        ck_assert_int_eq(bp_gguf_find_kv(g, "k.i32")->v.i, -7);
        ck_assert(!bp_gguf_kv_uint(bp_gguf_find_kv(g, "k.i32"), &u)); /* negative */
        ck_assert(bp_gguf_kv_float(bp_gguf_find_kv(g, "k.f32"), &f) && f == 0.5);
        ck_assert_uint_eq(bp_gguf_find_kv(g, "k.bool")->v.u, 1);
        const struct bp_gguf_kv *s = bp_gguf_find_kv(g, "k.str");
        ck_assert_uint_eq(s->type, BP_GGUF_STRING);
        ck_assert_uint_eq(s->v.s.len, strlen("héllo"));
        ck_assert_int_eq(memcmp(s->v.s.ptr, "héllo", s->v.s.len), 0);
        ck_assert_uint_eq(bp_gguf_find_kv(g, "k.empty")->v.s.len, 0);
        const struct bp_gguf_kv *a = bp_gguf_find_kv(g, "k.arr");
        ck_assert_uint_eq(a->arr_type, BP_GGUF_U32);
        ck_assert_uint_eq(a->arr_count, 4);
        ck_assert_int_eq(memcmp(a->arr_data, arr, 16), 0);
        ck_assert_int_eq(memcmp(bp_gguf_find_kv(g, "k.f64")->arr_data, &f64v, 8), 0);
        ck_assert_int_eq(memcmp(bp_gguf_find_kv(g, "k.i64")->arr_data, &i64v, 8), 0);
        const struct bp_gguf_kv *t = bp_gguf_find_kv(g, "tokenizer.ggml.tokens");
        struct bp_gguf_str e;
        ck_assert(bp_gguf_array_string(g, t, 2, &e) && e.len == 3 && !memcmp(e.ptr, "tok", 3));
        ck_assert(bp_gguf_array_string(g, t, 1, &e) && e.len == 0);
        ck_assert(!bp_gguf_array_string(g, t, 3, &e));
        ck_assert_ptr_null(bp_gguf_find_kv(g, "k.absent"));
        bp_gguf_close(g);
        free(img);
        bp_gguf_writer_free(w);
    }
}
END_TEST

/* ------------------------------------------------------- model files */

struct mutation {
    const char *skip;        /* leave this tensor out */
    const char *bad_shape;   /* write this tensor with its dims swapped */
    const char *raw_type;    /* write this tensor as ggml type 16 (iq2_xxs) */
    const char *arch;        /* general.architecture, default "llama" */
    uint32_t version, alignment;
};

static struct bp_run_model *builtin(enum bp_type t)
{
    char err[512];
    struct bp_run_model *m;
    struct bp_run_builtin_options o = { .weight_type = t, .seed = 3 };
    ck_assert_msg(bp_run_model_builtin("test", &o, &m, err, sizeof err) == BP_OK, "%s", err);
    return m;
}

static uint8_t *model_image(const struct bp_run_model *m, const struct mutation *mu, size_t *n)
{
    struct bp_gguf_writer *w;
    ck_assert_int_eq(bp_gguf_writer_new(mu->version ? mu->version : 3,
                                        mu->alignment ? mu->alignment : 32, &w), BP_OK);
    const struct bp_run_hparams *hp = &m->hp;
    bp_gguf_add_string(w, "general.architecture", mu->arch ? mu->arch : "llama");
    bp_gguf_add_u32(w, "llama.block_count", (uint32_t)hp->n_layer);
    bp_gguf_add_u32(w, "llama.embedding_length", (uint32_t)hp->n_embd);
    bp_gguf_add_u32(w, "llama.feed_forward_length", (uint32_t)hp->n_ff);
    bp_gguf_add_u32(w, "llama.attention.head_count", (uint32_t)hp->n_head);
    bp_gguf_add_u32(w, "llama.attention.head_count_kv", (uint32_t)hp->n_head_kv);
    bp_gguf_add_f32(w, "llama.rope.freq_base", hp->rope_base);
    bp_gguf_add_f32(w, "llama.attention.layer_norm_rms_epsilon", hp->rms_eps);
    bp_gguf_add_u32(w, "llama.context_length", (uint32_t)hp->n_ctx_train);
    for (size_t i = 0; i < m->n_weights; i++) {
        const struct bp_run_weight *x = &m->weights[i];
        if (mu->skip && !strcmp(x->name, mu->skip)) continue;
        if (mu->raw_type && !strcmp(x->name, mu->raw_type)) {
            ck_assert_int_eq(bp_gguf_add_tensor_raw(w, x->name, 16, x->n_dims, x->ne, x->data,
                                                    66 * (size_t)(x->ne[0] / 256 * x->ne[1])), BP_OK);
            continue;
        }
        int64_t ne[4];
        memcpy(ne, x->ne, sizeof ne);
        if (mu->bad_shape && !strcmp(x->name, mu->bad_shape)) { ne[0] = x->ne[1]; ne[1] = x->ne[0]; }
        ck_assert_int_eq(bp_gguf_add_tensor(w, x->name, (int)x->type, x->n_dims, ne, x->data), BP_OK);
    }
    uint8_t *img;
    ck_assert_int_eq(bp_gguf_writer_image(w, &img, n), BP_OK);
    bp_gguf_writer_free(w);
    return img;
}

/* Load an image as a model; returns the status and leaves the sentence in err. */
static bp_status load_image(const uint8_t *img, size_t n, struct bp_run_model **out, char *err,
                            size_t cap)
{
    struct bp_gguf *g;
    *out = NULL;
    err[0] = '\0';
    bp_status s = bp_gguf_parse(img, n, &g, err, cap);
    if (s != BP_OK) return s;
    s = bp_run_model_from_gguf(g, "image", out, err, cap);
    if (s != BP_OK) bp_gguf_close(g);
    return s;
}

START_TEST(test_gguf_model_saved_and_loaded_back_is_identical_and_gives_same_logits)
{
    struct bp_run_model *m = builtin(BP_TYPE_Q8_0);
    char path[] = "/tmp/bp_test_run_XXXXXX";
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    close(fd);
    for (uint32_t v = 2; v <= 3; v++) {
        ck_assert_int_eq(bp_run_model_save_gguf(m, path, v, v == 2 ? 64 : 32), BP_OK);
        char err[512];
        struct bp_run_model *l;
        ck_assert_msg(bp_run_model_load_gguf(path, &l, err, sizeof err) == BP_OK, "%s", err);
        ck_assert_ptr_nonnull(l->gguf->map); /* mapped, not read */
        ck_assert_int_eq(memcmp(&l->hp, &m->hp, sizeof m->hp), 0);
        ck_assert_uint_eq(l->n_weights, m->n_weights);
        for (size_t i = 0; i < m->n_weights; i++) {
            const struct bp_run_weight *a = &m->weights[i];
            const struct bp_gguf_tensor *t = bp_gguf_find_tensor(l->gguf, a->name);
            ck_assert_ptr_nonnull(t);
            ck_assert_int_eq(t->type, a->type);
            ck_assert_int_eq(memcmp(t->ne, a->ne, sizeof a->ne), 0);
            ck_assert_uint_eq(t->size, a->size);
            ck_assert_int_eq(memcmp(t->data, a->data, a->size), 0);
            ck_assert_uint_eq(((uintptr_t)t->data - (uintptr_t)l->gguf->base) % (v == 2 ? 64 : 32), 0);
        }
        ck_assert(!l->tied_output);
        if (v == 3) { /* same model, same logits, on the cpu */
            /* The cpu plugin is built with the tree: its absence is a failure. */
            struct bp_device *cpu = bp_device_by_name("cpu");
            ck_assert_msg(cpu != NULL, "no cpu device: %s", bp_last_error());
            struct bp_run_session *s1, *s2;
            const int32_t toks[3] = { 1, 2, 3 };
            const size_t bytes = (size_t)m->hp.n_vocab * 3 * sizeof(float);
            float *a = malloc(bytes), *b = malloc(bytes);
            ck_assert(a && b);
            struct bp_run_session_options so = { .n_ctx = 8 };
            ck_assert_msg(bp_run_session_new(m, cpu, &so, &s1, err, sizeof err) == BP_OK, "%s", err);
            ck_assert_msg(bp_run_session_new(l, cpu, &so, &s2, err, sizeof err) == BP_OK, "%s", err);
            ck_assert_msg(bp_run_session_eval(s1, toks, 3, true, a, err, sizeof err) == BP_OK, "built: %s", err);
            ck_assert_msg(bp_run_session_eval(s2, toks, 3, true, b, err, sizeof err) == BP_OK, "loaded: %s", err);
            ck_assert_int_eq(memcmp(a, b, bytes), 0);
            bp_run_session_free(s1);
            bp_run_session_free(s2);
            free(a); free(b);
        }
        bp_run_model_free(l);
    }
    unlink(path);
    bp_run_model_free(m);
}
END_TEST

/* Bytes of the mapping at map that this process holds in memory now (its
 * Rss in /proc/self/smaps: what counts toward the peak, unlike the page
 * cache, which mincore reports). */
static size_t mapping_rss(const void *map)
{
    FILE *f = fopen("/proc/self/smaps", "r");
    ck_assert_ptr_nonnull(f);
    char line[512];
    bool in = false;
    size_t kb = SIZE_MAX;
    while (fgets(line, sizeof line, f)) {
        unsigned long lo, hi;
        if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2 && strchr(line, '-') < strchr(line, ' ')) {
            in = (uintptr_t)map >= lo && (uintptr_t)map < hi;
            continue;
        }
        if (in && sscanf(line, "Rss: %zu kB", &kb) == 1) break;
    }
    fclose(f);
    ck_assert_msg(kb != SIZE_MAX, "no mapping at %p in /proc/self/smaps", map);
    return kb * 1024;
}

/* A session copies each weight into the device's buffer once and lets the
 * file's pages go: after it is made, the weights' pages of the mapping no
 * longer count toward the process's memory (llama.cpp keeps its mapping; the device copy
 * beside it doubled the peak). The model still reads back right after,
 * from the file: a second session on it gives the same logits. */
START_TEST(test_gguf_session_lets_the_mapped_weight_pages_go)
{
    struct bp_run_model *m = builtin(BP_TYPE_Q8_0), *l = NULL;
    char path[] = "/tmp/bp_test_run_XXXXXX", err[512];
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    close(fd);
    ck_assert_int_eq(bp_run_model_save_gguf(m, path, 3, 32), BP_OK);
    ck_assert_msg(bp_run_model_load_gguf(path, &l, err, sizeof err) == BP_OK, "%s", err);
    struct bp_device *cpu = bp_device_by_name("cpu");
    ck_assert_ptr_nonnull(cpu);
    for (size_t i = 0; i < l->n_weights; i++) { /* touch every page, as a reader would */
        volatile unsigned char sum = 0;
        for (size_t k = 0; k < l->weights[i].size; k += 512) sum += ((const unsigned char *)l->weights[i].data)[k];
    }
    const size_t file = l->gguf->size;
    ck_assert_uint_gt(mapping_rss(l->gguf->map), file * 9 / 10);
    struct bp_run_session *s1, *s2;
    struct bp_run_session_options so = { .n_ctx = 8 };
    ck_assert_msg(bp_run_session_new(l, cpu, &so, &s1, err, sizeof err) == BP_OK, "%s", err);
    /* What stays: the header and the pages tensors share at their edges. */
    const size_t left = mapping_rss(l->gguf->map);
    ck_assert_msg(left < file / 20, "%zu of the file's %zu bytes stay resident", left, file);
    ck_assert_msg(bp_run_session_new(l, cpu, &so, &s2, err, sizeof err) == BP_OK, "%s", err);
    const int32_t toks[3] = { 1, 2, 3 };
    const size_t bytes = (size_t)l->hp.n_vocab * 3 * sizeof(float);
    float *a = malloc(bytes), *b = malloc(bytes);
    ck_assert(a && b);
    ck_assert_msg(bp_run_session_eval(s1, toks, 3, true, a, err, sizeof err) == BP_OK, "%s", err);
    ck_assert_msg(bp_run_session_eval(s2, toks, 3, true, b, err, sizeof err) == BP_OK, "%s", err);
    ck_assert_int_eq(memcmp(a, b, bytes), 0);
    free(a);
    free(b);
    bp_run_session_free(s1);
    bp_run_session_free(s2);
    bp_run_model_free(l);
    unlink(path);
    bp_run_model_free(m);
}
END_TEST

START_TEST(test_gguf_model_without_output_weight_ties_it_to_the_embedding)
{
    struct bp_run_model *m = builtin(BP_TYPE_F32), *l;
    size_t n;
    uint8_t *img = model_image(m, &(struct mutation){ .skip = "output.weight" }, &n);
    char err[512];
    ck_assert_msg(load_image(img, n, &l, err, sizeof err) == BP_OK, "%s", err);
    ck_assert(l->tied_output);
    ck_assert_ptr_eq(l->output, l->tok_embd);
    bp_run_model_free(l);
    free(img);
    bp_run_model_free(m);
}
END_TEST

/* ----------------------------------------------------------- refusals */

static void expect_refusal(const struct mutation *mu, const char *const *phrases)
{
    struct bp_run_model *m = builtin(BP_TYPE_F32), *l;
    size_t n;
    uint8_t *img = model_image(m, mu, &n);
    char err[512];
    ck_assert_int_ne(load_image(img, n, &l, err, sizeof err), BP_OK);
    ck_assert_ptr_null(l);
    for (const char *const *p = phrases; *p; p++)
        ck_assert_msg(strstr(err, *p), "sentence '%s' lacks '%s'", err, *p);
    free(img);
    bp_run_model_free(m);
}

START_TEST(test_gguf_refuses_missing_tensor_naming_it)
{
    expect_refusal(&(struct mutation){ .skip = "blk.1.ffn_up.weight" },
                   (const char *[]){ "no tensor 'blk.1.ffn_up.weight'", NULL });
}
END_TEST

START_TEST(test_gguf_refuses_unsupported_tensor_type_naming_tensor_and_type)
{
    expect_refusal(&(struct mutation){ .raw_type = "blk.0.ffn_gate.weight" },
                   (const char *[]){ "'blk.0.ffn_gate.weight'", "iq2_xxs", NULL });
}
END_TEST

START_TEST(test_gguf_refuses_shape_disagreeing_with_metadata_giving_both_shapes)
{
    expect_refusal(&(struct mutation){ .bad_shape = "blk.0.attn_k.weight" },
                   (const char *[]){ "'blk.0.attn_k.weight'", "[128, 256]", "[256, 128]", NULL });
}
END_TEST

START_TEST(test_gguf_refuses_other_architecture_naming_it)
{
    expect_refusal(&(struct mutation){ .arch = "gpt2" }, (const char *[]){ "'gpt2'", "llama", NULL });
}
END_TEST

static uint8_t *small_image(size_t *n)
{
    struct bp_gguf_writer *w;
    ck_assert_int_eq(bp_gguf_writer_new(3, 32, &w), BP_OK);
    bp_gguf_add_string(w, "general.architecture", "llama");
    const char *strs[2] = { "a", "bc" };
    bp_gguf_add_string_array(w, "tokenizer.ggml.tokens", strs, 2);
    const float d[64] = { 1 };
    bp_gguf_add_tensor(w, "t0", BP_TYPE_F32, 2, (int64_t[]){8, 8}, d);
    bp_gguf_add_tensor(w, "t1", BP_TYPE_Q8_0, 1, (int64_t[]){32}, d);
    uint8_t *img;
    ck_assert_int_eq(bp_gguf_writer_image(w, &img, n), BP_OK);
    bp_gguf_writer_free(w);
    return img;
}

START_TEST(test_gguf_refuses_wrong_magic_and_unknown_versions)
{
    size_t n;
    uint8_t *img = small_image(&n);
    char err[512];
    struct bp_gguf *g;
    img[0] = 'X';
    ck_assert_int_ne(bp_gguf_parse(img, n, &g, err, sizeof err), BP_OK);
    ck_assert_ptr_nonnull(strstr(err, "not a GGUF file"));
    img[0] = 'G';
    const uint32_t versions[3] = { 1, 4, 0x03000000 };
    const char *const says[3] = { "version 1", "version 4", "big-endian" };
    for (int i = 0; i < 3; i++) {
        memcpy(img + 4, &versions[i], 4);
        ck_assert_int_eq(bp_gguf_parse(img, n, &g, err, sizeof err), BP_ERR_UNSUPPORTED);
        ck_assert_msg(strstr(err, says[i]), "'%s' lacks '%s'", err, says[i]);
    }
    free(img);
}
END_TEST

/* Every proper prefix of a valid file is refused with a sentence (no crash,
 * no read past the end: ASan and valgrind watch this one). */
START_TEST(test_gguf_refuses_every_truncation_of_a_file)
{
    size_t n;
    uint8_t *img = small_image(&n);
    for (size_t k = 0; k < n; k++) {
        uint8_t *cut = malloc(k ? k : 1);
        memcpy(cut, img, k);
        char err[512] = "";
        struct bp_gguf *g = (struct bp_gguf *)1;
        bp_status s = bp_gguf_parse(k ? cut : NULL, k, &g, err, sizeof err);
        if (s == BP_OK) { /* only the zero padding after the last tensor's data may go */
            ck_assert_ptr_nonnull(g);
            const struct bp_gguf_tensor *t = &g->tensors[g->n_tensors - 1];
            ck_assert_uint_ge(k, g->data_offset + t->offset + t->size);
            bp_gguf_close(g);
        } else {
            ck_assert_ptr_null(g);
            ck_assert_msg(strstr(err, "truncated") || strstr(err, "not a GGUF"),
                          "prefix %zu: '%s'", k, err);
        }
        free(cut);
    }
    free(img);
}
END_TEST

START_TEST(test_gguf_refuses_tensor_offsets_outside_file_or_unaligned)
{
    size_t n;
    uint8_t *img = small_image(&n);
    struct bp_gguf *g;
    char err[512];
    ck_assert_int_eq(bp_gguf_parse(img, n, &g, err, sizeof err), BP_OK);
    /* Find t1's offset field: the 8 bytes after its type word. */
    const uint8_t *p = memmem(img, n, "t1", 2);
    ck_assert_ptr_nonnull(p);
    const size_t at = (size_t)(p - img) + 2 + 4 + 8 + 4;
    ck_assert_uint_eq(rd64(img + at), g->tensors[1].offset);
    bp_gguf_close(g);
    const uint64_t bad[3] = { UINT64_MAX - 31, 1ull << 40, 8 };
    const char *const says[3] = { "truncated", "truncated", "not a multiple" };
    for (int i = 0; i < 3; i++) {
        memcpy(img + at, &bad[i], 8);
        ck_assert_int_ne(bp_gguf_parse(img, n, &g, err, sizeof err), BP_OK);
        ck_assert_msg(strstr(err, says[i]), "'%s' lacks '%s'", err, says[i]);
    }
    /* A count no file could hold is refused before anything is allocated. */
    const uint64_t huge = UINT64_MAX;
    memcpy(img + 16, &huge, 8);
    ck_assert_int_ne(bp_gguf_parse(img, n, &g, err, sizeof err), BP_OK);
    ck_assert_ptr_nonnull(strstr(err, "truncated or corrupt"));
    free(img);
}
END_TEST

START_TEST(test_gguf_open_refuses_missing_and_empty_files_with_a_sentence)
{
    struct bp_run_model *m;
    char err[512];
    ck_assert_int_eq(bp_run_model_load_gguf("/nonexistent/model.gguf", &m, err, sizeof err), BP_ERR_IO);
    ck_assert_ptr_nonnull(strstr(err, "/nonexistent/model.gguf"));
    char path[] = "/tmp/bp_test_run_XXXXXX";
    int fd = mkstemp(path);
    close(fd);
    ck_assert_int_ne(bp_run_model_load_gguf(path, &m, err, sizeof err), BP_OK);
    ck_assert_ptr_nonnull(strstr(err, "not a GGUF file"));
    unlink(path);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("run_gguf");
    TCase *tc = tcase_create("gguf");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, test_gguf_writer_lays_out_header_tensor_info_and_aligned_data_per_spec);
    tcase_add_test(tc, test_gguf_every_metadata_encoding_reads_back_in_v2_and_v3);
    tcase_add_test(tc, test_gguf_model_saved_and_loaded_back_is_identical_and_gives_same_logits);
    tcase_add_test(tc, test_gguf_model_without_output_weight_ties_it_to_the_embedding);
    tcase_add_test(tc, test_gguf_session_lets_the_mapped_weight_pages_go);
    tcase_add_test(tc, test_gguf_refuses_missing_tensor_naming_it);
    tcase_add_test(tc, test_gguf_refuses_unsupported_tensor_type_naming_tensor_and_type);
    tcase_add_test(tc, test_gguf_refuses_shape_disagreeing_with_metadata_giving_both_shapes);
    tcase_add_test(tc, test_gguf_refuses_other_architecture_naming_it);
    tcase_add_test(tc, test_gguf_refuses_wrong_magic_and_unknown_versions);
    tcase_add_test(tc, test_gguf_refuses_every_truncation_of_a_file);
    tcase_add_test(tc, test_gguf_refuses_tensor_offsets_outside_file_or_unaligned);
    tcase_add_test(tc, test_gguf_open_refuses_missing_and_empty_files_with_a_sentence);
    suite_add_tcase(s, tc);
    return run_suite(s);
}
