/* cli.h — what the subcommands of the `backplane` program share. */
#ifndef BP_CLI_H
#define BP_CLI_H

#include <stdbool.h>
#include <stddef.h>

#include <backplane/backplane.h>

/* Exit statuses: 0 success, 1 a failure (check failed, no such device, ...),
 * 2 a usage error. */
#define CLI_EXIT_OK 0
#define CLI_EXIT_FAIL 1
#define CLI_EXIT_USAGE 2

int cmd_devices(int argc, char **argv);
int cmd_info(int argc, char **argv);
int cmd_check(int argc, char **argv);
int cmd_version(int argc, char **argv);
int cmd_bench(int argc, char **argv);
int cmd_run(int argc, char **argv); /* cmd_run.c, on host/run/ */
int cmd_quantize(int argc, char **argv); /* cmd_quantize.c, on host/run/quantize_model.c */
int cmd_tokenize(int argc, char **argv);
int cmd_chat_template(int argc, char **argv); /* cmd_chat_template.c, on host/run/chat_template.c */
int cmd_serve(int argc, char **argv); /* cmd_serve.c, on host/serve/ when it is built */
int cmd_help(int argc, char **argv); /* cmd_help.c, on the guides embedded at build time */
/* `info --model`: a model file as the runner reads it (model_info.c). */
int cli_model_info(const char *path, bool as_json);

/* Loads plugins with crash/hang isolation so one bad plugin is reported,
 * not fatal. Prints the error and returns false when loading failed. */
bool cli_load(void);

/* The device called name, or NULL after printing a sentence that lists the
 * available names to stderr. */
struct bp_device *cli_find_device(const char *name);

/* "backplane: <message>" on stderr. */
void cli_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* A usage error: the message and a hint; returns CLI_EXIT_USAGE. */
int cli_usage_error(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* The arguments of a subcommand whose only option is --json: sets *as_json
 * and returns -1 to go on, or the exit code after --help or a usage error. */
int cli_json_only_args(const char *cmd, int argc, char **argv, void (*help)(void), bool *as_json);

/* The plugin that owns dev, or NULL. */
const struct bp_plugin_info *cli_plugin_of(struct bp_device *dev);

/* "1.0" for an ABI version word into buf. */
const char *cli_abi_string(uint32_t v, char *buf, size_t cap);

#endif /* BP_CLI_H */
