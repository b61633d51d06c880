/* env.c — reading BACKPLANE_* variables, and catching misspelt ones. */
#include <ctype.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>

#include "loader_internal.h"

extern char **environ;

/* The one list of variables backplane reads. A new knob goes here too, or
 * users setting it get a "not a backplane variable" warning. */
const char *const bp__known_env_vars[] = {
    "BACKPLANE_PLUGIN_PATH",
    "BACKPLANE_BACKENDS",
    "BACKPLANE_DEVICES",
    "BACKPLANE_LOG",
    "BACKPLANE_CPU_VARIANT",
    "BACKPLANE_CPU_THREADS",
    "BACKPLANE_CUDA_ALLREDUCE",
    "BACKPLANE_CUDA_ALLREDUCE_BF16_MIN",
    "BACKPLANE_CPU_POLL",
    "BACKPLANE_CPU_POLL_ADAPT",
    "BACKPLANE_CPU_HUGEPAGES",
    "BACKPLANE_CPU_AMX",
    "BACKPLANE_CPU_PREFETCH",
    "BACKPLANE_BENCH_REPACK",
    "BACKPLANE_PROFILE",
    "BACKPLANE_META_SPLIT",
    "BACKPLANE_META_ALLREDUCE",
    "BACKPLANE_SCHED_STRICT",
    "BACKPLANE_VULKAN_COOPMAT",
    "BACKPLANE_VULKAN_DEVICES",
    "BACKPLANE_VULKAN_F16_STORAGE",
    "BACKPLANE_VULKAN_F16_TILES",
    "BACKPLANE_VULKAN_INT_DOT",
    "BACKPLANE_VULKAN_MM_TILE",
    "BACKPLANE_VULKAN_FUSION",
    "BACKPLANE_VULKAN_PIPELINE_CACHE",
    "BACKPLANE_VULKAN_PROFILE",
    "BACKPLANE_VULKAN_SUBGROUPS",
    "BACKPLANE_DIST_TIMEOUT",
    "BACKPLANE_DIST_TEST_DIE_AT",
    "BACKPLANE_API_KEY",
    NULL,
};

#define ENV_PREFIX "BACKPLANE_"
#define VARIANT_SUFFIX "_VARIANT"

const char *bp__getenv(const char *name)
{
    /* secure_getenv: a setuid program must not let its caller pick which
     * shared objects it loads. */
    return secure_getenv(name);
}

bool bp__env_is_known(const char *name)
{
    if (!name) return false;
    for (const char *const *k = bp__known_env_vars; *k; k++)
        if (!strcmp(name, *k)) return true;
    /* BACKPLANE_<FAMILY>_VARIANT for any family: families come and go with
     * the plugins installed, so the pattern is all we can check. */
    size_t n = strlen(name), pre = strlen(ENV_PREFIX), suf = strlen(VARIANT_SUFFIX);
    if (n <= pre + suf || strncmp(name, ENV_PREFIX, pre) != 0 ||
        strcmp(name + n - suf, VARIANT_SUFFIX) != 0)
        return false;
    for (size_t i = pre; i < n - suf; i++) {
        unsigned char ch = (unsigned char)name[i];
        if (!(isupper(ch) || isdigit(ch) || ch == '_')) return false;
    }
    return true;
}

size_t bp__edit_distance(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    /* Two rows of the classic table; names are short, so a fixed cap keeps
     * this allocation-free. Longer inputs are compared on their prefix. */
    enum { CAP = 128 };
    size_t prev[CAP + 1], cur[CAP + 1];
    if (la > CAP) la = CAP;
    if (lb > CAP) lb = CAP;
    for (size_t j = 0; j <= lb; j++) prev[j] = j;
    for (size_t i = 1; i <= la; i++) {
        cur[0] = i;
        for (size_t j = 1; j <= lb; j++) {
            size_t sub = prev[j - 1] + (a[i - 1] != b[j - 1]);
            size_t del = prev[j] + 1, ins = cur[j - 1] + 1;
            size_t m = sub < del ? sub : del;
            cur[j] = m < ins ? m : ins;
        }
        memcpy(prev, cur, (lb + 1) * sizeof prev[0]);
    }
    return prev[lb];
}

const char *bp__env_suggest(const char *name)
{
    if (!name) return NULL;
    const char *best = NULL;
    size_t best_d = (size_t)-1;
    for (const char *const *k = bp__known_env_vars; *k; k++) {
        size_t d = bp__edit_distance(name, *k);
        if (d < best_d) {
            best_d = d;
            best = *k;
        }
    }
    /* Beyond a third of the name it is a different word, not a typo. */
    size_t limit = strlen(name) / 3;
    if (limit < 2) limit = 2;
    return best_d <= limit ? best : NULL;
}

static void env_warn_unknown_once(void)
{
    /* A setuid program ignores the environment; it has nothing to warn about. */
    if (!environ || getauxval(AT_SECURE)) return;
    for (char **e = environ; *e; e++) {
        if (strncmp(*e, ENV_PREFIX, strlen(ENV_PREFIX)) != 0) continue;
        const char *eq = strchr(*e, '=');
        size_t len = eq ? (size_t)(eq - *e) : strlen(*e);
        char name[256];
        if (len >= sizeof name) len = sizeof name - 1;
        memcpy(name, *e, len);
        name[len] = '\0';
        if (bp__env_is_known(name)) continue;
        const char *s = bp__env_suggest(name);
        if (s)
            bp__log(BP_LOG_WARN, "backplane", "%s is not a backplane variable; did you mean %s?",
                    name, s);
        else
            bp__log(BP_LOG_WARN, "backplane",
                    "%s is not a backplane variable; it is ignored (docs/operating.md lists the "
                    "BACKPLANE_* variables).", name);
    }
}

void bp__env_warn_unknown(void)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, env_warn_unknown_once);
}
