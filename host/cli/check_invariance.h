/* check_invariance.h — two properties `check --report` adds beyond op
 * equivalence: a row gives the same result alone and inside a batch (batch
 * invariance), and a device with a thread count gives identical bits for 1
 * and N threads. Both on MUL_MAT, the op whose kernels split work most. */
#ifndef BP_CLI_CHECK_INVARIANCE_H
#define BP_CLI_CHECK_INVARIANCE_H

#include <stdbool.h>

#include <backplane/backplane.h>

enum invariance_kind { INVARIANCE_BATCH, INVARIANCE_THREADS };

struct invariance_result {
    enum invariance_kind kind;
    enum bp_type type;        /* the weight type */
    int status;               /* 0 pass, 1 fail, 2 unsupported */
    double max_nmse;          /* batch: the worst row's NMSE; threads: 0 or 1 */
    double threshold;         /* batch: the op's threshold; threads: 0 (bit-identical) */
    int threads;              /* threads: the N compared with 1 */
    size_t differing;         /* threads: values whose bits differ */
    char message[200];        /* "" or why it failed / is unsupported */
};

/* Runs every invariance check that applies to dev into out (up to cap),
 * returning how many were written. Checks dev cannot run (a weight type it
 * declines; threads without BP_PROC_SET_N_THREADS) are unsupported or left
 * out. Uses its own backends and buffers. */
int check_invariance_run(struct bp_device *dev, struct invariance_result *out, int cap);

#endif
