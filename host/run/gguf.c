/*
 * gguf.c — the GGUF reader: map, parse with a bounds-checked cursor, and
 * locate tensor data. Every count is bounded by the bytes left before it is
 * used to allocate, every offset and size is summed with overflow checks,
 * and arrays nest at most BP_GGUF_MAX_DEPTH deep, so no input can make the
 * reader read outside the file, allocate without bound, or recurse deeply.
 */
#include "gguf.h"
#include "run_error.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define BP_GGUF_MAX_DEPTH 8


/* ---------------------------------------------------------- type tables */

int bp_gguf_type_from_ggml(uint32_t t)
{
    switch (t) {
    case BP_GGML_TYPE_F32: return BP_TYPE_F32;
    case BP_GGML_TYPE_F16: return BP_TYPE_F16;
    case BP_GGML_TYPE_BF16: return BP_TYPE_BF16;
    case BP_GGML_TYPE_Q4_0: return BP_TYPE_Q4_0;
    case BP_GGML_TYPE_Q8_0: return BP_TYPE_Q8_0;
    case BP_GGML_TYPE_Q4_K: return BP_TYPE_Q4_K;
    case BP_GGML_TYPE_Q6_K: return BP_TYPE_Q6_K;
    case BP_GGML_TYPE_Q4_1: return BP_TYPE_Q4_1;
    case BP_GGML_TYPE_Q5_0: return BP_TYPE_Q5_0;
    case BP_GGML_TYPE_Q5_1: return BP_TYPE_Q5_1;
    case BP_GGML_TYPE_Q2_K: return BP_TYPE_Q2_K;
    case BP_GGML_TYPE_Q3_K: return BP_TYPE_Q3_K;
    case BP_GGML_TYPE_Q5_K: return BP_TYPE_Q5_K;
    case BP_GGML_TYPE_IQ4_NL: return BP_TYPE_IQ4_NL;
    case BP_GGML_TYPE_IQ4_XS: return BP_TYPE_IQ4_XS;
    default: return -1;
    }
}

uint32_t bp_gguf_type_to_ggml(int t)
{
    switch (t) {
    case BP_TYPE_F32: return BP_GGML_TYPE_F32;
    case BP_TYPE_F16: return BP_GGML_TYPE_F16;
    case BP_TYPE_BF16: return BP_GGML_TYPE_BF16;
    case BP_TYPE_Q4_0: return BP_GGML_TYPE_Q4_0;
    case BP_TYPE_Q8_0: return BP_GGML_TYPE_Q8_0;
    case BP_TYPE_Q4_K: return BP_GGML_TYPE_Q4_K;
    case BP_TYPE_Q6_K: return BP_GGML_TYPE_Q6_K;
    case BP_TYPE_Q4_1: return BP_GGML_TYPE_Q4_1;
    case BP_TYPE_Q5_0: return BP_GGML_TYPE_Q5_0;
    case BP_TYPE_Q5_1: return BP_GGML_TYPE_Q5_1;
    case BP_TYPE_Q2_K: return BP_GGML_TYPE_Q2_K;
    case BP_TYPE_Q3_K: return BP_GGML_TYPE_Q3_K;
    case BP_TYPE_Q5_K: return BP_GGML_TYPE_Q5_K;
    case BP_TYPE_IQ4_NL: return BP_GGML_TYPE_IQ4_NL;
    case BP_TYPE_IQ4_XS: return BP_GGML_TYPE_IQ4_XS;
    default: return UINT32_MAX;
    }
}

const char *bp_gguf_ggml_type_name(uint32_t t)
{
    static const char *const names[] = {
        "f32", "f16", "q4_0", "q4_1", "q4_2", "q4_3", "q5_0", "q5_1", "q8_0", "q8_1",
        "q2_K", "q3_K", "q4_K", "q5_K", "q6_K", "q8_K", "iq2_xxs", "iq2_xs", "iq3_xxs",
        "iq1_s", "iq4_nl", "iq3_s", "iq2_s", "iq4_xs", "i8", "i16", "i32", "i64", "f64",
        "iq1_m", "bf16", "q4_0_4_4", "q4_0_4_8", "q4_0_8_8", "tq1_0", "tq2_0",
        "iq4_nl_4_4", "iq4_nl_4_8", "iq4_nl_8_8", "mxfp4",
    };
    return t < sizeof names / sizeof names[0] ? names[t] : "unknown";
}

/* --------------------------------------------------------------- cursor */

struct cursor {
    const uint8_t *p;
    size_t size, pos;
    char *err;
    size_t cap;
    const char *what; /* the part being read, for the truncation sentence */
};

static bool take(struct cursor *c, void *dst, size_t n)
{
    if (n > c->size - c->pos) return false;
    if (dst) memcpy(dst, c->p + c->pos, n);
    c->pos += n;
    return true;
}

static bp_status truncated(struct cursor *c)
{
    return bp_run_fail(c->err, c->cap, BP_ERR_INVALID_ARGUMENT,
                "the GGUF file is truncated: it ends (at %zu bytes) inside %s; the download or "
                "conversion was probably cut short, fetch or write the file again.",
                c->size, c->what);
}

static bool rd_u32(struct cursor *c, uint32_t *v) { return take(c, v, 4); }
static bool rd_u64(struct cursor *c, uint64_t *v) { return take(c, v, 8); }

static bool rd_str(struct cursor *c, struct bp_gguf_str *s)
{
    uint64_t len;
    if (!rd_u64(c, &len) || len > c->size - c->pos) return false;
    s->ptr = (const char *)c->p + c->pos;
    s->len = len;
    c->pos += (size_t)len;
    return true;
}

size_t bp_gguf_scalar_size(uint32_t type)
{
    switch (type) {
    case BP_GGUF_U8: case BP_GGUF_I8: case BP_GGUF_BOOL: return 1;
    case BP_GGUF_U16: case BP_GGUF_I16: return 2;
    case BP_GGUF_U32: case BP_GGUF_I32: case BP_GGUF_F32: return 4;
    case BP_GGUF_U64: case BP_GGUF_I64: case BP_GGUF_F64: return 8;
    default: return 0;
    }
}

static bp_status bad_value_type(struct cursor *c, uint32_t type)
{
    return bp_run_fail(c->err, c->cap, BP_ERR_INVALID_ARGUMENT,
                "the GGUF file has metadata value type %u in %s, which the format does not "
                "define (0..12); the file is corrupt or not a GGUF file.", type, c->what);
}

/* Skip n values of one type; arrays recurse at most BP_GGUF_MAX_DEPTH deep. */
static bp_status skip_values(struct cursor *c, uint32_t type, uint64_t n, int depth)
{
    size_t sz = bp_gguf_scalar_size(type);
    if (sz) {
        if (n > (c->size - c->pos) / sz) return truncated(c);
        c->pos += (size_t)n * sz;
        return BP_OK;
    }
    if (type == BP_GGUF_STRING) {
        for (uint64_t i = 0; i < n; i++) {
            struct bp_gguf_str s;
            if (!rd_str(c, &s)) return truncated(c);
        }
        return BP_OK;
    }
    if (type != BP_GGUF_ARRAY) return bad_value_type(c, type);
    if (depth >= BP_GGUF_MAX_DEPTH)
        return bp_run_fail(c->err, c->cap, BP_ERR_INVALID_ARGUMENT,
                    "the GGUF file nests arrays more than %d deep in %s; the file is corrupt.",
                    BP_GGUF_MAX_DEPTH, c->what);
    for (uint64_t i = 0; i < n; i++) {
        uint32_t et;
        uint64_t cnt;
        if (!rd_u32(c, &et) || !rd_u64(c, &cnt)) return truncated(c);
        bp_status s = skip_values(c, et, cnt, depth + 1);
        if (s != BP_OK) return s;
    }
    return BP_OK;
}

static bp_status read_kv_fields(struct cursor *c, struct bp_gguf_kv *kv)
{
    c->what = "a metadata key";
    if (!rd_str(c, &kv->key)) return truncated(c);
    c->what = "a metadata value";
    if (!rd_u32(c, &kv->type)) return truncated(c);
    uint8_t b[8] = {0};
    switch (kv->type) {
    case BP_GGUF_U8: case BP_GGUF_BOOL:
        if (!take(c, b, 1)) return truncated(c);
        kv->v.u = b[0];
        if (kv->type == BP_GGUF_BOOL && b[0] > 1)
            return bp_run_fail(c->err, c->cap, BP_ERR_INVALID_ARGUMENT,
                        "the GGUF metadata key '%.*s' is a bool with value %u (only 0 and 1 are "
                        "valid); the file is corrupt.", (int)(kv->key.len > 200 ? 200 : kv->key.len),
                        kv->key.ptr, b[0]);
        return BP_OK;
    case BP_GGUF_I8: { int8_t x; if (!take(c, &x, 1)) return truncated(c); kv->v.i = x; return BP_OK; }
    case BP_GGUF_U16: { uint16_t x; if (!take(c, &x, 2)) return truncated(c); kv->v.u = x; return BP_OK; }
    case BP_GGUF_I16: { int16_t x; if (!take(c, &x, 2)) return truncated(c); kv->v.i = x; return BP_OK; }
    case BP_GGUF_U32: { uint32_t x; if (!take(c, &x, 4)) return truncated(c); kv->v.u = x; return BP_OK; }
    case BP_GGUF_I32: { int32_t x; if (!take(c, &x, 4)) return truncated(c); kv->v.i = x; return BP_OK; }
    case BP_GGUF_F32: { float x; if (!take(c, &x, 4)) return truncated(c); kv->v.f = x; return BP_OK; }
    case BP_GGUF_U64: { uint64_t x; if (!take(c, &x, 8)) return truncated(c); kv->v.u = x; return BP_OK; }
    case BP_GGUF_I64: { int64_t x; if (!take(c, &x, 8)) return truncated(c); kv->v.i = x; return BP_OK; }
    case BP_GGUF_F64: { double x; if (!take(c, &x, 8)) return truncated(c); kv->v.f = x; return BP_OK; }
    case BP_GGUF_STRING:
        if (!rd_str(c, &kv->v.s)) return truncated(c);
        return BP_OK;
    case BP_GGUF_ARRAY:
        if (!rd_u32(c, &kv->arr_type) || !rd_u64(c, &kv->arr_count)) return truncated(c);
        kv->arr_data = c->p + c->pos;
        c->what = "a metadata array";
        return skip_values(c, kv->arr_type, kv->arr_count, 1);
    default:
        return bad_value_type(c, kv->type);
    }
}

static bp_status read_kv(struct cursor *c, struct bp_gguf_kv *kv)
{
    const size_t start = c->pos;
    bp_status s = read_kv_fields(c, kv);
    kv->raw = c->p + start;
    kv->raw_size = c->pos - start;
    return s;
}

static bool str_eq(struct bp_gguf_str s, const char *z)
{
    size_t n = strlen(z);
    return s.len == n && memcmp(s.ptr, z, n) == 0;
}

/* a * b, false on overflow. */
static bool mul_ok(uint64_t a, uint64_t b, uint64_t *out)
{
    if (a && b > UINT64_MAX / a) return false;
    *out = a * b;
    return true;
}

static bp_status read_tensor_info(struct cursor *c, struct bp_gguf_tensor *t)
{
    struct bp_gguf_str name;
    c->what = "a tensor description";
    if (!rd_str(c, &name)) return truncated(c);
    if (name.len == 0 || name.len > BP_GGUF_MAX_NAME)
        return bp_run_fail(c->err, c->cap, BP_ERR_INVALID_ARGUMENT,
                    "the GGUF file has a tensor name of %llu bytes (the format allows 1 to %d); "
                    "the file is corrupt.", (unsigned long long)name.len, BP_GGUF_MAX_NAME);
    memcpy(t->name, name.ptr, (size_t)name.len);
    t->name[name.len] = '\0';
    if (strlen(t->name) != name.len)
        return bp_run_fail(c->err, c->cap, BP_ERR_INVALID_ARGUMENT,
                    "the GGUF file has a tensor name with a NUL byte in it; the file is corrupt.");
    if (!rd_u32(c, &t->n_dims)) return truncated(c);
    if (t->n_dims < 1 || t->n_dims > 4)
        return bp_run_fail(c->err, c->cap, BP_ERR_INVALID_ARGUMENT,
                    "tensor '%s' in the GGUF file has %u dimensions; backplane reads 1 to 4.",
                    t->name, t->n_dims);
    uint64_t nel = 1;
    for (int i = 0; i < 4; i++) t->ne[i] = 1;
    for (uint32_t i = 0; i < t->n_dims; i++) {
        uint64_t d;
        if (!rd_u64(c, &d)) return truncated(c);
        if (d == 0 || d > INT64_MAX || !mul_ok(nel, d, &nel) || nel > (uint64_t)INT64_MAX)
            return bp_run_fail(c->err, c->cap, BP_ERR_INVALID_ARGUMENT,
                        "tensor '%s' in the GGUF file has dimension %u of %llu elements, which is "
                        "zero or makes the tensor impossibly large; the file is corrupt.",
                        t->name, i, (unsigned long long)d);
        t->ne[i] = (int64_t)d;
    }
    if (!rd_u32(c, &t->ggml_type) || !rd_u64(c, &t->offset)) return truncated(c);
    t->type = bp_gguf_type_from_ggml(t->ggml_type);
    return BP_OK;
}

/* Size of t's data in bytes, or a sentence when ne0 does not fit the blocks. */
static bp_status tensor_size(struct cursor *c, struct bp_gguf_tensor *t)
{
    if (t->type < 0) return BP_OK; /* unknown layout: refused by whoever binds it */
    size_t row = bp_row_size((enum bp_type)t->type, t->ne[0]);
    if (row == 0)
        return bp_run_fail(c->err, c->cap, BP_ERR_INVALID_ARGUMENT,
                    "tensor '%s' in the GGUF file is %s with %lld elements per row, not a "
                    "multiple of the type's block of %lld; the file is corrupt.",
                    t->name, bp_gguf_ggml_type_name(t->ggml_type), (long long)t->ne[0],
                    (long long)bp_type_block_size((enum bp_type)t->type));
    uint64_t sz = row;
    if (!mul_ok(sz, (uint64_t)t->ne[1], &sz) || !mul_ok(sz, (uint64_t)t->ne[2], &sz) ||
        !mul_ok(sz, (uint64_t)t->ne[3], &sz) || sz > SIZE_MAX)
        return bp_run_fail(c->err, c->cap, BP_ERR_INVALID_ARGUMENT,
                    "tensor '%s' in the GGUF file is too large to address; the file is corrupt.",
                    t->name);
    t->size = (size_t)sz;
    return BP_OK;
}

static bp_status parse_header(struct cursor *c, struct bp_gguf *g)
{
    uint8_t magic[4];
    c->what = "the header";
    if (c->size < 4 || !take(c, magic, 4)) {
        if (c->size < 4 && (c->size == 0 || memcmp(c->p, "GGUF", c->size) != 0))
            return bp_run_fail(c->err, c->cap, BP_ERR_INVALID_ARGUMENT,
                        "this is not a GGUF file (it is only %zu bytes and does not start with "
                        "\"GGUF\"); pass a .gguf model file.", c->size);
        return truncated(c);
    }
    if (memcmp(magic, "GGUF", 4) != 0)
        return bp_run_fail(c->err, c->cap, BP_ERR_INVALID_ARGUMENT,
                    "this is not a GGUF file: it starts with bytes %02x %02x %02x %02x instead "
                    "of \"GGUF\"; pass a .gguf model file.", magic[0], magic[1], magic[2], magic[3]);
    if (!rd_u32(c, &g->version)) return truncated(c);
    if (g->version != 2 && g->version != 3) {
        if (g->version == 1)
            return bp_run_fail(c->err, c->cap, BP_ERR_UNSUPPORTED,
                        "this GGUF file is version 1, which backplane does not read (it reads "
                        "versions 2 and 3); convert it again with a current llama.cpp.");
        if ((g->version & 0xffffu) == 0 && (g->version >> 16) != 0)
            return bp_run_fail(c->err, c->cap, BP_ERR_UNSUPPORTED,
                        "this GGUF file looks big-endian (version field 0x%08x); backplane reads "
                        "little-endian GGUF files only.", g->version);
        return bp_run_fail(c->err, c->cap, BP_ERR_UNSUPPORTED,
                    "this GGUF file has version %u, which backplane does not know (it reads "
                    "versions 2 and 3); use a file written by a llama.cpp of the same era.",
                    g->version);
    }
    if (!rd_u64(c, &g->n_tensors) || !rd_u64(c, &g->n_kv)) return truncated(c);
    /* A kv takes at least 12 bytes (empty key + type), a tensor info 24: a
     * count the remaining bytes cannot hold is a truncated or corrupt file
     * and must not drive an allocation. */
    size_t left = c->size - c->pos;
    if (g->n_kv > left / 12 || g->n_tensors > left / 24) {
        c->what = g->n_kv > left / 12 ? "the metadata" : "the tensor descriptions";
        return bp_run_fail(c->err, c->cap, BP_ERR_INVALID_ARGUMENT,
                    "the GGUF file is truncated or corrupt: it announces %llu metadata entries "
                    "and %llu tensors but only %zu bytes follow the header.",
                    (unsigned long long)g->n_kv, (unsigned long long)g->n_tensors, left);
    }
    return BP_OK;
}

static bp_status parse_alignment(struct cursor *c, struct bp_gguf *g)
{
    g->alignment = BP_GGUF_DEFAULT_ALIGNMENT;
    const struct bp_gguf_kv *a = bp_gguf_find_kv(g, "general.alignment");
    if (!a) return BP_OK;
    uint64_t v;
    if (!bp_gguf_kv_uint(a, &v) || v == 0 || v % 8 != 0 || v > (1u << 24))
        return bp_run_fail(c->err, c->cap, BP_ERR_INVALID_ARGUMENT,
                    "the GGUF file's general.alignment is not a positive multiple of 8 (at most "
                    "16 MiB); the file is corrupt.");
    g->alignment = v;
    return BP_OK;
}

static bp_status locate_data(struct cursor *c, struct bp_gguf *g)
{
    uint64_t pad = (g->alignment - c->pos % g->alignment) % g->alignment;
    g->data_offset = (uint64_t)c->pos + pad;
    if (g->n_tensors > 0 && g->data_offset > c->size) {
        c->what = "the padding before the tensor data";
        return truncated(c);
    }
    for (uint64_t i = 0; i < g->n_tensors; i++) {
        struct bp_gguf_tensor *t = &g->tensors[i];
        if (t->offset % g->alignment != 0)
            return bp_run_fail(c->err, c->cap, BP_ERR_INVALID_ARGUMENT,
                        "tensor '%s' in the GGUF file starts at data offset %llu, not a multiple "
                        "of the alignment %llu; the file is corrupt.", t->name,
                        (unsigned long long)t->offset, (unsigned long long)g->alignment);
        if (t->type < 0) continue;
        uint64_t avail = c->size - g->data_offset;
        if (t->offset > avail || t->size > avail - t->offset)
            return bp_run_fail(c->err, c->cap, BP_ERR_INVALID_ARGUMENT,
                        "the GGUF file is truncated: tensor '%s' needs bytes %llu..%llu of the "
                        "data section but the file has only %llu; fetch or write the file again.",
                        t->name, (unsigned long long)t->offset,
                        (unsigned long long)t->offset + (unsigned long long)t->size,
                        (unsigned long long)avail);
        t->data = c->p + g->data_offset + t->offset;
    }
    return BP_OK;
}

bp_status bp_gguf_parse(const void *base, size_t size, struct bp_gguf **out, char *err,
                        size_t err_cap)
{
    if (out) *out = NULL;
    if (!out || (!base && size)) return bp_run_fail(err, err_cap, BP_ERR_INVALID_ARGUMENT,
                                             "bp_gguf_parse needs a buffer and an out pointer.");
    struct cursor c = { .p = base, .size = size, .err = err, .cap = err_cap, .what = "" };
    struct bp_gguf *g = calloc(1, sizeof *g);
    if (!g) return bp_run_fail(err, err_cap, BP_ERR_OUT_OF_MEMORY, "out of memory reading a GGUF file.");
    g->base = base;
    g->size = size;
    bp_status s = parse_header(&c, g);
    if (s != BP_OK) goto out;
    g->kv = calloc(g->n_kv ? (size_t)g->n_kv : 1, sizeof *g->kv);
    g->tensors = calloc(g->n_tensors ? (size_t)g->n_tensors : 1, sizeof *g->tensors);
    if (!g->kv || !g->tensors) {
        s = bp_run_fail(err, err_cap, BP_ERR_OUT_OF_MEMORY, "out of memory reading a GGUF file.");
        goto out;
    }
    for (uint64_t i = 0; i < g->n_kv; i++) {
        if ((s = read_kv(&c, &g->kv[i])) != BP_OK) goto out;
        for (uint64_t j = 0; j < i; j++)
            if (g->kv[j].key.len == g->kv[i].key.len &&
                !memcmp(g->kv[j].key.ptr, g->kv[i].key.ptr, (size_t)g->kv[i].key.len)) {
                s = bp_run_fail(err, err_cap, BP_ERR_INVALID_ARGUMENT,
                         "the GGUF file has metadata key '%.*s' twice; the file is corrupt.",
                         (int)(g->kv[i].key.len > 200 ? 200 : g->kv[i].key.len), g->kv[i].key.ptr);
                goto out;
            }
    }
    if ((s = parse_alignment(&c, g)) != BP_OK) goto out;
    for (uint64_t i = 0; i < g->n_tensors; i++) {
        if ((s = read_tensor_info(&c, &g->tensors[i])) != BP_OK) goto out;
        if ((s = tensor_size(&c, &g->tensors[i])) != BP_OK) goto out;
        for (uint64_t j = 0; j < i; j++)
            if (!strcmp(g->tensors[j].name, g->tensors[i].name)) {
                s = bp_run_fail(err, err_cap, BP_ERR_INVALID_ARGUMENT,
                         "the GGUF file has tensor '%s' twice; the file is corrupt.",
                         g->tensors[i].name);
                goto out;
            }
    }
    s = locate_data(&c, g);
out:
    if (s != BP_OK) {
        bp_gguf_close(g);
        return s;
    }
    *out = g;
    return BP_OK;
}

bp_status bp_gguf_open(const char *path, struct bp_gguf **out, char *err, size_t err_cap)
{
    if (out) *out = NULL;
    if (!path || !out)
        return bp_run_fail(err, err_cap, BP_ERR_INVALID_ARGUMENT, "bp_gguf_open needs a path.");
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return bp_run_fail(err, err_cap, BP_ERR_IO, "cannot open model file '%s': %s.", path,
                    strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return bp_run_fail(err, err_cap, BP_ERR_IO, "model file '%s' is not a regular file.", path);
    }
    size_t size = (size_t)st.st_size;
    void *map = NULL;
    if (size > 0) {
        map = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (map == MAP_FAILED) {
            int e = errno;
            close(fd);
            return bp_run_fail(err, err_cap, BP_ERR_IO, "cannot map model file '%s': %s.", path,
                        strerror(e));
        }
    }
    close(fd);
    struct bp_gguf *g;
    bp_status s = bp_gguf_parse(map, size, &g, err, err_cap);
    if (s != BP_OK) {
        if (map) munmap(map, size);
        return s;
    }
    g->map = map;
    *out = g;
    return BP_OK;
}

void bp_gguf_release(const struct bp_gguf *g, const void *p, size_t n)
{
    if (!g || !g->map || !p || n == 0) return;
    const uintptr_t lo = (uintptr_t)g->map, hi = lo + g->size, page = (uintptr_t)sysconf(_SC_PAGESIZE);
    uintptr_t a = (uintptr_t)p, b = a + n;
    if (a < lo || b > hi || b < a) return;
    /* Whole pages inside the range only: a neighbour's bytes stay put. */
    a = (a + page - 1) / page * page;
    b = b / page * page;
    if (b > a) (void)madvise((void *)a, b - a, MADV_DONTNEED);
}

void bp_gguf_close(struct bp_gguf *g)
{
    if (!g) return;
    if (g->map) munmap(g->map, g->size);
    free(g->kv);
    free(g->tensors);
    free(g);
}

/* ------------------------------------------------------------- lookups */

const struct bp_gguf_kv *bp_gguf_find_kv(const struct bp_gguf *g, const char *key)
{
    for (uint64_t i = 0; g && i < g->n_kv; i++)
        if (str_eq(g->kv[i].key, key)) return &g->kv[i];
    return NULL;
}

const struct bp_gguf_tensor *bp_gguf_find_tensor(const struct bp_gguf *g, const char *name)
{
    for (uint64_t i = 0; g && i < g->n_tensors; i++)
        if (!strcmp(g->tensors[i].name, name)) return &g->tensors[i];
    return NULL;
}

bool bp_gguf_kv_uint(const struct bp_gguf_kv *kv, uint64_t *out)
{
    if (!kv) return false;
    switch (kv->type) {
    case BP_GGUF_U8: case BP_GGUF_U16: case BP_GGUF_U32: case BP_GGUF_U64:
        *out = kv->v.u;
        return true;
    case BP_GGUF_I8: case BP_GGUF_I16: case BP_GGUF_I32: case BP_GGUF_I64:
        if (kv->v.i < 0) return false;
        *out = (uint64_t)kv->v.i;
        return true;
    default:
        return false;
    }
}

bool bp_gguf_kv_float(const struct bp_gguf_kv *kv, double *out)
{
    if (!kv) return false;
    uint64_t u;
    switch (kv->type) {
    case BP_GGUF_F32: case BP_GGUF_F64: *out = kv->v.f; return true;
    case BP_GGUF_I8: case BP_GGUF_I16: case BP_GGUF_I32: case BP_GGUF_I64:
        *out = (double)kv->v.i;
        return true;
    default:
        if (!bp_gguf_kv_uint(kv, &u)) return false;
        *out = (double)u;
        return true;
    }
}

bool bp_gguf_array_string(const struct bp_gguf *g, const struct bp_gguf_kv *kv, uint64_t n,
                          struct bp_gguf_str *out)
{
    if (!g || !kv || kv->type != BP_GGUF_ARRAY || kv->arr_type != BP_GGUF_STRING ||
        n >= kv->arr_count)
        return false;
    struct cursor c = { .p = g->base, .size = g->size, .pos = (size_t)(kv->arr_data - g->base) };
    for (uint64_t i = 0; i <= n; i++)
        if (!rd_str(&c, out)) return false; /* cannot happen: parse walked it */
    return true;
}
