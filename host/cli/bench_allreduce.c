/* bench_allreduce.c — `mpirun -np N backplane bench allreduce`: the
 * all-reduce that closes a dist: device's cuts (the slot communicator of
 * the mpi plugin on a tensor of --device, default cpu) against plain
 * MPI_Allreduce on the same buffer (the plugin's raw reference), at 1 KB,
 * 16 KB, 1 MB and 16 MB, alternating within each round; rank 0 reports the
 * median latency, bus bandwidth and the median per-round ratio. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <backplane/bp_dist.h>

#include "../run/dist.h"
#include "bench.h"
#include "cli.h"
#include "json.h"

struct ar_procs {
    bp_dist_init_fn init;
    bp_dist_devices_fn devices;
    bp_dist_raw_allreduce_f32_fn raw;
    bp_comm_init_fn comm_init;
    bp_comm_allreduce_tensor_fn comm_allreduce;
    bp_comm_free_fn comm_free;
};

static bool procs(struct ar_procs *p)
{
    struct bp_registry *r = bp_registry_by_name(BP_DIST_REGISTRY);
    if (!r || !r->iface->get_proc_address) return false;
    p->init = (bp_dist_init_fn)r->iface->get_proc_address(r, BP_PROC_DIST_INIT);
    p->devices = (bp_dist_devices_fn)r->iface->get_proc_address(r, BP_PROC_DIST_DEVICES);
    p->raw = (bp_dist_raw_allreduce_f32_fn)r->iface->get_proc_address(r, BP_PROC_DIST_RAW_ALLREDUCE_F32);
    p->comm_init = (bp_comm_init_fn)r->iface->get_proc_address(r, BP_PROC_COMM_INIT);
    p->comm_allreduce = (bp_comm_allreduce_tensor_fn)r->iface->get_proc_address(r, BP_PROC_COMM_ALLREDUCE_TENSOR);
    p->comm_free = (bp_comm_free_fn)r->iface->get_proc_address(r, BP_PROC_COMM_FREE);
    return p->init && p->devices && p->raw && p->comm_init && p->comm_allreduce && p->comm_free;
}

static const size_t sizes[] = { 1 << 10, 16 << 10, 1 << 20, 16 << 20 };
#define N_SIZES (sizeof sizes / sizeof sizes[0])

struct ar_result {
    double t_dist, t_raw, ratio_med, ratio_lo, ratio_hi;
};

int bench_allreduce(const struct bench_opts *o)
{
    char err[1024];
    struct bp_run_dist *d = NULL;
    if (bp_run_dist_open(&d, err, sizeof err) != BP_OK) {
        cli_error("%s", err);
        return CLI_EXIT_FAIL;
    }
    const struct bp_dist_info *info = bp_run_dist_info(d);
    const int32_t n = info->nranks, rank = info->rank;
    struct ar_procs p = {0};
    struct bp_dist_group *g = NULL;
    struct bp_device *local = bp_device_by_name(o->device);
    struct bp_device *slots[16];
    struct bp_backend *be[16] = {0};
    struct bp_context *ctx = NULL;
    struct bp_buffer *buf = NULL;
    void *comm = NULL;
    int rc = CLI_EXIT_FAIL;
    if (!procs(&p) || p.init(&g) != BP_OK) { cli_error("the mpi plugin lacks the bench's procs."); goto out; }
    if (!local) { cli_error("%s", bp_last_error()); goto out; }
    if (p.devices(g, local, NULL, slots) != BP_OK) { cli_error("the mpi plugin made no slot devices."); goto out; }
    for (int32_t r = 0; r < n; r++)
        if (bp_backend_init(slots[r], NULL, &be[r]) != BP_OK) { cli_error("%s", bp_last_error()); goto out; }
    if (p.comm_init(be, (size_t)n, &comm) != BP_OK) { cli_error("the slot communicator did not start."); goto out; }
    const size_t max_n = sizes[N_SIZES - 1] / sizeof(float);
    struct bp_tensor *t[N_SIZES];
    if (bp_context_new(N_SIZES, &ctx) != BP_OK) goto out;
    for (size_t s = 0; s < N_SIZES; s++) t[s] = bp_tensor_new_1d(ctx, BP_TYPE_F32, (int64_t)(sizes[s] / sizeof(float)));
    if (bp_context_alloc_tensors(ctx, bp_device_buffer_type(local), NULL, &buf) != BP_OK) {
        cli_error("%s", bp_last_error());
        goto out;
    }
    /* Zeros stay zeros however often they are summed: no overflow, and the
     * same arithmetic for both paths. */
    bp_buffer_clear(buf, 0);
    float *host = calloc(max_n, sizeof *host);
    if (!host) goto out;
    const int rounds = o->rounds ? o->rounds : 5;
    struct ar_result res[N_SIZES];
    for (size_t s = 0; s < N_SIZES; s++) {
        const size_t count = sizes[s] / sizeof(float);
        const int reps = o->reps ? o->reps : (int)(sizes[s] >= (1u << 20) ? 10 : 200);
        struct bp_tensor *ts[16];
        for (int32_t r = 0; r < n; r++) ts[r] = t[s];
        /* Host-memory devices reduce in place; the raw reference uses the
         * same memory when the CPU can read it, else a host copy. */
        float *raw_buf = bp_device_type(local) == BP_DEVICE_TYPE_CPU ? (float *)t[s]->data : host;
        double td[BENCH_MAX_ROUNDS], tr[BENCH_MAX_ROUNDS], ratio[BENCH_MAX_ROUNDS];
        for (int k = 0; k < rounds; k++) {
            float sync = 0;
            p.raw(g, &sync, 1);
            double a = bench_now();
            for (int i = 0; i < reps; i++) p.comm_allreduce(comm, ts, (size_t)n);
            double b = bench_now();
            p.raw(g, &sync, 1);
            double c = bench_now();
            for (int i = 0; i < reps; i++) p.raw(g, raw_buf, count);
            double e = bench_now();
            td[k] = (b - a) / reps;
            tr[k] = (e - c) / reps;
            ratio[k] = td[k] / tr[k];
        }
        double sorted[BENCH_MAX_ROUNDS];
        memcpy(sorted, ratio, sizeof(double) * (size_t)rounds);
        res[s].ratio_med = bench_median(sorted, rounds);
        res[s].ratio_lo = sorted[0];
        res[s].ratio_hi = sorted[rounds - 1];
        res[s].t_dist = bench_median(td, rounds);
        res[s].t_raw = bench_median(tr, rounds);
    }
    free(host);
    if (rank == 0) {
        /* Bus bandwidth as nccl-tests defines it: 2 (n - 1) / n bytes per
         * byte of the buffer cross some link in a ring all-reduce. */
        const double bus = n > 1 ? 2.0 * (n - 1) / n : 1.0;
        if (o->json) {
            struct json_writer w;
            json_init(&w, stdout);
            json_object_begin(&w, NULL);
            json_int(&w, "ranks", n);
            json_string(&w, "device", o->device);
            json_array_begin(&w, "sizes");
            for (size_t s = 0; s < N_SIZES; s++) {
                json_object_begin(&w, NULL);
                json_uint(&w, "bytes", sizes[s]);
                json_double(&w, "dist_seconds", res[s].t_dist);
                json_double(&w, "mpi_seconds", res[s].t_raw);
                json_double(&w, "dist_bus_bytes_per_s", bus * (double)sizes[s] / res[s].t_dist);
                json_double(&w, "ratio_dist_over_mpi", res[s].ratio_med);
                json_object_end(&w);
            }
            json_array_end(&w);
            json_object_end(&w);
            json_finish(&w);
        } else {
            printf("all-reduce over %d ranks, %s tensors, %d rounds (dist path and MPI_Allreduce "
                   "alternating)\n", (int)n, o->device, rounds);
            printf("%10s %12s %12s %12s %22s\n", "bytes", "dist", "MPI", "dist bus", "dist / MPI");
            for (size_t s = 0; s < N_SIZES; s++) {
                char b[32];
                printf("%10s %10.1f us %10.1f us %8.2f GB/s %8.3fx [%.3f, %.3f]\n",
                       bp_format_bytes(sizes[s], b, sizeof b), res[s].t_dist * 1e6, res[s].t_raw * 1e6,
                       bus * (double)sizes[s] / res[s].t_dist / 1e9, res[s].ratio_med, res[s].ratio_lo,
                       res[s].ratio_hi);
            }
        }
    }
    rc = CLI_EXIT_OK;
out:
    if (comm) p.comm_free(comm);
    for (int32_t r = 0; r < n; r++) bp_backend_free(be[r]);
    bp_buffer_free(buf);
    bp_context_free(ctx);
    bp_run_dist_free(d);
    return rc;
}
