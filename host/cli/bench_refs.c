/* bench_refs.c — the references the bench measures in the same run: a
 * streaming-read bandwidth probe and OpenBLAS sgemm (dlopen'd, so the CLI
 * never depends on it). */
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#if defined(__x86_64__)
#include <immintrin.h>
#endif
#if defined(__linux__)
#include <sys/mman.h>
#endif

#include "bench.h"

double bench_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double bench_median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

double bench_median_of(const double *v, int n)
{
    double *c = n > 0 ? malloc((size_t)n * sizeof *c) : NULL;
    if (!c) return 0.0;
    memcpy(c, v, (size_t)n * sizeof *c);
    const double med = bench_median(c, n);
    free(c);
    return med;
}

/* The threads meet at a gate: every one is running before the clock
 * starts, and a run whose threads could not all be started is called off
 * (go < 0) instead of leaving threads blocked. */
struct bench_gate {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int ready, done, go;
};

struct bench_gate_arg {
    struct bench_gate *gate;
    void (*work)(void *);
    void *arg;
};

static void *bench_gate_thread(void *p)
{
    const struct bench_gate_arg *a = p;
    struct bench_gate *g = a->gate;
    pthread_mutex_lock(&g->mu);
    g->ready++;
    pthread_cond_broadcast(&g->cv);
    while (g->go == 0) pthread_cond_wait(&g->cv, &g->mu);
    const int go = g->go;
    pthread_mutex_unlock(&g->mu);
    if (go < 0) return NULL;
    a->work(a->arg);
    pthread_mutex_lock(&g->mu);
    g->done++;
    pthread_cond_broadcast(&g->cv);
    pthread_mutex_unlock(&g->mu);
    return NULL;
}

double bench_run_together(int n, void (*work)(void *), void *args, size_t arg_size)
{
    if (n < 1) return -1.0;
    pthread_t *tid = calloc((size_t)n, sizeof *tid);
    struct bench_gate_arg *ga = calloc((size_t)n, sizeof *ga);
    double sec = -1.0;
    if (tid && ga) {
        struct bench_gate gate = { .mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER };
        int started = 0;
        for (; started < n; started++) {
            ga[started] = (struct bench_gate_arg){ &gate, work, (char *)args + (size_t)started * arg_size };
            if (pthread_create(&tid[started], NULL, bench_gate_thread, &ga[started]) != 0) break;
        }
        pthread_mutex_lock(&gate.mu);
        while (started == n && gate.ready < n) pthread_cond_wait(&gate.cv, &gate.mu);
        gate.go = started == n ? 1 : -1;
        const double t0 = bench_now();
        pthread_cond_broadcast(&gate.cv);
        while (gate.go > 0 && gate.done < n) pthread_cond_wait(&gate.cv, &gate.mu);
        if (gate.go > 0) sec = bench_now() - t0;
        pthread_mutex_unlock(&gate.mu);
        for (int i = 0; i < started; i++) pthread_join(tid[i], NULL);
    }
    free(ga);
    free(tid);
    return sec;
}

struct bw_job {
    uint64_t (*read)(const uint64_t *p, size_t n);
    const uint64_t *p;
    size_t n;          /* uint64 words */
    uint64_t sink;
};

/* The read loops the probe tries. Each keeps independent chains so the
 * loop is bound by the loads. Which one a machine streams fastest differs:
 * on an AVX-512 Xeon (Emerald Rapids VM) whole-line 512-bit loads read
 * 14-20 % more than 256-bit ones, and a software prefetch 4 KiB ahead
 * another 0-8 %, so the probe takes the best of them: a kernel is then held
 * against the best plain read, never against a slow one. */
#define BW_PREFETCH_BYTES 4096

/* Always inlined, so that each target-specific wrapper below compiles its
 * own copy for its ISA (a call would run the baseline SSE2 code). */
static inline __attribute__((always_inline)) uint64_t
read_words_plain_body(const uint64_t *p, size_t n)
{
    uint64_t a[8] = { 0 };
    for (size_t i = 0; i + 8 <= n; i += 8)
        for (int k = 0; k < 8; k++) a[k] ^= p[i + k];
    return a[0] ^ a[1] ^ a[2] ^ a[3] ^ a[4] ^ a[5] ^ a[6] ^ a[7];
}

static inline __attribute__((always_inline)) uint64_t
read_words_prefetch_body(const uint64_t *p, size_t n)
{
    uint64_t a[8] = { 0 };
    for (size_t i = 0; i + 8 <= n; i += 8) {
        __builtin_prefetch((const char *)(p + i) + BW_PREFETCH_BYTES);
        for (int k = 0; k < 8; k++) a[k] ^= p[i + k];
    }
    return a[0] ^ a[1] ^ a[2] ^ a[3] ^ a[4] ^ a[5] ^ a[6] ^ a[7];
}

#if defined(__x86_64__)
__attribute__((target("avx2")))
static uint64_t read_words_avx2(const uint64_t *p, size_t n)
{
    return read_words_plain_body(p, n);
}

__attribute__((target("avx2")))
static uint64_t read_words_avx2_prefetch(const uint64_t *p, size_t n)
{
    return read_words_prefetch_body(p, n);
}

/* Four lines per iteration, one 512-bit load each (the buffer is 64-byte
 * aligned and n a multiple of 32 words: bench_probe_new). */
__attribute__((target("avx512f"))) static inline uint64_t
read_lines_avx512(const uint64_t *p, size_t n, int prefetch)
{
    __m512i a = _mm512_setzero_si512(), b = a, c = a, d = a;
    for (size_t i = 0; i + 32 <= n; i += 32) {
        const char *q = (const char *)(p + i);
        if (prefetch)
            for (int l = 0; l < 4; l++)
                _mm_prefetch(q + BW_PREFETCH_BYTES + 64 * l, _MM_HINT_T0);
        a = _mm512_xor_si512(a, _mm512_load_si512(q));
        b = _mm512_xor_si512(b, _mm512_load_si512(q + 64));
        c = _mm512_xor_si512(c, _mm512_load_si512(q + 128));
        d = _mm512_xor_si512(d, _mm512_load_si512(q + 192));
    }
    return (uint64_t)_mm512_reduce_or_epi64(
        _mm512_xor_si512(_mm512_xor_si512(a, b), _mm512_xor_si512(c, d)));
}

__attribute__((target("avx512f")))
static uint64_t read_words_avx512(const uint64_t *p, size_t n)
{
    return read_lines_avx512(p, n, 0);
}

__attribute__((target("avx512f")))
static uint64_t read_words_avx512_prefetch(const uint64_t *p, size_t n)
{
    return read_lines_avx512(p, n, 1);
}

static int have_avx2(void) { return __builtin_cpu_supports("avx2"); }
static int have_avx512(void) { return __builtin_cpu_supports("avx512f"); }
/* the compiler's baseline loops only where no wider one runs */
static int baseline(void) { return !have_avx2(); }
#else
static int baseline(void) { return 1; }
#endif

static uint64_t read_words_plain(const uint64_t *p, size_t n)
{
    return read_words_plain_body(p, n);
}

static uint64_t read_words_prefetch(const uint64_t *p, size_t n)
{
    return read_words_prefetch_body(p, n);
}

static const struct bw_reader {
    uint64_t (*read)(const uint64_t *p, size_t n);
    int (*usable)(void);
} bw_readers[] = {
#if defined(__x86_64__)
    { read_words_avx512, have_avx512 },
    { read_words_avx512_prefetch, have_avx512 },
    { read_words_avx2, have_avx2 },
    { read_words_avx2_prefetch, have_avx2 },
#endif
    { read_words_plain, baseline },
    { read_words_prefetch, baseline },
};
enum { BW_N_READERS = sizeof bw_readers / sizeof bw_readers[0] };

static void bw_work(void *arg)
{
    struct bw_job *j = arg;
    j->sink = j->read(j->p, j->n);
}

struct bench_probe {
    uint64_t *buf;
    size_t words;
};

struct bench_probe *bench_probe_new(size_t bytes)
{
    struct bench_probe *p = calloc(1, sizeof *p);
    if (!p) return NULL;
    p->words = bytes / 8 / 64 * 64;
    /* In 2 MiB pages where the kernel gives them, as the cpu plugin's
     * weight buffers are (plugins/cpu/host_memory.c): the reference is the
     * best plain streaming read, and 4 KiB pages cost it a third on a VM. */
    const size_t huge = (size_t)2 << 20;
    const size_t alloc = (p->words * 8 + huge - 1) / huge * huge;
    p->buf = p->words ? aligned_alloc(huge, alloc) : NULL;
    if (!p->buf) {
        free(p);
        return NULL;
    }
#if defined(__linux__) && defined(MADV_HUGEPAGE)
    (void)madvise(p->buf, alloc, MADV_HUGEPAGE);
#endif
    /* Written once, so every page is mapped before anything is timed. */
    for (size_t i = 0; i < p->words; i++) p->buf[i] = i * 0x9e3779b97f4a7c15ull;
    return p;
}

void bench_probe_free(struct bench_probe *p)
{
    if (!p) return;
    free(p->buf);
    free(p);
}

size_t bench_probe_bytes(const struct bench_probe *p)
{
    return p ? p->words * 8 : 0;
}

/* reps rounds; each round times one pass of every read loop this CPU can
 * run, in turn, so the loops see the same neighbours. Thread start-up is
 * outside the timed region (the threads meet at a gate first), so this is
 * the bandwidth the threads see, not the cost of creating them. */
double bench_probe_run(struct bench_probe *p, int n_threads, int reps)
{
    if (!p || reps < 1) return 0;
    if (n_threads < 1) n_threads = 1;
    if (n_threads > 256) n_threads = 256;
    /* whole 4-line groups per thread: the AVX-512 loop reads 32 words a step */
    const size_t words = p->words / 32 / (size_t)n_threads * 32 * (size_t)n_threads;
    if (words == 0) return 0;
    double *t = calloc((size_t)reps * BW_N_READERS, sizeof *t);
    struct bw_job *jobs = calloc((size_t)n_threads, sizeof *jobs);
    double bw = 0;
    if (t && jobs) {
        int r = 0, ok = 1;
        for (; r < reps && ok; r++)
            for (int k = 0; k < BW_N_READERS && ok; k++) {
                if (!bw_readers[k].usable()) continue;
                for (int i = 0; i < n_threads; i++)
                    jobs[i] = (struct bw_job){ .read = bw_readers[k].read,
                                               .p = p->buf + words / (size_t)n_threads * (size_t)i,
                                               .n = words / (size_t)n_threads };
                /* cannot measure: give up cleanly */
                ok = (t[(size_t)k * reps + r] = bench_run_together(n_threads, bw_work, jobs,
                                                                  sizeof *jobs)) >= 0;
            }
        for (int k = 0; k < BW_N_READERS && ok; k++) {
            if (!bw_readers[k].usable()) continue;
            const double b = (double)(words * 8) / bench_median(t + (size_t)k * reps, reps);
            if (b > bw) bw = b;
        }
    }
    free(jobs);
    free(t);
    return bw;
}

double bench_read_bandwidth(size_t bytes, int n_threads, int reps)
{
    struct bench_probe *p = bench_probe_new(bytes);
    const double bw = bench_probe_run(p, n_threads, reps);
    bench_probe_free(p);
    return bw;
}

typedef void (*sgemm_fn)(int, int, int, int, int, int, float, const float *, int, const float *,
                         int, float, float *, int);
typedef void (*set_threads_fn)(int);

double bench_blas_sgemm_gflops(int64_t M, int64_t N, int64_t K, int threads, int reps)
{
    void *h = dlopen("libopenblas.so.0", RTLD_NOW | RTLD_LOCAL);
    if (!h) h = dlopen("libopenblas.so", RTLD_NOW | RTLD_LOCAL);
    if (!h) return 0;
    sgemm_fn sgemm;
    set_threads_fn set_threads;
    void *p = dlsym(h, "cblas_sgemm");
    memcpy(&sgemm, &p, sizeof p);
    p = dlsym(h, "openblas_set_num_threads");
    memcpy(&set_threads, &p, sizeof p);
    double gf = 0;
    float *a = malloc((size_t)(M * K) * 4), *b = malloc((size_t)(N * K) * 4),
          *c = malloc((size_t)(M * N) * 4);
    double *t = calloc((size_t)reps + 1, sizeof *t);
    if (sgemm && a && b && c && t) {
        if (set_threads && threads > 0) set_threads(threads);
        for (int64_t i = 0; i < M * K; i++) a[i] = (float)(i % 7) * 0.1f;
        for (int64_t i = 0; i < N * K; i++) b[i] = (float)(i % 5) * 0.1f;
        for (int r = 0; r <= reps; r++) { /* the first is a warm-up */
            double t0 = bench_now();
            /* 101 RowMajor, 111 NoTrans, 112 Trans: C = A * B^T as the mul_mat */
            sgemm(101, 111, 112, (int)M, (int)N, (int)K, 1.0f, a, (int)K, b, (int)K, 0.0f, c,
                  (int)N);
            t[r] = bench_now() - t0;
        }
        gf = 2.0 * (double)M * (double)N * (double)K / bench_median(t + 1, reps) * 1e-9;
    }
    free(t);
    free(c);
    free(b);
    free(a);
    dlclose(h);
    return gf;
}
