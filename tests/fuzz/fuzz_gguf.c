/*
 * fuzz_gguf.c — libFuzzer harness for the GGUF reader and the llama model
 * binding: any input must give BP_OK or one sentence, never a crash, an
 * out-of-bounds read or a leak. It starts from the seeds gguf_seeds.c
 * writes, with a dictionary of the format's words (see README.md).
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "gguf.h"
#include "model.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char err[1024];
    struct bp_gguf *g = NULL;
    if (bp_gguf_parse(data, size, &g, err, sizeof err) != BP_OK) {
        if (!memchr(err, '\0', sizeof err) || err[0] == '\0') __builtin_trap(); /* no sentence */
        return 0;
    }
    /* Walk every string array element the way a tokenizer would. */
    for (uint64_t i = 0; i < g->n_kv; i++) {
        const struct bp_gguf_kv *kv = &g->kv[i];
        if (kv->type == BP_GGUF_ARRAY && kv->arr_type == BP_GGUF_STRING && kv->arr_count) {
            struct bp_gguf_str s;
            if (!bp_gguf_array_string(g, kv, kv->arr_count - 1, &s)) __builtin_trap();
        }
    }
    /* Touch the first and last byte of every located tensor. */
    volatile uint8_t sink = 0;
    for (uint64_t i = 0; i < g->n_tensors; i++) {
        const struct bp_gguf_tensor *t = &g->tensors[i];
        if (t->data && t->size) sink ^= ((const uint8_t *)t->data)[0] ^ ((const uint8_t *)t->data)[t->size - 1];
    }
    (void)sink;
    struct bp_run_model *m = NULL;
    if (bp_run_model_from_gguf(g, "fuzz", &m, err, sizeof err) == BP_OK) bp_run_model_free(m);
    else bp_gguf_close(g);
    return 0;
}
