/*
 * cmd_serve.c — `backplane serve`: parse the options, load the plugins and
 * pick the device, then host/serve/ does the rest (bp_serve_run). Built
 * without libmicrohttpd or Jansson, it says how to get them.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "split.h"

#ifdef BP_HAVE_SERVE
#include "serve.h"

static void help(void)
{
    puts("usage: backplane serve [--model PATH|builtin:NAME] [--device NAME] [--threads N]\n"
         "                       [--host ADDR] [--port N] [--parallel N] [--n-ctx N]\n"
         "                       [--max-queue N] [--api-key KEY] [--max-body BYTES]\n"
         "                       [--timeout S] [--json]\n\n"
         "Serves the model over HTTP with OpenAI's API: POST /v1/chat/completions (with\n"
         "the model's chat template), POST /v1/completions, GET /v1/models, POST\n"
         "/tokenize and /detokenize, GET /health and GET /metrics (Prometheus). Requests\n"
         "share the model in slots that one engine steps together; a request's text\n"
         "does not depend on what else is being served. SIGTERM or Ctrl-C finishes the\n"
         "requests in flight, then exits. The guide: 'backplane help serving'.\n\n"
         "  --model PATH         a GGUF file (as for 'backplane run'); builtin:NAME a\n"
         "                       built-in model with pseudo-random weights, f16, seed 1\n"
         "                       (default builtin:tiny)\n"
         "  --device NAME        cpu, vulkan0, meta:cpu*2, ... (default: BACKPLANE_DEVICES,\n"
         "                       else the first GPU, else the CPU)\n"
         "  --threads N          threads of a CPU device (default: the backend's)\n"
         "  --host ADDR          address to listen on (default 127.0.0.1; 0.0.0.0 or ::\n"
         "                       for every interface)\n"
         "  --port N             TCP port (default 8080; 0: any free port, printed)\n"
         "  --parallel N         slots: requests generated at once (default 4)\n"
         "  --n-ctx N            KV positions per slot: prompt plus generated tokens\n"
         "                       (default: the model's context, at most 4096)\n"
         "  --max-queue N        requests that may wait for a slot; more get 503\n"
         "                       (default 64)\n"
         "  --api-key KEY        require 'Authorization: Bearer KEY' on every route but\n"
         "                       /health (default: BACKPLANE_API_KEY; unset: no key)\n"
         "  --max-body BYTES     largest request body; larger gets 413 (default 8388608)\n"
         "  --timeout S          close a connection idle for S seconds (default 600)\n"
         "  --json               announce the server as one JSON line on stdout: url,\n"
         "                       model, device, slots, n_ctx\n");
}

static bool num(const char *opt, const char *v, long long lo, long long hi, long long *out)
{
    char *end;
    errno = 0;
    long long x = v ? strtoll(v, &end, 10) : 0;
    if (!v || errno || end == v || *end || x < lo || x > hi) {
        cli_usage_error("serve", "%s wants a whole number from %lld to %lld%s%s%s.", opt, lo, hi,
                        v ? ", not '" : "", v ? v : "", v ? "'" : "");
        return false;
    }
    *out = x;
    return true;
}

int cmd_serve(int argc, char **argv)
{
    struct bp_serve_options o;
    bp_serve_defaults(&o);
    const char *device = NULL, *env_key = getenv("BACKPLANE_API_KEY");
    o.api_key = env_key && *env_key ? env_key : NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        long long x;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            help();
            return CLI_EXIT_OK;
        }
        if (!strcmp(a, "--json")) {
            o.json = true;
            continue;
        }
        const bool takes = !strcmp(a, "--model") || !strcmp(a, "--device") || !strcmp(a, "--host") ||
                           !strcmp(a, "--api-key") || !strcmp(a, "--threads") || !strcmp(a, "--port") ||
                           !strcmp(a, "--parallel") || !strcmp(a, "--n-ctx") || !strcmp(a, "--max-queue") ||
                           !strcmp(a, "--max-body") || !strcmp(a, "--timeout");
        if (!takes) return cli_usage_error("serve", "unknown option '%s'.", a);
        if (!v) return cli_usage_error("serve", "%s needs a value.", a);
        i++;
        if (!strcmp(a, "--model")) o.model = v;
        else if (!strcmp(a, "--device")) device = v;
        else if (!strcmp(a, "--host")) o.host = v;
        else if (!strcmp(a, "--api-key")) o.api_key = v;
        else if (!strcmp(a, "--threads")) {
            if (!num(a, v, 1, 4096, &x)) return CLI_EXIT_USAGE;
            o.threads = (int)x;
        } else if (!strcmp(a, "--port")) {
            if (!num(a, v, 0, 65535, &x)) return CLI_EXIT_USAGE;
            o.port = (int)x;
        } else if (!strcmp(a, "--parallel")) {
            if (!num(a, v, 1, 256, &x)) return CLI_EXIT_USAGE;
            o.parallel = (int)x;
        } else if (!strcmp(a, "--n-ctx")) {
            if (!num(a, v, 2, 1 << 24, &x)) return CLI_EXIT_USAGE;
            o.n_ctx = x;
        } else if (!strcmp(a, "--max-queue")) {
            if (!num(a, v, 0, 1 << 20, &x)) return CLI_EXIT_USAGE;
            o.max_queue = (int)x;
        } else if (!strcmp(a, "--max-body")) {
            if (!num(a, v, 64, (long long)1 << 40, &x)) return CLI_EXIT_USAGE;
            o.max_body = (size_t)x;
        } else {
            if (!num(a, v, 1, 86400, &x)) return CLI_EXIT_USAGE;
            o.timeout_s = (unsigned)x;
        }
    }
    if (!cli_load()) return CLI_EXIT_FAIL;
    struct bp_device *dev = NULL;
    char err[1024];
    if (device && !strncmp(device, "meta:", 5)) {
        if (!(dev = bp_run_find_device(device, err, sizeof err))) cli_error("%s", err);
    } else if (device) {
        dev = cli_find_device(device);
    } else {
        size_t n = 0;
        if (bp_default_devices(&dev, 1, &n) != BP_OK || n == 0) {
            cli_error("no default device: %s; run 'backplane devices'.", bp_last_error());
            dev = NULL;
        }
    }
    if (!dev) return CLI_EXIT_FAIL;
    return bp_serve_run(&o, dev) ? CLI_EXIT_FAIL : CLI_EXIT_OK;
}

#else /* !BP_HAVE_SERVE */

int cmd_serve(int argc, char **argv)
{
    (void)argc, (void)argv;
    cli_error("this backplane was built without 'serve': it needs libmicrohttpd and Jansson. Install "
              "libmicrohttpd-dev and libjansson-dev (scripts/packages.txt) and build again.");
    return CLI_EXIT_FAIL;
}

#endif
