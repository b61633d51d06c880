/* help_topics.h — the guides' sections, embedded at build time from
 * the .md files of docs/ by cmake/embed_docs.c, for `backplane help`. */
#ifndef BP_CLI_HELP_TOPICS_H
#define BP_CLI_HELP_TOPICS_H

#include <stddef.h>

struct bp_help_section {
    const char *guide; /* the guide's file name without .md: "using" */
    const char *topic; /* the guide's name for its introduction, else the heading's anchor */
    int level;         /* 1 the introduction, 2 a "## " section, 3 a "### " section within it */
    const char *title; /* the heading as written */
    const char *text;  /* the Markdown of the section, heading included */
};

extern const struct bp_help_section bp_help_sections[];
extern const size_t bp_help_section_count;

#endif /* BP_CLI_HELP_TOPICS_H */
