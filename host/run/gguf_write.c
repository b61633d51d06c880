/*
 * gguf_write.c — the GGUF writer: collects metadata and tensors, then lays
 * the file out exactly as the specification says (header, kvs, tensor infos,
 * zero padding to the alignment, tensor data at aligned offsets relative to
 * the data section). Used by the tests and by `backplane run --save`.
 */
#include "gguf.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct wbuf {
    uint8_t *p;
    size_t n, cap;
    bool failed;
};

static void put(struct wbuf *b, const void *src, size_t n)
{
    if (b->failed) return;
    if (n > b->cap - b->n) {
        size_t cap = b->cap ? b->cap : 256;
        while (n > cap - b->n) {
            if (cap > SIZE_MAX / 2) { b->failed = true; return; }
            cap *= 2;
        }
        uint8_t *q = realloc(b->p, cap);
        if (!q) { b->failed = true; return; }
        b->p = q;
        b->cap = cap;
    }
    if (n) memcpy(b->p + b->n, src, n);
    b->n += n;
}
static void put_u32(struct wbuf *b, uint32_t v) { put(b, &v, 4); }
static void put_u64(struct wbuf *b, uint64_t v) { put(b, &v, 8); }
static void put_str(struct wbuf *b, const char *s)
{
    size_t n = strlen(s);
    put_u64(b, n);
    put(b, s, n);
}
static void put_zeros(struct wbuf *b, size_t n)
{
    static const uint8_t z[64];
    while (n) {
        size_t k = n < sizeof z ? n : sizeof z;
        put(b, z, k);
        n -= k;
    }
}

struct wtensor {
    char name[BP_GGUF_MAX_NAME + 1];
    uint32_t n_dims, ggml_type;
    int64_t ne[4];
    uint8_t *data;
    size_t size;
};

struct bp_gguf_writer {
    uint32_t version, alignment;
    uint64_t n_kv;
    struct wbuf kvs;           /* the serialised kv section */
    struct wtensor *tensors;
    size_t n_tensors, cap_tensors;
};

bp_status bp_gguf_writer_new(uint32_t version, uint32_t alignment, struct bp_gguf_writer **out)
{
    if (!out || (version != 2 && version != 3) || alignment == 0 || alignment % 8 != 0)
        return BP_ERR_INVALID_ARGUMENT;
    struct bp_gguf_writer *w = calloc(1, sizeof *w);
    if (!w) return BP_ERR_OUT_OF_MEMORY;
    w->version = version;
    w->alignment = alignment;
    *out = w;
    if (alignment != BP_GGUF_DEFAULT_ALIGNMENT)
        return bp_gguf_add_u32(w, "general.alignment", alignment);
    return BP_OK;
}

void bp_gguf_writer_free(struct bp_gguf_writer *w)
{
    if (!w) return;
    for (size_t i = 0; i < w->n_tensors; i++) free(w->tensors[i].data);
    free(w->tensors);
    free(w->kvs.p);
    free(w);
}

static bp_status kv_head(struct bp_gguf_writer *w, const char *key, uint32_t type)
{
    if (!w || !key) return BP_ERR_INVALID_ARGUMENT;
    put_str(&w->kvs, key);
    put_u32(&w->kvs, type);
    w->n_kv++;
    return w->kvs.failed ? BP_ERR_OUT_OF_MEMORY : BP_OK;
}

static bp_status kv_scalar(struct bp_gguf_writer *w, const char *key, uint32_t type,
                           const void *v, size_t n)
{
    bp_status s = kv_head(w, key, type);
    if (s != BP_OK) return s;
    put(&w->kvs, v, n);
    return w->kvs.failed ? BP_ERR_OUT_OF_MEMORY : BP_OK;
}

bp_status bp_gguf_add_u32(struct bp_gguf_writer *w, const char *key, uint32_t v)
{ return kv_scalar(w, key, BP_GGUF_U32, &v, 4); }
bp_status bp_gguf_add_u64(struct bp_gguf_writer *w, const char *key, uint64_t v)
{ return kv_scalar(w, key, BP_GGUF_U64, &v, 8); }
bp_status bp_gguf_add_i32(struct bp_gguf_writer *w, const char *key, int32_t v)
{ return kv_scalar(w, key, BP_GGUF_I32, &v, 4); }
bp_status bp_gguf_add_f32(struct bp_gguf_writer *w, const char *key, float v)
{ return kv_scalar(w, key, BP_GGUF_F32, &v, 4); }
bp_status bp_gguf_add_bool(struct bp_gguf_writer *w, const char *key, bool v)
{ uint8_t b = v ? 1 : 0; return kv_scalar(w, key, BP_GGUF_BOOL, &b, 1); }

bp_status bp_gguf_add_string(struct bp_gguf_writer *w, const char *key, const char *v)
{
    if (!v) return BP_ERR_INVALID_ARGUMENT;
    bp_status s = kv_head(w, key, BP_GGUF_STRING);
    if (s != BP_OK) return s;
    put_str(&w->kvs, v);
    return w->kvs.failed ? BP_ERR_OUT_OF_MEMORY : BP_OK;
}

bp_status bp_gguf_add_array(struct bp_gguf_writer *w, const char *key, uint32_t elem_type,
                            const void *elems, uint64_t n)
{
    size_t es = bp_gguf_scalar_size(elem_type);
    if (!es || (n && !elems) || n > SIZE_MAX / es) return BP_ERR_INVALID_ARGUMENT;
    bp_status s = kv_head(w, key, BP_GGUF_ARRAY);
    if (s != BP_OK) return s;
    put_u32(&w->kvs, elem_type);
    put_u64(&w->kvs, n);
    put(&w->kvs, elems, (size_t)n * es);
    return w->kvs.failed ? BP_ERR_OUT_OF_MEMORY : BP_OK;
}

bp_status bp_gguf_add_string_array(struct bp_gguf_writer *w, const char *key,
                                   const char *const *strs, uint64_t n)
{
    if (n && !strs) return BP_ERR_INVALID_ARGUMENT;
    bp_status s = kv_head(w, key, BP_GGUF_ARRAY);
    if (s != BP_OK) return s;
    put_u32(&w->kvs, BP_GGUF_STRING);
    put_u64(&w->kvs, n);
    for (uint64_t i = 0; i < n; i++) put_str(&w->kvs, strs[i] ? strs[i] : "");
    return w->kvs.failed ? BP_ERR_OUT_OF_MEMORY : BP_OK;
}

bp_status bp_gguf_add_tensor_raw(struct bp_gguf_writer *w, const char *name, uint32_t ggml_type,
                                 int n_dims, const int64_t *ne, const void *data, size_t size)
{
    if (!w || !name || strlen(name) == 0 || strlen(name) > BP_GGUF_MAX_NAME || n_dims < 1 ||
        n_dims > 4 || !ne || (size && !data))
        return BP_ERR_INVALID_ARGUMENT;
    if (w->n_tensors == w->cap_tensors) {
        size_t cap = w->cap_tensors ? w->cap_tensors * 2 : 16;
        struct wtensor *t = realloc(w->tensors, cap * sizeof *t);
        if (!t) return BP_ERR_OUT_OF_MEMORY;
        w->tensors = t;
        w->cap_tensors = cap;
    }
    struct wtensor *t = &w->tensors[w->n_tensors];
    memset(t, 0, sizeof *t);
    snprintf(t->name, sizeof t->name, "%s", name);
    t->n_dims = (uint32_t)n_dims;
    t->ggml_type = ggml_type;
    for (int i = 0; i < 4; i++) t->ne[i] = i < n_dims ? ne[i] : 1;
    t->size = size;
    t->data = malloc(size ? size : 1);
    if (!t->data) return BP_ERR_OUT_OF_MEMORY;
    if (size) memcpy(t->data, data, size);
    w->n_tensors++;
    return BP_OK;
}

bp_status bp_gguf_add_tensor(struct bp_gguf_writer *w, const char *name, int type, int n_dims,
                             const int64_t *ne, const void *data)
{
    uint32_t gt = bp_gguf_type_to_ggml(type);
    if (gt == UINT32_MAX || !ne || n_dims < 1 || n_dims > 4) return BP_ERR_INVALID_ARGUMENT;
    size_t size = bp_row_size((enum bp_type)type, ne[0]);
    if (!size) return BP_ERR_SHAPE;
    for (int i = 1; i < n_dims; i++) {
        if (ne[i] <= 0 || size > SIZE_MAX / (size_t)ne[i]) return BP_ERR_SHAPE;
        size *= (size_t)ne[i];
    }
    return bp_gguf_add_tensor_raw(w, name, gt, n_dims, ne, data, size);
}

static size_t pad_to(size_t n, size_t a) { return (a - n % a) % a; }

bp_status bp_gguf_writer_image(struct bp_gguf_writer *w, uint8_t **out, size_t *size)
{
    if (!w || !out || !size) return BP_ERR_INVALID_ARGUMENT;
    *out = NULL;
    *size = 0;
    struct wbuf b = {0};
    put(&b, "GGUF", 4);
    put_u32(&b, w->version);
    put_u64(&b, w->n_tensors);
    put_u64(&b, w->n_kv);
    put(&b, w->kvs.p, w->kvs.n);
    size_t off = 0;
    for (size_t i = 0; i < w->n_tensors; i++) {
        const struct wtensor *t = &w->tensors[i];
        put_str(&b, t->name);
        put_u32(&b, t->n_dims);
        for (uint32_t d = 0; d < t->n_dims; d++) put_u64(&b, (uint64_t)t->ne[d]);
        put_u32(&b, t->ggml_type);
        put_u64(&b, off);
        off += t->size + pad_to(t->size, w->alignment);
    }
    put_zeros(&b, pad_to(b.n, w->alignment));
    for (size_t i = 0; i < w->n_tensors; i++) {
        const struct wtensor *t = &w->tensors[i];
        put(&b, t->data, t->size);
        put_zeros(&b, pad_to(t->size, w->alignment));
    }
    if (b.failed) {
        free(b.p);
        return BP_ERR_OUT_OF_MEMORY;
    }
    *out = b.p;
    *size = b.n;
    return BP_OK;
}

bp_status bp_gguf_writer_save(struct bp_gguf_writer *w, const char *path)
{
    uint8_t *img;
    size_t n;
    bp_status s = bp_gguf_writer_image(w, &img, &n);
    if (s != BP_OK) return s;
    FILE *f = fopen(path, "wb");
    if (!f) {
        free(img);
        return BP_ERR_IO;
    }
    bool ok = fwrite(img, 1, n, f) == n;
    ok = (fclose(f) == 0) && ok;
    free(img);
    return ok ? BP_OK : BP_ERR_IO;
}
