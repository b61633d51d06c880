/*
 * test_dist.c — `backplane run --device dist:cpu` under mpirun: the ranks
 * together give the tokens and logits of the single-process CPU run (the
 * independent reference), each holding about 1/N of the weights; a dead, a
 * hung or a misconfigured rank ends every rank with one sentence; and
 * without mpirun the user is told to use it.
 */
#include <check.h>
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli_util.h"
#include "dist.h"
#include "suite_main.h"

/* Root needs --allow-run-as-root; more ranks than cores --oversubscribe. */
#define MPIRUN BP_TEST_MPIEXEC " --allow-run-as-root --oversubscribe"

static char dir[64];

static void make_dir(void)
{
    ck_assert_ptr_nonnull(cli_tempdir("dist", dir, sizeof dir));
}

static void remove_dir(void)
{
    ck_assert_int_eq(cli_tempdir_remove(dir), 0);
}

static int count(const char *hay, const char *needle)
{
    int n = 0;
    for (const char *p = hay; (p = strstr(p, needle)); p += strlen(needle)) n++;
    return n;
}

static float *read_floats(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    ck_assert_msg(f != NULL, "no %s", path);
    fseek(f, 0, SEEK_END);
    long bytes = ftell(f);
    fseek(f, 0, SEEK_SET);
    float *v = malloc((size_t)bytes + 1);
    ck_assert_ptr_nonnull(v);
    ck_assert_int_eq(fread(v, 1, (size_t)bytes, f), (size_t)bytes);
    fclose(f);
    *n = (size_t)bytes / sizeof(float);
    return v;
}

/* Largest |a - b| over two logit dumps of equal length. */
static double dump_diff(const char *a, const char *b)
{
    size_t na, nb;
    float *x = read_floats(a, &na), *y = read_floats(b, &nb);
    ck_assert_uint_eq(na, nb);
    ck_assert_uint_gt(na, 0);
    double m = 0;
    for (size_t i = 0; i < na; i++) {
        double d = fabs((double)x[i] - (double)y[i]);
        m = isnan(d) || d > m ? (isnan(d) ? INFINITY : d) : m;
    }
    free(x);
    free(y);
    return m;
}

static unsigned long long json_u64(const char *json, const char *key)
{
    const char *p = strstr(json, key);
    ck_assert_msg(p != NULL, "no %s in: %s", key, json);
    return strtoull(p + strlen(key) + 2, NULL, 10);
}

/* How a dist run is made: environment, device and the reduction path it
 * must report. */
struct dist_run {
    const char *env, *device, *comm;
};
static const struct dist_run dist_cpu = { "", "dist:cpu", "host" };

/* The single-process run of model args `model` on ref (the reference)
 * against mpirun `np` ranks of run->device with mpirun options `mpi`: same
 * tokens, logits within tol, the expected reduction path, and each rank
 * holding about its share of the weights. */
static void check_run(const struct dist_run *run_as, const char *ref, const char *model, int np,
                      const char *mpi, double tol)
{
    make_dir();
    char cmd[2048], a[32768], b[32768], ta[1024], tb[1024], pa[128], pb[128];
    snprintf(pa, sizeof pa, "%s/cpu.bin", dir);
    snprintf(pb, sizeof pb, "%s/dist.bin", dir);
    const char *common = "--prompt-len 6 --n-gen 6 --threads 1 --json";
    snprintf(cmd, sizeof cmd, CLI " run %s %s --device %s --dump-logits %s", model, common, ref, pa);
    ck_assert_msg(cli_run(cmd, CLI_OUT_AND_ERR, a, sizeof a) == 0, "%s", a);
    snprintf(cmd, sizeof cmd, "%s " MPIRUN " %s -np %d " CLI " run %s %s --device %s --dump-logits %s",
             run_as->env, mpi, np, model, common, run_as->device, pb);
    ck_assert_msg(cli_run(cmd, CLI_OUT_AND_ERR, b, sizeof b) == 0, "%s: %s", cmd, b);
    /* One report: rank 0's. */
    ck_assert_int_eq(count(b, "\"tokens\""), 1);
    ck_assert_str_eq(cli_json_tokens(a, ta, sizeof ta), cli_json_tokens(b, tb, sizeof tb));
    double d = dump_diff(pa, pb);
    ck_assert_msg(d <= tol, "np=%d: logits differ by %g (tolerance %g)", np, d, tol);
    char comm[64];
    snprintf(comm, sizeof comm, "\"comm\": \"%s\"", run_as->comm);
    ck_assert_msg(strstr(b, comm) != NULL, "expected %s in: %s", comm, b);
    /* Each rank holds its slices of the split weights and the mirrored
     * rest (embedding, norms): at most its share plus 15% of the model. */
    const unsigned long long total = json_u64(a, "\"weight_bytes\"");
    const char *arr = strstr(b, "\"weight_bytes_per_rank\"");
    ck_assert_ptr_nonnull(arr);
    arr = strchr(arr, '[') + 1;
    unsigned long long sum = 0;
    for (int r = 0; r < np; r++) {
        char *end;
        unsigned long long v = strtoull(arr, &end, 10);
        ck_assert_msg(v > 0 && (double)v <= ((double)1 / np + 0.15) * (double)total,
                      "rank %d holds %llu of %llu weight bytes", r, v, total);
        sum += v;
        arr = end + 1;
    }
    ck_assert_uint_ge(sum, total);
    remove_dir();
}

static void check_against(const char *ref, const char *model, int np, const char *mpi, double tol)
{
    check_run(&dist_cpu, ref, model, np, mpi, tol);
}

static void check_against_cpu(const char *model, int np, const char *mpi, double tol)
{
    check_against("cpu", model, np, mpi, tol);
}

/* One file of each architecture (tests/data/arch: random weights, F32)
 * over two ranks: rank r plays sub-device r of the split table, so every
 * architecture's own tensors (biases, Q/K norms, post norms, fused gate|up,
 * RoPE factors) are cut or mirrored as on meta. Same tokens as the cpu
 * run, logits within the F32 tolerance of the llama.cpp tests. */
static const char *const family_files[] = {
    "llama-bias-freqs", "qwen2-outbias", "qwen3", "gemma2", "gemma3-softcap", "phi3-long", "mistral3",
};

START_TEST(test_dist_each_architecture_matches_the_cpu_run)
{
    make_dir();
    char model[256], cmd[2048], a[32768], b[32768], ta[1024], tb[1024], pa[128], pb[128];
    snprintf(model, sizeof model, "--model " BP_TEST_SOURCE_DIR "/tests/data/arch/%s.gguf --n-ctx 256",
             family_files[_i]);
    snprintf(pa, sizeof pa, "%s/cpu.bin", dir);
    snprintf(pb, sizeof pb, "%s/dist.bin", dir);
    const char *common = "--prompt-len 8 --n-gen 8 --threads 1 --json";
    snprintf(cmd, sizeof cmd, CLI " run %s %s --device cpu --dump-logits %s", model, common, pa);
    ck_assert_msg(cli_run(cmd, CLI_OUT_AND_ERR, a, sizeof a) == 0, "%s", a);
    snprintf(cmd, sizeof cmd, MPIRUN " -np 2 " CLI " run %s %s --device dist:cpu --dump-logits %s", model, common,
             pb);
    ck_assert_msg(cli_run(cmd, CLI_OUT_AND_ERR, b, sizeof b) == 0, "%s: %s", cmd, b);
    ck_assert_str_eq(cli_json_tokens(a, ta, sizeof ta), cli_json_tokens(b, tb, sizeof tb));
    const double d = dump_diff(pa, pb);
    ck_assert_msg(d <= 2e-3, "%s: logits differ by %g", family_files[_i], d);
    remove_dir();
}
END_TEST

START_TEST(test_dist_two_ranks_f32_match_the_cpu_run)
{
    check_against_cpu("--model builtin:test --weight-type f32", 2, "", 1e-5);
}
END_TEST

/* builtin:test has 2 KV heads: with 3 ranks one rank holds no KV head and
 * contributes zeros to every attention cut. */
START_TEST(test_dist_three_ranks_over_two_kv_heads_q8_0)
{
    check_against_cpu("--model builtin:test --weight-type q8_0", 3, "", 1e-3);
}
END_TEST

/* Q4_0 weights see Q8_0 activations, whose rounding moves with the split:
 * a split run differs from one CPU by ~4e-3 in one process too (meta:cpu*3),
 * so the reference here is the single-process split. */
START_TEST(test_dist_three_ranks_q4_0_fused_qkv_match_meta)
{
    check_against("meta:cpu*3", "--model builtin:test --weight-type q4_0 --fused-qkv", 3, "", 1e-3);
}
END_TEST

/* TCP over loopback stands in for a node boundary (no shared memory). */
START_TEST(test_dist_tcp_loopback_matches_the_cpu_run)
{
    check_against_cpu("--model builtin:test --weight-type f32", 2,
                      "--mca btl self,tcp --mca btl_tcp_if_include lo", 1e-5);
}
END_TEST

START_TEST(test_dist_saved_gguf_matches_the_cpu_run)
{
    char path[64];
    ck_assert_ptr_nonnull(cli_tempdir("dist_gguf", path, sizeof path));
    char cmd[1024], out[16384], model[256];
    snprintf(cmd, sizeof cmd, CLI " run --model builtin:test --weight-type q8_0 --n-gen 1 --save %s/m.gguf",
             path);
    ck_assert_msg(cli_run(cmd, CLI_OUT_AND_ERR, out, sizeof out) == 0, "%s", out);
    snprintf(model, sizeof model, "--model %s/m.gguf", path);
    check_against_cpu(model, 2, "", 1e-3);
    ck_assert_int_eq(cli_tempdir_remove(path), 0);
}
END_TEST

/* A device whose plugin offers bp_comm_init_rank on every rank (the test
 * plugin rankcomm: shared memory, id broadcast over MPI) reduces through it;
 * if it fails on one rank, every rank takes the host path. Either way the
 * logits are the CPU run's. */
START_TEST(test_dist_device_communicator_is_used_when_every_rank_has_one)
{
    const struct dist_run rc = { "BACKPLANE_META_ALLREDUCE=comm BACKPLANE_PLUGIN_PATH=" BP_TEST_DIST_PLUGIN_DIR,
                                 "dist:rankcommcpu", "device" };
    check_run(&rc, "cpu", "--model builtin:test --weight-type f32", 3, "", 1e-5);
}
END_TEST

/* Under auto (the default) the ranks measure both paths per size class on
 * first use and agree on one; rank 1's device communicator adds one to
 * every element, so only the host path is right, and the logits are still
 * the CPU run's. */
START_TEST(test_dist_auto_never_takes_a_wrong_device_path)
{
    const struct dist_run rc = { "RANKCOMM_WRONG_RANK=1 BACKPLANE_PLUGIN_PATH=" BP_TEST_DIST_PLUGIN_DIR,
                                 "dist:rankcommcpu", "auto" };
    check_run(&rc, "cpu", "--model builtin:test --weight-type f32", 2, "", 1e-5);
}
END_TEST

/* Pinned to the device path, the same wrong communicator does change the
 * logits: the test above would catch a choice that took it. */
START_TEST(test_dist_pinned_wrong_device_path_changes_the_logits)
{
    make_dir();
    char cmd[2048], out[32768];
    snprintf(cmd, sizeof cmd, CLI " run --model builtin:test --weight-type f32 --prompt-len 6 --n-gen 1 --threads 1 "
             "--device cpu --dump-logits %s/cpu.bin", dir);
    ck_assert_msg(cli_run(cmd, CLI_OUT_AND_ERR, out, sizeof out) == 0, "%s", out);
    snprintf(cmd, sizeof cmd, "RANKCOMM_WRONG_RANK=1 BACKPLANE_META_ALLREDUCE=comm BACKPLANE_PLUGIN_PATH="
             BP_TEST_DIST_PLUGIN_DIR " " MPIRUN " -np 2 " CLI " run --model builtin:test --weight-type f32 "
             "--prompt-len 6 --n-gen 1 --threads 1 --device dist:rankcommcpu --dump-logits %s/dist.bin", dir);
    ck_assert_msg(cli_run(cmd, CLI_OUT_AND_ERR, out, sizeof out) == 0, "%s", out);
    char a[300], b[300];
    snprintf(a, sizeof a, "%s/cpu.bin", dir);
    snprintf(b, sizeof b, "%s/dist.bin", dir);
    ck_assert_msg(dump_diff(a, b) > 1e-2, "a wrong communicator left the logits unchanged");
    remove_dir();
}
END_TEST

START_TEST(test_dist_device_communicator_failing_on_one_rank_means_host_path)
{
    const struct dist_run rc = { "RANKCOMM_FAIL_RANK=1 BACKPLANE_PLUGIN_PATH=" BP_TEST_DIST_PLUGIN_DIR,
                                 "dist:rankcommcpu", "host" };
    check_run(&rc, "cpu", "--model builtin:test --weight-type f32", 2, "", 1e-5);
}
END_TEST

#ifdef BP_TEST_HAVE_VULKAN
/* Two ranks on one Vulkan device (lavapipe here): its memory is not the
 * CPU's, so the host path stages each partial sum out and back. */
START_TEST(test_dist_vulkan_ranks_stage_through_host_memory)
{
    /* As test_vulkan does: a build with the plugin on a machine with no
     * Vulkan driver has nothing to run this on (it says so). */
    char out[16384];
    cli_run(CLI " devices", CLI_OUT_AND_ERR, out, sizeof out);
    if (!strstr(out, "vulkan0")) {
        fprintf(stderr, "test_dist: no vulkan0 here; the staged host path is not tested.\n");
        return;
    }
    const struct dist_run vk = { "", "dist:vulkan0,vulkan0", "host" };
    check_run(&vk, "vulkan0", "--model builtin:test --weight-type f32", 2, "", 1e-5);
}
END_TEST
#endif

/* Processes whose command line mentions marker (this test's directory). */
static int processes_with(const char *marker)
{
    DIR *d = opendir("/proc");
    ck_assert_ptr_nonnull(d);
    int n = 0;
    for (struct dirent *e; (e = readdir(d));) {
        if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
        char p[300], buf[4096];
        snprintf(p, sizeof p, "/proc/%s/cmdline", e->d_name);
        FILE *f = fopen(p, "rb");
        if (!f) continue;
        size_t k = fread(buf, 1, sizeof buf - 1, f);
        fclose(f);
        for (size_t i = 0; i < k; i++) if (!buf[i]) buf[i] = ' ';
        buf[k] = '\0';
        if (strstr(buf, marker) && !strstr(buf, "sh -c")) n++;
    }
    closedir(d);
    return n;
}

START_TEST(test_dist_rank_killed_mid_decode_ends_every_rank)
{
    make_dir();
    char cmd[2048], out[32768];
    snprintf(cmd, sizeof cmd, "BACKPLANE_DIST_TEST_DIE_AT=3 BACKPLANE_DIST_TIMEOUT=10 " MPIRUN
             " -np 2 " CLI " run --model builtin:test --device dist:cpu --n-gen 8 --threads 1 "
             "--dump-logits %s/x.bin",
             dir);
    ck_assert_int_ne(cli_run(cmd, CLI_OUT_AND_ERR, out, sizeof out), 0);
    ck_assert_msg(strstr(out, "rank 1: BACKPLANE_DIST_TEST_DIE_AT: dying at step 3") != NULL, "%s", out);
    /* No output was printed as if the run had finished. */
    ck_assert_msg(strstr(out, "output:") == NULL, "%s", out);
    ck_assert_int_eq(processes_with(dir), 0);
    remove_dir();
}
END_TEST

START_TEST(test_dist_hung_rank_is_named_by_the_watchdog)
{
    make_dir();
    char cmd[2048], out[32768];
    snprintf(cmd, sizeof cmd, "BACKPLANE_DIST_TEST_DIE_AT=2:1:hang BACKPLANE_DIST_TIMEOUT=2 " MPIRUN
             " -np 2 " CLI " run --model builtin:test --device dist:cpu --n-gen 8 --threads 1 "
             "--dump-logits %s/x.bin", dir);
    ck_assert_int_ne(cli_run(cmd, CLI_OUT_AND_ERR, out, sizeof out), 0);
    ck_assert_msg(strstr(out, "of step 2 did not complete within 2 s") != NULL, "%s", out);
    ck_assert_msg(strstr(out, "rank 0: the all-reduce") != NULL, "%s", out);
    ck_assert_int_eq(processes_with(dir), 0);
    remove_dir();
}
END_TEST

START_TEST(test_dist_mismatched_models_stop_every_rank_with_one_sentence)
{
    char cmd[2048], out[32768];
    snprintf(cmd, sizeof cmd, MPIRUN " -np 1 " CLI " run --model builtin:test --device dist:cpu --weight-seed 1 : "
             "-np 1 " CLI " run --model builtin:test --device dist:cpu --weight-seed 2");
    ck_assert_int_ne(cli_run(cmd, CLI_OUT_AND_ERR, out, sizeof out), 0);
    ck_assert_int_eq(count(out, "backplane: "), 1);
    ck_assert_msg(strstr(out, "backplane: rank 1: its model (builtin:test") != NULL, "%s", out);
    ck_assert_ptr_nonnull(strstr(out, "differs from rank 0's"));
    ck_assert_ptr_null(strstr(out, "output:"));
}
END_TEST

START_TEST(test_dist_bad_model_path_on_one_rank_stops_all)
{
    char cmd[2048], out[32768];
    snprintf(cmd, sizeof cmd, MPIRUN " -np 2 " CLI " run --model builtin:test --device dist:cpu : "
             "-np 1 " CLI " run --model /nonexistent/m.gguf --device dist:cpu");
    ck_assert_int_ne(cli_run(cmd, CLI_OUT_AND_ERR, out, sizeof out), 0);
    ck_assert_int_eq(count(out, "backplane: "), 1);
    ck_assert_msg(strstr(out, "backplane: rank 2: /nonexistent/m.gguf") != NULL, "%s", out);
}
END_TEST

START_TEST(test_dist_unwritable_dump_on_rank_0_stops_all)
{
    char out[32768];
    ck_assert_int_ne(cli_run(MPIRUN " -np 2 " CLI " run --model builtin:test --device dist:cpu --dump-logits "
                             "/nonexistent/x.bin", CLI_OUT_AND_ERR, out, sizeof out), 0);
    ck_assert_int_eq(count(out, "backplane: "), 1);
    ck_assert_msg(strstr(out, "backplane: rank 0: cannot write '/nonexistent/x.bin'") != NULL, "%s", out);
}
END_TEST

START_TEST(test_dist_without_mpirun_says_to_use_it)
{
    char out[8192];
    ck_assert_int_eq(cli_run(CLI " run --model builtin:test --device dist:cpu", CLI_OUT_AND_ERR, out, sizeof out), 1);
    ck_assert_int_eq(count(out, "\n"), 1);
    ck_assert_msg(strstr(out, "run under mpirun -np N") != NULL, "%s", out);
}
END_TEST

START_TEST(test_dist_without_the_mpi_plugin_names_the_packages)
{
    char out[8192];
    ck_assert_int_eq(cli_run("BACKPLANE_BACKENDS=cpu,meta " CLI " run --model builtin:test --device dist:cpu",
                             CLI_OUT_AND_ERR, out, sizeof out), 1);
    ck_assert_int_eq(count(out, "\n"), 1);
    ck_assert_msg(strstr(out, "needs the mpi plugin") && strstr(out, "openmpi-bin libopenmpi-dev"), "%s", out);
}
END_TEST

START_TEST(test_dist_nested_meta_is_refused_in_one_sentence)
{
    char out[8192];
    ck_assert_int_eq(cli_run(MPIRUN " -np 2 " CLI " run --model builtin:test --device dist:meta:cpu*2",
                             CLI_OUT_AND_ERR, out, sizeof out), 1);
    ck_assert_int_eq(count(out, "backplane: "), 1);
    ck_assert_msg(strstr(out, "nests tensor parallelism") != NULL, "%s", out);
}
END_TEST

START_TEST(test_dist_text_report_comes_from_rank_0_alone)
{
    char out[32768];
    ck_assert_int_eq(cli_run(MPIRUN " -np 2 " CLI " run --model builtin:test --device dist:cpu --threads 1 "
                             "--n-gen 3", CLI_OUT_AND_ERR, out, sizeof out), 0);
    ck_assert_int_eq(count(out, "output:"), 1);
    ck_assert_msg(strstr(out, "ranks:   2, reducing through host") != NULL, "%s", out);
}
END_TEST

START_TEST(test_dist_ranks_of_a_node_share_its_cpus)
{
    ck_assert_int_eq(bp_run_dist_cpu_threads(1, 16, NULL), 0); /* a lone rank: the default */
    ck_assert_int_eq(bp_run_dist_cpu_threads(2, 16, NULL), 8);
    ck_assert_int_eq(bp_run_dist_cpu_threads(3, 16, NULL), 5);
    ck_assert_int_eq(bp_run_dist_cpu_threads(2, 2, NULL), 1);
    ck_assert_int_eq(bp_run_dist_cpu_threads(4, 2, NULL), 1); /* never 0 threads */
    ck_assert_int_eq(bp_run_dist_cpu_threads(2, 16, "3"), 0); /* the user's count stands */
    ck_assert_int_eq(bp_run_dist_cpu_threads(2, 16, ""), 8);
}
END_TEST

START_TEST(test_dist_local_name_counts_gpus_up_by_node_rank)
{
    char b[32];
    ck_assert(bp_run_dist_local_name("cpu", 3, b, sizeof b));
    ck_assert_str_eq(b, "cpu");
    ck_assert(bp_run_dist_local_name("cuda0", 1, b, sizeof b));
    ck_assert_str_eq(b, "cuda1");
    ck_assert(bp_run_dist_local_name("vulkan2", 3, b, sizeof b));
    ck_assert_str_eq(b, "vulkan5");
    ck_assert(bp_run_dist_local_name("fakegpu", 2, b, sizeof b));
    ck_assert_str_eq(b, "fakegpu");
    ck_assert(!bp_run_dist_local_name("cuda9", 1, b, 5));
    ck_assert(bp_run_dist_local_name("vulkan0,cpu", 1, b, sizeof b));
    ck_assert_str_eq(b, "cpu");
    ck_assert(bp_run_dist_local_name("vulkan0,cpu", 0, b, sizeof b));
    ck_assert_str_eq(b, "vulkan0");
    ck_assert(!bp_run_dist_local_name("vulkan0,cpu", 2, b, sizeof b));
    ck_assert(!bp_run_dist_local_name("vulkan0,,cpu", 1, b, sizeof b));
}
END_TEST

/* The n values after key in json, each the first number after the key's
 * next occurrence. */
static void json_u64s(const char *json, const char *key, unsigned long long *v, int n)
{
    for (int i = 0; i < n; i++) {
        json = strstr(json, key);
        ck_assert_msg(json != NULL, "fewer than %d %s", n, key);
        json += strlen(key);
        v[i] = strtoull(json + 2, NULL, 10);
    }
}

/* --plan on a dist: job: every rank plans, rank 0 prints one plan with a
 * row per rank, and each rank's planned weights are what that rank then
 * holds in the real run (its own count, gathered), within 2%. */
START_TEST(test_dist_plan_has_a_row_per_rank_matching_the_run)
{
    char cmd[2048], plan[32768], real[32768];
    const char *args = "--model builtin:test --weight-type q8_0 --prompt-len 6 --n-gen 6 --threads 1 --json";
    snprintf(cmd, sizeof cmd, MPIRUN " -np 2 " CLI " run %s --device dist:cpu --plan", args);
    ck_assert_msg(cli_run(cmd, CLI_OUT_AND_ERR, plan, sizeof plan) == 0, "%s: %s", cmd, plan);
    ck_assert_int_eq(count(plan, "\"sub_devices\""), 1);
    ck_assert_msg(strstr(plan, "\"fits\": true"), "%s", plan);
    const char *rows = strstr(plan, "\"sub_devices\"");
    unsigned long long planned[2], held[2];
    json_u64s(rows, "\"weights\"", planned, 2);
    snprintf(cmd, sizeof cmd, MPIRUN " -np 2 " CLI " run %s --device dist:cpu", args);
    ck_assert_msg(cli_run(cmd, CLI_OUT_AND_ERR, real, sizeof real) == 0, "%s: %s", cmd, real);
    const char *arr = strstr(real, "\"weight_bytes_per_rank\"");
    ck_assert_ptr_nonnull(arr);
    arr = strchr(arr, '[') + 1;
    for (int r = 0; r < 2; r++) {
        char *end;
        held[r] = strtoull(arr, &end, 10);
        arr = end + 1;
        ck_assert_msg(held[r] > 0 && planned[r] >= 0.98 * (double)held[r] && planned[r] <= 1.02 * (double)held[r],
                      "rank %d: planned %llu weight bytes, holds %llu", r, planned[r], held[r]);
    }
}
END_TEST

/* check --comm dist:X: every rank probes, rank 0 alone prints the table of
 * check --comm for meta devices; the ranks' sums are checked exactly in
 * the CLI, so these tests see the verdicts (and one that must be WRONG). */
static int check_comm(const char *env, int np, const char *device, const char *flags, char *out, size_t cap)
{
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "%s BACKPLANE_DIST_TIMEOUT=60 " MPIRUN " -np %d " CLI " check --comm %s %s", env,
             np, device, flags);
    return cli_run(cmd, CLI_OUT_AND_ERR, out, cap);
}

START_TEST(test_dist_check_comm_cpu_host_path_is_right_at_every_size)
{
    char out[16384];
    ck_assert_int_eq(check_comm("", 2, "dist:cpu", "", out, sizeof out), 0);
    ck_assert_msg(count(out, "all-reduce paths of dist:cpu") == 1, "%s", out);
    ck_assert_msg(strstr(out, "2 ranks") != NULL, "%s", out);
    /* One path (the slot communicator over MPI) x four sizes, all ok. */
    ck_assert_int_eq(count(out, "\nhost "), 4);
    ck_assert_int_eq(count(out, "  ok\n"), 4);
    ck_assert_msg(strstr(out, "16 MiB") != NULL && strstr(out, "4 KiB") != NULL, "%s", out);
    ck_assert_msg(strstr(out, "fastest right path: 4 KiB host, 64 KiB host, 1 MiB host, 16 MiB host"), "%s", out);
}
END_TEST

START_TEST(test_dist_check_comm_three_ranks_device_and_host_paths_json)
{
    char out[16384];
    ck_assert_int_eq(check_comm("BACKPLANE_PLUGIN_PATH=" BP_TEST_DIST_PLUGIN_DIR, 3, "dist:rankcommcpu", "--json",
                                out, sizeof out), 0);
    ck_assert_int_eq(count(out, "\"device\": \"dist:rankcommcpu\""), 1);
    ck_assert_int_eq(json_u64(out, "sub_devices"), 3);
    ck_assert_int_eq(count(out, "\"path\": \"device\""), 4);
    ck_assert_int_eq(count(out, "\"path\": \"host\""), 4);
    ck_assert_int_eq(count(out, "\"result\": \"ok\""), 8);
    ck_assert_int_eq(count(out, "\"max_abs_err\": 0"), 8);
    ck_assert_msg(strstr(out, "\"ok\": true") != NULL, "%s", out);
}
END_TEST

/* Rank 1 of the device communicator adds one to its contribution: every
 * rank's sum is off by one, the device path is WRONG at every size, the
 * host path stays ok, and every rank exits 1. */
START_TEST(test_dist_check_comm_flags_a_wrong_contribution)
{
    char out[16384];
    ck_assert_int_eq(check_comm("RANKCOMM_WRONG_RANK=1 BACKPLANE_PLUGIN_PATH=" BP_TEST_DIST_PLUGIN_DIR, 2,
                                "dist:rankcommcpu", "", out, sizeof out), 1);
    ck_assert_int_eq(count(out, "WRONG (off by up to 1)"), 4);
    ck_assert_int_eq(count(out, "  ok\n"), 4);
    ck_assert_msg(count(out, "all-reduce path device of dist:rankcommcpu gave a wrong sum") == 1, "%s", out);
    ck_assert_msg(strstr(out, "fastest right path: 4 KiB host, 64 KiB host, 1 MiB host, 16 MiB host"), "%s", out);
}
END_TEST

START_TEST(test_dist_check_comm_rank_dying_ends_the_job_with_a_sentence)
{
    char out[16384];
    ck_assert_int_ne(check_comm("BACKPLANE_DIST_TEST_DIE_AT=2", 2, "dist:cpu", "", out, sizeof out), 0);
    ck_assert_msg(strstr(out, "rank 1: BACKPLANE_DIST_TEST_DIE_AT: dying at step 2") != NULL, "%s", out);
    ck_assert_msg(strstr(out, "fastest right path") == NULL, "%s", out);
}
END_TEST

START_TEST(test_dist_check_comm_without_mpirun_says_to_use_it)
{
    char out[8192];
    ck_assert_int_eq(cli_run(CLI " check --comm dist:cpu", CLI_OUT_AND_ERR, out, sizeof out), 2);
    ck_assert_msg(strstr(out, "run under mpirun -np N") != NULL, "%s", out);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("dist");
    TCase *eq = tcase_create("equivalence");
    tcase_set_timeout(eq, 300);
    tcase_add_test(eq, test_dist_two_ranks_f32_match_the_cpu_run);
    tcase_add_loop_test(eq, test_dist_each_architecture_matches_the_cpu_run, 0,
                        (int)(sizeof family_files / sizeof family_files[0]));
    tcase_add_test(eq, test_dist_three_ranks_over_two_kv_heads_q8_0);
    tcase_add_test(eq, test_dist_three_ranks_q4_0_fused_qkv_match_meta);
    tcase_add_test(eq, test_dist_tcp_loopback_matches_the_cpu_run);
    tcase_add_test(eq, test_dist_saved_gguf_matches_the_cpu_run);
    tcase_add_test(eq, test_dist_text_report_comes_from_rank_0_alone);
    tcase_add_test(eq, test_dist_plan_has_a_row_per_rank_matching_the_run);
    tcase_add_test(eq, test_dist_device_communicator_is_used_when_every_rank_has_one);
    tcase_add_test(eq, test_dist_device_communicator_failing_on_one_rank_means_host_path);
    tcase_add_test(eq, test_dist_auto_never_takes_a_wrong_device_path);
    tcase_add_test(eq, test_dist_pinned_wrong_device_path_changes_the_logits);
    tcase_add_test(eq, test_dist_check_comm_cpu_host_path_is_right_at_every_size);
    tcase_add_test(eq, test_dist_check_comm_three_ranks_device_and_host_paths_json);
#ifdef BP_TEST_HAVE_VULKAN
    tcase_add_test(eq, test_dist_vulkan_ranks_stage_through_host_memory);
#endif
    suite_add_tcase(s, eq);
    TCase *f = tcase_create("faults");
    tcase_set_timeout(f, 300);
    tcase_add_test(f, test_dist_rank_killed_mid_decode_ends_every_rank);
    tcase_add_test(f, test_dist_hung_rank_is_named_by_the_watchdog);
    tcase_add_test(f, test_dist_mismatched_models_stop_every_rank_with_one_sentence);
    tcase_add_test(f, test_dist_bad_model_path_on_one_rank_stops_all);
    tcase_add_test(f, test_dist_without_mpirun_says_to_use_it);
    tcase_add_test(f, test_dist_unwritable_dump_on_rank_0_stops_all);
    tcase_add_test(f, test_dist_nested_meta_is_refused_in_one_sentence);
    tcase_add_test(f, test_dist_without_the_mpi_plugin_names_the_packages);
    tcase_add_test(f, test_dist_check_comm_flags_a_wrong_contribution);
    tcase_add_test(f, test_dist_check_comm_rank_dying_ends_the_job_with_a_sentence);
    tcase_add_test(f, test_dist_check_comm_without_mpirun_says_to_use_it);
    suite_add_tcase(s, f);
    TCase *u = tcase_create("unit");
    tcase_add_test(u, test_dist_local_name_counts_gpus_up_by_node_rank);
    tcase_add_test(u, test_dist_ranks_of_a_node_share_its_cpus);
    suite_add_tcase(s, u);
    return s;
}

int main(void)
{
    return run_suite(suite());
}
