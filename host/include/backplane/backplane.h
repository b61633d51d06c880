/*
 * backplane.h — the application API of libbackplane.
 *
 * Plugins are discovered on first use of any function here (calling
 * bp_load_plugins() first is allowed, never required) and stay loaded until
 * bp_unload() or process exit.
 *
 * Errors: every fallible call returns a bp_status; bp_last_error() returns a
 * sentence about the most recent failure on the calling thread.
 * Op constructors (bp_mul_mat, ...) return NULL instead, set the last error
 * and mark their context failed; passing NULL to a constructor returns NULL,
 * so a whole graph can be built and checked once (bp_context_status, or the
 * status of bp_graph_build).
 *
 * The three error channels, each for one thing:
 * - bp_last_error(): why the call this thread just made into libbackplane
 *   failed. Read it right after the failing call; the next failure on the
 *   thread overwrites it.
 * - A caller's `char *err, size_t cap` (the runner, host/run): why a
 *   runner call failed, for a caller that reports it later or elsewhere. The
 *   runner writes one sentence there and returns the status; when the cause
 *   is a libbackplane call it quotes that call's bp_last_error(). It does not
 *   log the failure as well: reporting it is the caller's choice.
 * - Log lines (bp_set_log_callback, else stderr): what no return value
 *   carries: a plugin refused at load, a variable ignored, a fallback taken,
 *   and the detail behind a plugin's status (which op, which tensor, which
 *   limit), since a plugin cannot set the host's last error.
 *
 * Threads (tests/test_host_threads.c; ThreadSanitizer runs the cpu, meta and
 * loader suites in CI):
 * - Any thread may make the first call; discovery runs once, under a lock,
 *   and the others wait for it. bp_unload must not overlap any other call.
 * - Read-only after loading, so callable from any number of threads at once:
 *   the device and plugin lists and lookups (bp_device_*, bp_plugin_*,
 *   bp_default_devices, bp_device_buffer_type, supports-op queries).
 * - bp_last_error() is per thread: it describes the calling thread's failure.
 * - A context and what is built from it (tensors, graphs) is used by one
 *   thread at a time; different contexts may be used concurrently.
 * - A buffer (tensor set/get, read/write/clear, free) is used by one thread
 *   at a time, and never while a backend computes a graph that touches it
 *   (synchronize that backend first); different buffers concurrently.
 * - A backend (stream) is used by one thread at a time; different backends,
 *   even of one device, compute concurrently and independently.
 * - Meta devices: bp_meta_set_split_fn applies to tensors placed afterwards
 *   and must not overlap an allocation on that device; the split callback
 *   runs on the allocating thread.
 */
#ifndef BACKPLANE_H
#define BACKPLANE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <backplane/bp_abi.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define BP_API __attribute__((visibility("default")))
#else
#define BP_API
#endif

/* Library version (not the ABI version): "0.1.0". */
BP_API const char *bp_version_string(void);

/* Sentence describing the last failure on this thread ("" if none). */
BP_API const char *bp_last_error(void);

/* ------------------------------------------------------------------- log */

/* Receives one log line: its level, who logged it ("backplane", or a
 * plugin's family such as "meta"), and the sentence without a newline; the
 * strings live only for the call. */
typedef void (*bp_log_fn)(void *user, enum bp_log_level level, const char *who,
                          const char *message);
/* Send the lines that pass BACKPLANE_LOG (default: warn) from the host and
 * every plugin to fn instead of stderr; fn == NULL restores stderr. fn runs
 * on whichever thread logs, several at once, so it must be thread-safe and
 * must not call libbackplane. Set it before other threads use the library:
 * a line logged while it changes may still reach the previous callback. */
BP_API void bp_set_log_callback(bp_log_fn fn, void *user);

/* ---------------------------------------------------------------- loader */

/* Loading options; zero-initialise and set what you need. `size` (1.1):
 * sizeof as the caller compiled it; the host reads only the fields it
 * covers. 0 reads every field of 1.1, so `{.isolate_probe = true}` works. */
struct bp_load_options {
    size_t size;
    /* Probe each candidate plugin in a child process first (fork, with a time
     * limit) so that one crashing or hanging in init is recorded instead of
     * taking this process down. Costs one fork per plugin file. */
    bool isolate_probe;
    /* Seconds the child may take; 0 means 10. */
    unsigned probe_timeout_s;
};

/* Discover and load plugins once (idempotent). Later calls with different
 * options do nothing; call bp_unload() first to reload. Returns BP_OK even when
 * some plugins were refused: see bp_plugin_failure_*. */
BP_API bp_status bp_load_plugins(const struct bp_load_options *opts);

/* Shut every plugin down (registry shutdown), free all devices, and forget
 * the loader state. Every object obtained before is invalid afterwards. */
BP_API void bp_unload(void);

struct bp_plugin_info {
    const char *family;       /* "cpu" */
    const char *variant;      /* "avx2" or "" */
    const char *path;         /* absolute path of the shared object */
    uint32_t    abi_version;  /* the plugin's BP_ABI_VERSION */
    int         score;        /* its variant score (1 when it has no score entry) */
    size_t      n_devices;
    struct bp_registry *reg;
};
/* Number of loaded plugins (loads them on first use). Any thread. */
BP_API size_t bp_plugin_count(void);
/* Record of loaded plugin number index, owned by the library until
 * bp_unload; NULL past the end. Any thread. */
BP_API const struct bp_plugin_info *bp_plugin_get(size_t index);
/* The registry of a loaded family, or NULL. */
BP_API struct bp_registry *bp_registry_by_name(const char *family);

/* Why a candidate plugin was not loaded. Values are stable (scripts match
 * on bp_plugin_failure_code_name). */
enum bp_plugin_failure_code {
    BP_PLUGIN_FAIL_NOT_SHARED_OBJECT = 1,  /* dlopen: not an ELF shared object */
    BP_PLUGIN_FAIL_MISSING_DEPENDENCY = 2, /* dlopen: a library it needs is missing (named) */
    BP_PLUGIN_FAIL_DLOPEN = 3,             /* dlopen failed for another reason */
    BP_PLUGIN_FAIL_MISSING_ENTRY = 4,      /* no bp_plugin_abi_version or bp_plugin_init */
    BP_PLUGIN_FAIL_ABI_MAJOR = 5,          /* plugin's ABI major differs from the host's */
    BP_PLUGIN_FAIL_INIT = 6,               /* bp_plugin_init returned an error */
    BP_PLUGIN_FAIL_DUPLICATE = 7,          /* a plugin of the same family was loaded first */
    BP_PLUGIN_FAIL_FILTERED = 8,           /* excluded by an environment variable */
    BP_PLUGIN_FAIL_CRASHED = 9,            /* the probe child died of a signal */
    BP_PLUGIN_FAIL_TIMEOUT = 10,           /* the probe child did not answer in time */
    BP_PLUGIN_FAIL_CANNOT_RUN = 11,        /* variant score 0: this machine lacks what it needs */
    BP_PLUGIN_FAIL_OUTSCORED = 12,         /* another variant of the family scored higher */
    BP_PLUGIN_FAIL_BAD_NAME = 13,          /* file name is not `libbackplane-<family>[-<variant>].so` */
    BP_PLUGIN_FAIL_BAD_REGISTRY = 14,      /* init succeeded but returned an unusable registry */
    BP_PLUGIN_FAIL_ABI_MINOR = 15,         /* (1.1) the plugin needs a newer host minor */
};
struct bp_plugin_failure {
    const char *path;
    const char *family;       /* from the file name, "" if unparsable */
    enum bp_plugin_failure_code code;
    const char *reason;       /* one sentence: what was wrong */
    const char *remedy;       /* one sentence: what to do */
};
/* Number of candidate plugins refused while loading. Any thread. */
BP_API size_t bp_plugin_failure_count(void);
/* Refusal record number index, owned by the library until bp_unload; NULL
 * past the end. Any thread. */
BP_API const struct bp_plugin_failure *bp_plugin_failure_get(size_t index);
/* "ABI_MAJOR", "CRASHED", ... */
BP_API const char *bp_plugin_failure_code_name(enum bp_plugin_failure_code code);

/* --------------------------------------------------------------- devices */

/* Number of devices of all loaded plugins (loads them on first use). */
BP_API size_t bp_device_count(void);
/* Device number index, owned by its plugin until bp_unload; NULL (and the
 * last error) past the end. Any thread. */
BP_API struct bp_device *bp_device_get(size_t index);
/* Exact name match ("cpu", "vulkan0"), or an identity selector
 * ("uuid:3f2a", "pci:0000:65:00.0"); NULL and last error when absent. */
BP_API struct bp_device *bp_device_by_name(const char *name);
/* The devices an application should use by default: BACKPLANE_DEVICES when
 * set (comma-separated names, `uuid:<prefix>` or `pci:<bus id>`), otherwise the
 * first GPU/IGPU device that is not a software implementation, otherwise the
 * first CPU device. Fills up to cap pointers; *n_out gets the count. */
BP_API bp_status bp_default_devices(struct bp_device **out, size_t cap, size_t *n_out);

/* The device's unique short name ("cpu", "vulkan0"), owned by it. */
BP_API const char *bp_device_name(struct bp_device *dev);
/* The plugin's one-line description of the device; "" when it has none. */
BP_API const char *bp_device_description(struct bp_device *dev);
/* CPU, GPU, IGPU, ACCEL or META; ACCEL when the plugin does not say. */
BP_API enum bp_device_type bp_device_type(struct bp_device *dev);
/* "CPU", "GPU", ... for type; "unknown" for a value outside the enum. */
BP_API const char *bp_device_type_name(enum bp_device_type type);
/* Free and total bytes of the device's memory as its plugin reports them
 * (0 and 0 when it does not); either pointer may be NULL. */
BP_API void bp_device_memory(struct bp_device *dev, size_t *free, size_t *total);
/* Set caps->size = sizeof *caps first: only the fields it covers are
 * written (false when the device does not say), never caps->size itself. */
BP_API void bp_device_caps(struct bp_device *dev, struct bp_device_caps *caps);
/* The device's default buffer type, owned by the device; NULL when the
 * device is NULL or has none. Any thread. */
BP_API struct bp_buffer_type *bp_device_buffer_type(struct bp_device *dev);
/* Where to put a tensor used only as a MUL_MAT weight (src[0]) of this type:
 * the device's BP_PROC_WEIGHT_BUFFER_TYPE answer (which may store it in a
 * layout only MUL_MAT reads, e.g. the CPU's CPU_REPACK for Q4_0/Q8_0), else
 * its default buffer type. NULL only when the device has no buffer type. */
BP_API struct bp_buffer_type *bp_device_weight_buffer_type(struct bp_device *dev, enum bp_type type);
/* Whether the device computes node (op, types, shapes) as it stands; false
 * for NULL. The plugin may log why it declines. Any thread. */
BP_API bool bp_device_supports_op(struct bp_device *dev, const struct bp_tensor *node);
/* Proc address from the device's registry, or NULL. */
BP_API void *bp_device_proc_address(struct bp_device *dev, const char *name);
/* The device's stable identity (bp_identity.h). Set out->size to
 * sizeof(*out) first; the host writes that many bytes. BP_ERR_UNSUPPORTED
 * (out filled as "unknown": no UUID, no PCI id, package/node -1) when the
 * plugin has no BP_PROC_DEVICE_IDENTITY. Any thread. */
BP_API bp_status bp_device_identity(struct bp_device *dev, struct bp_device_identity *out);
/* The UUID as 8-4-4-4-12 lower-case hex into buf, "" without one; returns buf. */
BP_API char *bp_identity_uuid_string(const struct bp_device_identity *id, char *buf, size_t cap);
/* An earlier device in the list that is the same physical device as dev
 * through another plugin (bp_identity_same), or NULL. */
BP_API struct bp_device *bp_device_same_physical(struct bp_device *dev);

/* -------------------------------------------------------------- backends */

/* A new stream on dev into *out (NULL on failure), which the caller frees
 * with bp_backend_free. params ("n_threads=4") are the plugin's; NULL for
 * its defaults. Fails when dev is NULL or the plugin refuses (see the log). */
BP_API bp_status bp_backend_init(struct bp_device *dev, const char *params, struct bp_backend **out);
/* Frees b (NULL is ignored). Synchronize first if work may be queued. */
BP_API void bp_backend_free(struct bp_backend *b);
/* Computes every node of g, in order, on b. Asynchronous on devices that
 * queue work (GPUs): it may return before the results are written; call
 * bp_backend_synchronize before reading them or touching the buffers. A
 * node the device declines fails the call before anything runs (UNSUPPORTED). */
BP_API bp_status bp_backend_graph_compute(struct bp_backend *b, struct bp_graph *g);
/* Waits until everything queued on b has finished; BP_OK at once on
 * devices that compute synchronously. An error of queued work shows here. */
BP_API bp_status bp_backend_synchronize(struct bp_backend *b);
/* Uses the backend's set_n_threads proc when it has one; BP_ERR_UNSUPPORTED otherwise. */
BP_API bp_status bp_backend_set_n_threads(struct bp_backend *b, int n_threads);

/* --------------------------------------------------------------- buffers */

/* A buffer of size bytes of buft into *out (NULL on failure), freed by the
 * caller with bp_buffer_free. Fails on a NULL buft, a broken plugin table,
 * or memory the device does not have (the plugin logs how much). */
BP_API bp_status bp_buffer_alloc(struct bp_buffer_type *buft, size_t size, struct bp_buffer **out);
/* Frees buf (NULL is ignored); tensors placed in it are unusable after. */
BP_API void bp_buffer_free(struct bp_buffer *buf);
/* buf's size in bytes; 0 for NULL. */
BP_API size_t bp_buffer_size(const struct bp_buffer *buf);
/* Fill every byte of buf with value: the plugin's clear, or its set_tensor
 * when the buffer has no clear (1.1). */
BP_API bp_status bp_buffer_clear(struct bp_buffer *buf, uint8_t value);
/* Raw byte access to a buffer (for guard checks and debugging). */
BP_API bp_status bp_buffer_read(struct bp_buffer *buf, size_t offset, void *dst, size_t size);
/* Write counterpart of bp_buffer_read: [offset, offset+size) must lie in
 * buf; INVALID_ARGUMENT otherwise. */
BP_API bp_status bp_buffer_write(struct bp_buffer *buf, size_t offset, const void *src, size_t size);

/* -------------------------------------------------------------- contexts */

/* A context owns tensor metadata (not data). */
struct bp_context;
/* A context for up to max_tensors tensors into *out, freed by the caller
 * with bp_context_free; NULL and BP_ERR_OUT_OF_MEMORY when memory runs out. */
BP_API bp_status bp_context_new(size_t max_tensors, struct bp_context **out);
/* Frees ctx and its tensors' metadata (not their buffers); NULL is ignored. */
BP_API void bp_context_free(struct bp_context *ctx);
/* BP_OK, or the first error an op constructor hit in this context. */
BP_API bp_status bp_context_status(const struct bp_context *ctx);

/* Options for bp_context_alloc_tensors. `size` (1.1): as in
 * bp_load_options (0 reads every field of 1.1). */
struct bp_alloc_options {
    size_t size;
    /* Bytes of unused space before and after every tensor (rounded up to the
     * alignment); the check harness fills them with a pattern to catch
     * out-of-bounds writes. */
    size_t guard_bytes;
};
/* Place every tensor of ctx that has no buffer yet (views excepted: they
 * alias their source) in one new buffer of buft; *out receives it (the
 * caller frees it after the tensors are no longer used). opts may be NULL.
 * Offsets are multiples of the buffer type's alignment; each tensor takes
 * get_alloc_size bytes when the buffer type has it, else bp_nbytes. Views in
 * ctx whose source now has memory are resolved too. When no tensor needs
 * memory the call returns BP_OK and sets *out to NULL (nothing to free). On
 * failure no tensor is changed and *out is NULL. */
BP_API bp_status bp_context_alloc_tensors(struct bp_context *ctx, struct bp_buffer_type *buft,
                                          const struct bp_alloc_options *opts,
                                          struct bp_buffer **out);
/* As bp_context_alloc_tensors (no guard bytes), but the bytes of a tensor
 * that graph g computes are reused by later nodes once the last node of g
 * that reads it (directly or through a view) has been computed, so the
 * buffer holds what is alive at once rather than every intermediate: the
 * tensors of one g, computed as one graph, in the order of its nodes.
 * Tensors that no node of g computes (inputs, leaves) and nodes flagged
 * BP_TENSOR_FLAG_OUTPUT keep their bytes for the buffer's life; any other
 * intermediate's value is unspecified after the compute. */
BP_API bp_status bp_context_alloc_graph(struct bp_context *ctx, const struct bp_graph *g,
                                        struct bp_buffer_type *buft, struct bp_buffer **out);
/* Bytes bp_context_alloc_graph(ctx, g, buft) would allocate (0 when no
 * tensor needs memory or on error, with a sentence in bp_last_error);
 * allocates no device memory. */
BP_API size_t bp_context_alloc_graph_size(struct bp_context *ctx, const struct bp_graph *g,
                                          struct bp_buffer_type *buft);
/* Bytes bp_context_alloc_tensors would need. */
BP_API size_t bp_context_alloc_size(struct bp_context *ctx, struct bp_buffer_type *buft,
                                    const struct bp_alloc_options *opts);
/* Tensor number i of the context in creation order, NULL past the end. */
BP_API struct bp_tensor *bp_context_tensor(struct bp_context *ctx, size_t i);
/* Number of tensors made in ctx so far; 0 for NULL. */
BP_API size_t bp_context_tensor_count(const struct bp_context *ctx);
/* The tensor of ctx named name (owned by ctx); NULL and BP_ERR_NOT_FOUND as
 * the last error when there is none. */
BP_API struct bp_tensor *bp_context_find(struct bp_context *ctx, const char *name);

/* --------------------------------------------------------------- tensors */

/* New leaf tensor, contiguous, owned by ctx. n_dims 1..4; missing dims are
 * 1. NULL, with the context marked failed, on a bad shape or a full ctx. */
BP_API struct bp_tensor *bp_tensor_new(struct bp_context *ctx, enum bp_type type, int n_dims,
                                       const int64_t *ne);
/* bp_tensor_new with the dims as arguments: 1 dim. */
BP_API struct bp_tensor *bp_tensor_new_1d(struct bp_context *ctx, enum bp_type type, int64_t ne0);
/* bp_tensor_new with 2 dims as arguments. */
BP_API struct bp_tensor *bp_tensor_new_2d(struct bp_context *ctx, enum bp_type type, int64_t ne0,
                                          int64_t ne1);
/* bp_tensor_new with 3 dims as arguments. */
BP_API struct bp_tensor *bp_tensor_new_3d(struct bp_context *ctx, enum bp_type type, int64_t ne0,
                                          int64_t ne1, int64_t ne2);
/* bp_tensor_new with 4 dims as arguments. */
BP_API struct bp_tensor *bp_tensor_new_4d(struct bp_context *ctx, enum bp_type type, int64_t ne0,
                                          int64_t ne1, int64_t ne2, int64_t ne3);
/* Sets the name (truncated to BP_MAX_NAME-1 bytes); returns t. */
BP_API struct bp_tensor *bp_tensor_set_name(struct bp_tensor *t, const char *name);

/* Copy bytes [offset, offset+size) of the tensor's storage from host memory.
 * The tensor must be allocated; the range must lie within bp_nbytes(t);
 * INVALID_ARGUMENT otherwise. Synchronous: src may be reused on return. */
BP_API bp_status bp_tensor_set(struct bp_tensor *t, const void *src, size_t offset, size_t size);
/* The read counterpart of bp_tensor_set, into dst; same rules. Synchronize
 * a backend computing t first (bp_backend_synchronize). */
BP_API bp_status bp_tensor_get(const struct bp_tensor *t, void *dst, size_t offset, size_t size);

/* ------------------------------------------------ op constructors (bp_ops.h) */
/* Where bp_ops.h says "F", the constructors also accept bf16: whether a
 * device computes it is for its supports_op to say at compute time.
 * Each returns a new tensor owned by ctx that computes nothing until a
 * backend computes a graph holding it; bp_ops.h states each op's shapes and
 * types. A shape or type it breaks gives NULL (see the top of this file). */

/* GET_ROWS: rows ids (I32) of table, dequantized to F32. */
BP_API struct bp_tensor *bp_get_rows(struct bp_context *ctx, struct bp_tensor *table,
                                     struct bp_tensor *ids);
/* MUL_MAT: W (any type, [K, N]) times x (F, [K, M]) -> F32 [N, M]. */
BP_API struct bp_tensor *bp_mul_mat(struct bp_context *ctx, struct bp_tensor *w,
                                    struct bp_tensor *x);
/* ADD: a + b elementwise, b repeating over a. */
BP_API struct bp_tensor *bp_add(struct bp_context *ctx, struct bp_tensor *a, struct bp_tensor *b);
/* MUL: a * b elementwise, b repeating over a. */
BP_API struct bp_tensor *bp_mul(struct bp_context *ctx, struct bp_tensor *a, struct bp_tensor *b);
/* SCALE: x * s + b. */
BP_API struct bp_tensor *bp_scale(struct bp_context *ctx, struct bp_tensor *x, float s, float b);
/* RMS_NORM: each row of x over sqrt(mean(x^2) + eps). */
BP_API struct bp_tensor *bp_rms_norm(struct bp_context *ctx, struct bp_tensor *x, float eps);
/* mask may be NULL. */
BP_API struct bp_tensor *bp_soft_max(struct bp_context *ctx, struct bp_tensor *x,
                                     struct bp_tensor *mask, float scale);
/* ROPE: x rotated by positions pos (I32) over its first n_dims values. */
BP_API struct bp_tensor *bp_rope(struct bp_context *ctx, struct bp_tensor *x, struct bp_tensor *pos,
                                 int n_dims, int mode, float freq_base, float freq_scale);
/* The parameters of ROPE_EXT (bp_ops.h has the formula). */
struct bp_rope_ext_params {
    int n_dims, mode;
    float freq_base, freq_scale;
    int n_ctx_orig;
    float ext_factor, attn_factor, beta_fast, beta_slow;
};
/* The ROPE_EXT node of x at positions pos in ctx, p copied into its params
 * (p is only read); NULL with bp_last_error set when p is NULL, the
 * factors are not F32 [n_dims / 2], ext_factor, attn_factor or a beta is
 * not finite, or YaRN (ext_factor != 0) lacks n_ctx_orig, positive betas
 * or a positive freq_scale; ROPE's own refusals apply too. */
BP_API struct bp_tensor *bp_rope_ext(struct bp_context *ctx, struct bp_tensor *x, struct bp_tensor *pos,
                                     struct bp_tensor *freq_factors,
                                     const struct bp_rope_ext_params *p);
/* SILU: x * sigmoid(x). */
BP_API struct bp_tensor *bp_silu(struct bp_context *ctx, struct bp_tensor *x);
/* GELU, the tanh approximation. */
BP_API struct bp_tensor *bp_gelu(struct bp_context *ctx, struct bp_tensor *x);
/* x*x element by element (BP_OP_SQR, ABI 1.1): a node of x's type and shape
 * in ctx, or NULL with bp_last_error set when x is not a float tensor. */
BP_API struct bp_tensor *bp_sqr(struct bp_context *ctx, struct bp_tensor *x);
/* TANH (ABI 1.2): tanh(x) element by element, x's type and shape. */
BP_API struct bp_tensor *bp_tanh(struct bp_context *ctx, struct bp_tensor *x);
/* CPY: src copied (and converted) into dst; the result is a view of dst. */
BP_API struct bp_tensor *bp_cpy(struct bp_context *ctx, struct bp_tensor *src, struct bp_tensor *dst);
/* CONT: a contiguous copy of x (any strides). */
BP_API struct bp_tensor *bp_cont(struct bp_context *ctx, struct bp_tensor *x);
/* n_dims 1..4; element count must match; x must be contiguous. */
BP_API struct bp_tensor *bp_reshape(struct bp_context *ctx, struct bp_tensor *x, int n_dims,
                                    const int64_t *ne);
/* A view with its own shape ne[0..n_dims) and byte strides nb[1..n_dims)
 * (nb[0] is the type size) starting offset bytes into x; must lie inside x.
 * nb points to n_dims entries indexed like bp_tensor.nb; nb[0] is not read
 * (the element size is used) and nb may be NULL when n_dims == 1. Offset and
 * strides must keep elements aligned (multiples of 4 bytes for f32, i32,
 * q4_K, q8_K; of 2 bytes for the other types). */
BP_API struct bp_tensor *bp_view(struct bp_context *ctx, struct bp_tensor *x, int n_dims,
                                 const int64_t *ne, const size_t *nb, size_t offset);
/* axis[i] is the position source dim i takes in the result (a permutation). */
BP_API struct bp_tensor *bp_permute(struct bp_context *ctx, struct bp_tensor *x, int a0, int a1,
                                    int a2, int a3);
/* A view of x with dims 0 and 1 swapped (bp_permute(x, 1, 0, 2, 3)). */
BP_API struct bp_tensor *bp_transpose(struct bp_context *ctx, struct bp_tensor *x);
/* SET_ROWS: values written into rows ids (I32) of dst; a view of dst. */
BP_API struct bp_tensor *bp_set_rows(struct bp_context *ctx, struct bp_tensor *dst,
                                     struct bp_tensor *values, struct bp_tensor *ids);
/* mask may be NULL. */
BP_API struct bp_tensor *bp_flash_attn_ext(struct bp_context *ctx, struct bp_tensor *q,
                                           struct bp_tensor *k, struct bp_tensor *v,
                                           struct bp_tensor *mask, float scale);
/* FLASH_ATTN_SOFTCAP (ABI 1.2): bp_flash_attn_ext whose scores are capped,
 * softcap * tanh(scale q.k / softcap), before the mask; softcap > 0. */
BP_API struct bp_tensor *bp_flash_attn_softcap(struct bp_context *ctx, struct bp_tensor *q,
                                               struct bp_tensor *k, struct bp_tensor *v,
                                               struct bp_tensor *mask, float scale, float softcap);
/* MUL_MAT_ID (ABI 1.2): slot u of token t is expert ids[u, t] of the
 * stacked weights w [K, N, n_expert] times x[:, u % x1, t] (x F32
 * [K, x1 = 1 or n_used, n_tok], ids I32 [n_used, n_tok]) -> F32
 * [N, n_used, n_tok]; NULL with bp_last_error set when shapes disagree. */
BP_API struct bp_tensor *bp_mul_mat_id(struct bp_context *ctx, struct bp_tensor *w,
                                       struct bp_tensor *x, struct bp_tensor *ids);
/* TOP_K (ABI 1.2): I32 [k, ...], per row of x (F32) the indices of its k
 * largest values, largest first, ties by ascending index; 1 <= k <= ne0. */
BP_API struct bp_tensor *bp_top_k(struct bp_context *ctx, struct bp_tensor *x, int k);
/* SUM_ROWS (ABI 1.2): F32 [1, ne1, ne2, ne3], each row of x (F32) summed. */
BP_API struct bp_tensor *bp_sum_rows(struct bp_context *ctx, struct bp_tensor *x);
/* DIV (ABI 1.2): a / b elementwise, b repeating over a (as bp_add). */
BP_API struct bp_tensor *bp_div(struct bp_context *ctx, struct bp_tensor *a, struct bp_tensor *b);
/* CLAMP (ABI 1.2): min(max(x, lo), hi) elementwise, x's type and shape;
 * NULL with bp_last_error set unless lo <= hi (infinities allowed). */
BP_API struct bp_tensor *bp_clamp(struct bp_context *ctx, struct bp_tensor *x, float lo, float hi);
/* A vendor-defined op (BP_OP_CUSTOM, bp_custom_op.h): name "<vendor>.<op>",
 * srcs[0..n_src) (n_src 0..BP_MAX_SRC), params[0..n_params) (0 to
 * BP_CUSTOM_MAX_PARAMS words; params may be NULL when 0), and the result's
 * type and shape ne[0..n_dims), which only the op's vendor knows. The host
 * checks this form only; whether a device computes the op is its
 * supports_op's answer. The arrays are copied; nothing is retained. */
BP_API struct bp_tensor *bp_custom(struct bp_context *ctx, const char *name,
                                   struct bp_tensor *const *srcs, int n_src, const int32_t *params,
                                   int n_params, enum bp_type type, int n_dims, const int64_t *ne);

/* ---------------------------------------------------------------- graphs */

/* A graph of up to capacity nodes, owned by the caller (bp_graph_free). */
BP_API bp_status bp_graph_new(size_t capacity, struct bp_graph **out);
/* Frees g (not its tensors, which belong to their contexts); NULL ignored. */
BP_API void bp_graph_free(struct bp_graph *g);
/* Append every node needed to compute t that is not yet in g, sources first
 * (views are included: they are free). Fails when the context of t has a
 * sticky error or the graph is full. t == NULL (an op constructor failed)
 * gives BP_ERR_INVALID_ARGUMENT with the earlier error repeated. On failure
 * g is left as it was before the call. */
BP_API bp_status bp_graph_build(struct bp_graph *g, struct bp_tensor *t);

/* ------------------------------------------------------------- utilities */

/* Human "1.5 GiB" into buf; returns buf. */
BP_API const char *bp_format_bytes(size_t bytes, char *buf, size_t cap);

#ifdef __cplusplus
}
#endif

/* The scheduler (one graph over several backends) is part of this API. */
#include <backplane/bp_sched.h>

#endif /* BACKPLANE_H */
