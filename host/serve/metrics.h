/*
 * metrics.h — the server's counters, gauges and latency histograms, shared
 * by the HTTP threads and the engine (one mutex), rendered as Prometheus
 * text for GET /metrics.
 */
#ifndef BP_SERVE_METRICS_H
#define BP_SERVE_METRICS_H

#include <stddef.h>
#include <stdint.h>

#include "text.h"

enum serve_hist { SERVE_HIST_REQUEST, SERVE_HIST_TTFT, SERVE_HIST_ITL, SERVE_HIST_COUNT };

/* Initialises the metrics (process-wide; call once before any thread). */
void serve_metrics_init(int n_slots);
/* A finished HTTP request on route (a static string) with its status. */
void serve_metrics_request(const char *route, int status);
void serve_metrics_tokens(int64_t prompt, int64_t generated);
/* Gauges the engine sets each step. */
void serve_metrics_gauges(int queued, int busy);
void serve_metrics_observe(enum serve_hist h, double seconds);
/* The metrics as Prometheus text exposition appended to b; false when
 * memory runs out. */
bool serve_metrics_render(struct serve_buf *b);
/* Busy slots as last set (for tests and /health). */
int serve_metrics_busy(void);

#endif /* BP_SERVE_METRICS_H */
