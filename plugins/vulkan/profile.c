/*
 * profile.c — per-op time of a stream's graphs from timestamp queries.
 *
 * A timed graph gets a timestamp before its first dispatch and one after
 * each dispatch (bottom of pipe); dispatch k is charged the time between
 * mark k and mark k + 1. Dispatches between two barriers may overlap on a
 * GPU, so there a dispatch's time is "how far it moved the end", and the
 * times still partition the graph's span. Two consumers: the caller's
 * bp_profile (bp_set_profile: `backplane run --profile`), by op, whose
 * graph_ns is the recording time plus the device span; and
 * BACKPLANE_VULKAN_PROFILE=1, a finer table (op, shader, weight type)
 * printed to stderr when the stream is freed. A fused chain (fusion.c) is
 * one dispatch, charged to the op whose shader runs it; the finer table
 * names the chain ("RMS_NORM+MUL", "ADD+RMS_NORM+MUL").
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "vk_internal.h"

uint64_t vk_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

void vk_prof_init(struct vk_dev *d, struct vk_prof *p)
{
    const char *env = vk_getenv(d->pl, "BACKPLANE_VULKAN_PROFILE");
    p->env = env && *env && strcmp(env, "0") != 0;
    if (p->env && d->ts_bits == 0)
        vk_log(d->pl, BP_LOG_WARN, "BACKPLANE_VULKAN_PROFILE is set but the compute queue of %s "
               "has no timestamps; nothing will be timed.", d->name);
}

bool vk_prof_wanted(const struct vk_dev *d, const struct vk_prof *p)
{
    return (p->env || p->abi) && d->ts_bits > 0;
}

bp_status vk_prof_start(struct vk_dev *d, struct vk_prof *p, VkCommandBuffer cmd, uint32_t n)
{
    const struct vk_fns *f = &d->pl->fn;
    p->n = 0;
    if (n + 1 > p->cap) {
        uint32_t cap = n + 1 < 256 ? 256 : n + 1;
        struct vk_prof_tag *tags = realloc(p->tags, (size_t)cap * sizeof *tags);
        if (!tags) {
            vk_log(d->pl, BP_LOG_ERROR, "could not allocate the profile of %u dispatches; free "
                   "memory or unset BACKPLANE_VULKAN_PROFILE.", n);
            return BP_ERR_OUT_OF_MEMORY;
        }
        p->tags = tags;
        if (p->pool) f->vkDestroyQueryPool(d->device, p->pool, NULL);
        p->pool = VK_NULL_HANDLE;
        p->cap = 0;
        VkQueryPoolCreateInfo qi = { .sType = VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO,
                                     .queryType = VK_QUERY_TYPE_TIMESTAMP, .queryCount = cap };
        VkResult r = f->vkCreateQueryPool(d->device, &qi, NULL, &p->pool);
        if (r != VK_SUCCESS) {
            p->pool = VK_NULL_HANDLE;
            return vk_status(d->pl, r, "creating the profile's timestamp queries");
        }
        p->cap = cap;
    }
    f->vkCmdResetQueryPool(cmd, p->pool, 0, n + 1);
    f->vkCmdWriteTimestamp(cmd, VK_PIPELINE_STAGE_TOP_OF_PIPE_BIT, p->pool, 0);
    p->n = n;
    return BP_OK;
}

void vk_prof_mark(struct vk_dev *d, struct vk_prof *p, VkCommandBuffer cmd, uint32_t k,
                  struct vk_prof_tag tag)
{
    if (k >= p->n) return;
    d->pl->fn.vkCmdWriteTimestamp(cmd, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, p->pool, k + 1);
    p->tags[k] = tag;
}

static void add_row(struct vk_prof *p, struct vk_prof_tag tag, uint64_t ns)
{
    uint32_t i = 0;
    while (i < p->n_rows && memcmp(&p->rows[i].tag, &tag, sizeof tag) != 0) i++;
    if (i == p->n_rows) {
        if (p->n_rows == VK_PROF_ROWS) return;
        p->rows[p->n_rows++] = (struct vk_prof_row){ .tag = tag };
    }
    p->rows[i].count++;
    p->rows[i].ns += ns;
}

void vk_prof_collect(struct vk_dev *d, struct vk_prof *p)
{
    if (p->n == 0) return;
    uint32_t n = p->n;
    p->n = 0;
    uint64_t *ts = malloc(((size_t)n + 1) * sizeof *ts);
    if (!ts) return;
    VkResult r = d->pl->fn.vkGetQueryPoolResults(d->device, p->pool, 0, n + 1,
                                                  ((size_t)n + 1) * sizeof *ts, ts, sizeof *ts,
                                                  VK_QUERY_RESULT_64_BIT | VK_QUERY_RESULT_WAIT_BIT);
    if (r != VK_SUCCESS) {
        free(ts);
        return;
    }
    const double period = d->props.limits.timestampPeriod > 0 ? d->props.limits.timestampPeriod : 1.0;
    const uint64_t mask = d->ts_bits >= 64 ? UINT64_MAX : (((uint64_t)1 << d->ts_bits) - 1);
    uint64_t span = 0;
    for (uint32_t k = 0; k < n; k++) {
        uint64_t dt = ((ts[k + 1] - ts[k]) & mask);
        /* A mark earlier than the one before (overlapping dispatches): none. */
        if (dt > mask / 2) dt = 0;
        uint64_t ns = (uint64_t)((double)dt * period);
        span += ns;
        const struct vk_prof_tag *t = &p->tags[k];
        if (p->abi && t->op >= 0 && t->op < p->abi->n_ops) {
            p->abi->ops[t->op].count++;
            p->abi->ops[t->op].ns += ns;
        }
        if (p->env) add_row(p, *t, ns);
    }
    free(ts);
    if (p->abi) {
        p->abi->graphs++;
        p->abi->graph_ns += p->record_ns + span;
    }
    p->graphs++;
    p->graph_ns += p->record_ns + span;
}


static int by_time(const void *a, const void *b)
{
    const struct vk_prof_row *x = a, *y = b;
    return x->ns < y->ns ? 1 : x->ns > y->ns ? -1 : 0;
}

static void print_table(struct vk_dev *d, struct vk_prof *p)
{
    qsort(p->rows, p->n_rows, sizeof p->rows[0], by_time);
    uint64_t sum = 0;
    for (uint32_t i = 0; i < p->n_rows; i++) sum += p->rows[i].ns;
    fprintf(stderr, "%s profile (BACKPLANE_VULKAN_PROFILE): %" PRIu64 " graphs, %.3f ms "
            "(recording + device), %.3f ms in dispatches\n", d->name, p->graphs,
            (double)p->graph_ns / 1e6, (double)sum / 1e6);
    fprintf(stderr, "  %-16s %-18s %-7s %10s %12s %7s\n", "op", "shader", "weights", "dispatches",
            "ms", "share");
    for (uint32_t i = 0; i < p->n_rows; i++) {
        const struct vk_prof_row *r = &p->rows[i];
        const char *sh = (unsigned)r->tag.shader < VK_SH_COUNT ? vk_shader_names[r->tag.shader] : "?";
        const bool mm = r->tag.op == BP_OP_MUL_MAT || r->tag.op == BP_OP_MUL_MAT_ID ||
                        r->tag.op == BP_OP_GET_ROWS;
        char op[48];
        snprintf(op, sizeof op, "%s%s%s%s%s",
                 r->tag.lead != BP_OP_NONE ? bp_op_name((enum bp_op)r->tag.lead) : "",
                 r->tag.lead != BP_OP_NONE ? "+" : "", bp_op_name((enum bp_op)r->tag.op),
                 r->tag.fused != BP_OP_NONE ? "+" : "",
                 r->tag.fused != BP_OP_NONE ? bp_op_name((enum bp_op)r->tag.fused) : "");
        fprintf(stderr, "  %-16s %-18s %-7s %10" PRIu64 " %12.3f %6.1f%%\n", op, sh,
                mm ? bp_type_name((enum bp_type)r->tag.wtype) : "", r->count, (double)r->ns / 1e6,
                sum ? 100.0 * (double)r->ns / (double)sum : 0.0);
    }
}

void vk_prof_free(struct vk_dev *d, struct vk_prof *p)
{
    if (p->env && p->graphs > 0) print_table(d, p);
    if (p->pool) d->pl->fn.vkDestroyQueryPool(d->device, p->pool, NULL);
    free(p->tags);
    memset(p, 0, sizeof *p);
}
