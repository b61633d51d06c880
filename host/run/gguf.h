/*
 * gguf.h — reading and writing GGUF files (versions 2 and 3, little-endian),
 * as the published specification (ggml docs/gguf.md) lays them out:
 *
 *   "GGUF" u32 version  u64 n_tensors  u64 n_kv
 *   n_kv x   { string key, u32 value_type, value }
 *   n_tensors x { string name, u32 n_dims, u64 ne[n_dims], u32 ggml_type, u64 offset }
 *   zero padding to general.alignment (default 32)
 *   tensor data; each offset is relative to here and a multiple of the alignment
 *
 * where a string is u64 length + bytes (no NUL) and an array is u32 element
 * type + u64 count + elements. The reader maps the file and never copies
 * tensor data: every tensor's `data` points into the mapping, and every
 * offset and size is checked against the file size before it is used.
 */
#ifndef BP_RUN_GGUF_H
#define BP_RUN_GGUF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <backplane/backplane.h>

/* GGUF metadata value types (spec: gguf_metadata_value_type). */
enum bp_gguf_vtype {
    BP_GGUF_U8 = 0, BP_GGUF_I8 = 1, BP_GGUF_U16 = 2, BP_GGUF_I16 = 3,
    BP_GGUF_U32 = 4, BP_GGUF_I32 = 5, BP_GGUF_F32 = 6, BP_GGUF_BOOL = 7,
    BP_GGUF_STRING = 8, BP_GGUF_ARRAY = 9, BP_GGUF_U64 = 10, BP_GGUF_I64 = 11,
    BP_GGUF_F64 = 12,
};

/* ggml type ids as GGUF stores them (spec: enum ggml_type). */
#define BP_GGML_TYPE_F32  0
#define BP_GGML_TYPE_F16  1
#define BP_GGML_TYPE_Q4_0 2
#define BP_GGML_TYPE_Q4_1 3
#define BP_GGML_TYPE_Q5_0 6
#define BP_GGML_TYPE_Q5_1 7
#define BP_GGML_TYPE_Q8_0 8
#define BP_GGML_TYPE_Q2_K 10
#define BP_GGML_TYPE_Q3_K 11
#define BP_GGML_TYPE_Q4_K 12
#define BP_GGML_TYPE_Q5_K 13
#define BP_GGML_TYPE_Q6_K 14
#define BP_GGML_TYPE_IQ4_NL 20
#define BP_GGML_TYPE_IQ4_XS 23
#define BP_GGML_TYPE_BF16 30

#define BP_GGUF_DEFAULT_ALIGNMENT 32
#define BP_GGUF_MAX_NAME 64   /* the spec's limit on tensor names */

/* A string inside the file (not NUL-terminated). */
struct bp_gguf_str {
    const char *ptr;
    uint64_t len;
};

struct bp_gguf_kv {
    struct bp_gguf_str key;
    uint32_t type;            /* enum bp_gguf_vtype */
    union {
        uint64_t u;           /* U8..U64, BOOL (zero-extended) */
        int64_t i;            /* I8..I64 (sign-extended) */
        double f;             /* F32, F64 */
        struct bp_gguf_str s; /* STRING */
    } v;
    /* ARRAY: element type, count and the first element's bytes in the file. */
    uint32_t arr_type;
    uint64_t arr_count;
    const uint8_t *arr_data;
    /* The whole record as the file holds it (key, type, value), for copying
     * it to another file unchanged. */
    const uint8_t *raw;
    size_t raw_size;
};

struct bp_gguf_tensor {
    char name[BP_GGUF_MAX_NAME + 1];
    uint32_t n_dims;
    int64_t ne[4];            /* unused dims are 1 */
    uint32_t ggml_type;
    int type;                 /* enum bp_type, or -1 when backplane lacks the ggml type */
    uint64_t offset;          /* relative to the data section */
    size_t size;              /* bytes; 0 when type is -1 (unknown layout) */
    const void *data;         /* in the mapping; NULL when type is -1 */
};

struct bp_gguf {
    uint32_t version;
    uint64_t alignment;
    uint64_t n_kv;
    struct bp_gguf_kv *kv;
    uint64_t n_tensors;
    struct bp_gguf_tensor *tensors;
    uint64_t data_offset;     /* file offset of the data section */
    const uint8_t *base;      /* the whole file */
    size_t size;
    void *map;                /* non-NULL when the reader mapped a file */
};

/* Parse a GGUF image in memory (base must outlive the result). On failure
 * returns a status, writes one sentence to err and sets *out to NULL. */
bp_status bp_gguf_parse(const void *base, size_t size, struct bp_gguf **out, char *err,
                        size_t err_cap);
/* Map path read-only and parse it; the mapping lives until bp_gguf_close. */
bp_status bp_gguf_open(const char *path, struct bp_gguf **out, char *err, size_t err_cap);
void bp_gguf_close(struct bp_gguf *g);
/* Let the pages of bytes [p, p + n) of g's mapping leave memory (whole
 * pages inside the range): read once into a device's buffer, a weight's
 * file bytes would otherwise stay resident beside the copy. The mapping is
 * private and read-only, so a later read faults the same bytes in from the
 * file. No effect for an image g does not map, or for p outside it. */
void bp_gguf_release(const struct bp_gguf *g, const void *p, size_t n);

const struct bp_gguf_kv *bp_gguf_find_kv(const struct bp_gguf *g, const char *key);
const struct bp_gguf_tensor *bp_gguf_find_tensor(const struct bp_gguf *g, const char *name);
/* An unsigned integer value of any integer type (negative -> false). */
bool bp_gguf_kv_uint(const struct bp_gguf_kv *kv, uint64_t *out);
/* A float value of any numeric type. */
bool bp_gguf_kv_float(const struct bp_gguf_kv *kv, double *out);
/* Bytes of one value of a fixed-size GGUF value type; 0 for strings,
 * arrays and unknown types. */
size_t bp_gguf_scalar_size(uint32_t type);
/* ggml type -> bp_type (-1 when unsupported) and its ggml name ("q5_K"). */
int bp_gguf_type_from_ggml(uint32_t ggml_type);
uint32_t bp_gguf_type_to_ggml(int bp_type);
const char *bp_gguf_ggml_type_name(uint32_t ggml_type);
/* Element n of a string array (0 <= n < arr_count), walking from the start. */
bool bp_gguf_array_string(const struct bp_gguf *g, const struct bp_gguf_kv *kv, uint64_t n,
                          struct bp_gguf_str *out);

/* ------------------------------------------------------------- writing */

struct bp_gguf_writer;
/* Start a file of the given version (2 or 3) and alignment (a multiple of
 * 8; general.alignment is written when it is not 32). */
bp_status bp_gguf_writer_new(uint32_t version, uint32_t alignment, struct bp_gguf_writer **out);
void bp_gguf_writer_free(struct bp_gguf_writer *w);
bp_status bp_gguf_add_u32(struct bp_gguf_writer *w, const char *key, uint32_t v);
bp_status bp_gguf_add_u64(struct bp_gguf_writer *w, const char *key, uint64_t v);
bp_status bp_gguf_add_i32(struct bp_gguf_writer *w, const char *key, int32_t v);
bp_status bp_gguf_add_f32(struct bp_gguf_writer *w, const char *key, float v);
bp_status bp_gguf_add_bool(struct bp_gguf_writer *w, const char *key, bool v);
bp_status bp_gguf_add_string(struct bp_gguf_writer *w, const char *key, const char *v);
/* An array of n elements of a fixed-size type (elem_type not STRING/ARRAY). */
bp_status bp_gguf_add_array(struct bp_gguf_writer *w, const char *key, uint32_t elem_type,
                            const void *elems, uint64_t n);
bp_status bp_gguf_add_string_array(struct bp_gguf_writer *w, const char *key,
                                   const char *const *strs, uint64_t n);
/* A tensor; data (bp_row_size(type, ne0) * ne1*ne2*ne3 bytes) is copied. */
bp_status bp_gguf_add_tensor(struct bp_gguf_writer *w, const char *name, int bp_type, int n_dims,
                             const int64_t *ne, const void *data);
/* A tensor whose ggml type id is given as is (tests write unsupported types). */
bp_status bp_gguf_add_tensor_raw(struct bp_gguf_writer *w, const char *name, uint32_t ggml_type,
                                 int n_dims, const int64_t *ne, const void *data, size_t size);
/* The finished file image (malloc'd; caller frees) or written to path. */
bp_status bp_gguf_writer_image(struct bp_gguf_writer *w, uint8_t **out, size_t *size);
bp_status bp_gguf_writer_save(struct bp_gguf_writer *w, const char *path);

#endif /* BP_RUN_GGUF_H */
