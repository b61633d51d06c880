/*
 * quantize_model.h — `backplane quantize`: a GGUF model converted to one of
 * llama.cpp's presets (quant_presets.h), written as llama.cpp's
 * llama_model_quantize writes it: the same tensor order (by layer, then by
 * name), the input's metadata with general.quantization_version 2 and
 * general.file_type last, the same per-tensor types and ggml's encodings
 * (bp_quantize_ggml), so that for the same input and preset the two files
 * are equal byte for byte. The input is read through its mapping and the
 * output streamed tensor by tensor, so memory stays near the largest
 * tensor.
 */
#ifndef BP_RUN_QUANTIZE_MODEL_H
#define BP_RUN_QUANTIZE_MODEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gguf.h"
#include "quant_presets.h"

/* One tensor of the output, in output order. */
struct bp_quant_item {
    const struct bp_gguf_tensor *in;
    int n_dims;                 /* dimensions written: trailing 1s dropped, as ggml counts them */
    enum bp_type from, type;    /* the input's and the output's type */
    size_t size;                /* output bytes, without padding */
    uint64_t offset;            /* in the output's data section */
};

/* A planned conversion: every tensor's type and place. */
struct bp_quant_job {
    const struct bp_gguf *in;
    const struct bp_quant_preset *preset;
    struct bp_quant_model model;
    size_t n;
    struct bp_quant_item *items;
    uint64_t alignment;         /* the input's */
    uint64_t out_size;          /* bytes of the output file */
};

/* Plans converting in (which must outlive the job) to preset p: the facts
 * the rules read, each tensor's type, order and offset. Returns BP_OK, or a
 * status with one sentence in err (no block_count, a tensor type backplane
 * does not know or cannot convert from, a width llama.cpp refuses). */
bp_status bp_quant_plan(const struct bp_gguf *in, const struct bp_quant_preset *p,
                        struct bp_quant_job **out, char *err, size_t err_cap);
void bp_quant_job_free(struct bp_quant_job *job);

/* Called before each tensor is written (i counts from 0 to job->n - 1). */
typedef void (*bp_quant_progress_fn)(void *user, size_t i, const struct bp_quant_item *item);

/* Writes the planned file to path, converting each tensor on n_threads
 * threads (rows split between them; the bytes do not depend on the count).
 * Returns BP_OK, or a status with one sentence in err (path not writable or
 * the input file itself, a NaN or infinity in the input, out of memory); a
 * partly written file is removed. progress may be NULL. */
bp_status bp_quant_write(const struct bp_quant_job *job, const char *path, int n_threads,
                         bp_quant_progress_fn progress, void *user, char *err, size_t err_cap);

#endif /* BP_RUN_QUANTIZE_MODEL_H */
