/*
 * fuzz_serve_request.c — arbitrary bytes as the body of a chat and of a
 * completion request (host/serve/request.c), and as generated text pushed
 * through the stop-string matcher in pieces (host/serve/text.c): any input
 * must parse or give a 400 naming a sentence, never crash, read out of
 * bounds or leak; the matcher's released text must be a prefix of what
 * was pushed and never contain a stop string.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "request.h"
#include "text.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *body = (const char *)data;
    for (int k = 0; k < 2; k++) {
        struct serve_params p;
        struct serve_error e;
        if (!serve_params_parse(body, size, k ? SERVE_COMPLETION : SERVE_CHAT, &p, &e) &&
            (e.status != 400 && e.status != 500))
            abort();
        serve_params_free(&p);
    }
    /* The first bytes choose a stop string; the rest is text in pieces of 1-7 bytes. */
    if (size < 2) return 0;
    size_t sl = 1 + data[0] % 4;
    if (sl + 1 > size) return 0;
    char stop[8];
    memcpy(stop, body + 1, sl);
    stop[sl] = '\0';
    if (strlen(stop) == 0) return 0;
    char *stops[] = {stop};
    struct serve_stop s;
    serve_stop_init(&s, stops, 1);
    struct serve_buf out = {0};
    size_t at = 1 + sl;
    while (at < size && !s.stopped) {
        size_t n = 1 + (size_t)(data[at] % 7);
        if (n > size - at) n = size - at;
        if (!serve_stop_push(&s, body + at, n)) abort();
        at += n;
        const char *t;
        size_t len;
        serve_stop_take(&s, at >= size || s.stopped, &t, &len);
        if (!serve_buf_add(&out, t, len)) abort();
    }
    if (out.len > s.text.len || (out.len && memcmp(out.data, s.text.data, out.len))) abort();
    if (out.len && memmem(out.data, out.len, stop, strlen(stop))) abort();
    free(out.data);
    serve_stop_free(&s);
    return 0;
}
