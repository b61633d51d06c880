/* check_comm.c — `backplane check --comm DEVICE`: the link preflight of a
 * meta device. Every all-reduce path it has (the sub-devices' registry
 * collective, each named one, the butterfly) at 4 KB, 64 KB, 1 MB and
 * 16 MB, measured and verified by the meta plugin's probe (integer-valued
 * inputs, so the sums are exact), printed as path x size. A wrong sum or a
 * failed call fails the check (exit 1); a declined path is only noted, as
 * the meta device falls back to the butterfly for it. */
#include <stdio.h>
#include <string.h>

#include "check_harness.h"
#include "cli.h"
#include "json.h"

static const char *verdict(const struct bp_meta_allreduce_probe *r)
{
    if (r->status == BP_ERR_UNSUPPORTED) return "declined";
    if (r->status != BP_OK) return "failed";
    return r->wrong ? "WRONG" : "ok";
}

static bool comm_probe_bad(const struct bp_meta_allreduce_probe *r)
{
    return (r->status != BP_OK && r->status != BP_ERR_UNSUPPORTED) || r->wrong;
}

/* Bus bandwidth as nccl-tests defines it: 2 (n - 1) / n bytes per byte of
 * the buffer cross some link in a ring all-reduce. */
static double bus_bw(size_t n_dev, size_t bytes, double seconds)
{
    return seconds > 0 ? 2.0 * (double)(n_dev - 1) / (double)n_dev * (double)bytes / seconds : 0;
}

static void print_text(const struct comm_table *t)
{
    const size_t n_dev = t->n_members;
    printf("all-reduce paths of %s (%s), %zu %s, F32, median of %d rounds (paths alternating)\n",
           t->name, t->description, n_dev, t->members, COMM_ROUNDS);
    printf("%-22s %10s %12s %12s  %s\n", "path", "size", "time", "bus bw", "result");
    for (size_t p = 0; p < t->n_paths; p++)
        for (int k = 0; k < BP_META_ALLREDUCE_CLASSES; k++) {
            const struct bp_meta_allreduce_probe *r = &t->r[k][p];
            size_t bytes = bp_meta_allreduce_class_bytes(k);
            char b[32];
            printf("%-22s %10s", r->path, bp_format_bytes(bytes, b, sizeof b));
            if (r->status == BP_OK)
                printf(" %9.1f us %7.2f GB/s", r->seconds * 1e6, bus_bw(n_dev, bytes, r->seconds) / 1e9);
            else
                printf(" %12s %12s", "-", "-");
            printf("  %s", verdict(r));
            if (r->wrong) printf(" (off by up to %g)", r->max_abs_err);
            else if (r->status != BP_OK && r->status != BP_ERR_UNSUPPORTED) printf(" (%s)", bp_status_name(r->status));
            putchar('\n');
        }
    printf("\nfastest right path:");
    for (int k = 0; k < BP_META_ALLREDUCE_CLASSES; k++) {
        int best = -1;
        for (size_t p = 0; p < t->n_paths; p++) {
            const struct bp_meta_allreduce_probe *r = &t->r[k][p];
            if (r->status == BP_OK && !r->wrong && (best < 0 || r->seconds < t->r[k][best].seconds)) best = (int)p;
        }
        char b[32];
        printf("%s %s %s", k ? "," : "", bp_format_bytes(bp_meta_allreduce_class_bytes(k), b, sizeof b),
               best >= 0 ? t->r[k][best].path : "none");
    }
    putchar('\n');
}

static void print_json(const struct comm_table *t, bool ok)
{
    const size_t n_dev = t->n_members;
    struct json_writer w;
    json_init(&w, stdout);
    json_object_begin(&w, NULL);
    json_string(&w, "device", t->name);
    json_uint(&w, "sub_devices", n_dev);
    json_int(&w, "rounds", COMM_ROUNDS);
    json_array_begin(&w, "results");
    for (size_t p = 0; p < t->n_paths; p++)
        for (int k = 0; k < BP_META_ALLREDUCE_CLASSES; k++) {
            const struct bp_meta_allreduce_probe *r = &t->r[k][p];
            size_t bytes = bp_meta_allreduce_class_bytes(k);
            json_object_begin(&w, NULL);
            json_string(&w, "path", r->path);
            json_uint(&w, "bytes", bytes);
            json_string(&w, "result", r->wrong ? "wrong" : verdict(r));
            if (r->status == BP_OK) {
                json_double(&w, "seconds", r->seconds);
                json_double(&w, "bus_bytes_per_s", bus_bw(n_dev, bytes, r->seconds));
                json_double(&w, "max_abs_err", r->max_abs_err);
            } else {
                json_string(&w, "status", bp_status_name(r->status));
            }
            json_object_end(&w);
        }
    json_array_end(&w);
    json_bool(&w, "ok", ok);
    json_object_end(&w);
    json_finish(&w);
}

int comm_report(const struct comm_table *t, bool json, bool print)
{
    if (t->n_paths == 0) {
        if (!print) return CLI_EXIT_OK;
        if (json) print_json(t, true);
        else printf("%s has one %s: there is nothing to all-reduce.\n", t->name, t->members);
        return CLI_EXIT_OK;
    }
    char wrong[256] = "";
    size_t used = 0;
    bool ok = true;
    for (size_t p = 0; p < t->n_paths; p++) {
        bool any = false;
        for (int k = 0; k < BP_META_ALLREDUCE_CLASSES; k++) any |= comm_probe_bad(&t->r[k][p]);
        if (any && used < sizeof wrong)
            used += (size_t)snprintf(wrong + used, sizeof wrong - used, "%s%s", used ? ", " : "", t->r[0][p].path);
        ok &= !any;
    }
    if (!print) return ok ? CLI_EXIT_OK : CLI_EXIT_FAIL;
    if (json) print_json(t, ok);
    else print_text(t);
    if (!ok)
        cli_error("all-reduce path %s of %s gave a wrong sum or failed; %s, but report it to the plugin's vendor.",
                  wrong, t->name, t->on_wrong);
    return ok ? CLI_EXIT_OK : CLI_EXIT_FAIL;
}

int check_comm(const char *name, bool json)
{
    if (!strncmp(name, "dist:", 5)) return check_comm_dist(name, json);
    struct bp_device *dev = cli_find_device(name);
    if (!dev) return CLI_EXIT_FAIL;
    bp_meta_allreduce_probe_fn probe =
        (bp_meta_allreduce_probe_fn)bp_device_proc_address(dev, BP_PROC_META_ALLREDUCE_PROBE);
    struct bp_device *subs[BP_META_MAX_DEVICES];
    size_t n_dev = 0;
    if (!probe || bp_meta_device_sub_devices(dev, subs, BP_META_MAX_DEVICES, &n_dev) != BP_OK) {
        cli_error("'%s' is not a meta device, so it has no all-reduce to check; name one such as "
                  "meta:cpu*2, or dist:cpu under mpirun -np N.", name);
        return CLI_EXIT_USAGE;
    }
    struct bp_backend *be = NULL;
    if (bp_backend_init(dev, NULL, &be) != BP_OK) {
        cli_error("%s", bp_last_error());
        return CLI_EXIT_FAIL;
    }
    static struct comm_table t;
    memset(&t, 0, sizeof t);
    t.name = bp_device_name(dev);
    t.description = bp_device_description(dev);
    t.members = "sub-devices";
    t.on_wrong = "BACKPLANE_META_ALLREDUCE=auto never chooses it";
    t.n_members = n_dev;
    for (int k = 0; k < BP_META_ALLREDUCE_CLASSES; k++) {
        size_t n = 0;
        if (probe(be, bp_meta_allreduce_class_bytes(k), COMM_ROUNDS, t.r[k], COMM_MAX_PATHS, &n) != BP_OK) {
            cli_error("measuring the all-reduce of %s failed: %s", name, bp_last_error());
            bp_backend_free(be);
            return CLI_EXIT_FAIL;
        }
        t.n_paths = n < COMM_MAX_PATHS ? n : COMM_MAX_PATHS;
    }
    bp_backend_free(be);
    return comm_report(&t, json, true);
}

bool comm_choices(struct bp_device *dev, char choice[][BP_META_ALLREDUCE_PATH_LEN])
{
    bp_meta_allreduce_choice_fn fn =
        (bp_meta_allreduce_choice_fn)bp_device_proc_address(dev, BP_PROC_META_ALLREDUCE_CHOICE);
    struct bp_backend *be = NULL;
    if (!fn || bp_device_type(dev) != BP_DEVICE_TYPE_META || bp_backend_init(dev, NULL, &be) != BP_OK) return false;
    bool ok = true;
    for (int k = 0; k < BP_META_ALLREDUCE_CLASSES && ok; k++)
        ok = fn(be, bp_meta_allreduce_class_bytes(k), 1, choice[k], BP_META_ALLREDUCE_PATH_LEN) == BP_OK;
    bp_backend_free(be);
    return ok;
}
