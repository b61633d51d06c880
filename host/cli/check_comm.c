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

#define COMM_ROUNDS 7

struct comm_table {
    size_t n_paths;
    struct bp_meta_allreduce_probe r[BP_META_ALLREDUCE_CLASSES][8];
};

static const char *verdict(const struct bp_meta_allreduce_probe *r)
{
    if (r->status == BP_ERR_UNSUPPORTED) return "declined";
    if (r->status != BP_OK) return "failed";
    return r->wrong ? "WRONG" : "ok";
}

static bool bad(const struct bp_meta_allreduce_probe *r)
{
    return (r->status != BP_OK && r->status != BP_ERR_UNSUPPORTED) || r->wrong;
}

/* Bus bandwidth as nccl-tests defines it: 2 (n - 1) / n bytes per byte of
 * the buffer cross some link in a ring all-reduce. */
static double bus_bw(size_t n_dev, size_t bytes, double seconds)
{
    return seconds > 0 ? 2.0 * (double)(n_dev - 1) / (double)n_dev * (double)bytes / seconds : 0;
}

static void print_text(struct bp_device *dev, size_t n_dev, const struct comm_table *t)
{
    printf("all-reduce paths of %s (%s), %zu sub-devices, F32, median of %d rounds (paths alternating)\n",
           bp_device_name(dev), bp_device_description(dev), n_dev, COMM_ROUNDS);
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

static void print_json(struct bp_device *dev, size_t n_dev, const struct comm_table *t, bool ok)
{
    struct json_writer w;
    json_init(&w, stdout);
    json_object_begin(&w, NULL);
    json_string(&w, "device", bp_device_name(dev));
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

int check_comm(const char *name, bool json)
{
    if (!strncmp(name, "dist:", 5)) {
        /* Its slots span processes: only the rank's own slot holds data,
         * so the probe's every-copy check does not apply (not done yet). */
        cli_error("check --comm measures meta devices in one process; for %s run `mpirun -np N backplane bench "
                  "allreduce --device %s`, which times the ranks' communicator against MPI_Allreduce.",
                  name, name + 5);
        return CLI_EXIT_USAGE;
    }
    struct bp_device *dev = cli_find_device(name);
    if (!dev) return CLI_EXIT_FAIL;
    bp_meta_allreduce_probe_fn probe =
        (bp_meta_allreduce_probe_fn)bp_device_proc_address(dev, BP_PROC_META_ALLREDUCE_PROBE);
    struct bp_device *subs[BP_META_MAX_DEVICES];
    size_t n_dev = 0;
    if (!probe || bp_meta_device_sub_devices(dev, subs, BP_META_MAX_DEVICES, &n_dev) != BP_OK) {
        cli_error("'%s' is not a meta device, so it has no all-reduce to check; name one such as "
                  "meta:cpu*2 (dist: devices: mpirun -np N backplane bench allreduce).", name);
        return CLI_EXIT_USAGE;
    }
    struct bp_backend *be = NULL;
    if (bp_backend_init(dev, NULL, &be) != BP_OK) {
        cli_error("%s", bp_last_error());
        return CLI_EXIT_FAIL;
    }
    static struct comm_table t;
    memset(&t, 0, sizeof t);
    bool ok = true;
    for (int k = 0; k < BP_META_ALLREDUCE_CLASSES; k++) {
        size_t n = 0;
        if (probe(be, bp_meta_allreduce_class_bytes(k), COMM_ROUNDS, t.r[k], 8, &n) != BP_OK) {
            cli_error("measuring the all-reduce of %s failed: %s", name, bp_last_error());
            bp_backend_free(be);
            return CLI_EXIT_FAIL;
        }
        t.n_paths = n < 8 ? n : 8;
    }
    bp_backend_free(be);
    if (t.n_paths == 0) {
        if (json) print_json(dev, n_dev, &t, true);
        else printf("%s has one sub-device: there is nothing to all-reduce.\n", bp_device_name(dev));
        return CLI_EXIT_OK;
    }
    char wrong[256] = "";
    size_t used = 0;
    for (size_t p = 0; p < t.n_paths; p++) {
        bool any = false;
        for (int k = 0; k < BP_META_ALLREDUCE_CLASSES; k++) any |= bad(&t.r[k][p]);
        if (any && used < sizeof wrong)
            used += (size_t)snprintf(wrong + used, sizeof wrong - used, "%s%s", used ? ", " : "", t.r[0][p].path);
        ok &= !any;
    }
    if (json) print_json(dev, n_dev, &t, ok);
    else print_text(dev, n_dev, &t);
    if (!ok)
        cli_error("all-reduce path %s of %s gave a wrong sum or failed; BACKPLANE_META_ALLREDUCE=auto never "
                  "chooses it, but report it to the plugin's vendor.", wrong, bp_device_name(dev));
    return ok ? CLI_EXIT_OK : CLI_EXIT_FAIL;
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
