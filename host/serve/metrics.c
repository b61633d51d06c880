/* metrics.c — counters and histograms for GET /metrics (metrics.h). */
#include "metrics.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static const double bounds[] = {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120};
#define N_BOUNDS (sizeof bounds / sizeof bounds[0])

static const struct {
    const char *name, *help;
} hist_names[SERVE_HIST_COUNT] = {
    {"backplane_request_duration_seconds", "Time from a completion request's arrival to its last byte."},
    {"backplane_time_to_first_token_seconds", "Time from a completion request's arrival to its first token."},
    {"backplane_inter_token_latency_seconds", "Time between two tokens of one request."},
};

#define MAX_ROUTES 32
static struct {
    pthread_mutex_t mu;
    int n_slots, queued, busy;
    int64_t prompt_tokens, generated_tokens;
    struct {
        const char *route;
        int status;
        uint64_t n;
    } requests[MAX_ROUTES];
    int n_requests;
    struct {
        uint64_t bucket[N_BOUNDS];
        uint64_t count;
        double sum;
    } hist[SERVE_HIST_COUNT];
} M = { .mu = PTHREAD_MUTEX_INITIALIZER };

void serve_metrics_init(int n_slots)
{
    pthread_mutex_lock(&M.mu);
    M.n_slots = n_slots;
    pthread_mutex_unlock(&M.mu);
}

void serve_metrics_request(const char *route, int status)
{
    pthread_mutex_lock(&M.mu);
    int i = 0;
    while (i < M.n_requests && (strcmp(M.requests[i].route, route) || M.requests[i].status != status)) i++;
    if (i == M.n_requests && i < MAX_ROUTES) {
        M.requests[i].route = route;
        M.requests[i].status = status;
        M.n_requests++;
    }
    if (i < MAX_ROUTES) M.requests[i].n++;
    pthread_mutex_unlock(&M.mu);
}

void serve_metrics_tokens(int64_t prompt, int64_t generated)
{
    pthread_mutex_lock(&M.mu);
    M.prompt_tokens += prompt;
    M.generated_tokens += generated;
    pthread_mutex_unlock(&M.mu);
}

void serve_metrics_gauges(int queued, int busy)
{
    pthread_mutex_lock(&M.mu);
    M.queued = queued;
    M.busy = busy;
    pthread_mutex_unlock(&M.mu);
}

int serve_metrics_busy(void)
{
    pthread_mutex_lock(&M.mu);
    int b = M.busy;
    pthread_mutex_unlock(&M.mu);
    return b;
}

void serve_metrics_observe(enum serve_hist h, double seconds)
{
    pthread_mutex_lock(&M.mu);
    for (size_t i = 0; i < N_BOUNDS; i++)
        if (seconds <= bounds[i]) M.hist[h].bucket[i]++;
    M.hist[h].count++;
    M.hist[h].sum += seconds;
    pthread_mutex_unlock(&M.mu);
}

static bool addf(struct serve_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static bool addf(struct serve_buf *b, const char *fmt, ...)
{
    char line[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    return n >= 0 && serve_buf_add(b, line, (size_t)n < sizeof line ? (size_t)n : sizeof line - 1);
}

bool serve_metrics_render(struct serve_buf *b)
{
    bool ok = true;
    pthread_mutex_lock(&M.mu);
    ok &= addf(b, "# HELP backplane_requests_total HTTP requests answered, by route and status.\n"
                  "# TYPE backplane_requests_total counter\n");
    for (int i = 0; i < M.n_requests; i++)
        ok &= addf(b, "backplane_requests_total{route=\"%s\",code=\"%d\"} %llu\n", M.requests[i].route,
                   M.requests[i].status, (unsigned long long)M.requests[i].n);
    ok &= addf(b, "# HELP backplane_prompt_tokens_total Prompt tokens evaluated.\n"
                  "# TYPE backplane_prompt_tokens_total counter\nbackplane_prompt_tokens_total %lld\n",
               (long long)M.prompt_tokens);
    ok &= addf(b, "# HELP backplane_generated_tokens_total Tokens generated.\n"
                  "# TYPE backplane_generated_tokens_total counter\nbackplane_generated_tokens_total %lld\n",
               (long long)M.generated_tokens);
    ok &= addf(b, "# HELP backplane_queue_length Requests waiting for a slot.\n"
                  "# TYPE backplane_queue_length gauge\nbackplane_queue_length %d\n", M.queued);
    ok &= addf(b, "# HELP backplane_slots_busy Slots serving a request.\n"
                  "# TYPE backplane_slots_busy gauge\nbackplane_slots_busy %d\n", M.busy);
    ok &= addf(b, "# HELP backplane_slots_total Slots (--parallel).\n"
                  "# TYPE backplane_slots_total gauge\nbackplane_slots_total %d\n", M.n_slots);
    for (int h = 0; h < SERVE_HIST_COUNT; h++) {
        const char *n = hist_names[h].name;
        ok &= addf(b, "# HELP %s %s\n# TYPE %s histogram\n", n, hist_names[h].help, n);
        for (size_t i = 0; i < N_BOUNDS; i++)
            ok &= addf(b, "%s_bucket{le=\"%g\"} %llu\n", n, bounds[i], (unsigned long long)M.hist[h].bucket[i]);
        ok &= addf(b, "%s_bucket{le=\"+Inf\"} %llu\n%s_sum %.6f\n%s_count %llu\n", n,
                   (unsigned long long)M.hist[h].count, n, M.hist[h].sum, n, (unsigned long long)M.hist[h].count);
    }
    pthread_mutex_unlock(&M.mu);
    return ok;
}
