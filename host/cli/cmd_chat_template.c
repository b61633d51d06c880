/*
 * cmd_chat_template.c — `backplane chat-template`: a conversation (a JSON
 * file of {"role", "content"} messages) formatted with a model's chat
 * template, or a template named or given on the command line, the way
 * llama.cpp's llama_chat_apply_template does it (host/run/chat_template.c).
 * Reads the model's metadata only, never its weights.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chat_template.h"
#include "cli.h"
#include "json_read.h"

static void help(void)
{
    puts("usage: backplane chat-template (--model PATH|builtin:NAME | --template NAME-OR-TEXT)\n"
         "                               --messages FILE.json [--no-assistant]\n"
         "       backplane chat-template --list\n\n"
         "Prints a conversation as the prompt text a model reads, exactly (no newline\n"
         "added), formatted as llama.cpp's llama_chat_apply_template formats it: a\n"
         "built-in format by name, or the one whose markers the model's Jinja template\n"
         "carries (the Jinja itself is not run). A template that matches no format is\n"
         "refused, never guessed.\n\n"
         "  --model PATH|builtin:NAME  the template of a GGUF file (tokenizer.chat_template;\n"
         "                             none, and built-in models: chatml)\n"
         "  --template NAME-OR-TEXT    a built-in format's name (chatml, llama3, gemma, ...)\n"
         "                             or a template's text\n"
         "  --messages FILE.json       [{\"role\": \"system\", \"content\": \"...\"},\n"
         "                              {\"role\": \"user\", \"content\": \"...\"}, ...]\n"
         "  --no-assistant             leave out the prompt for the assistant's reply\n"
         "  --list                     print the built-in format names, one a line\n");
}

/* The messages of a JSON file: an array of objects with string "role" and
 * "content" (other members ignored). NULL after a sentence. *doc owns the
 * strings the messages point into. */
static struct bp_chat_message *read_messages(const char *path, struct json_value **doc, size_t *n)
{
    char err[512];
    *doc = json_read_file(path, err, sizeof err);
    if (!*doc) {
        cli_error("reading the messages failed: %s.", err);
        return NULL;
    }
    const struct json_value *v = *doc;
    if (v->kind != JSON_ARRAY) {
        cli_error("'%s' is not a JSON array of messages ([{\"role\": ..., \"content\": ...}, ...]).", path);
        return NULL;
    }
    struct bp_chat_message *m = calloc(v->n ? v->n : 1, sizeof *m);
    if (!m) {
        cli_error("out of memory for %zu messages.", v->n);
        return NULL;
    }
    for (size_t i = 0; i < v->n; i++) {
        const struct json_value *it = &v->items[i];
        m[i].role = json_member_string(it, "role", NULL);
        m[i].content = json_member_string(it, "content", NULL);
        if (it->kind != JSON_OBJECT || !m[i].role || !m[i].content) {
            cli_error("message %zu of '%s' is not an object with a string \"role\" and a string "
                      "\"content\".", i + 1, path);
            free(m);
            return NULL;
        }
    }
    *n = v->n;
    return m;
}

int cmd_chat_template(int argc, char **argv)
{
    const char *model = NULL, *tmpl_arg = NULL, *messages = NULL;
    bool add_assistant = true, list = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) { help(); return CLI_EXIT_OK; }
        else if (!strcmp(a, "--no-assistant")) add_assistant = false;
        else if (!strcmp(a, "--list")) list = true;
        else if (!strcmp(a, "--model") || !strcmp(a, "--template") || !strcmp(a, "--messages")) {
            if (!v) return cli_usage_error("chat-template", "%s needs a value.", a);
            *(!strcmp(a, "--model") ? &model : !strcmp(a, "--template") ? &tmpl_arg : &messages) = v;
            i++;
        } else
            return cli_usage_error("chat-template", "unknown option '%s'.", a);
    }
    if (list) {
        const char *names[128];
        const size_t n = bp_chat_template_builtin_names(names, 128);
        for (size_t i = 0; i < n && i < 128; i++) puts(names[i]);
        return CLI_EXIT_OK;
    }
    if (!!model + !!tmpl_arg != 1)
        return cli_usage_error("chat-template", "give one of --model and --template.");
    if (!messages) return cli_usage_error("chat-template", "--messages is required.");

    int rc = CLI_EXIT_FAIL;
    char err[1024], *from_model = NULL, *out = NULL;
    size_t n = 0, len = 0, cap = 0;
    struct json_value *doc = NULL;
    struct bp_chat_message *m = NULL;
    if (model && bp_chat_template_of_model(model, &from_model, err, sizeof err) != BP_OK) {
        cli_error("%s", err);
        goto out;
    }
    const char *tmpl = model ? from_model : tmpl_arg;
    if (bp_chat_template_detect(tmpl) == BP_CHAT_TEMPLATE_UNKNOWN) {
        bp_chat_template_unknown(tmpl, err, sizeof err);
        const size_t l = strlen(err);
        if (l && err[l - 1] == '.') err[l - 1] = '\0';   /* the sentence goes on below */
        cli_error("%s; choose a format with --template NAME (--list names them).", err);
        goto out;
    }
    if (!(m = read_messages(messages, &doc, &n))) goto out;
    if (bp_chat_template_format(tmpl, m, n, add_assistant, &out, &len, &cap, err, sizeof err) != BP_OK) {
        cli_error("%s", err);
        goto out;
    }
    if (fwrite(out, 1, len, stdout) != len || fflush(stdout) != 0) {
        cli_error("writing the prompt to stdout failed.");
        goto out;
    }
    rc = CLI_EXIT_OK;
out:
    free(out);
    free(m);
    json_value_free(doc);
    free(from_model);
    return rc;
}
