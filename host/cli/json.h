/*
 * json.h — a small streaming JSON writer for the CLI's --json output.
 *
 * Calls nest like the document: json_object_begin(w, "key") inside an object,
 * json_object_begin(w, NULL) inside an array. Commas and indentation are the
 * writer's job; strings are escaped per RFC 8259; non-finite numbers become
 * null (JSON has no NaN).
 */
#ifndef BP_CLI_JSON_H
#define BP_CLI_JSON_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#define JSON_MAX_DEPTH 32

/* Jansson (linked in for `serve`) exports json_string and json_null too:
 * the writer's own are renamed at link level so that neither shadows the
 * other. */
#define json_string cli_json_string
#define json_null cli_json_null

struct json_writer {
    FILE *f;
    int depth;
    bool has_items[JSON_MAX_DEPTH];
};

void json_init(struct json_writer *w, FILE *f);
void json_object_begin(struct json_writer *w, const char *key);
void json_object_end(struct json_writer *w);
void json_array_begin(struct json_writer *w, const char *key);
void json_array_end(struct json_writer *w);
void json_string(struct json_writer *w, const char *key, const char *value); /* NULL -> null */
void json_int(struct json_writer *w, const char *key, int64_t value);
void json_uint(struct json_writer *w, const char *key, uint64_t value);
void json_double(struct json_writer *w, const char *key, double value);
void json_bool(struct json_writer *w, const char *key, bool value);
void json_null(struct json_writer *w, const char *key);
/* Ends the document with a newline. */
void json_finish(struct json_writer *w);

/* Writes s as a quoted, escaped JSON string. */
void json_write_escaped(FILE *f, const char *s);

#endif /* BP_CLI_JSON_H */
