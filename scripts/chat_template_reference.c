/*
 * chat_template_reference.c — the program behind
 * scripts/chat-template-reference.sh: loads llama.cpp's own libllama (npm
 * @node-llama-cpp/linux-x64) with dlopen and writes, to stdout, what its
 * llama_chat_apply_template makes of
 *   - every built-in name (llama_chat_builtin_templates) on every message
 *     list of tests/data/chat/messages.txt,
 *   - every text of tests/data/chat/templates.txt on the lists marked
 *     "probe",
 * each with add_ass false and true; and for each text, the built-in names
 * whose output is the same on all its cases (the format llama.cpp detected,
 * seen from outside). tests/test_chat_template.c checks ours against it.
 *
 *   cc -O2 -o /tmp/chatref scripts/chat_template_reference.c -ldl
 *   /tmp/chatref LIBDIR/libllama.so tests/data/chat/templates.txt tests/data/chat/messages.txt
 */
#include <dlfcn.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct llama_chat_message {
    const char *role;
    const char *content;
};

typedef int32_t (*apply_fn)(const char *tmpl, const struct llama_chat_message *chat, size_t n_msg,
                            bool add_ass, char *buf, int32_t length);
typedef int32_t (*builtin_fn)(const char **output, size_t len);

#define MAX_SETS 32
#define MAX_MSGS 16
#define MAX_TEMPLATES 256
#define MAX_NAMES 128

struct set {
    char name[64];
    bool probe;
    size_t n;
    struct llama_chat_message m[MAX_MSGS];
};

static char *unescape(const char *s)
{
    char *out = malloc(strlen(s) + 1), *o = out;
    for (; *s; s++) {
        if (*s != '\\') { *o++ = *s; continue; }
        s++;
        if (*s == 'n') *o++ = '\n';
        else if (*s == 't') *o++ = '\t';
        else if (*s == 'r') *o++ = '\r';
        else if (*s == 'x') {
            unsigned v = 0;
            sscanf(s + 1, "%2x", &v);
            *o++ = (char)v;
            s += 2;
        } else *o++ = *s;
    }
    *o = 0;
    return out;
}

static void escape(const char *s, int32_t n)
{
    for (int32_t i = 0; i < n; i++) {
        const unsigned char c = (unsigned char)s[i];
        if (c == '\\') fputs("\\\\", stdout);
        else if (c == '\n') fputs("\\n", stdout);
        else if (c == '\t') fputs("\\t", stdout);
        else if (c == '\r') fputs("\\r", stdout);
        else if (c < 0x20 || c == 0x7F) printf("\\x%02x", c);
        else putchar(c);
    }
}

static char *read_line(FILE *f)
{
    static char line[1 << 16];
    if (!fgets(line, sizeof line, f)) return NULL;
    line[strcspn(line, "\n")] = 0;
    return line;
}

/* One template's outputs: [set][add_ass], NULL when the library refused. */
struct result {
    char *out[MAX_SETS][2];
};

static void run(apply_fn apply, const char *key, const char *tmpl, const struct set *sets, size_t n_sets,
                bool probes_only, struct result *r)
{
    static char buf[1 << 20];
    for (size_t s = 0; s < n_sets; s++) {
        if (probes_only && !sets[s].probe) continue;
        for (int add = 0; add < 2; add++) {
            int32_t rc = apply(tmpl, sets[s].m, sets[s].n, add, buf, sizeof buf);
            if (rc >= (int32_t)sizeof buf) { fprintf(stderr, "%s: output too long\n", key); exit(1); }
            printf("case\t%s\t%s\t%d\t%d\t", key, sets[s].name, add, (int)rc);
            if (rc >= 0) escape(buf, rc);
            printf("\n");
            if (r && rc >= 0) {
                r->out[s][add] = malloc((size_t)rc + 1);
                memcpy(r->out[s][add], buf, (size_t)rc);
                r->out[s][add][rc] = 0;
            }
        }
    }
}

static bool same_on_probes(const struct result *a, const struct result *b, const struct set *sets, size_t n)
{
    for (size_t s = 0; s < n; s++)
        for (int add = 0; sets[s].probe && add < 2; add++)
            if (!a->out[s][add] || !b->out[s][add] || strcmp(a->out[s][add], b->out[s][add])) return false;
    return true;
}

int main(int argc, char **argv)
{
    if (argc != 4) { fprintf(stderr, "usage: chatref LIBLLAMA TEMPLATES MESSAGES\n"); return 2; }
    void *lib = dlopen(argv[1], RTLD_NOW | RTLD_GLOBAL);
    if (!lib) { fprintf(stderr, "%s\n", dlerror()); return 1; }
    apply_fn apply = (apply_fn)dlsym(lib, "llama_chat_apply_template");
    builtin_fn builtins = (builtin_fn)dlsym(lib, "llama_chat_builtin_templates");
    if (!apply || !builtins) { fprintf(stderr, "libllama lacks the chat-template functions\n"); return 1; }

    static struct set sets[MAX_SETS];
    size_t n_sets = 0;
    FILE *f = fopen(argv[3], "r");
    if (!f) { perror(argv[3]); return 1; }
    for (char *l; (l = read_line(f));) {
        if (l[0] == '#' || !l[0]) continue;
        if (!strncmp(l, "set ", 4)) {
            struct set *s = &sets[n_sets++];
            char flag[16] = "";
            sscanf(l + 4, "%63s %15s", s->name, flag);
            s->probe = !strcmp(flag, "probe");
            continue;
        }
        struct set *s = &sets[n_sets - 1];
        char *tab = strchr(l, '\t');
        if (!tab || s->n == MAX_MSGS) { fprintf(stderr, "bad message line: %s\n", l); return 1; }
        *tab = 0;
        s->m[s->n].role = unescape(l);
        s->m[s->n++].content = unescape(tab + 1);
    }
    fclose(f);

    const char *names[MAX_NAMES];
    const int32_t n_names = builtins(names, MAX_NAMES);
    if (n_names > MAX_NAMES) { fprintf(stderr, "more built-in names than this program holds\n"); return 1; }
    printf("# llama.cpp's llama_chat_apply_template on tests/data/chat/templates.txt and every\n"
           "# built-in name, over the lists of tests/data/chat/messages.txt (scripts/\n"
           "# chat-template-reference.sh, libllama of npm @node-llama-cpp/linux-x64 3.22.1).\n"
           "# case KEY LIST ADD_ASS RC OUTPUT (escaped; =NAME is a built-in name);\n"
           "# family KEY NAMES: the built-in names whose output equals KEY's on every probe list.\n");
    printf("names\t");
    for (int32_t i = 0; i < n_names; i++) printf("%s%s", i ? " " : "", names[i]);
    printf("\n");
    static struct result named[MAX_NAMES], text;
    for (int32_t i = 0; i < n_names; i++) {
        char key[80];
        snprintf(key, sizeof key, "=%s", names[i]);
        run(apply, key, names[i], sets, n_sets, false, &named[i]);
    }
    f = fopen(argv[2], "r");
    if (!f) { perror(argv[2]); return 1; }
    for (char *l; (l = read_line(f));) {
        if (l[0] == '#' || !l[0]) continue;
        char *tab = strchr(l, '\t');
        char *tmpl = tab ? unescape(tab + 1) : NULL;
        if (tab) *tab = 0;
        char key[128];
        snprintf(key, sizeof key, "%.127s", l);
        memset(&text, 0, sizeof text);
        run(apply, key, tmpl, sets, n_sets, true, &text);
        printf("family\t%s\t", key);
        int found = 0;
        for (int32_t i = 0; i < n_names; i++)
            if (same_on_probes(&text, &named[i], sets, n_sets)) printf("%s%s", found++ ? "," : "", names[i]);
        printf("%s\n", found ? "" : "-");
        free(tmpl);
    }
    fclose(f);
    return 0;
}
