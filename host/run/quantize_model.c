/*
 * quantize_model.c — plan and write a quantized GGUF file (the contract is
 * in quantize_model.h). The plan mirrors llama_model_quantize_impl: tensors
 * sorted as llama.cpp's weight map sorts them, the type rules applied in
 * that order (their counters depend on it), offsets aligned as the input's.
 * The writer streams: header first (every size is known from the plan),
 * then each tensor converted by worker threads into one buffer and written
 * with its padding, into a temporary file renamed over the output at the
 * end, so that a failure leaves no partial file and the input may be
 * replaced in place.
 */
#include "quantize_model.h"
#include "run_error.h"

#include <backplane/bp_quantize.h>

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define QUANTIZATION_VERSION 2 /* GGML_QNT_VERSION, written as general.quantization_version */

/* Keys llama.cpp does not copy: it writes the first two again at the end,
 * and a single output file has no split. */
static const char *const replaced_keys[] = {
    "general.quantization_version", "general.file_type", "split.no", "split.count",
    "split.tensors.count",
};

static bool replaced_key(const struct bp_gguf_kv *kv)
{
    for (size_t i = 0; i < sizeof replaced_keys / sizeof replaced_keys[0]; i++)
        if (kv->key.len == strlen(replaced_keys[i]) && !memcmp(kv->key.ptr, replaced_keys[i], kv->key.len))
            return true;
    return false;
}

struct buf {
    uint8_t *p;
    size_t n, cap;
    bool failed;
};
static bool build_header(const struct bp_quant_job *job, struct buf *b);

/* ------------------------------------------------------------------ plan */

static int dims_of(const struct bp_gguf_tensor *t)
{
    int n = 4;
    while (n > 1 && t->ne[n - 1] == 1) n--;
    return n;
}

/* llama.cpp's weight_name_comparer: by layer (-1 outside blk.N.), then by
 * name. */
static int by_layer_then_name(const void *a, const void *b)
{
    const struct bp_quant_item *x = a, *y = b;
    int lx = -1, ly = -1;
    if (!bp_quant_name_layer(x->in->name, &lx)) lx = -1;
    if (!bp_quant_name_layer(y->in->name, &ly)) ly = -1;
    if (lx != ly) return lx < ly ? -1 : 1;
    return strcmp(x->in->name, y->in->name);
}

/* A metadata value as an unsigned count: an integer, or an array's first
 * integer (llama.cpp reads per-layer head counts that way for layer 0). */
static bool key_count(const struct bp_gguf *g, const char *arch, const char *suffix, int64_t *out)
{
    char key[160];
    snprintf(key, sizeof key, "%s.%s", arch, suffix);
    const struct bp_gguf_kv *kv = bp_gguf_find_kv(g, key);
    if (!kv) return false;
    uint64_t v;
    if (kv->type == BP_GGUF_ARRAY) {
        const size_t es = bp_gguf_scalar_size(kv->arr_type);
        if (!es || es > 8 || kv->arr_count == 0) return false;
        struct bp_gguf_kv first = { .type = kv->arr_type };
        uint64_t raw = 0;
        memcpy(&raw, kv->arr_data, es);
        if (kv->arr_type == BP_GGUF_I8 || kv->arr_type == BP_GGUF_I16 || kv->arr_type == BP_GGUF_I32 ||
            kv->arr_type == BP_GGUF_I64) {
            const int shift = (int)(64 - 8 * es);
            first.v.i = (int64_t)(raw << shift) >> shift;
        } else {
            first.v.u = raw;
        }
        if (!bp_gguf_kv_uint(&first, &v)) return false;
    } else if (!bp_gguf_kv_uint(kv, &v)) {
        return false;
    }
    if (v > (uint64_t)INT64_MAX) return false;
    *out = (int64_t)v;
    return true;
}

static bp_status model_facts(const struct bp_gguf *g, struct bp_quant_model *m, char *err, size_t cap)
{
    const struct bp_gguf_kv *a = bp_gguf_find_kv(g, "general.architecture");
    if (!a || a->type != BP_GGUF_STRING || a->v.s.len == 0 || a->v.s.len >= 64)
        return bp_run_fail(err, cap, BP_ERR_UNSUPPORTED, "the model has no general.architecture "
                           "string, which llama.cpp's quantizer needs to read its layer count.");
    char arch[64];
    memcpy(arch, a->v.s.ptr, (size_t)a->v.s.len);
    arch[a->v.s.len] = '\0';
    int64_t n_head = 0, n_head_kv;
    if (!key_count(g, arch, "block_count", &m->n_layer) || m->n_layer <= 0)
        return bp_run_fail(err, cap, BP_ERR_UNSUPPORTED, "the model has no positive %s.block_count, "
                           "which llama.cpp's quantizer reads for its per-layer rules.", arch);
    key_count(g, arch, "attention.head_count", &n_head);
    if (!key_count(g, arch, "attention.head_count_kv", &n_head_kv)) n_head_kv = n_head;
    if (!key_count(g, arch, "expert_count", &m->n_expert)) m->n_expert = 0;
    m->n_gqa = n_head_kv ? n_head / n_head_kv : 0;
    m->falcon = !strcmp(arch, "falcon");
    m->is_70b = bp_quant_model_is_70b(arch, m->n_layer, n_head, n_head_kv, m->n_expert);
    m->tied = bp_gguf_find_tensor(g, "output.weight") == NULL;
    m->n_attn_v = 0;
    for (uint64_t i = 0; i < g->n_tensors; i++) m->n_attn_v += bp_quant_is_attn_v(g->tensors[i].name);
    return BP_OK;
}

static bool convertible_from(enum bp_type t)
{
    return t == BP_TYPE_F32 || t == BP_TYPE_F16 || t == BP_TYPE_BF16;
}

bp_status bp_quant_plan(const struct bp_gguf *in, const struct bp_quant_preset *p,
                        struct bp_quant_job **out, char *err, size_t err_cap)
{
    *out = NULL;
    struct bp_quant_job *job = calloc(1, sizeof *job);
    struct bp_quant_item *items = calloc(in->n_tensors ? (size_t)in->n_tensors : 1, sizeof *items);
    if (!job || !items) {
        free(job);
        free(items);
        return bp_run_fail(err, err_cap, BP_ERR_OUT_OF_MEMORY, "out of memory planning the quantization.");
    }
    job->in = in;
    job->preset = p;
    job->items = items;
    job->n = (size_t)in->n_tensors;
    job->alignment = in->alignment;
    bp_status s = model_facts(in, &job->model, err, err_cap);
    for (size_t i = 0; s == BP_OK && i < job->n; i++) {
        items[i].in = &in->tensors[i];
        items[i].n_dims = dims_of(&in->tensors[i]);
    }
    if (s == BP_OK) qsort(items, job->n, sizeof *items, by_layer_then_name);
    struct bp_quant_counters c = {0};
    uint64_t off = 0;
    for (size_t i = 0; s == BP_OK && i < job->n; i++) {
        struct bp_quant_item *it = &items[i];
        const struct bp_gguf_tensor *t = it->in;
        if (t->type < 0) {
            s = bp_run_fail(err, err_cap, BP_ERR_UNSUPPORTED, "tensor '%s' is stored as %s (ggml type "
                            "%u), which backplane cannot read; quantize from an F32, F16 or BF16 file.",
                            t->name, bp_gguf_ggml_type_name(t->ggml_type), t->ggml_type);
            break;
        }
        it->from = (enum bp_type)t->type;
        s = bp_quant_choose(p, &job->model, &c, t->name, it->n_dims, t->ne[0], it->from, &it->type, err,
                            err_cap);
        if (s != BP_OK) break;
        if (it->type != it->from && !convertible_from(it->from)) {
            s = bp_run_fail(err, err_cap, BP_ERR_UNSUPPORTED, "tensor '%s' is already %s, and llama.cpp's "
                            "quantizer does not convert quantized tensors (to %s here); quantize from "
                            "the F32, F16 or BF16 file.", t->name, bp_type_name(it->from),
                            bp_type_name(it->type));
            break;
        }
        it->size = bp_row_size(it->type, t->ne[0]) * (size_t)(t->ne[1] * t->ne[2] * t->ne[3]);
        it->offset = off;
        off += it->size + (job->alignment - it->size % job->alignment) % job->alignment;
    }
    struct buf head = {0};
    if (s == BP_OK && !build_header(job, &head))
        s = bp_run_fail(err, err_cap, BP_ERR_OUT_OF_MEMORY, "out of memory building the GGUF header.");
    free(head.p);
    if (s != BP_OK) {
        bp_quant_job_free(job);
        return s;
    }
    job->out_size = head.n + off;
    *out = job;
    return BP_OK;
}

void bp_quant_job_free(struct bp_quant_job *job)
{
    if (!job) return;
    free(job->items);
    free(job);
}

/* ---------------------------------------------------------------- header */

static void put(struct buf *b, const void *src, size_t n)
{
    if (b->failed) return;
    if (n > b->cap - b->n) {
        size_t cap = b->cap ? b->cap : 4096;
        while (n > cap - b->n) cap *= 2;
        uint8_t *q = realloc(b->p, cap);
        if (!q) {
            b->failed = true;
            return;
        }
        b->p = q;
        b->cap = cap;
    }
    memcpy(b->p + b->n, src, n);
    b->n += n;
}

static void put_u32(struct buf *b, uint32_t v) { put(b, &v, 4); }
static void put_u64(struct buf *b, uint64_t v) { put(b, &v, 8); }

static void put_key_u32(struct buf *b, const char *key, uint32_t v)
{
    put_u64(b, strlen(key));
    put(b, key, strlen(key));
    put_u32(b, BP_GGUF_U32);
    put_u32(b, v);
}

/* Header, metadata, tensor infos and the padding before the data. */
static bool build_header(const struct bp_quant_job *job, struct buf *b)
{
    const struct bp_gguf *in = job->in;
    uint64_t n_kv = 2;
    for (uint64_t i = 0; i < in->n_kv; i++) n_kv += !replaced_key(&in->kv[i]);
    put(b, "GGUF", 4);
    put_u32(b, 3);
    put_u64(b, job->n);
    put_u64(b, n_kv);
    for (uint64_t i = 0; i < in->n_kv; i++)
        if (!replaced_key(&in->kv[i])) put(b, in->kv[i].raw, in->kv[i].raw_size);
    put_key_u32(b, "general.quantization_version", QUANTIZATION_VERSION);
    put_key_u32(b, "general.file_type", job->preset->ftype);
    for (size_t i = 0; i < job->n; i++) {
        const struct bp_quant_item *it = &job->items[i];
        put_u64(b, strlen(it->in->name));
        put(b, it->in->name, strlen(it->in->name));
        put_u32(b, (uint32_t)it->n_dims);
        for (int d = 0; d < it->n_dims; d++) put_u64(b, (uint64_t)it->in->ne[d]);
        put_u32(b, bp_gguf_type_to_ggml(it->type));
        put_u64(b, it->offset);
    }
    static const uint8_t zeros[64];
    size_t pad = (size_t)((job->alignment - b->n % job->alignment) % job->alignment);
    while (pad) {
        const size_t k = pad < sizeof zeros ? pad : sizeof zeros;
        put(b, zeros, k);
        pad -= k;
    }
    return !b->failed;
}

/* --------------------------------------------------------------- convert */

/* Rows a worker converts at a time: its f32 scratch holds this many values
 * at most (or one row, when a row is longer). */
#define CHUNK_VALUES (64 * 1024)

struct work {
    const struct bp_quant_item *it;
    int64_t row0, row1;         /* the worker's rows */
    uint8_t *dst;               /* the tensor's output */
    int64_t bad_row;            /* first row with a NaN or infinity, or -1 */
    bool failed;                /* out of memory or a conversion error */
};

static bool all_finite(const float *x, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        if (!isfinite(x[i])) return false;
    return true;
}

static void *convert_rows(void *arg)
{
    struct work *w = arg;
    const struct bp_quant_item *it = w->it;
    const int64_t ne0 = it->in->ne[0];
    const size_t in_row = bp_row_size(it->from, ne0), out_row = bp_row_size(it->type, ne0);
    const int64_t per_chunk = ne0 >= CHUNK_VALUES ? 1 : CHUNK_VALUES / ne0;
    float *scratch = NULL;
    if (it->from != BP_TYPE_F32) {
        scratch = malloc((size_t)(per_chunk * ne0) * sizeof *scratch);
        if (!scratch) {
            w->failed = true;
            return NULL;
        }
    }
    for (int64_t r = w->row0; r < w->row1; r += per_chunk) {
        const int64_t nr = r + per_chunk < w->row1 ? per_chunk : w->row1 - r;
        const uint8_t *src = (const uint8_t *)it->in->data + (size_t)r * in_row;
        const float *x = (const float *)(const void *)src;
        if (scratch) {
            if (bp_dequantize(it->from, src, scratch, nr * ne0) != BP_OK) {
                w->failed = true;
                break;
            }
            x = scratch;
        }
        if (!all_finite(x, nr * ne0)) {
            for (int64_t k = 0; k < nr; k++)
                if (!all_finite(x + k * ne0, ne0)) {
                    w->bad_row = r + k;
                    break;
                }
            break;
        }
        if (it->type == it->from) {
            memcpy(w->dst + (size_t)r * out_row, src, (size_t)nr * out_row);
        } else if (bp_quantize_ggml(it->type, x, w->dst + (size_t)r * out_row, nr, ne0) == 0) {
            w->failed = true;
            break;
        }
    }
    free(scratch);
    return NULL;
}

/* Converts one tensor into dst on up to n_threads threads. Every tensor,
 * copied or converted, is checked for NaN and infinity first, as llama.cpp's
 * loader checks them (a quantized one through its values); i32 data is
 * copied as it is. */
static bp_status convert_tensor(const struct bp_quant_item *it, uint8_t *dst, int n_threads, char *err,
                                size_t cap)
{
    const int64_t rows = it->in->ne[1] * it->in->ne[2] * it->in->ne[3];
    if (it->from == BP_TYPE_I32) {
        memcpy(dst, it->in->data, it->size);
        return BP_OK;
    }
    /* small tensors are not worth a thread each */
    int64_t n_use = (rows * it->in->ne[0]) / CHUNK_VALUES;
    if (n_use > n_threads) n_use = n_threads;
    if (n_use > rows) n_use = rows;
    if (n_use < 1) n_use = 1;
    struct work w[64];
    pthread_t tid[64];
    bool started[64] = {0};
    if (n_use > 64) n_use = 64;
    for (int64_t k = 0; k < n_use; k++) {
        w[k] = (struct work){ .it = it, .row0 = rows * k / n_use, .row1 = rows * (k + 1) / n_use,
                              .dst = dst, .bad_row = -1 };
        started[k] = k > 0 && pthread_create(&tid[k], NULL, convert_rows, &w[k]) == 0;
        if (k > 0 && !started[k]) convert_rows(&w[k]); /* no thread: do it here */
    }
    convert_rows(&w[0]);
    int64_t bad = -1;
    bool failed = false;
    for (int64_t k = 0; k < n_use; k++) {
        if (started[k]) pthread_join(tid[k], NULL);
        if (w[k].bad_row >= 0 && bad < 0) bad = w[k].bad_row;
        failed |= w[k].failed;
    }
    if (bad >= 0)
        return bp_run_fail(err, cap, BP_ERR_INVALID_ARGUMENT, "tensor '%s' holds a NaN or infinite "
                           "value in row %lld; llama.cpp refuses such a file too, so fix its source.",
                           it->in->name, (long long)bad);
    if (failed)
        return bp_run_fail(err, cap, BP_ERR_OUT_OF_MEMORY, "out of memory converting tensor '%s'.",
                           it->in->name);
    return BP_OK;
}

/* ----------------------------------------------------------------- write */

static bool write_all(FILE *f, const void *p, size_t n)
{
    return n == 0 || fwrite(p, 1, n, f) == n;
}

bp_status bp_quant_write(const struct bp_quant_job *job, const char *path, int n_threads,
                         bp_quant_progress_fn progress, void *user, char *err, size_t err_cap)
{
    if (n_threads < 1) n_threads = 1;
    struct buf head = {0};
    if (!build_header(job, &head)) {
        free(head.p);
        return bp_run_fail(err, err_cap, BP_ERR_OUT_OF_MEMORY, "out of memory building the GGUF header.");
    }
    size_t tmp_len = strlen(path) + 16;
    char *tmp = malloc(tmp_len);
    if (!tmp) {
        free(head.p);
        return bp_run_fail(err, err_cap, BP_ERR_OUT_OF_MEMORY, "out of memory.");
    }
    snprintf(tmp, tmp_len, "%s.tmp-XXXXXX", path);
    const int fd = mkstemp(tmp);
    FILE *f = fd >= 0 ? fdopen(fd, "wb") : NULL;
    if (!f) {
        const int e = errno;
        if (fd >= 0) {
            close(fd);
            unlink(tmp);
        }
        free(tmp);
        free(head.p);
        return bp_run_fail(err, err_cap, BP_ERR_IO, "cannot write '%s': %s.", path, strerror(e));
    }
    /* a file as fopen would make it: 0666 less the umask */
    const mode_t mask = umask(0);
    umask(mask);
    fchmod(fd, 0666 & ~mask);

    int io_errno = 0;
    bp_status s = BP_OK;
    if (!write_all(f, head.p, head.n)) {
        io_errno = errno;
        s = BP_ERR_IO;
    }
    free(head.p);
    uint8_t *data = NULL;
    size_t cap = 0;
    static const uint8_t zeros[64];
    for (size_t i = 0; s == BP_OK && i < job->n; i++) {
        const struct bp_quant_item *it = &job->items[i];
        if (progress) progress(user, i, it);
        if (it->size > cap) {
            free(data);
            cap = it->size;
            data = malloc(cap);
            if (!data) {
                s = bp_run_fail(err, err_cap, BP_ERR_OUT_OF_MEMORY, "out of memory for tensor '%s' "
                                "(%zu bytes).", it->in->name, it->size);
                break;
            }
        }
        s = convert_tensor(it, data, n_threads, err, err_cap);
        if (s != BP_OK) break;
        size_t pad = (size_t)((job->alignment - it->size % job->alignment) % job->alignment);
        bool ok = write_all(f, data, it->size);
        while (ok && pad) {
            const size_t k = pad < sizeof zeros ? pad : sizeof zeros;
            ok = write_all(f, zeros, k);
            pad -= k;
        }
        if (!ok) {
            io_errno = errno;
            s = BP_ERR_IO;
        }
    }
    free(data);
    if (fclose(f) != 0 && s == BP_OK) {
        io_errno = errno;
        s = BP_ERR_IO;
    }
    if (s == BP_ERR_IO)
        bp_run_fail(err, err_cap, s, "writing '%s' failed: %s.", path, strerror(io_errno ? io_errno : EIO));
    if (s == BP_OK && rename(tmp, path) != 0)
        s = bp_run_fail(err, err_cap, BP_ERR_IO, "cannot write '%s': %s.", path, strerror(errno));
    if (s != BP_OK) unlink(tmp);
    free(tmp);
    return s;
}
