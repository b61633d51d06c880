/*
 * cmd_check.c — `backplane check`: every op of the harness on every selected
 * device, compared with the CPU reference. Each case runs twice, on the
 * device under test and on the CPU device, each with its own backend and
 * buffer (so comparing the CPU with itself is meaningful: it still exercises
 * guards, NaN checks and two independent streams).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "check_harness.h"
#include "check_report.h"
#include "cli.h"
#include "json.h"

#define MAX_SELECTED 64

static void help(void)
{
    puts("usage: backplane check [--device NAME]... [--op NAME]... [--json] [--verbose]\n"
         "                       [--report FILE.json]\n"
         "       backplane check --diff OLD.json NEW.json\n"
         "       backplane check --sched DEVICE[,cpu] [--json]\n"
         "       backplane check --comm META_DEVICE [--json]\n\n"
         "Runs every op of the harness (each element type, odd sizes, broadcasts,\n"
         "non-contiguous inputs) on each selected device (default: every device)\n"
         "and compares the output with the CPU reference by normalised mean\n"
         "squared error. Guard bytes around every tensor catch out-of-bounds\n"
         "writes; NaN/Inf where the reference is finite fails; ops a device\n"
         "declines are reported as unsupported. A device whose plugin publishes\n"
         "vendor-defined ops (BP_PROC_CUSTOM_OPS) also runs those, compared with\n"
         "the plugin's reference (--op CUSTOM selects only them). Exits 1 when\n"
         "any case fails.\n\n"
         "  --device NAME  check this device (repeatable)\n"
         "  --op NAME      check only this op, e.g. MUL_MAT (repeatable)\n"
         "  --json         per-case records and the summary as JSON\n"
         "  --verbose      more detail on each line (largest error, reasons)\n"
         "  --report FILE  also write a conformance report: plugin file and ABI,\n"
         "                 device identity, every case (op, types, shape class,\n"
         "                 NMSE, threshold, result), per-op coverage, and the\n"
         "                 batch-invariance and 1-vs-N-thread bit-identity checks\n"
         "                 of MUL_MAT (a failed invariance fails the check)\n"
         "  --diff OLD NEW compare two reports: print every regression (a case\n"
         "                 that passed and now fails, NMSE grown 10x, coverage\n"
         "                 lost, an invariance lost); exits 1 on any\n"
         "  --sched D,cpu  instead: the decoder graphs of builtin:test (several weight\n"
         "                 types) through the scheduler over D with the cpu as\n"
         "                 fallback, against the cpu alone, with where each ran\n"
         "  --comm META    instead: every all-reduce path of a meta device (registry\n"
         "                 collectives, the butterfly) at 4 KB, 64 KB, 1 MB, 16 MB:\n"
         "                 time, bus bandwidth, sums verified; exits 1 on a wrong sum");
}

enum case_status { CASE_PASS, CASE_FAIL, CASE_UNSUPPORTED };

static const char *status_word(enum case_status s)
{
    return s == CASE_PASS ? "PASS" : s == CASE_FAIL ? "FAIL" : "UNSUP";
}

struct options {
    const char *devices[MAX_SELECTED];
    int n_devices;
    bool ops[BP_OP_COUNT];
    bool any_op;
    bool json;
    bool verbose;
    const char *report_path, *diff_old, *diff_new;
    struct check_report *report;
    const char *sched;    /* --sched: the scheduler check of check_sched.c */
    const char *comm;     /* --comm: the all-reduce preflight of check_comm.c */
};

static bool op_by_name(const char *name, enum bp_op *out)
{
    for (int op = 1; op < BP_OP_COUNT; op++)
        if (!strcasecmp(name, bp_op_name((enum bp_op)op))) {
            *out = (enum bp_op)op;
            return true;
        }
    return false;
}

static bool op_has_cases(enum bp_op op)
{
    if (op == BP_OP_CUSTOM) return true; /* the devices' own cases (check_custom.c) */
    for (size_t i = 0; i < check_case_count(); i++)
        if (check_case_get(i)->op == op) return true;
    return false;
}

static int unknown_op(const char *name)
{
    char list[512] = "";
    size_t used = 0;
    for (int op = 1; op < BP_OP_COUNT && used < sizeof list; op++) {
        if (!op_has_cases((enum bp_op)op)) continue;
        int w = snprintf(list + used, sizeof list - used, "%s%s", used ? ", " : "",
                         bp_op_name((enum bp_op)op));
        if (w < 0) break;
        used += (size_t)w;
    }
    return cli_usage_error("check", "there is no op named '%s' in the check; ops: %s.", name, list);
}

/* Returns -1 when the options parsed, otherwise the exit status to return. */
static int parse(int argc, char **argv, struct options *o)
{
    memset(o, 0, sizeof *o);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *val = NULL;
        bool is_dev = !strcmp(a, "--device") || !strncmp(a, "--device=", 9);
        bool is_op = !strcmp(a, "--op") || !strncmp(a, "--op=", 5);
        if (is_dev || is_op) {
            const char *eq = strchr(a, '=');
            if (eq) val = eq + 1;
            else if (i + 1 < argc) val = argv[++i];
            else return cli_usage_error("check", "'%s' needs a value.", a);
            if (!*val) return cli_usage_error("check", "'%s' needs a non-empty value.", a);
            if (is_dev) {
                if (o->n_devices >= MAX_SELECTED)
                    return cli_usage_error("check", "at most %d --device options are allowed.", MAX_SELECTED);
                o->devices[o->n_devices++] = val;
            } else {
                enum bp_op op;
                if (!op_by_name(val, &op) || !op_has_cases(op)) return unknown_op(val);
                o->ops[op] = true;
                o->any_op = true;
            }
        } else if (!strcmp(a, "--report") || !strcmp(a, "--diff")) {
            int need = a[2] == 'r' ? 1 : 2;
            if (i + need >= argc) return cli_usage_error("check", "'%s' needs %s.", a,
                                                         need == 1 ? "a file name" : "two report files");
            if (need == 1) o->report_path = argv[++i];
            else o->diff_old = argv[i + 1], o->diff_new = argv[i + 2], i += 2;
        } else if (!strcmp(a, "--sched")) {
            if (i + 1 >= argc || !*argv[i + 1]) return cli_usage_error("check", "'--sched' needs a device list.");
            o->sched = argv[++i];
        } else if (!strcmp(a, "--comm")) {
            if (i + 1 >= argc || !*argv[i + 1]) return cli_usage_error("check", "'--comm' needs a meta device.");
            o->comm = argv[++i];
        } else if (!strcmp(a, "--json")) {
            o->json = true;
        } else if (!strcmp(a, "--verbose") || !strcmp(a, "-v")) {
            o->verbose = true;
        } else if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            help();
            return CLI_EXIT_OK;
        } else {
            return cli_usage_error("check", "unknown argument '%s' for 'check'.", a);
        }
    }
    return -1;
}

struct record {
    struct bp_device *dev;
    const struct check_case *c;
    bool split;          /* the meta device's split pass of the case */
    enum case_status status;
    struct check_verdict v;
    char message[300];
};

/* "sub-device 1 (badadd)", or "" for a device that is not meta. */
static void sub_label(struct bp_device *dev, size_t d, char *buf, size_t cap)
{
    struct bp_device *subs[BP_META_MAX_DEVICES];
    size_t n = 0;
    buf[0] = '\0';
    if (bp_meta_device_sub_devices(dev, subs, BP_META_MAX_DEVICES, &n) == BP_OK && d < n &&
        d < BP_META_MAX_DEVICES)
        snprintf(buf, cap, "sub-device %zu (%s)", d, bp_device_name(subs[d]));
}

/* Every sub-device's name, "cpu, badadd", for a split that failed. */
static void sub_list(struct bp_device *dev, char *buf, size_t cap)
{
    struct bp_device *subs[BP_META_MAX_DEVICES];
    size_t n = 0, used = 0;
    buf[0] = '\0';
    if (bp_meta_device_sub_devices(dev, subs, BP_META_MAX_DEVICES, &n) != BP_OK) return;
    for (size_t d = 0; d < n && d < BP_META_MAX_DEVICES && used < cap; d++) {
        int w = snprintf(buf + used, cap - used, "%s%s", d ? ", " : "", bp_device_name(subs[d]));
        if (w < 0) break;
        used += (size_t)w;
    }
}

/* Judges out against ref. A meta device's output is judged copy by copy
 * (each sub-device computes a MIRRORED node itself), so the failure names
 * the sub-device; a split output, gathered from all, names them all. */
static void judge(struct record *r, const char *ref_name, const struct check_output *ref,
                  const struct check_output *out)
{
    const struct check_case *c = r->c;
    if (ref->unsupported || ref->problem[0] || !ref->values) {
        /* Without a reference there is nothing to judge the device by. */
        r->status = ref->unsupported ? CASE_UNSUPPORTED : CASE_FAIL;
        snprintf(r->message, sizeof r->message, "reference %s: %s", ref_name,
                 ref->problem[0] ? ref->problem : "no output");
        return;
    }
    if (!out->values) {
        r->status = CASE_FAIL;
        snprintf(r->message, sizeof r->message, "%s", out->problem[0] ? out->problem : "no output");
        return;
    }
    check_compare(c, ref, out, &r->v);
    if (out->problem[0]) {
        r->status = CASE_FAIL;
        snprintf(r->message, sizeof r->message, "%s", out->problem);
        return;
    }
    char who[160];
    size_t bad = 0;
    struct check_verdict cv = r->v;
    for (size_t d = 1; cv.pass && d < out->n_copies; d++) {
        struct check_output copy = *out;
        copy.values = out->copies[d];
        check_compare(c, ref, &copy, &cv);
        bad = d;
    }
    if (!r->v.pass || !cv.pass) {
        if (r->v.pass) r->v = cv;
        else bad = 0;
        r->status = CASE_FAIL;
        if (out->n_copies > 1) {
            sub_label(r->dev, bad, who, sizeof who);
            if (snprintf(r->message, sizeof r->message, "%s computed it wrong: %s", who, r->v.message) < 0)
                r->message[0] = '\0'; /* a report line: cutting a long one is fine */
        } else if (out->split) {
            sub_list(r->dev, who, sizeof who);
            if (snprintf(r->message, sizeof r->message, "split over %s: %s", who, r->v.message) < 0)
                r->message[0] = '\0';
        } else {
            snprintf(r->message, sizeof r->message, "%s", r->v.message);
        }
        return;
    }
    r->status = CASE_PASS;
    snprintf(r->message, sizeof r->message, "%s", r->v.message);
}

/* One case on one device: the device first, so a declined op costs nothing.
 * A meta device runs it twice, mirrored then split (when the case has a
 * split), against one reference. A custom op's reference is its plugin's
 * function, run on ref_dev's memory. Returns the number of records filled. */
static int run_one(struct bp_device *dev, struct bp_device *ref_dev, const struct check_case *c,
                   size_t ci, struct record r[2])
{
    const bool meta = bp_device_type(dev) == BP_DEVICE_TYPE_META;
    const int n_runs = meta && check_case_splits(c) ? 2 : 1;
    struct check_output out[2], ref;
    memset(&ref, 0, sizeof ref);
    for (int k = 0; k < n_runs; k++) {
        memset(&r[k], 0, sizeof r[k]);
        r[k] = (struct record){.dev = dev, .c = c, .split = k == 1};
        r[k].v.threshold = check_case_threshold(c);
        r[k].v.nmse = -1.0;
        check_run_case(c, ci, dev, k == 1 ? CHECK_SPLIT : CHECK_MIRRORED, &out[k]);
    }
    if (out[0].unsupported) {
        for (int k = 0; k < n_runs; k++) {
            r[k].status = CASE_UNSUPPORTED;
            snprintf(r[k].message, sizeof r[k].message, "%s", out[0].problem);
        }
    } else {
        if (c->custom) check_run_custom_reference(c, ci, ref_dev, &ref);
        else check_run_case(c, ci, ref_dev, CHECK_MIRRORED, &ref);
        const char *ref_name = c->custom ? c->custom->name : bp_device_name(ref_dev);
        for (int k = 0; k < n_runs; k++) judge(&r[k], ref_name, &ref, &out[k]);
    }
    for (int k = 0; k < n_runs; k++) check_output_free(&out[k]);
    check_output_free(&ref);
    return n_runs;
}

static void print_line(const struct record *r, bool verbose)
{
    printf("%-5s %-10s %-14s %-4s %s%s", status_word(r->status), bp_device_name(r->dev),
           check_case_op_label(r->c), bp_type_name(r->c->type), r->c->desc, r->split ? " [split]" : "");
    if (r->v.nmse >= 0.0) printf("  nmse=%.2e", r->v.nmse);
    if (verbose && r->status == CASE_PASS)
        printf(" (limit %.0e, max |err| %.2e, reference rms %.3g)", r->v.threshold,
               r->v.max_abs_err, r->v.ref_rms);
    if (r->status == CASE_FAIL || (verbose && r->message[0])) printf("  -- %s", r->message);
    putchar('\n');
    fflush(stdout);
}

static void json_record(struct json_writer *w, const struct record *r)
{
    static const char *const words[] = {"pass", "fail", "unsupported"};
    json_object_begin(w, NULL);
    json_string(w, "device", bp_device_name(r->dev));
    json_string(w, "op", bp_op_name(r->c->op));
    json_string(w, "type", bp_type_name(r->c->type));
    json_string(w, "case", r->c->desc);
    json_bool(w, "split", r->split);
    if (r->c->custom) json_string(w, "custom_op", r->c->custom->name);
    json_string(w, "status", words[r->status]);
    if (r->v.nmse >= 0.0) json_double(w, "nmse", r->v.nmse);
    else json_null(w, "nmse");
    json_double(w, "threshold", r->v.threshold);
    json_string(w, "message", r->message);
    json_object_end(w);
}

struct tally {
    int passed, failed, unsupported;
};

static void run_and_report(struct bp_device *dev, struct bp_device *ref_dev,
                           const struct check_case *c, size_t ci, const struct options *o,
                           struct json_writer *w, struct tally *t)
{
    struct record r[2];
    const int n = run_one(dev, ref_dev, c, ci, r);
    for (int k = 0; k < n; k++) {
        if (r[k].status == CASE_PASS) t->passed++;
        else if (r[k].status == CASE_FAIL) t->failed++;
        else t->unsupported++;
        if (o->json) json_record(w, &r[k]);
        else print_line(&r[k], o->verbose);
        if (o->report)
            check_report_add(o->report, dev, c, r[k].split, (int)r[k].status, r[k].v.nmse,
                             r[k].v.threshold, r[k].message);
    }
}

int cmd_check(int argc, char **argv)
{
    struct options o;
    int rc = parse(argc, argv, &o);
    if (rc >= 0) return rc;
    if (o.diff_old) return check_report_diff(o.diff_old, o.diff_new);
    if (!cli_load()) return CLI_EXIT_FAIL;
    if (o.sched) return check_sched(o.sched, o.json);
    if (o.comm) return check_comm(o.comm, o.json);

    struct bp_device *ref_dev = bp_device_by_name("cpu");
    if (!ref_dev) {
        cli_error("the check needs the CPU plugin as its reference, but no device named 'cpu' "
                  "is loaded; run 'backplane devices' to see why.");
        return CLI_EXIT_FAIL;
    }
    struct bp_device *devs[MAX_SELECTED];
    int n_devs = 0;
    if (o.n_devices == 0) {
        for (size_t i = 0; i < bp_device_count() && n_devs < MAX_SELECTED; i++)
            devs[n_devs++] = bp_device_get(i);
    } else {
        for (int i = 0; i < o.n_devices; i++) {
            devs[n_devs] = cli_find_device(o.devices[i]);
            if (!devs[n_devs]) return CLI_EXIT_FAIL;
            n_devs++;
        }
    }

    if (o.report_path && !(o.report = check_report_open(o.report_path))) return CLI_EXIT_FAIL;
    struct json_writer w;
    if (o.json) {
        json_init(&w, stdout);
        json_object_begin(&w, NULL);
        json_string(&w, "reference", bp_device_name(ref_dev));
        json_array_begin(&w, "cases");
    }
    struct tally tallies[MAX_SELECTED];
    memset(tallies, 0, sizeof tallies);
    for (int d = 0; d < n_devs; d++) {
        for (size_t ci = 0; ci < check_case_count(); ci++) {
            if (o.any_op && !o.ops[check_case_get(ci)->op]) continue;
            run_and_report(devs[d], ref_dev, check_case_get(ci), ci, &o, &w, &tallies[d]);
        }
        struct check_case *custom = NULL;
        size_t n_custom = (!o.any_op || o.ops[BP_OP_CUSTOM]) ? check_custom_cases(devs[d], &custom) : 0;
        for (size_t ci = 0; ci < n_custom; ci++)
            run_and_report(devs[d], ref_dev, &custom[ci], check_case_count() + ci, &o, &w, &tallies[d]);
        free(custom);
    }
    bool all_ok = !o.report || check_report_finish(o.report, ref_dev, devs, n_devs);
    if (o.json) {
        json_array_end(&w);
        json_array_begin(&w, "summary");
    } else {
        putchar('\n');
    }
    for (int d = 0; d < n_devs; d++) {
        all_ok &= tallies[d].failed == 0;
        if (o.json) {
            json_object_begin(&w, NULL);
            json_string(&w, "device", bp_device_name(devs[d]));
            json_int(&w, "passed", tallies[d].passed);
            json_int(&w, "failed", tallies[d].failed);
            json_int(&w, "unsupported", tallies[d].unsupported);
            json_object_end(&w);
        } else {
            printf("%s: %d passed, %d failed, %d unsupported\n", bp_device_name(devs[d]),
                   tallies[d].passed, tallies[d].failed, tallies[d].unsupported);
        }
    }
    if (o.json) {
        json_array_end(&w);
        json_bool(&w, "ok", all_ok);
        json_object_end(&w);
        json_finish(&w);
    }
    if (!all_ok && !o.json)
        cli_error("the check failed on at least one device; the FAIL lines above say where.");
    return all_ok ? CLI_EXIT_OK : CLI_EXIT_FAIL;
}
