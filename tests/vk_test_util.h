/*
 * vk_test_util.h — what the Vulkan plugin suites share: vulkan0 and its
 * published features, the suites' pseudo-random numbers, a graph computed
 * on a backend, quantized weights with finite scales and their reference
 * dequantization, a MUL_MAT run on a device, and the gated suite main.
 * Every helper fails the running test (libcheck) on a step that fails.
 */
#ifndef BP_VK_TEST_UTIL_H
#define BP_VK_TEST_UTIL_H

#include <check.h>
#include <stdint.h>

#include <backplane/backplane.h>

/* The device "vulkan0"; fails the running test when the plugin has none. */
struct bp_device *vk0(void);
/* Loads the plugins (bp_load_plugins) and returns vk0(); the caller
 * unloads them with bp_unload. */
struct bp_device *vk_load(void);

/* Value of dev's published feature key (the plugin owns it, valid while it
 * stays loaded); NULL when dev does not publish key. Fails the running test
 * when dev has no feature table at all. */
const char *vk_feature(struct bp_device *dev, const char *key);

/* One step of the suites' linear congruential generator on *seed; returns
 * the state's bits 8 and up (the low bits repeat too soon). */
unsigned vk_next(unsigned *seed);
/* Pseudo-random float in [-1, 1) from one vk_next step. */
float vk_frand(unsigned *seed);

/* Builds out's graph and computes it on be, waiting for the device; be
 * stays the caller's. Fails the running test on any error. */
void vk_compute_on(struct bp_backend *be, struct bp_tensor *out);
/* vk_compute_on with a backend of dev made and freed for this one graph. */
void vk_compute(struct bp_device *dev, struct bp_tensor *out);

/* Every tensor of ctx in one buffer of dev (the caller frees it), once out,
 * the graph's last node, exists; fails the running test when out is NULL
 * (an op refused its operands) or allocation fails. */
struct bp_buffer *vk_alloc(struct bp_context *ctx, struct bp_device *dev, const struct bp_tensor *out);

/* rows x K weights of type t, malloc'd (the caller frees): random bytes
 * from seed; F16 values in [-1, 1); a type of quant_layouts with every
 * block's f16 scale (and min) finite and different from its neighbour's, so
 * every quant pattern occurs and a misread block shows. Fails on others. */
unsigned char *vk_random_weights(enum bp_type t, int64_t K, int64_t rows, unsigned seed);

/* rows x K weights of type t into rows * K floats y: quant_layouts'
 * reference dequantizer (F16 through bp_f16_to_f32). Fails on others. */
void vk_dequant(enum bp_type t, const void *w, int64_t K, int64_t rows, float *y);

/* y = W X on dev with a backend made for it: W [K, N, wb] of type t from
 * the bytes w, X f32 [K, M, xb] from x; y receives N * M * xb floats. Fails
 * the running test when dev declines the MUL_MAT or a step fails. */
void vk_mul_mat(struct bp_device *dev, enum bp_type t, const void *w, const float *x, int64_t K,
                int64_t N, int64_t M, int64_t wb, int64_t xb, float *y);

/* A suite's main, logging at warn unless BACKPLANE_LOG says otherwise:
 * returns device_gate's 77 (no vulkan0) or 1 (no plugin); else runs the
 * cases add_cases puts in one TCase named name (timeout in seconds) and
 * returns run_suite's status. */
int vk_suite_main(const char *name, int timeout, void (*add_cases)(TCase *tc));

#endif
