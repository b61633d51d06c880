/*
 * dist.h — the runner's side of `--device dist:X` (tensor parallelism across
 * the ranks of an MPI job): joining the job through the mpi plugin, the
 * rank's device, the agreements that stop all ranks together, and the
 * gathering of logits. MPI itself stays in the plugin (<backplane/bp_dist.h>).
 */
#ifndef BP_RUN_DIST_H
#define BP_RUN_DIST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <backplane/backplane.h>
#include <backplane/bp_dist.h>

#include "model.h"

#define BP_RUN_DIST_PREFIX "dist:"

struct bp_run_dist;

/* True when name asks for a dist: device. */
bool bp_run_dist_wanted(const char *name);

/* Join the job (collective). No mpi plugin: names the packages to install;
 * not launched by mpirun: says to run under mpirun -np N. One sentence in
 * err on failure; *out is freed with bp_run_dist_free. */
bp_status bp_run_dist_open(struct bp_run_dist **out, char *err, size_t err_cap);
void bp_run_dist_free(struct bp_run_dist *d);
const struct bp_dist_info *bp_run_dist_info(const struct bp_run_dist *d);

/* The device name rank-local device `spec` means on the node-local rank
 * local_rank: in a list (vulkan0,vulkan0) entry local_rank; a GPU name with
 * an index (cuda0, vulkan1) counts up from that index, so the ranks of a
 * node take one GPU each; any other name (cpu) is the same on every rank.
 * False when the list is too short or the name does not fit in cap. */
bool bp_run_dist_local_name(const char *spec, int32_t local_rank, char *buf, size_t cap);

/* The thread count of a rank's CPU device when the run names none: ranks
 * that share a node share its ncpu CPUs, so each takes its share (at least
 * 1) rather than the CPU plugin's default of every online CPU. Oversubscribed,
 * the pool's spinning waits hold off the threads they wait for: 2 ranks x
 * 2 threads on 2 cores decoded 5.7 tokens/s where 2 x 1 decoded 10.8.
 * 0 (the device's default) for a lone rank or when BACKPLANE_CPU_THREADS
 * (env_threads) says what to use. */
int bp_run_dist_cpu_threads(int32_t local_nranks, long ncpu, const char *env_threads);

/* The meta device over the job's slot devices for "dist:SPEC" on this
 * rank; n_threads > 0 is given to the rank's device, else a CPU device
 * shared by several ranks of a node gets its share of the node's CPUs
 * (unless BACKPLANE_CPU_THREADS is set). Not collective. */
bp_status bp_run_dist_device(struct bp_run_dist *d, const char *name, int n_threads,
                             struct bp_device **out, char *err, size_t err_cap);

/* Whether every rank got this far (collective). ok and err are this rank's;
 * returns true when all are ok, else false with err = "rank R: <its
 * sentence>" of the lowest failing rank, the same on every rank. */
bool bp_run_dist_agree(struct bp_run_dist *d, bool ok, char *err, size_t err_cap);

/* The model's fingerprint: for a file its size and a hash of the header and
 * tensor table (everything before the data), for a built-in model a hash
 * of its description and tensor table. */
uint64_t bp_run_dist_model_hash(const struct bp_run_model *m, uint64_t *file_size);

/* Every rank has the same model as rank 0 (collective); else false and a
 * sentence naming the first rank that differs. */
bool bp_run_dist_check_model(struct bp_run_dist *d, const struct bp_run_model *m, char *err,
                             size_t err_cap);

/* Sum v[0..n) over ranks in place: reads of a dist device hold this rank's
 * slices and zeros elsewhere, so the sum is the whole tensor. Collective. */
bp_status bp_run_dist_gather(struct bp_run_dist *d, float *v, size_t n);

/* Copy len bytes at buf on rank root to every rank. Collective. */
bp_status bp_run_dist_bcast(struct bp_run_dist *d, void *buf, size_t len, int32_t root);

/* Weight bytes each rank holds for session s of model m (its slices of the
 * session's weight buffers), gathered: per_rank[0..nranks). Collective. */
struct bp_run_session;
bp_status bp_run_dist_weight_bytes(struct bp_run_dist *d, const struct bp_run_session *s,
                                   const struct bp_run_model *m, uint64_t *per_rank);

/* A memory plan of the dist: device p was made for (its rows p->sub[r] are
 * rank r's shares): each row's free and total memory set to rank r's own
 * device's, gathered, as every slot reports this rank's. Collective. */
struct bp_run_plan;
bp_status bp_run_dist_plan_memory(struct bp_run_dist *d, struct bp_run_plan *p);

/* The group's reduction counters so far (bp_dist_info). */
void bp_run_dist_counters(struct bp_run_dist *d, uint64_t *reductions, uint64_t *bytes);

/* Name the step being computed, for the watchdog's sentence and test hook. */
void bp_run_dist_step(struct bp_run_dist *d, int64_t step);

/* "device" or "host": how the last dist device reduces; NULL before. */
const char *bp_run_dist_comm_path(struct bp_run_dist *d);

#endif /* BP_RUN_DIST_H */
