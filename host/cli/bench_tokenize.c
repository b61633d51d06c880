/*
 * bench_tokenize.c — `backplane bench tokenize`: encoding throughput (MB/s
 * of text) of each --model's tokenizer, against a reference pass timed in
 * the same rounds: a UTF-8 validation scan of the same bytes, the least
 * work any tokenizer does per byte. Rounds alternate the two; the median
 * round's ratio is reported with its range.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <backplane/bp_tokenizer.h>

#include "bench.h"
#include "cli.h"
#include "json.h"
#include "../run/tokenizer_builtin.h"

/* The default text: prose with contractions, digits, accents, CJK and
 * emoji, as a chat would send, repeated to 1 MB. */
static const char sample[] =
    "The quick brown fox doesn't jump over 1234567 lazy dogs; it'll rest instead. "
    "Café, naïve façade, Straße and Dvořák sit beside 日本語のテキスト and 中文 words, "
    "with an emoji or two 😀🎉 and some code: for (int i = 0; i < n; i++) x[i] += 2;\n"
    "    Indented lines,\ttabs, and \"quotes\" appear too.\n\n";

static double utf8_scan(const unsigned char *s, size_t n)
{
    size_t bad = 0;
    for (size_t i = 0; i < n;) {
        unsigned c = s[i], l = c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
        for (unsigned k = 1; k < l && i + k < n; k++) bad += (s[i + k] & 0xC0) != 0x80;
        i += l;
    }
    return (double)bad;
}

static char *read_text(const char *path, size_t *len)
{
    if (!path) {
        const size_t one = sizeof sample - 1, n = ((size_t)1 << 20) / one;
        char *t = malloc(n * one + 1);
        if (!t) return NULL;
        for (size_t i = 0; i < n; i++) memcpy(t + i * one, sample, one);
        *len = n * one;
        return t;
    }
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *t = n > 0 ? malloc((size_t)n) : NULL;
    if (t && fread(t, 1, (size_t)n, f) != (size_t)n) { free(t); t = NULL; }
    fclose(f);
    *len = (size_t)n;
    return t;
}

int bench_tokenize(const struct bench_opts *o)
{
    const char *models_default[] = { "builtin:tiny" };
    const char *const *models = o->n_models ? o->models : models_default;
    const int n_models = o->n_models ? o->n_models : 1;
    const int rounds = o->rounds ? o->rounds : 5;
    size_t len;
    char *text = read_text(o->text_file, &len);
    if (!text) {
        cli_error("cannot read the text file '%s'.", o->text_file);
        return CLI_EXIT_FAIL;
    }
    struct json_writer w;
    if (o->json) {
        json_init(&w, stdout);
        json_object_begin(&w, NULL);
        json_uint(&w, "text_bytes", len);
        json_array_begin(&w, "models");
    } else
        printf("tokenize: %zu bytes of text, %d rounds (median round; range)\n", len, rounds);
    int rc = CLI_EXIT_OK;
    for (int m = 0; m < n_models; m++) {
        struct bp_tokenizer *t;
        char err[1024];
        if (bp_run_tokenizer_for(models[m], &t, err, sizeof err) != BP_OK) {
            cli_error("%s", err);
            rc = CLI_EXIT_FAIL;
            break;
        }
        double mbs[BENCH_MAX_ROUNDS], ref[BENCH_MAX_ROUNDS], ratio[BENCH_MAX_ROUNDS], sink = 0;
        size_t n_ids = 0;
        for (int r = 0; r < rounds; r++) {
            /* Each side repeated to at least 50 ms: a short text encodes
             * in a millisecond, below what one timing can resolve here. */
            int enc = 0, reps = 0;
            double t0 = bench_now(), t1;
            do {
                int32_t *ids;
                if (bp_tokenizer_encode(t, text, len, BP_TOKENIZE_ADD_SPECIAL, &ids, &n_ids) != BP_OK) {
                    cli_error("%s", bp_last_error());
                    bp_tokenizer_free(t);
                    free(text);
                    return CLI_EXIT_FAIL;
                }
                free(ids);
                enc++;
            } while ((t1 = bench_now()) - t0 < 0.05);
            double t2 = bench_now(), t3;
            do { sink += utf8_scan((const unsigned char *)text, len); reps++; } while ((t3 = bench_now()) - t2 < 0.05);
            mbs[r] = (double)len * enc / (t1 - t0) / 1e6;
            ref[r] = (double)len * reps / (t3 - t2) / 1e6;
            ratio[r] = mbs[r] / ref[r];
        }
        double lo = ratio[0], hi = ratio[0];
        for (int r = 1; r < rounds; r++) { if (ratio[r] < lo) lo = ratio[r]; if (ratio[r] > hi) hi = ratio[r]; }
        const double med = bench_median(mbs, rounds), med_ref = bench_median(ref, rounds),
                     med_ratio = bench_median(ratio, rounds);
        if (o->json) {
            json_object_begin(&w, NULL);
            json_string(&w, "model", models[m]);
            json_string(&w, "tokenizer", bp_tokenizer_model(t));
            json_string(&w, "pre", bp_tokenizer_pre(t));
            json_uint(&w, "tokens", n_ids);
            json_double(&w, "mb_per_s", med);
            json_double(&w, "utf8_scan_mb_per_s", med_ref);
            json_double(&w, "ratio_to_utf8_scan", med_ratio);
            json_object_end(&w);
        } else
            printf("  %-40s %s%s%s: %.1f MB/s, %.2f bytes/token; %.4f of a UTF-8 scan "
                   "(%.0f MB/s) [%.4f .. %.4f]\n", models[m], bp_tokenizer_model(t),
                   *bp_tokenizer_pre(t) ? "/" : "", bp_tokenizer_pre(t), med,
                   (double)len / (double)(n_ids ? n_ids : 1), med_ratio, med_ref, lo, hi);
        if (sink < 0) puts("");   /* keeps the scan */
        bp_tokenizer_free(t);
    }
    if (o->json) {
        json_array_end(&w);
        json_object_end(&w);
        json_finish(&w);
    }
    free(text);
    return rc;
}
