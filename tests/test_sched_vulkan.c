/*
 * test_sched_vulkan.c — partial offload on a Vulkan device (Mesa's lavapipe
 * in CI): builtin:test with --offload-layers 1 chooses the cpu's tokens;
 * layer 0's weights and caches are on vulkan0 and only there (the device's
 * buffer bytes are layer 0's tensors, counted here from the model), the
 * rest on the cpu. Exit 77 (skipped) without a Vulkan device.
 */
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "sched_run_util.h"
#include "device_gate.h"
#include "suite_main.h"

START_TEST(test_offload_one_layer_to_vulkan_gives_cpu_tokens_with_layer0_there_only)
{
    struct bp_device *vk = bp_device_by_name("vulkan0");
    ck_assert_ptr_nonnull(vk);
    struct bp_run_model *m = sr_model();
    struct bp_run_session *v = sr_session(m, "vulkan0", &(struct bp_run_session_options){ .offload_layers = 1 });
    struct bp_run_session *c = sr_session(m, "cpu", NULL);
    double worst = sr_decode_both(m, v, c);
    ck_assert_msg(worst <= 1e-3, "largest logit difference %g", worst);

    struct bp_device *cpu = bp_device_by_name("cpu");
    size_t layer0 = 0, n0 = 0;
    for (size_t i = 0; i < m->n_weights; i++) {
        const struct bp_tensor *t = bp_run_session_weight(v, m->weights[i].name);
        ck_assert_ptr_nonnull(t);
        bool in0 = !strncmp(m->weights[i].name, "blk.0.", 6);
        ck_assert_msg(t->buffer->buft->device == (in0 ? vk : cpu), "%s is on %s", m->weights[i].name,
                      bp_device_name(t->buffer->buft->device));
        if (in0) {
            layer0 += m->weights[i].size;
            n0++;
        }
    }
    /* Two caches of [head_dim, n_ctx, n_head_kv] f32 for layer 0. */
    const size_t n_ctx = (size_t)bp_run_session_n_ctx(v);
    layer0 += 2 * (size_t)(m->hp.head_dim * m->hp.n_head_kv) * n_ctx * sizeof(float);
    n0 += 2;
    size_t align = 256;   /* generous: each tensor's offset is rounded up to the buffer's alignment */
    size_t on_vk = bp_run_session_device_bytes(v, vk);
    ck_assert_msg(on_vk >= layer0 && on_vk <= layer0 + n0 * align, "vulkan0 holds %zu bytes, layer 0 is %zu",
                  on_vk, layer0);
    struct bp_sched_summary sum = { .size = sizeof sum };
    ck_assert_int_eq(bp_run_session_placement(v, &sum), BP_OK);
    ck_assert_uint_gt(sum.backends[0].n_nodes, 0);
    ck_assert_uint_gt(sum.backends[1].n_nodes, 0);
    ck_assert_uint_gt(sum.n_copies, 0);
    bp_run_session_free(v);
    bp_run_session_free(c);
    bp_run_model_free(m);
}
END_TEST

int main(void)
{
    const int gate = device_gate("vulkan", "vulkan0");
    if (gate) return gate;
    Suite *s = suite_create("sched_vulkan");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, test_offload_one_layer_to_vulkan_gives_cpu_tokens_with_layer0_there_only);
    suite_add_tcase(s, tc);
    return run_suite(s);
}
