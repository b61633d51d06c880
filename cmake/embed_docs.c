/*
 * embed_docs.c — a build-time tool: turns the guides (the .md files of docs/) into a C
 * file of sections for `backplane help`, so the program carries its guides
 * and reads them offline.
 *
 *   embed_docs OUT.c GUIDE.md...
 *
 * Each guide gives one entry for itself (its name, e.g. "using", with the
 * text before its first "## " heading) and one per "## " and "### "
 * heading: the topic is the heading as a GitHub anchor ("## The memory
 * plan" -> "the-memory-plan"), so every link into a guide names a topic,
 * and the text runs to the next heading of the same or a higher level (a
 * "## " section holds its "### " ones). The output defines
 * bp_help_sections[] and bp_help_section_count (host/cli/help_topics.h).
 */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void put_c_string(FILE *out, const char *s, size_t n)
{
    fputs("\"", out);
    for (size_t i = 0; i < n; i++) {
        const unsigned char c = (unsigned char)s[i];
        if (c == '\n') {
            fputs(i + 1 < n ? "\\n\"\n    \"" : "\\n", out);
        } else if (c == '"' || c == '\\') {
            fprintf(out, "\\%c", c);
        } else if (c == '?' && i + 1 < n && s[i + 1] == '?') {
            fputs("?\"\"", out); /* no trigraphs */
        } else if (c < 0x20 || c == 0x7f) {
            fprintf(out, "\\%03o", c);
        } else {
            fputc(c, out);
        }
    }
    fputs("\"", out);
}

/* The heading's anchor as GitHub makes it: lower case, letters, digits,
 * '-' and '_' kept, spaces to '-', the rest dropped. */
static void anchor_of(const char *title, size_t n, char *out, size_t cap)
{
    size_t o = 0;
    for (size_t i = 0; i < n && o + 1 < cap; i++) {
        const unsigned char c = (unsigned char)title[i];
        if (isalnum(c) || c == '-' || c == '_') out[o++] = (char)tolower(c);
        else if (c == ' ') out[o++] = '-';
    }
    out[o] = '\0';
}

static char *read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap + 1);
    size_t got;
    while (buf && (got = fread(buf + n, 1, cap - n, f)) > 0) {
        n += got;
        if (n == cap) {
            char *bigger = realloc(buf, 2 * cap + 1);
            if (!bigger) { free(buf); buf = NULL; break; }
            buf = bigger;
            cap *= 2;
        }
    }
    const int err = ferror(f);
    fclose(f);
    if (!buf || err) { free(buf); return NULL; }
    buf[n] = '\0';
    *len = n;
    return buf;
}

static void put_entry(FILE *out, const char *guide, const char *topic, int level, const char *title,
                      size_t title_len, const char *text, size_t text_len)
{
    fprintf(out, "    {\"%s\", \"%s\", %d, ", guide, topic, level);
    put_c_string(out, title, title_len);
    fputs(",\n    ", out);
    put_c_string(out, text, text_len);
    fputs("},\n", out);
}

/* The level of a heading line: 2 for "## ", 3 for "### ", else 0. */
static int heading_level(const char *line)
{
    if (!strncmp(line, "## ", 3)) return 2;
    if (!strncmp(line, "### ", 4)) return 3;
    return 0;
}

/* One guide: its own entry, then one per "## " and "### " heading. Fenced
 * blocks are skipped when looking for headings ("## " may start a line in
 * a shell block). Returns the number of entries, or -1. */
static int embed_guide(FILE *out, const char *path)
{
    size_t len = 0;
    char *doc = read_file(path, &len);
    if (!doc) {
        fprintf(stderr, "embed_docs: cannot read %s.\n", path);
        return -1;
    }
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    char guide[64];
    snprintf(guide, sizeof guide, "%.*s", (int)strcspn(base, "."), base);

    /* The headings, in order: where each line starts and its level. */
    size_t n_heads = 0, cap = 0;
    const char **heads = NULL;
    int *levels = NULL;
    int in_fence = 0;
    for (const char *line = doc; line < doc + len;) {
        const char *next = strchr(line, '\n');
        next = next ? next + 1 : doc + len;
        if (!strncmp(line, "```", 3)) in_fence = !in_fence;
        const int level = in_fence ? 0 : heading_level(line);
        if (level) {
            if (n_heads == cap) {
                cap = cap ? 2 * cap : 64;
                const char **h = realloc(heads, cap * sizeof *heads);
                int *l = h ? realloc(levels, cap * sizeof *levels) : NULL;
                if (h) heads = h;
                if (l) levels = l;
                if (!h || !l) {
                    fprintf(stderr, "embed_docs: out of memory reading %s.\n", path);
                    free(heads);
                    free(levels);
                    free(doc);
                    return -1;
                }
            }
            heads[n_heads] = line;
            levels[n_heads++] = level;
        }
        line = next;
    }

    const char *title = doc;
    size_t title_len = 0;
    if (!strncmp(doc, "# ", 2)) {
        title = doc + 2;
        title_len = strcspn(title, "\n");
    }
    const char *intro_end = doc + len;
    for (size_t i = 0; i < n_heads; i++)
        if (levels[i] == 2) {
            intro_end = heads[i];
            break;
        }
    put_entry(out, guide, guide, 1, title, title_len, doc, (size_t)(intro_end - doc));
    for (size_t i = 0; i < n_heads; i++) {
        const char *end = doc + len;
        for (size_t j = i + 1; j < n_heads; j++)
            if (levels[j] <= levels[i]) {
                end = heads[j];
                break;
            }
        const char *t = heads[i] + levels[i] + 1;
        const size_t t_len = strcspn(t, "\n");
        char topic[128];
        anchor_of(t, t_len, topic, sizeof topic);
        put_entry(out, guide, topic, levels[i], t, t_len, heads[i], (size_t)(end - heads[i]));
    }
    free(heads);
    free(levels);
    free(doc);
    return (int)n_heads + 1;
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: embed_docs OUT.c GUIDE.md...\n");
        return 2;
    }
    FILE *out = fopen(argv[1], "w");
    if (!out) {
        fprintf(stderr, "embed_docs: cannot write %s.\n", argv[1]);
        return 1;
    }
    fputs("/* Generated by cmake/embed_docs.c from the guides in docs/: edit them, not this file. */\n"
          "#include \"help_topics.h\"\n\n"
          "const struct bp_help_section bp_help_sections[] = {\n", out);
    int total = 0;
    for (int i = 2; i < argc; i++) {
        const int n = embed_guide(out, argv[i]);
        if (n < 0) {
            fclose(out);
            remove(argv[1]);
            return 1;
        }
        total += n;
    }
    fprintf(out, "};\n\nconst size_t bp_help_section_count = %d;\n", total);
    if (fclose(out) != 0) {
        fprintf(stderr, "embed_docs: writing %s failed.\n", argv[1]);
        remove(argv[1]);
        return 1;
    }
    return 0;
}
