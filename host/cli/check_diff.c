/* check_diff.c — `backplane check --diff OLD NEW`: the regressions of one
 * conformance report against another. Cases are matched by device name and
 * (op, type, type2, case description); invariance checks by (check, type). */
#include <stdio.h>
#include <string.h>

#include "check_report.h"
#include "cli.h"
#include "json_read.h"

/* NMSE below this is exact arithmetic's noise: growing from 1e-15 to 1e-14
 * is not a regression. */
#define NMSE_FLOOR 1e-12
#define NMSE_GROWTH 10.0

static const struct json_value *find_by(const struct json_value *arr, const char *k1, const char *v1,
                                        const char *k2, const char *v2, const char *k3,
                                        const char *v3, const char *k4, const char *v4)
{
    for (size_t i = 0; arr && arr->kind == JSON_ARRAY && i < arr->n; i++) {
        const struct json_value *e = &arr->items[i];
        if (!strcmp(json_member_string(e, k1, ""), v1) &&
            (!k2 || !strcmp(json_member_string(e, k2, ""), v2)) &&
            (!k3 || !strcmp(json_member_string(e, k3, ""), v3)) &&
            (!k4 || !strcmp(json_member_string(e, k4, ""), v4)))
            return e;
    }
    return NULL;
}

static int regression(const char *dev, const char *what, const char *fmt, const char *a, double x,
                      double y)
{
    printf("REGRESSION %-10s %s: ", dev, what);
    printf(fmt, a, x, y);
    putchar('\n');
    return 1;
}

static int diff_cases(const char *dev, const struct json_value *od, const struct json_value *nd)
{
    int n = 0;
    const struct json_value *oc = json_member(od, "cases"), *nc = json_member(nd, "cases");
    for (size_t i = 0; oc && oc->kind == JSON_ARRAY && i < oc->n; i++) {
        const struct json_value *o = &oc->items[i];
        const char *op = json_member_string(o, "op", ""), *type = json_member_string(o, "type", "");
        const char *type2 = json_member_string(o, "type2", ""), *desc = json_member_string(o, "case", "");
        const char *was = json_member_string(o, "result", "");
        char what[200];
        snprintf(what, sizeof what, "%s %s %s", op, type, desc);
        const struct json_value *c = find_by(nc, "op", op, "type", type, "type2", type2, "case", desc);
        if (strcmp(was, "pass") != 0) continue; /* only what worked can regress */
        if (!c) {
            n += regression(dev, what, "coverage lost: the case %s", "is no longer in the report", 0, 0);
            continue;
        }
        const char *now = json_member_string(c, "result", "");
        if (!strcmp(now, "fail"))
            n += regression(dev, what, "passed, now fails (%s)", json_member_string(c, "message", ""), 0, 0);
        else if (strcmp(now, "pass") != 0)
            n += regression(dev, what, "coverage lost: passed, now %s", now, 0, 0);
        else {
            double a = json_member_number(o, "nmse", 0), b = json_member_number(c, "nmse", 0);
            if (b > NMSE_GROWTH * (a > NMSE_FLOOR ? a : NMSE_FLOOR))
                n += regression(dev, what, "%sNMSE grew from %.2e to %.2e (over 10x)", "", a, b);
        }
    }
    return n;
}

static int diff_invariance(const char *dev, const struct json_value *od, const struct json_value *nd)
{
    int n = 0;
    const struct json_value *oi = json_member(od, "invariance"), *ni = json_member(nd, "invariance");
    for (size_t i = 0; oi && oi->kind == JSON_ARRAY && i < oi->n; i++) {
        const struct json_value *o = &oi->items[i];
        const char *check = json_member_string(o, "check", ""), *type = json_member_string(o, "type", "");
        if (strcmp(json_member_string(o, "result", ""), "pass") != 0) continue;
        const struct json_value *c = find_by(ni, "check", check, "type", type, NULL, NULL, NULL, NULL);
        const char *now = c ? json_member_string(c, "result", "") : "missing";
        char what[120];
        snprintf(what, sizeof what, "%s invariance MUL_MAT %s", check, type);
        if (strcmp(now, "pass") != 0)
            n += regression(dev, what, "passed, now %s", now, 0, 0);
    }
    return n;
}

static struct json_value *load(const char *path)
{
    char err[256];
    struct json_value *v = json_read_file(path, err, sizeof err);
    if (!v) {
        cli_error("cannot read report '%s': %s; pass files written by `backplane check --report`.",
                  path, err);
        return NULL;
    }
    if (strcmp(json_member_string(v, "schema", ""), CHECK_REPORT_SCHEMA) != 0) {
        cli_error("'%s' is not a %s file; pass files written by `backplane check --report`.",
                  path, CHECK_REPORT_SCHEMA);
        json_value_free(v);
        return NULL;
    }
    return v;
}

int check_report_diff(const char *old_path, const char *new_path)
{
    struct json_value *old = load(old_path), *new = old ? load(new_path) : NULL;
    if (!new) {
        json_value_free(old);
        return CLI_EXIT_FAIL;
    }
    int n = 0;
    const struct json_value *od = json_member(old, "devices"), *nd = json_member(new, "devices");
    for (size_t i = 0; od && od->kind == JSON_ARRAY && i < od->n; i++) {
        const char *name = json_member_string(&od->items[i], "name", "");
        const struct json_value *d = find_by(nd, "name", name, NULL, NULL, NULL, NULL, NULL, NULL);
        if (!d) {
            n += regression(name, "device", "coverage lost: the device %s", "is not in the new report", 0, 0);
            continue;
        }
        n += diff_cases(name, &od->items[i], d);
        n += diff_invariance(name, &od->items[i], d);
    }
    json_value_free(old);
    json_value_free(new);
    if (n) {
        cli_error("%d regression%s from '%s' to '%s'.", n, n == 1 ? "" : "s", old_path, new_path);
        return CLI_EXIT_FAIL;
    }
    printf("no regressions from '%s' to '%s'.\n", old_path, new_path);
    return CLI_EXIT_OK;
}
