/* cmd_help.c — `backplane help [TOPIC]`: the guides (the .md files of docs/), offline.
 * The sections are compiled in (help_topics.h), so what it prints is the
 * guide of the same release as the program. */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "help_topics.h"

static void list_topics(void)
{
    puts("usage: backplane help TOPIC\n\n"
         "Prints a section of the guides. A guide's name prints its introduction,\n"
         "GUIDE/TOPIC one guide's section; a word of a topic's name is enough when\n"
         "only one topic has it. Topics (indented further: parts of the one above):");
    const char *guide = NULL;
    for (size_t i = 0; i < bp_help_section_count; i++) {
        const struct bp_help_section *s = &bp_help_sections[i];
        if (!guide || strcmp(guide, s->guide) != 0) {
            guide = s->guide;
            printf("\n  %s (%s)\n", s->topic, s->title);
        } else {
            printf("%*s%s\n", s->level == 3 ? 6 : 4, "", s->topic);
        }
    }
    puts("\nThe same guides are the .md files of docs/ in the source tree.");
}

static void print_section(const struct bp_help_section *s)
{
    fputs(s->text, stdout);
    if (!*s->text || s->text[strlen(s->text) - 1] != '\n') putchar('\n');
}

int cmd_help(int argc, char **argv)
{
    if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
        list_topics();
        return CLI_EXIT_OK;
    }
    if (argc > 2) return cli_usage_error("help", "give one topic ('backplane help' lists them).");
    const char *want = argv[1];
    /* An exact topic first (a guide's name, or a section's anchor), also as
     * GUIDE/TOPIC; then the topics whose name contains the word. */
    size_t exact = 0, partial = 0, last = 0;
    for (size_t i = 0; i < bp_help_section_count; i++) {
        const struct bp_help_section *s = &bp_help_sections[i];
        const size_t gl = strlen(s->guide);
        if (!strcmp(want, s->topic) ||
            (!strncmp(want, s->guide, gl) && want[gl] == '/' && !strcmp(want + gl + 1, s->topic))) {
            if (exact++) puts("");
            print_section(s);
        }
    }
    if (exact) return CLI_EXIT_OK;
    /* One topic name matched, perhaps in several guides: print each. */
    bool one_name = true;
    for (size_t i = 0; i < bp_help_section_count; i++)
        if (strstr(bp_help_sections[i].topic, want)) {
            if (partial++ && strcmp(bp_help_sections[i].topic, bp_help_sections[last].topic) != 0)
                one_name = false;
            last = i;
        }
    if (partial && one_name) {
        for (size_t i = 0, n = 0; i < bp_help_section_count; i++)
            if (!strcmp(bp_help_sections[i].topic, bp_help_sections[last].topic)) {
                if (n++) puts("");
                print_section(&bp_help_sections[i]);
            }
        return CLI_EXIT_OK;
    }
    if (partial > 1) {
        fprintf(stderr, "backplane: '%s' is part of %zu topics; say which:\n", want, partial);
        for (size_t i = 0; i < bp_help_section_count; i++)
            if (strstr(bp_help_sections[i].topic, want))
                fprintf(stderr, "  %-28s %s (%s)\n", bp_help_sections[i].topic, bp_help_sections[i].title,
                        bp_help_sections[i].guide);
        return CLI_EXIT_USAGE;
    }
    cli_error("no help topic '%s'; 'backplane help' lists them.", want);
    return CLI_EXIT_FAIL;
}
