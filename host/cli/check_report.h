/* check_report.h — `backplane check --report FILE.json`: what a vendor can
 * publish and a user can diff (schema: host/cli/check_report.schema.json). */
#ifndef BP_CLI_CHECK_REPORT_H
#define BP_CLI_CHECK_REPORT_H

#include <stdbool.h>

#include "check_harness.h"

#define CHECK_REPORT_SCHEMA "backplane-check-report/1"

struct check_report;

/* Opens path for writing (so a bad path fails before the long run); NULL
 * after printing a sentence. */
struct check_report *check_report_open(const char *path);
/* One case's result; status 0 pass, 1 fail, 2 unsupported; split: a meta
 * device's split pass (its case reads "<desc> [split]"). Copies what it keeps. */
void check_report_add(struct check_report *r, struct bp_device *dev, const struct check_case *c,
                      bool split, int status, double nmse, double threshold, const char *message);
/* Runs the invariance checks on each device, writes the file and frees r.
 * Returns false when an invariance check failed or the file could not be
 * written (a sentence says which). */
bool check_report_finish(struct check_report *r, struct bp_device *ref_dev,
                         struct bp_device *const *devs, int n_devs);

/* `backplane check --diff OLD NEW`: prints every regression of NEW against
 * OLD; returns the exit status (0 none, 1 any or an unreadable file). */
int check_report_diff(const char *old_path, const char *new_path);

#endif
