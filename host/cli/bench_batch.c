/*
 * bench_batch.c — `backplane bench batch`: aggregate decode tokens/s of the
 * batching engine (host/run/batch.h) at 1, 2, 4 and 8 sequences (or powers
 * of two up to -M), on --model (GGUF or builtin:NAME, default builtin:1b in
 * --type, default q4_0).
 *
 * One batch of the largest count of slots serves every count, as a server
 * would: per count and round, that many slots get distinct pseudo-random
 * prompts of PROMPT tokens (prefilled, untimed), one untimed decode step
 * (the first in which all decode: the prompts may take more than one
 * step, and each slot decodes once its own is done), then --reps (default
 * 28) timed steps in which every slot decodes its greedy token; tokens/s =
 * slots x steps / seconds. The positions stay within one capacity (at
 * most PROMPT + n + 28 + 1 <= 64 positions at 8 sequences), so no timed
 * step makes a plan. Counts alternate within each of --rounds rounds (default 3); the
 * median round and the range are reported per count, with the speed-up
 * over one sequence of the same round. BACKPLANE_PROFILE=1 adds the cpu
 * plugin's per-op table of each count's timed steps in the last round.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "batch.h"
#include "bench.h"
#include "cli.h"
#include "decoder.h"
#include "json.h"
#include "model.h"
#include "profile.h"

#define PROMPT 34
#define MAX_COUNTS 8

/* Feed each of slots 0..n-1 that has logits its greedy token. */
static bp_status feed_greedy(struct bp_run_batch *b, int n, char *err, size_t cap)
{
    for (int s = 0; s < n; s++) {
        const float *lg = bp_run_batch_logits(b, s);
        if (!lg) continue;
        const int32_t t = bp_run_argmax(lg, bp_run_batch_n_vocab(b));
        bp_status st = bp_run_batch_feed(b, s, &t, 1, err, cap);
        if (st != BP_OK) return st;
    }
    return BP_OK;
}

/* Seconds of `steps` decode steps of slots 0..n-1 (every one a row of
 * each), after fresh prompts and the first step in which all n decode
 * (untimed); -1 on error (err says why). */
static double batch_seconds(struct bp_run_batch *b, int n, int steps, uint32_t seed, struct bp_run_profile *pr,
                            char *err, size_t cap)
{
    const int64_t V = bp_run_batch_n_vocab(b);
    int32_t prompt[PROMPT];
    for (int s = 0; s < n; s++) {
        bp_run_batch_clear(b, s);
        for (int i = 0; i < PROMPT; i++) {
            seed = seed * 1664525u + 1013904223u;
            prompt[i] = (int32_t)((seed >> 8) % (uint32_t)V);
        }
        if (bp_run_batch_feed(b, s, prompt, PROMPT, err, cap) != BP_OK) return -1;
    }
    struct bp_run_batch_step_info info = {0};
    for (int i = 0; info.decode_rows < n; i++) {
        if (i > 2 * n + 8) {
            snprintf(err, cap, "%d slots never decoded together", n);
            return -1;
        }
        if (bp_run_batch_step(b, err, cap) != BP_OK || feed_greedy(b, n, err, cap) != BP_OK) return -1;
        bp_run_batch_last_step(b, &info);
    }
    if (pr) bp_run_profile_attach(bp_run_batch_session(b), pr);
    const double t0 = bench_now();
    for (int k = 0; k < steps; k++) {
        if (bp_run_batch_step(b, err, cap) != BP_OK || feed_greedy(b, n, err, cap) != BP_OK) return -1;
        bp_run_batch_last_step(b, &info);
        if (info.decode_rows != n) {
            snprintf(err, cap, "a timed step decoded %d rows, not %d", info.decode_rows, n);
            return -1;
        }
    }
    const double t = bench_now() - t0;
    if (pr) bp_run_profile_attach(bp_run_batch_session(b), NULL);
    return t;
}

static struct bp_run_model *bench_model(const struct bench_opts *o, const char **name, char *err, size_t cap)
{
    struct bp_run_model *m = NULL;
    *name = o->n_models ? o->models[0] : "builtin:1b";
    bp_status st;
    if (!strncmp(*name, "builtin:", 8)) {
        struct bp_run_builtin_options bo = { .weight_type = o->type, .seed = 1 };
        st = bp_run_model_builtin(*name + 8, &bo, &m, err, cap);
    } else {
        st = bp_run_model_load_gguf(*name, &m, err, cap);
    }
    return st == BP_OK ? m : NULL;
}

int bench_batch(const struct bench_opts *o)
{
    char err[1024] = "";
    const int rounds = o->rounds > 0 ? o->rounds : 3, steps = o->reps > 0 ? o->reps : 28;
    int counts[MAX_COUNTS], n_counts = 0;
    const int64_t max_m = o->M > 1 ? o->M : 8;
    for (int64_t c = 1; c <= max_m && c <= BP_RUN_MAX_SEQ && n_counts < MAX_COUNTS; c *= 2) counts[n_counts++] = (int)c;
    const int slots = counts[n_counts - 1];
    double tps[MAX_COUNTS][BENCH_MAX_ROUNDS], gain[MAX_COUNTS][BENCH_MAX_ROUNDS];
    const char *name = NULL;
    struct bp_run_batch *b = NULL;
    int rc = CLI_EXIT_FAIL;
    struct bp_device *dev = cli_find_device(o->device);
    if (!dev) return CLI_EXIT_FAIL;
    struct bp_run_model *m = bench_model(o, &name, err, sizeof err);
    if (!m) goto fail;
    const struct bp_run_batch_options bo = { .n_slots = slots, .n_ctx = PROMPT + steps + slots + 4,
                                             .n_threads = o->threads, .prefill_chunk = 128 };
    if (bp_run_batch_new(m, dev, &bo, &b, err, sizeof err) != BP_OK) goto fail;
    for (int c = 0; c < n_counts; c++) /* untimed: every plan made, every page touched */
        if (batch_seconds(b, counts[c], 1, 99, NULL, err, sizeof err) < 0) goto fail;
    const char *prof = getenv("BACKPLANE_PROFILE");
    static struct bp_run_profile pr[MAX_COUNTS];
    for (int r = 0; r < rounds; r++) {
        for (int c = 0; c < n_counts; c++) {
            const bool last = r == rounds - 1 && prof && !strcmp(prof, "1");
            double t = batch_seconds(b, counts[c], steps, 1000u * (unsigned)r + (unsigned)c, last ? &pr[c] : NULL,
                                     err, sizeof err);
            if (t < 0) goto fail;
            tps[c][r] = counts[c] * steps / t;
        }
        for (int c = 0; c < n_counts; c++) gain[c][r] = tps[c][r] / tps[0][r];
    }
    struct json_writer w;
    if (o->json) {
        json_init(&w, stdout);
        json_object_begin(&w, NULL);
        json_string(&w, "model", name);
        json_string(&w, "device", bp_device_name(dev));
        json_int(&w, "threads", o->threads);
        json_int(&w, "rounds", rounds);
        json_int(&w, "steps_per_round", steps);
        json_int(&w, "prompt", PROMPT);
        json_array_begin(&w, "sequences");
    } else {
        printf("%s on %s, %d threads: %d rounds of %d decode steps after %d-token prompts\n", name,
               bp_device_name(dev), o->threads, rounds, steps, PROMPT);
        printf("%9s %26s %22s\n", "sequences", "aggregate tokens/s", "vs one sequence");
    }
    for (int c = 0; c < n_counts; c++) {
        double t = bench_median_of(tps[c], rounds), g = bench_median_of(gain[c], rounds);
        double tlo = tps[c][0], thi = tps[c][0], glo = gain[c][0], ghi = gain[c][0];
        for (int r = 1; r < rounds; r++) {
            tlo = tps[c][r] < tlo ? tps[c][r] : tlo;
            thi = tps[c][r] > thi ? tps[c][r] : thi;
            glo = gain[c][r] < glo ? gain[c][r] : glo;
            ghi = gain[c][r] > ghi ? gain[c][r] : ghi;
        }
        if (o->json) {
            json_object_begin(&w, NULL);
            json_int(&w, "n", counts[c]);
            json_double(&w, "tokens_per_s", t);
            json_double(&w, "tokens_per_s_min", tlo);
            json_double(&w, "tokens_per_s_max", thi);
            json_double(&w, "vs_one", g);
            json_object_end(&w);
        } else {
            printf("%9d %8.1f (%6.1f .. %6.1f) %6.2fx (%4.2f .. %4.2f)\n", counts[c], t, tlo, thi, g, glo, ghi);
        }
    }
    if (o->json) {
        json_array_end(&w);
        json_object_end(&w);
        json_finish(&w);
    }
    for (int c = 0; prof && !strcmp(prof, "1") && c < n_counts; c++) {
        char what[64];
        snprintf(what, sizeof what, "%d sequences, %d steps (last round)", counts[c], steps);
        bp_run_profile_print(o->json ? stderr : stdout, what, &pr[c]);
    }
    rc = CLI_EXIT_OK;
    goto out;
fail:
    cli_error("bench batch: %s", err[0] ? err : "out of memory.");
out:
    bp_run_batch_free(b);
    bp_run_model_free(m);
    return rc;
}
