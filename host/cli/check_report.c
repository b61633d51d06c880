/* check_report.c — the conformance report file of `check --report`. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check_invariance.h"
#include "check_report.h"
#include "cli.h"
#include "identity_print.h"
#include "json.h"

#define MAX_INVARIANCE 48

static const char *const status_words[] = {"pass", "fail", "unsupported"};

struct report_case {
    struct bp_device *dev;
    char op[40], type[12], type2[12], desc[112], message[300];
    const char *shape_class;
    int status;
    double nmse, threshold;
};

struct check_report {
    FILE *f;
    char *path;
    struct report_case *v;
    size_t n, cap;
};

/* What a case's shape exercises, from the words the harness puts in its
 * description; the first match wins, so the order is the priority. */
static const struct { const char *word, *cls; } shape_words[] = {
    {"permuted", "non-contiguous"}, {"transposed", "non-contiguous"},
    {"strided view", "non-contiguous"}, {"into rows", "view-destination"},
    {"broadcast", "broadcast"}, {"GQA", "grouped"},
};

static const char *shape_class(const char *desc)
{
    for (size_t i = 0; i < sizeof shape_words / sizeof shape_words[0]; i++)
        if (strstr(desc, shape_words[i].word)) return shape_words[i].cls;
    if (strstr(desc, "[1]")) return "single-element";
    /* Odd extents catch tails of vectorised loops. */
    for (const char *p = desc; *p; p++)
        if ((*p == '[' || *p == ',') && p[1] >= '0' && p[1] <= '9' && strtol(p + 1, NULL, 10) % 2)
            return "odd";
    return "regular";
}

struct check_report *check_report_open(const char *path)
{
    struct check_report *r = calloc(1, sizeof *r);
    if (!r || !(r->path = strdup(path))) {
        free(r);
        cli_error("out of memory opening the report.");
        return NULL;
    }
    r->f = fopen(path, "w");
    if (!r->f) {
        cli_error("cannot write the report to '%s'; check that its directory exists and is "
                  "writable.", path);
        free(r->path);
        free(r);
        return NULL;
    }
    return r;
}

void check_report_add(struct check_report *r, struct bp_device *dev, const struct check_case *c,
                      bool split, int status, double nmse, double threshold, const char *message)
{
    if (r->n == r->cap) {
        size_t cap = r->cap ? r->cap * 2 : 256;
        struct report_case *v = realloc(r->v, cap * sizeof *v);
        if (!v) return; /* the report is short by one case; the run goes on */
        r->v = v;
        r->cap = cap;
    }
    struct report_case *k = &r->v[r->n++];
    memset(k, 0, sizeof *k);
    k->dev = dev;
    snprintf(k->op, sizeof k->op, "%s", check_case_op_label(c));
    snprintf(k->type, sizeof k->type, "%s", bp_type_name(c->type));
    snprintf(k->type2, sizeof k->type2, "%s", bp_type_name(c->type2));
    snprintf(k->desc, sizeof k->desc, "%s%s", c->desc, split ? " [split]" : "");
    snprintf(k->message, sizeof k->message, "%s", message ? message : "");
    k->shape_class = shape_class(c->desc);
    k->status = status;
    k->nmse = nmse;
    k->threshold = threshold;
}

static void write_plugin(struct json_writer *w, struct bp_device *dev)
{
    const struct bp_plugin_info *p = cli_plugin_of(dev);
    if (!p) {
        json_null(w, "plugin");
        return;
    }
    char abi[16];
    json_object_begin(w, "plugin");
    json_string(w, "family", p->family);
    json_string(w, "variant", p->variant ? p->variant : "");
    json_string(w, "file", p->path);
    json_string(w, "abi_version", cli_abi_string(p->abi_version, abi, sizeof abi));
    json_object_end(w);
}

static void write_cases_and_coverage(struct json_writer *w, const struct check_report *r,
                                     struct bp_device *dev)
{
    int totals[3] = {0, 0, 0};
    json_array_begin(w, "cases");
    for (size_t i = 0; i < r->n; i++) {
        const struct report_case *k = &r->v[i];
        if (k->dev != dev) continue;
        totals[k->status]++;
        json_object_begin(w, NULL);
        json_string(w, "op", k->op);
        json_string(w, "type", k->type);
        json_string(w, "type2", k->type2);
        json_string(w, "shape_class", k->shape_class);
        json_string(w, "case", k->desc);
        json_string(w, "result", status_words[k->status]);
        if (k->nmse >= 0) json_double(w, "nmse", k->nmse);
        else json_null(w, "nmse");
        json_double(w, "threshold", k->threshold);
        json_string(w, "message", k->message);
        json_object_end(w);
    }
    json_array_end(w);
    /* Per op: the counts a vendor quotes ("MUL_MAT 48/48"). Ops in first-seen order. */
    json_array_begin(w, "coverage");
    for (size_t i = 0; i < r->n; i++) {
        const struct report_case *k = &r->v[i];
        bool seen = false;
        for (size_t j = 0; j < i && !seen; j++)
            seen = r->v[j].dev == dev && !strcmp(r->v[j].op, k->op);
        if (k->dev != dev || seen) continue;
        int c[3] = {0, 0, 0};
        for (size_t j = i; j < r->n; j++)
            if (r->v[j].dev == dev && !strcmp(r->v[j].op, k->op)) c[r->v[j].status]++;
        json_object_begin(w, NULL);
        json_string(w, "op", k->op);
        json_int(w, "passed", c[0]);
        json_int(w, "failed", c[1]);
        json_int(w, "unsupported", c[2]);
        json_object_end(w);
    }
    json_array_end(w);
    json_object_begin(w, "totals");
    json_int(w, "passed", totals[0]);
    json_int(w, "failed", totals[1]);
    json_int(w, "unsupported", totals[2]);
    json_object_end(w);
}

/* Returns false when an invariance check failed. */
static bool write_invariance(struct json_writer *w, struct bp_device *dev)
{
    struct invariance_result inv[MAX_INVARIANCE];
    int n = check_invariance_run(dev, inv, MAX_INVARIANCE);
    bool ok = true;
    json_array_begin(w, "invariance");
    for (int i = 0; i < n; i++) {
        const struct invariance_result *v = &inv[i];
        ok &= v->status != 1;
        if (v->status == 1)
            cli_error("%s: %s invariance of MUL_MAT with %s weights failed: %s.",
                      bp_device_name(dev), v->kind == INVARIANCE_BATCH ? "batch" : "thread",
                      bp_type_name(v->type), v->message);
        json_object_begin(w, NULL);
        json_string(w, "check", v->kind == INVARIANCE_BATCH ? "batch" : "threads");
        json_string(w, "op", "MUL_MAT");
        json_string(w, "type", bp_type_name(v->type));
        json_string(w, "result", status_words[v->status]);
        json_double(w, "max_nmse", v->max_nmse);
        json_double(w, "threshold", v->threshold);
        if (v->kind == INVARIANCE_THREADS) {
            json_int(w, "threads", v->threads);
            json_uint(w, "differing_values", v->differing);
        }
        json_string(w, "message", v->message);
        json_object_end(w);
    }
    json_array_end(w);
    return ok;
}

bool check_report_finish(struct check_report *r, struct bp_device *ref_dev,
                         struct bp_device *const *devs, int n_devs)
{
    struct json_writer w;
    char abi[16];
    bool ok = true;
    json_init(&w, r->f);
    json_object_begin(&w, NULL);
    json_string(&w, "schema", CHECK_REPORT_SCHEMA);
    json_string(&w, "backplane_version", bp_version_string());
    json_string(&w, "host_abi_version", cli_abi_string(BP_ABI_VERSION, abi, sizeof abi));
    json_string(&w, "reference", bp_device_name(ref_dev));
    json_array_begin(&w, "devices");
    for (int d = 0; d < n_devs; d++) {
        json_object_begin(&w, NULL);
        json_string(&w, "name", bp_device_name(devs[d]));
        json_string(&w, "type", bp_device_type_name(bp_device_type(devs[d])));
        json_string(&w, "description", bp_device_description(devs[d]));
        write_plugin(&w, devs[d]);
        cli_identity_json(&w, devs[d]);
        write_cases_and_coverage(&w, r, devs[d]);
        ok &= write_invariance(&w, devs[d]);
        json_object_end(&w);
    }
    json_array_end(&w);
    json_object_end(&w);
    json_finish(&w);
    if (fclose(r->f) != 0) {
        cli_error("writing the report to '%s' failed (disk full?); the report is incomplete.",
                  r->path);
        ok = false;
    }
    free(r->v);
    free(r->path);
    free(r);
    return ok;
}
