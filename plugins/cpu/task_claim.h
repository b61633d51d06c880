/*
 * task_claim.h — how the threads of a graph share the tasks of one step.
 *
 * Most steps hand their tasks out in order: one range that every thread
 * claims from the front. In the steps that stream a weight (backend.c says
 * which), each of the nth threads owns a contiguous range of the tasks and
 * takes them from the front, in order; a thread whose range is empty takes
 * the other ranges' tasks from their back ends. For a MUL_MAT the tasks
 * are chunks in row order, so at decode each thread streams one contiguous
 * part of the weight and its run-ahead (hardware and software prefetch)
 * stays in memory it will read itself; a thread the OS has not scheduled
 * yet still holds nobody up, because the others take its range from the
 * far end. (One shared counter, used before, handed out chunks in order of
 * arrival, so two threads leapfrogged through the weight and each one's
 * run-ahead landed in the other's next chunk.)
 *
 * A range's claims are one 64-bit word: front count in the low half, back
 * count in the high half. Every claim is one fetch_add; it succeeds when
 * the counts before it sum to less than the range's length, so exactly
 * `length` claims succeed and the front and back never hand out the same
 * task. A thread stops at its first failed claim on a range, so the counts
 * overrun the length by at most nth (<= 4096) and never carry into the
 * other half.
 */
#ifndef BP_CPU_TASK_CLAIM_H
#define BP_CPU_TASK_CLAIM_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

/* The most tasks one step may have: the claim counts are 32-bit. */
#define CPU_CLAIM_MAX_TASKS ((int64_t)INT32_MAX)

/* Thread i's range [lo, hi) of n tasks shared by nth threads. */
static inline void cpu_claim_range(int64_t n, int nth, int i, int64_t *lo, int64_t *hi)
{
    *lo = n * i / nth;
    *hi = n * (i + 1) / nth;
}

/* The owner's next task of [lo, hi): false when the range is used up. */
static inline bool cpu_claim_front(_Atomic uint64_t *w, int64_t lo, int64_t hi, int64_t *task)
{
    const uint64_t old = atomic_fetch_add_explicit(w, 1, memory_order_relaxed);
    const int64_t front = (int64_t)(old & 0xffffffffu), back = (int64_t)(old >> 32);
    if (front + back >= hi - lo)
        return false;
    *task = lo + front;
    return true;
}

/* Another thread's task from the back of [lo, hi). */
static inline bool cpu_claim_back(_Atomic uint64_t *w, int64_t lo, int64_t hi, int64_t *task)
{
    const uint64_t old = atomic_fetch_add_explicit(w, (uint64_t)1 << 32, memory_order_relaxed);
    const int64_t front = (int64_t)(old & 0xffffffffu), back = (int64_t)(old >> 32);
    if (front + back >= hi - lo)
        return false;
    *task = hi - 1 - back;
    return true;
}

#endif
