/*
 * bench_sched.c — `backplane bench sched`: what the scheduler costs and
 * what partial offload does, on builtin:tiny (weights of --type).
 *
 *  - overhead: decode steps on the cpu through the scheduler ÷ the same
 *    steps on the cpu backend directly. The two alternate within each of
 *    --rounds rounds (--reps steps each, default 5 x 8); the median round's
 *    ratio is reported with the range. The goal is <= 1.02.
 *  - partial offload: half the layers on --device (default: the first GPU
 *    device), the rest on the cpu: decode tokens/s, the cpu-only tokens/s
 *    of the same rounds as reference, and the copies per token; two rounds
 *    of at most 4 steps (on lavapipe this measures the machinery, not the
 *    device, and lavapipe is slow).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "cli.h"
#include "decoder.h"
#include "json.h"
#include "model.h"
#include "split.h"

#define PROMPT 4

/* Seconds of `steps` greedy decode steps after a fresh prefill. */
static double decode_seconds(struct bp_run_session *s, const struct bp_run_model *m, int steps, float *lg,
                             char *err, size_t cap)
{
    static const int32_t prompt[PROMPT] = { 1, 2, 3, 4 };
    bp_run_session_reset(s);
    if (bp_run_session_eval(s, prompt, PROMPT, false, lg, err, cap) != BP_OK) return -1;
    double t0 = bench_now();
    for (int i = 0; i < steps; i++) {
        int32_t t = bp_run_argmax(lg, m->hp.n_vocab);
        if (bp_run_session_eval(s, &t, 1, false, lg, err, cap) != BP_OK) return -1;
    }
    return bench_now() - t0;
}

static struct bp_device *offload_device(const char *name)
{
    if (name && strcmp(name, "cpu")) return cli_find_device(name);
    for (size_t i = 0; i < bp_device_count(); i++) {
        enum bp_device_type t = bp_device_type(bp_device_get(i));
        if (t == BP_DEVICE_TYPE_GPU || t == BP_DEVICE_TYPE_IGPU) return bp_device_get(i);
    }
    return NULL;
}

struct sched_figures {
    double ratio, lo, hi;                    /* overhead: sched / direct */
    double off_tps, cpu_tps, copies_per_tok; /* partial offload */
    int64_t off_layers;
    struct bp_device *off;
};

int bench_sched(const struct bench_opts *o)
{
    char err[1024] = "";
    const int rounds = o->rounds > 0 ? o->rounds : 5, steps = o->reps > 0 ? o->reps : 8;
    struct bp_run_model *m = NULL;
    struct bp_run_session *sch = NULL, *dir = NULL, *off = NULL;
    struct bp_device *cpu = bp_device_by_name("cpu");
    struct sched_figures f = { 0 };
    double ratio[BENCH_MAX_ROUNDS];
    float *lg = NULL;
    int rc = CLI_EXIT_FAIL;
    struct bp_run_builtin_options bo = { .weight_type = o->type, .seed = 1 };
    struct bp_run_session_options so = { .n_ctx = PROMPT + steps + 1, .n_threads = o->threads };
    if (!cpu) {
        cli_error("bench sched needs the cpu device; run 'backplane devices' to see why it is missing.");
        return CLI_EXIT_FAIL;
    }
    if (bp_run_model_builtin("tiny", &bo, &m, err, sizeof err) != BP_OK ||
        !(lg = malloc((size_t)m->hp.n_vocab * sizeof *lg)) ||
        bp_run_session_new(m, cpu, &so, &sch, err, sizeof err) != BP_OK)
        goto fail;
    so.direct = true;
    if (bp_run_session_new(m, cpu, &so, &dir, err, sizeof err) != BP_OK) goto fail;
    so.direct = false;
    /* One untimed pass each: plans made, pages touched. */
    if (decode_seconds(sch, m, 1, lg, err, sizeof err) < 0 || decode_seconds(dir, m, 1, lg, err, sizeof err) < 0)
        goto fail;
    for (int r = 0; r < rounds; r++) {
        double ts = decode_seconds(sch, m, steps, lg, err, sizeof err);
        double td = decode_seconds(dir, m, steps, lg, err, sizeof err);
        if (ts < 0 || td < 0) goto fail;
        ratio[r] = ts / td;
        f.lo = r == 0 || ratio[r] < f.lo ? ratio[r] : f.lo;
        f.hi = r == 0 || ratio[r] > f.hi ? ratio[r] : f.hi;
    }
    f.ratio = bench_median(ratio, rounds);
    bp_run_session_free(sch);
    sch = NULL;

    if ((f.off = offload_device(o->device)) != NULL) {
        f.off_layers = m->hp.n_layer / 2;
        so.offload_layers = f.off_layers;
        if (bp_run_session_new(m, f.off, &so, &off, err, sizeof err) != BP_OK ||
            decode_seconds(off, m, 1, lg, err, sizeof err) < 0)
            goto fail;
        /* A slow device (lavapipe) gets two short rounds, not the overhead's. */
        const int off_rounds = rounds < 2 ? rounds : 2, off_steps = steps < 4 ? steps : 4;
        double t_off = 0, t_cpu = 0;
        for (int r = 0; r < off_rounds; r++) {
            double x = decode_seconds(off, m, off_steps, lg, err, sizeof err);
            double y = decode_seconds(dir, m, off_steps, lg, err, sizeof err);
            if (x < 0 || y < 0) goto fail;
            t_off += x;
            t_cpu += y;
        }
        f.off_tps = off_rounds * off_steps / t_off;
        f.cpu_tps = off_rounds * off_steps / t_cpu;
        /* The decode plan's copies: exactly what each step makes. */
        struct bp_sched_summary sum = { .size = sizeof sum };
        f.copies_per_tok = bp_run_session_placement(off, &sum) == BP_OK ? sum.n_copies : 0;
    }
    if (o->json) {
        struct json_writer w;
        json_init(&w, stdout);
        json_object_begin(&w, NULL);
        json_string(&w, "model", "builtin:tiny");
        json_string(&w, "weight_type", bp_type_name(o->type));
        json_int(&w, "rounds", rounds);
        json_int(&w, "steps_per_round", steps);
        json_double(&w, "overhead_ratio", f.ratio);
        json_double(&w, "overhead_ratio_min", f.lo);
        json_double(&w, "overhead_ratio_max", f.hi);
        if (f.off) {
            json_object_begin(&w, "offload");
            json_string(&w, "device", bp_device_name(f.off));
            json_int(&w, "layers", f.off_layers);
            json_int(&w, "n_layer", m->hp.n_layer);
            json_double(&w, "decode_tokens_per_s", f.off_tps);
            json_double(&w, "cpu_decode_tokens_per_s", f.cpu_tps);
            json_double(&w, "copies_per_token", f.copies_per_tok);
            json_object_end(&w);
        }
        json_object_end(&w);
        json_finish(&w);
    } else {
        printf("builtin:tiny (%s), %d rounds of %d decode steps\n", bp_type_name(o->type), rounds, steps);
        printf("overhead: cpu through the scheduler / cpu directly = %.3f (rounds %.3f .. %.3f)\n", f.ratio,
               f.lo, f.hi);
        if (f.off)
            printf("offload:  %lld of %lld layers on %s: %.1f tokens/s (cpu alone %.1f, ratio %.2f), "
                   "%.0f copies per token\n", (long long)f.off_layers, (long long)m->hp.n_layer,
                   bp_device_name(f.off), f.off_tps, f.cpu_tps, f.off_tps / f.cpu_tps, f.copies_per_tok);
        else
            printf("offload:  no GPU device to offload to (give one with --device)\n");
    }
    rc = CLI_EXIT_OK;
    goto out;
fail:
    cli_error("bench sched: %s", err[0] ? err : "out of memory.");
out:
    free(lg);
    bp_run_session_free(off);
    bp_run_session_free(sch);
    bp_run_session_free(dir);
    bp_run_model_free(m);
    return rc;
}
