/* chat_family.c — see chat_family.h; the detection is host/run/chat_template.c. */
#include "chat_family.h"

#include <stdio.h>
#include <stdlib.h>

#include "chat_template.h"
#include "gguf.h"

void cli_chat_family(const struct bp_gguf *g, char *buf, size_t cap)
{
    char err[512], *tmpl = NULL;
    if (!g) {
        snprintf(buf, cap, "none (chatml by default)");
        return;
    }
    if (bp_chat_template_of_gguf(g, &tmpl, err, sizeof err) != BP_OK) {
        snprintf(buf, cap, "unreadable: %s", err);
        return;
    }
    const enum bp_chat_template id = bp_chat_template_detect(tmpl);
    if (!tmpl) {
        snprintf(buf, cap, "none (chatml by default)");
    } else if (id == BP_CHAT_TEMPLATE_UNKNOWN) {
        char line[80];
        bp_chat_template_first_line(tmpl, line, sizeof line);
        snprintf(buf, cap, "not one llama.cpp formats natively (first line \"%s\"); run --chat needs "
                 "--template NAME", line);
    } else {
        snprintf(buf, cap, "%s", bp_chat_template_name(id));
    }
    free(tmpl);
}
