/*
 * test_chat_template.c — host/run/chat_template.c against llama.cpp itself:
 * tests/data/chat/expected.txt holds what the real llama_chat_apply_template
 * made of every built-in name and every template text of templates.txt over
 * the message lists of messages.txt (scripts/chat-template-reference.sh), and
 * every case must come out byte for byte the same, refusals included. Then
 * the refusal's sentence, the caller's buffer, and the template of a GGUF.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chat_template.h"
#include "gguf.h"
#include "suite_main.h"

#define DATA BP_TEST_SOURCE_DIR "/tests/data/chat/"
#define MAX_SETS 32
#define MAX_MSGS 16
#define MAX_TEMPLATES 256

/* Escapes as the data files write them: \n \t \r \\ \xNN. */
static char *unescape(const char *s)
{
    char *out = malloc(strlen(s) + 1), *o = out;
    ck_assert_ptr_nonnull(out);
    for (; *s; s++) {
        if (*s != '\\') { *o++ = *s; continue; }
        s++;
        if (*s == 'n') *o++ = '\n';
        else if (*s == 't') *o++ = '\t';
        else if (*s == 'r') *o++ = '\r';
        else if (*s == 'x') {
            unsigned v = 0;
            ck_assert_int_eq(sscanf(s + 1, "%2x", &v), 1);
            *o++ = (char)v;
            s += 2;
        } else *o++ = *s;
    }
    *o = 0;
    return out;
}

struct set {
    char name[64];
    size_t n;
    struct bp_chat_message m[MAX_MSGS];
};

struct tmpl {
    char name[128];
    char *text;   /* NULL: the "null" template */
};

static struct set sets[MAX_SETS];
static size_t n_sets;
static struct tmpl tmpls[MAX_TEMPLATES];
static size_t n_tmpls;

static char *next_line(FILE *f)
{
    static char line[1 << 18];
    if (!fgets(line, sizeof line, f)) return NULL;
    line[strcspn(line, "\n")] = 0;
    return line;
}

static void free_inputs(void)
{
    for (size_t i = 0; i < n_sets; i++)
        for (size_t k = 0; k < sets[i].n; k++) {
            free((char *)sets[i].m[k].role);
            free((char *)sets[i].m[k].content);
        }
    for (size_t i = 0; i < n_tmpls; i++) free(tmpls[i].text);
    n_sets = n_tmpls = 0;
}

static void load_inputs(void)
{
    free_inputs();
    FILE *f = fopen(DATA "messages.txt", "r");
    ck_assert_msg(f, "cannot open " DATA "messages.txt");
    n_sets = 0;
    for (char *l; (l = next_line(f));) {
        if (l[0] == '#' || !l[0]) continue;
        if (!strncmp(l, "set ", 4)) {
            ck_assert_uint_lt(n_sets, MAX_SETS);
            struct set *s = &sets[n_sets++];
            s->n = 0;
            ck_assert_int_eq(sscanf(l + 4, "%63s", s->name), 1);
            continue;
        }
        ck_assert_uint_gt(n_sets, 0);
        struct set *s = &sets[n_sets - 1];
        char *tab = strchr(l, '\t');
        ck_assert_msg(tab && s->n < MAX_MSGS, "bad message line '%s'", l);
        *tab = 0;
        s->m[s->n].role = unescape(l);
        s->m[s->n++].content = unescape(tab + 1);
    }
    fclose(f);
    f = fopen(DATA "templates.txt", "r");
    ck_assert_msg(f, "cannot open " DATA "templates.txt");
    n_tmpls = 0;
    for (char *l; (l = next_line(f));) {
        if (l[0] == '#' || !l[0]) continue;
        ck_assert_uint_lt(n_tmpls, MAX_TEMPLATES);
        char *tab = strchr(l, '\t');
        struct tmpl *t = &tmpls[n_tmpls++];
        t->text = tab ? unescape(tab + 1) : NULL;
        if (tab) *tab = 0;
        snprintf(t->name, sizeof t->name, "%.127s", l);
    }
    fclose(f);
}

static const struct set *find_set(const char *name)
{
    for (size_t i = 0; i < n_sets; i++)
        if (!strcmp(sets[i].name, name)) return &sets[i];
    ck_abort_msg("expected.txt names a message list '%s' that messages.txt lacks", name);
    return NULL;
}

/* The template text of an expected.txt key: "=NAME" is the name itself. */
static const char *find_template(const char *key, bool *found)
{
    *found = true;
    if (key[0] == '=') return key + 1;
    for (size_t i = 0; i < n_tmpls; i++)
        if (!strcmp(tmpls[i].name, key)) return tmpls[i].text;
    *found = false;
    return NULL;
}

/* Splits line at tabs into at most n fields; returns how many. */
static int fields(char *line, char **f, int n)
{
    int k = 0;
    f[k++] = line;
    for (char *c = line; *c && k < n; c++)
        if (*c == '\t') { *c = 0; f[k++] = c + 1; }
    return k;
}

START_TEST(test_chat_builtin_names_are_llama_cpps)
{
    FILE *f = fopen(DATA "expected.txt", "r");
    ck_assert_ptr_nonnull(f);
    char want[4096] = "";
    for (char *l; (l = next_line(f));)
        if (!strncmp(l, "names\t", 6)) snprintf(want, sizeof want, "%.4000s", l + 6);
    fclose(f);
    ck_assert_msg(want[0], "expected.txt has no names line");
    const char *names[128];
    const size_t n = bp_chat_template_builtin_names(names, 128);
    char got[4096] = "";
    for (size_t i = 0; i < n && i < 128; i++) {
        strcat(got, i ? " " : "");
        strcat(got, names[i]);
        /* each name detects as itself */
        ck_assert_str_eq(bp_chat_template_name(bp_chat_template_detect(names[i])), names[i]);
    }
    ck_assert_str_eq(got, want);
    ck_assert_uint_eq(n, 54);
    /* a short buffer gets the first names, and the count is the whole */
    ck_assert_uint_eq(bp_chat_template_builtin_names(names, 2), 54);
    ck_assert_str_eq(names[0], "bailing");
    ck_assert_str_eq(names[1], "bailing-think");
}
END_TEST

START_TEST(test_chat_every_case_is_llama_cpps_byte_for_byte)
{
    load_inputs();
    FILE *f = fopen(DATA "expected.txt", "r");
    ck_assert_ptr_nonnull(f);
    char *buf = NULL;
    size_t len = 0, cap = 0;
    int cases = 0, failed = 0, refused = 0;
    for (char *l; (l = next_line(f));) {
        if (strncmp(l, "case\t", 5)) continue;
        char *fl[6] = { 0 };
        ck_assert_int_ge(fields(l, fl, 6), 5);
        const char *key = fl[1], *list = fl[2];
        const bool add = !strcmp(fl[3], "1");
        const long rc = strtol(fl[4], NULL, 10);
        bool known;
        const char *text = find_template(key, &known);
        ck_assert_msg(known, "expected.txt names a template '%s' that templates.txt lacks", key);
        const struct set *s = find_set(list);
        char err[512] = "";
        const bp_status st = bp_chat_template_format(text, s->m, s->n, add, &buf, &len, &cap, err, sizeof err);
        cases++;
        if (rc < 0) {
            refused++;
            if (st != BP_ERR_UNSUPPORTED) {
                if (failed++ < 10) fprintf(stderr, "%s on %s (add_ass %d): llama.cpp refuses, we gave '%s'\n",
                                           key, list, add, st == BP_OK ? buf : err);
            }
            continue;
        }
        char *want = unescape(fl[5] ? fl[5] : "");
        if (st != BP_OK || len != (size_t)rc || strlen(want) != (size_t)rc || memcmp(buf, want, len)) {
            if (failed++ < 10)
                fprintf(stderr, "%s on %s (add_ass %d):\n  llama.cpp: '%s'\n  ours:      '%s'%s\n", key, list,
                        add, want, st == BP_OK ? buf : err, st == BP_OK ? "" : " (refused)");
        }
        free(want);
    }
    fclose(f);
    free(buf);
    ck_assert_int_gt(cases, 1500);
    ck_assert_int_ge(refused, 40);
    free_inputs();
    ck_assert_msg(failed == 0, "%d of %d cases differ from llama.cpp's output (the first are on stderr)",
                  failed, cases);
}
END_TEST

START_TEST(test_chat_detects_the_format_llama_cpp_formats_as)
{
    load_inputs();
    FILE *f = fopen(DATA "expected.txt", "r");
    ck_assert_ptr_nonnull(f);
    int n = 0;
    for (char *l; (l = next_line(f));) {
        if (strncmp(l, "family\t", 7)) continue;
        char *fl[3];
        ck_assert_int_eq(fields(l, fl, 3), 3);
        bool known;
        const char *text = find_template(fl[1], &known);
        ck_assert(known);
        const enum bp_chat_template id = bp_chat_template_detect(text);
        const char *name = bp_chat_template_name(id);
        n++;
        if (!strcmp(fl[2], "-")) {
            /* llama.cpp's output matched no built-in name: refused, or dots1,
             * the one format with no name */
            ck_assert_msg(id == BP_CHAT_TEMPLATE_UNKNOWN || id == BP_CHAT_DOTS1,
                          "%s: llama.cpp matches no built-in name, we detect %s", fl[1], name);
            ck_assert_int_eq(id == BP_CHAT_DOTS1, !strcmp(fl[1], "dots1"));
            continue;
        }
        ck_assert_msg(name, "%s: llama.cpp formats it as %s, we detect nothing", fl[1], fl[2]);
        char list[1024];
        snprintf(list, sizeof list, ",%s,", fl[2]);
        char item[80];
        snprintf(item, sizeof item, ",%s,", name);
        ck_assert_msg(strstr(list, item), "%s: llama.cpp formats it as %s, we detect %s", fl[1], fl[2], name);
    }
    fclose(f);
    free_inputs();
    ck_assert_int_gt(n, 60);
}
END_TEST

START_TEST(test_chat_refusal_names_the_first_line)
{
    char err[512];
    char *buf = NULL;
    size_t len = 0, cap = 0;
    const struct bp_chat_message m = { "user", "hi" };
    /* leading blank lines skipped, the line trimmed at both ends */
    ck_assert_int_eq(bp_chat_template_format("\n\n   {# my own #}  \r\n{{ x }}", &m, 1, true, &buf, &len, &cap,
                                             err, sizeof err), BP_ERR_UNSUPPORTED);
    ck_assert_str_eq(err, "the chat template whose first line is \"{# my own #}\" is not one llama.cpp "
                          "formats without Jinja: it is none of the 54 built-in names (chatml, llama3, "
                          "...) and has none of the markers llama.cpp detects a format by.");
    /* cut at 60 bytes */
    const char *longer = "{# 0123456789012345678901234567890123456789012345678901234567890123456789 #}";
    bp_chat_template_unknown(longer, err, sizeof err);
    ck_assert_ptr_nonnull(strstr(err, "\"{# 012345678901234567890123456789012345678901234567890123456..."
                                      "\" is not"));
    /* ... and never inside a UTF-8 character: 3 + 28 x 2 bytes fit, the 29th would not */
    char utf8[128] = "{# ", want[128] = "\"{# ";
    for (int i = 0; i < 40; i++) strcat(utf8, "\xC3\xA9");
    for (int i = 0; i < 28; i++) strcat(want, "\xC3\xA9");
    strcat(want, "...\" is not");
    bp_chat_template_unknown(utf8, err, sizeof err);
    ck_assert_ptr_nonnull(strstr(err, want));
    /* the empty template has its own sentence; case and spaces matter in names */
    ck_assert_int_eq(bp_chat_template_format("", &m, 1, true, &buf, &len, &cap, err, sizeof err),
                     BP_ERR_UNSUPPORTED);
    ck_assert_str_eq(err, "the chat template is empty, which llama.cpp's formatter refuses too; name one of "
                          "its 54 built-in formats (chatml, llama3, ...) instead.");
    bp_chat_template_unknown(" \n\t ", err, sizeof err);
    ck_assert_ptr_nonnull(strstr(err, "the chat template is blank,"));
    char line[64];
    bp_chat_template_first_line("\r\n  a\tb  \nc", line, sizeof line);
    ck_assert_str_eq(line, "a b");
    ck_assert_int_eq(bp_chat_template_detect("ChatML"), BP_CHAT_TEMPLATE_UNKNOWN);
    ck_assert_int_eq(bp_chat_template_detect("chatml "), BP_CHAT_TEMPLATE_UNKNOWN);
    ck_assert_int_eq(bp_chat_template_detect(NULL), BP_CHAT_CHATML);
    /* dots1 is detected by its markers only, as in llama.cpp */
    ck_assert_int_eq(bp_chat_template_detect("dots1"), BP_CHAT_TEMPLATE_UNKNOWN);
    free(buf);
}
END_TEST

START_TEST(test_chat_apply_reuses_and_grows_the_callers_buffer)
{
    char *buf = malloc(4);
    size_t cap = 4, len = 0;
    ck_assert_ptr_nonnull(buf);
    const struct bp_chat_message m[2] = { { "system", "S" }, { "user", "U" } };
    ck_assert_int_eq(bp_chat_template_apply(BP_CHAT_CHATML, m, 2, true, &buf, &len, &cap), BP_OK);
    const char *want = "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nU<|im_end|>\n<|im_start|>assistant\n";
    ck_assert_uint_eq(len, strlen(want));
    ck_assert_str_eq(buf, want);
    ck_assert_uint_gt(cap, len);
    /* a second call replaces the contents */
    ck_assert_int_eq(bp_chat_template_apply(BP_CHAT_LLAMA3, m + 1, 1, false, &buf, &len, &cap), BP_OK);
    ck_assert_str_eq(buf, "<|start_header_id|>user<|end_header_id|>\n\nU<|eot_id|>");
    /* no messages, no generation prompt: an empty string, not NULL */
    ck_assert_int_eq(bp_chat_template_apply(BP_CHAT_PHI3, NULL, 0, false, &buf, &len, &cap), BP_OK);
    ck_assert_uint_eq(len, 0);
    ck_assert_str_eq(buf, "");
    /* NULL strings read as empty */
    const struct bp_chat_message nul = { NULL, NULL };
    ck_assert_int_eq(bp_chat_template_apply(BP_CHAT_CHATML, &nul, 1, false, &buf, &len, &cap), BP_OK);
    ck_assert_str_eq(buf, "<|im_start|>\n<|im_end|>\n");
    ck_assert_int_eq(bp_chat_template_apply(BP_CHAT_TEMPLATE_UNKNOWN, m, 2, true, &buf, &len, &cap),
                     BP_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(bp_chat_template_apply(BP_CHAT_TEMPLATE_COUNT, m, 2, true, &buf, &len, &cap),
                     BP_ERR_INVALID_ARGUMENT);
    ck_assert_ptr_null(bp_chat_template_name(BP_CHAT_TEMPLATE_COUNT));
    free(buf);
}
END_TEST

/* A GGUF image with the given metadata (NULL values are left out). */
static struct bp_gguf *gguf_with(const char *tmpl, const char *pre, uint32_t layers, bool tmpl_as_number,
                                 uint8_t **img)
{
    struct bp_gguf_writer *w = NULL;
    ck_assert_int_eq(bp_gguf_writer_new(3, 32, &w), BP_OK);
    ck_assert_int_eq(bp_gguf_add_string(w, "general.architecture", "llama"), BP_OK);
    ck_assert_int_eq(bp_gguf_add_u32(w, "llama.block_count", layers), BP_OK);
    if (pre) ck_assert_int_eq(bp_gguf_add_string(w, "tokenizer.ggml.pre", pre), BP_OK);
    if (tmpl) ck_assert_int_eq(bp_gguf_add_string(w, "tokenizer.chat_template", tmpl), BP_OK);
    if (tmpl_as_number) ck_assert_int_eq(bp_gguf_add_u32(w, "tokenizer.chat_template", 7), BP_OK);
    size_t size;
    ck_assert_int_eq(bp_gguf_writer_image(w, img, &size), BP_OK);
    bp_gguf_writer_free(w);
    struct bp_gguf *g = NULL;
    char err[256];
    ck_assert_int_eq(bp_gguf_parse(*img, size, &g, err, sizeof err), BP_OK);
    return g;
}

START_TEST(test_chat_template_of_a_gguf)
{
    uint8_t *img;
    char err[512], *t;
    /* the key's text, and the family it detects as */
    const char *llama3 = "{% for m in messages %}<|start_header_id|>{{ m.role }}<|end_header_id|>{% endfor %}";
    struct bp_gguf *g = gguf_with(llama3, NULL, 22, false, &img);
    ck_assert_int_eq(bp_chat_template_of_gguf(g, &t, err, sizeof err), BP_OK);
    ck_assert_str_eq(t, llama3);
    free(t);
    ck_assert_str_eq(bp_chat_template_gguf_family(g, err, sizeof err), "llama3");
    bp_gguf_close(g);
    free(img);
    /* none: chatml */
    g = gguf_with(NULL, "llama-bpe", 40, false, &img);
    ck_assert_int_eq(bp_chat_template_of_gguf(g, &t, err, sizeof err), BP_OK);
    ck_assert_ptr_null(t);
    ck_assert_str_eq(bp_chat_template_gguf_family(g, err, sizeof err), "chatml");
    bp_gguf_close(g);
    free(img);
    /* empty counts as none */
    g = gguf_with("", NULL, 22, false, &img);
    ck_assert_int_eq(bp_chat_template_of_gguf(g, &t, err, sizeof err), BP_OK);
    ck_assert_ptr_null(t);
    bp_gguf_close(g);
    free(img);
    /* llama.cpp's one fallback: tekken and 40 layers, no template */
    g = gguf_with(NULL, "tekken", 40, false, &img);
    ck_assert_int_eq(bp_chat_template_of_gguf(g, &t, err, sizeof err), BP_OK);
    ck_assert_str_eq(t, "mistral-v7-tekken");
    free(t);
    ck_assert_str_eq(bp_chat_template_gguf_family(g, err, sizeof err), "mistral-v7-tekken");
    bp_gguf_close(g);
    free(img);
    g = gguf_with(NULL, "tekken", 39, false, &img);
    ck_assert_str_eq(bp_chat_template_gguf_family(g, err, sizeof err), "chatml");
    bp_gguf_close(g);
    free(img);
    /* an unknown template: no family, the sentence */
    g = gguf_with("{{ messages }}", NULL, 22, false, &img);
    ck_assert_ptr_null(bp_chat_template_gguf_family(g, err, sizeof err));
    ck_assert_ptr_nonnull(strstr(err, "first line is \"{{ messages }}\""));
    bp_gguf_close(g);
    free(img);
    /* a number where the text should be */
    g = gguf_with(NULL, NULL, 22, true, &img);
    ck_assert_int_eq(bp_chat_template_of_gguf(g, &t, err, sizeof err), BP_ERR_INVALID_ARGUMENT);
    ck_assert_str_eq(err, "tokenizer.chat_template is not a string (GGUF value type 4); the file is malformed.");
    ck_assert_ptr_null(bp_chat_template_gguf_family(g, err, sizeof err));
    bp_gguf_close(g);
    free(img);
    /* a built-in model has no template: chatml */
    ck_assert_int_eq(bp_chat_template_of_model("builtin:test", &t, err, sizeof err), BP_OK);
    ck_assert_ptr_null(t);
    ck_assert_int_ne(bp_chat_template_of_model("/nonexistent/model.gguf", &t, err, sizeof err), BP_OK);
    ck_assert_ptr_nonnull(strstr(err, "/nonexistent/model.gguf: "));
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("chat_template");
    TCase *tc = tcase_create("chat_template");
    tcase_add_test(tc, test_chat_builtin_names_are_llama_cpps);
    tcase_add_test(tc, test_chat_every_case_is_llama_cpps_byte_for_byte);
    tcase_add_test(tc, test_chat_detects_the_format_llama_cpp_formats_as);
    tcase_add_test(tc, test_chat_refusal_names_the_first_line);
    tcase_add_test(tc, test_chat_apply_reuses_and_grows_the_callers_buffer);
    tcase_add_test(tc, test_chat_template_of_a_gguf);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return run_suite(suite());
}
