/* json_read.h — a small JSON reader for the CLI's own files (check reports, chat
 * messages): a whole document into a tree. Not a general-purpose parser: nesting at
 * most 64 deep, and strings are C strings (\u escapes become UTF-8; \u0000
 * is refused). */
#ifndef BP_CLI_JSON_READ_H
#define BP_CLI_JSON_READ_H

#include <stdbool.h>
#include <stddef.h>

enum json_kind { JSON_NULL, JSON_BOOL, JSON_NUMBER, JSON_STRING, JSON_ARRAY, JSON_OBJECT };

struct json_value {
    enum json_kind kind;
    bool boolean;
    double number;
    char *string;               /* JSON_STRING */
    size_t n;                   /* JSON_ARRAY / JSON_OBJECT: members */
    struct json_value *items;   /* n values */
    char **keys;                /* JSON_OBJECT: n keys */
};

/* The document in path, or NULL with a sentence in err (file or syntax,
 * with the byte offset). Free with json_value_free. */
struct json_value *json_read_file(const char *path, char *err, size_t cap);
void json_value_free(struct json_value *v);
/* Member key of an object, NULL when absent or v is not an object. */
const struct json_value *json_member(const struct json_value *v, const char *key);
/* The string of a JSON_STRING member, else fallback. */
const char *json_member_string(const struct json_value *v, const char *key, const char *fallback);
/* The number of a JSON_NUMBER member, else fallback. */
double json_member_number(const struct json_value *v, const char *key, double fallback);

#endif
