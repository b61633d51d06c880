/* test_cuda_policy.c — the CUDA plugin's all-reduce decisions, no GPU needed. */
#include <check.h>
#include <stdint.h>
#include <string.h>

#include "comm_policy.h"
#include "suite_main.h"

static bool yes(void *ctx) { (void)ctx; return true; }
static bool no(void *ctx) { (void)ctx; return false; }
static bool counted(void *ctx) { (*(int *)ctx)++; return true; }

START_TEST(test_env_default_is_nccl)
{
    char why[256];
    ck_assert_int_eq(cuda_parse_allreduce_env(NULL, why, sizeof why), CUDA_ALLREDUCE_NCCL);
    ck_assert_str_eq(why, "");
    ck_assert_int_eq(cuda_parse_allreduce_env("", why, sizeof why), CUDA_ALLREDUCE_NCCL);
}
END_TEST

START_TEST(test_env_accepts_each_mode_any_case)
{
    char why[256];
    ck_assert_int_eq(cuda_parse_allreduce_env("nccl", why, sizeof why), CUDA_ALLREDUCE_NCCL);
    ck_assert_int_eq(cuda_parse_allreduce_env("Internal", why, sizeof why), CUDA_ALLREDUCE_INTERNAL);
    ck_assert_int_eq(cuda_parse_allreduce_env("NONE", why, sizeof why), CUDA_ALLREDUCE_NONE);
    ck_assert_str_eq(why, "");
}
END_TEST

START_TEST(test_env_bad_value_gives_default_and_a_sentence)
{
    char why[256];
    ck_assert_int_eq(cuda_parse_allreduce_env("mpi", why, sizeof why), CUDA_ALLREDUCE_NCCL);
    ck_assert_ptr_nonnull(strstr(why, "'mpi'"));
    ck_assert_ptr_nonnull(strstr(why, "nccl, internal or none"));
    ck_assert_int_eq(why[strlen(why) - 1], '.');
}
END_TEST

START_TEST(test_bf16_threshold_default_and_override)
{
    char why[256];
    int64_t d = cuda_parse_bf16_min_env(NULL, why, sizeof why);
    ck_assert_int_eq(d, 32768);
    ck_assert(!cuda_reduce_in_bf16(32767, d));
    ck_assert(cuda_reduce_in_bf16(32768, d));
    ck_assert_int_eq(cuda_parse_bf16_min_env("0", why, sizeof why), 0);
    ck_assert(cuda_reduce_in_bf16(1, 0));
    int64_t off = cuda_parse_bf16_min_env("off", why, sizeof why);
    ck_assert(!cuda_reduce_in_bf16(INT64_MAX - 1, off));
    ck_assert_int_eq(cuda_parse_bf16_min_env("-5", why, sizeof why), 32768);
    ck_assert_ptr_nonnull(strstr(why, "'-5'"));
    ck_assert_int_eq(cuda_parse_bf16_min_env("12k", why, sizeof why), 32768);
    ck_assert_ptr_nonnull(strstr(why, "BACKPLANE_CUDA_ALLREDUCE_BF16_MIN"));
}
END_TEST

START_TEST(test_repeated_devices_are_found)
{
    const int a[] = { 0, 1, 2 }, b[] = { 0, 1, 0 };
    ck_assert(!cuda_devices_repeat(a, 3));
    ck_assert(cuda_devices_repeat(b, 3));
    ck_assert(!cuda_devices_repeat(a, 0));
}
END_TEST

START_TEST(test_nccl_chosen_for_distinct_devices_when_loadable)
{
    char why[256];
    const int ids[] = { 0, 1, 2, 3 };
    ck_assert_int_eq(cuda_choose_allreduce(CUDA_ALLREDUCE_NCCL, ids, 4, yes, NULL, why, sizeof why),
                     CUDA_ALLREDUCE_NCCL);
    ck_assert_str_eq(why, "");
}
END_TEST

START_TEST(test_twice_given_device_falls_back_to_internal_without_loading_nccl)
{
    char why[256];
    int calls = 0;
    const int ids[] = { 0, 0 };
    ck_assert_int_eq(cuda_choose_allreduce(CUDA_ALLREDUCE_NCCL, ids, 2, counted, &calls, why, sizeof why),
                     CUDA_ALLREDUCE_INTERNAL);
    ck_assert_int_eq(calls, 0);
    ck_assert_ptr_nonnull(strstr(why, "given twice"));
}
END_TEST

START_TEST(test_missing_nccl_falls_back_to_internal_for_two)
{
    char why[256];
    const int ids[] = { 0, 1 };
    ck_assert_int_eq(cuda_choose_allreduce(CUDA_ALLREDUCE_NCCL, ids, 2, no, NULL, why, sizeof why),
                     CUDA_ALLREDUCE_INTERNAL);
    ck_assert_ptr_nonnull(strstr(why, "libnccl.so.2"));
}
END_TEST

START_TEST(test_missing_nccl_with_four_declines)
{
    char why[256];
    const int ids[] = { 0, 1, 2, 3 };
    ck_assert_int_eq(cuda_choose_allreduce(CUDA_ALLREDUCE_NCCL, ids, 4, no, NULL, why, sizeof why),
                     CUDA_ALLREDUCE_NONE);
    ck_assert_ptr_nonnull(strstr(why, "exactly two"));
}
END_TEST

START_TEST(test_internal_and_none_requests)
{
    char why[256];
    const int ids[] = { 0, 1, 2 };
    ck_assert_int_eq(cuda_choose_allreduce(CUDA_ALLREDUCE_INTERNAL, ids, 2, no, NULL, why, sizeof why),
                     CUDA_ALLREDUCE_INTERNAL);
    ck_assert_str_eq(why, "");
    ck_assert_int_eq(cuda_choose_allreduce(CUDA_ALLREDUCE_INTERNAL, ids, 3, no, NULL, why, sizeof why),
                     CUDA_ALLREDUCE_NONE);
    ck_assert_int_eq(cuda_choose_allreduce(CUDA_ALLREDUCE_NONE, ids, 2, yes, NULL, why, sizeof why),
                     CUDA_ALLREDUCE_NONE);
    ck_assert_int_eq(cuda_choose_allreduce(CUDA_ALLREDUCE_NCCL, ids, 1, yes, NULL, why, sizeof why),
                     CUDA_ALLREDUCE_NONE);
    ck_assert_ptr_nonnull(strstr(why, "at least two"));
}
END_TEST

/* Across processes: NCCL or the host path, never the single-process one. */
START_TEST(test_rank_comm_without_nccl_is_the_host_path)
{
    char why[256];
    ck_assert_int_eq(cuda_choose_rank_comm(CUDA_ALLREDUCE_NCCL, no, NULL, why, sizeof why),
                     CUDA_ALLREDUCE_NONE);
    ck_assert_ptr_nonnull(strstr(why, "host memory"));
    ck_assert_int_eq(cuda_choose_rank_comm(CUDA_ALLREDUCE_NCCL, yes, NULL, why, sizeof why),
                     CUDA_ALLREDUCE_NCCL);
    ck_assert_str_eq(why, "");
    ck_assert_int_eq(cuda_choose_rank_comm(CUDA_ALLREDUCE_INTERNAL, yes, NULL, why, sizeof why),
                     CUDA_ALLREDUCE_NONE);
    ck_assert_ptr_nonnull(strstr(why, "within one process"));
    ck_assert_int_eq(cuda_choose_rank_comm(CUDA_ALLREDUCE_NONE, yes, NULL, why, sizeof why),
                     CUDA_ALLREDUCE_NONE);
}
END_TEST

START_TEST(test_mode_names)
{
    ck_assert_str_eq(cuda_allreduce_mode_name(CUDA_ALLREDUCE_NCCL), "nccl");
    ck_assert_str_eq(cuda_allreduce_mode_name(CUDA_ALLREDUCE_INTERNAL), "internal");
    ck_assert_str_eq(cuda_allreduce_mode_name(CUDA_ALLREDUCE_NONE), "none");
}
END_TEST

int main(void)
{
    Suite *s = suite_create("cuda_policy");
    TCase *tc = tcase_create("policy");
    tcase_add_test(tc, test_env_default_is_nccl);
    tcase_add_test(tc, test_env_accepts_each_mode_any_case);
    tcase_add_test(tc, test_env_bad_value_gives_default_and_a_sentence);
    tcase_add_test(tc, test_bf16_threshold_default_and_override);
    tcase_add_test(tc, test_repeated_devices_are_found);
    tcase_add_test(tc, test_nccl_chosen_for_distinct_devices_when_loadable);
    tcase_add_test(tc, test_twice_given_device_falls_back_to_internal_without_loading_nccl);
    tcase_add_test(tc, test_missing_nccl_falls_back_to_internal_for_two);
    tcase_add_test(tc, test_missing_nccl_with_four_declines);
    tcase_add_test(tc, test_internal_and_none_requests);
    tcase_add_test(tc, test_mode_names);
    tcase_add_test(tc, test_rank_comm_without_nccl_is_the_host_path);
    suite_add_tcase(s, tc);
    return run_suite(s);
}
