/*
 * test_cuda_load.c — the CUDA plugin loads through the loader on any
 * machine. Without a driver or GPU it reports zero devices with one
 * sentence saying why, and its collectives decline cleanly. With a GPU,
 * the device cases check names, type and memory (the op equivalence runs
 * in `backplane check --device cuda0`, see scripts/gpu-check.sh).
 */
#include <check.h>
#include <stdio.h>
#include <string.h>

#include <backplane/backplane.h>

#include "device_gate.h"
#include "suite_main.h"

static struct bp_registry *cuda_reg(void)
{
    ck_assert_int_eq(bp_load_plugins(NULL), BP_OK);
    return bp_registry_by_name("cuda");
}

static void *proc(struct bp_registry *reg, const char *name)
{
    return reg->iface->get_proc_address ? reg->iface->get_proc_address(reg, name) : NULL;
}

START_TEST(test_cuda_plugin_loads_without_refusal)
{
    struct bp_registry *reg = cuda_reg();
    ck_assert_msg(reg != NULL, "the cuda plugin was not loaded");
    for (size_t i = 0; i < bp_plugin_failure_count(); i++) {
        const struct bp_plugin_failure *f = bp_plugin_failure_get(i);
        ck_assert_msg(!f->family || strcmp(f->family, "cuda") != 0, "cuda refused: %s", f->reason);
    }
    bp_unload();
}
END_TEST

START_TEST(test_zero_devices_come_with_one_sentence)
{
    struct bp_registry *reg = cuda_reg();
    ck_assert_ptr_nonnull(reg);
    size_t n = reg->iface->get_device_count(reg);
    void *p = proc(reg, BP_PROC_GET_FEATURES);
    ck_assert_ptr_nonnull(p);
    bp_get_features_fn features;
    memcpy(&features, &p, sizeof p);
    const char *why = NULL, *devices = NULL;
    for (const struct bp_feature *f = features(reg); f && f->name; f++) {
        if (strcmp(f->name, "no_devices") == 0) why = f->value;
        if (strcmp(f->name, "devices") == 0) devices = f->value;
    }
    ck_assert_ptr_nonnull(devices);
    char expect[32];
    snprintf(expect, sizeof expect, "%zu", n);
    ck_assert_str_eq(devices, expect);
    if (n == 0) {
        ck_assert_msg(why != NULL, "zero CUDA devices but no sentence saying why");
        ck_assert_int_gt((int)strlen(why), 10);
        ck_assert_int_eq(why[strlen(why) - 1], '.');
        ck_assert_ptr_null(strchr(why, '\n'));
        ck_assert_ptr_null(reg->iface->get_device(reg, 0));
    } else {
        ck_assert_ptr_null(why);
    }
    bp_unload();
}
END_TEST

START_TEST(test_comm_init_declines_without_participants)
{
    struct bp_registry *reg = cuda_reg();
    ck_assert_ptr_nonnull(reg);
    void *pi = proc(reg, BP_PROC_COMM_INIT), *pf = proc(reg, BP_PROC_COMM_FREE);
    ck_assert_ptr_nonnull(pi);
    ck_assert_ptr_nonnull(pf);
    ck_assert_ptr_nonnull(proc(reg, BP_PROC_COMM_ALLREDUCE_TENSOR));
    bp_comm_init_fn init;
    bp_comm_free_fn fr;
    memcpy(&init, &pi, sizeof pi);
    memcpy(&fr, &pf, sizeof pf);
    void *comm = (void *)1;
    ck_assert_int_eq(init(NULL, 0, &comm), BP_ERR_UNSUPPORTED);
    ck_assert_ptr_null(comm);
    ck_assert_int_eq(init(NULL, 0, NULL), BP_ERR_INVALID_ARGUMENT);
    fr(NULL); /* a no-op */
    bp_unload();
}
END_TEST

START_TEST(test_gpu_devices_are_named_typed_and_sized)
{
    struct bp_registry *reg = cuda_reg();
    ck_assert_ptr_nonnull(reg);
    size_t n = reg->iface->get_device_count(reg);
    ck_assert_msg(n > 0, "no CUDA device here (CTest runs this case only where cuda0 exists)");
    for (size_t i = 0; i < n; i++) {
        struct bp_device *d = reg->iface->get_device(reg, i);
        char want[32];
        snprintf(want, sizeof want, "cuda%zu", i);
        ck_assert_str_eq(d->iface->get_name(d), want);
        ck_assert_int_eq(d->iface->get_type(d), BP_DEVICE_TYPE_GPU);
        size_t fr = 0, tot = 0;
        d->iface->get_memory(d, &fr, &tot);
        ck_assert_uint_gt(tot, 0);
        ck_assert_uint_le(fr, tot);
        ck_assert_ptr_nonnull(d->iface->get_host_buffer_type(d));
    }
    bp_unload();
}
END_TEST

int main(void)
{
    const int gate = device_gate_for_tag("cuda", "cuda0");
    if (gate) return gate;
    Suite *s = suite_create("cuda_load");
    TCase *tc = tcase_create("load");
    tcase_add_test(tc, test_cuda_plugin_loads_without_refusal);
    tcase_add_test(tc, test_zero_devices_come_with_one_sentence);
    tcase_add_test(tc, test_comm_init_declines_without_participants);
    suite_add_tcase(s, tc);
    TCase *gpu = tcase_create("cuda0");
    tcase_set_tags(gpu, "cuda0");
    tcase_add_test(gpu, test_gpu_devices_are_named_typed_and_sized);
    suite_add_tcase(s, gpu);
    return run_suite(s);
}
