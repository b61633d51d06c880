/* main.c — `backplane`: subcommand dispatch and the top-level help. */
#include <stdio.h>
#include <string.h>

#include "cli.h"

struct command {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *summary;
};

static const struct command commands[] = {
    {"devices", cmd_devices, "list devices, loaded plugins and plugins that were refused"},
    {"info", cmd_info, "show one device's capabilities, supported ops and features"},
    {"check", cmd_check, "run the op-equivalence check against the CPU reference"},
    {"version", cmd_version, "print the library and ABI versions"},
    {"bench", cmd_bench, "benchmark an op on a device against references measured in the same run"},
    {"run", cmd_run, "run a language model (GGUF or built-in) on a device, or chat with it"},
    {"quantize", cmd_quantize, "convert a GGUF model to a llama.cpp quantization preset (Q4_K_M, Q8_0, ...)"},
    {"tokenize", cmd_tokenize, "text to token ids and back with a model's tokenizer"},
    {"chat-template", cmd_chat_template, "format a conversation with a model's chat template, as llama.cpp does"},
    {"serve", cmd_serve, "serve a model over HTTP with OpenAI's API (chat, completions, streaming)"},
    {"help", cmd_help, "print a section of the guides: 'backplane help' lists the topics"},
};

static void usage(FILE *f)
{
    fputs("usage: backplane <command> [options]\n\ncommands:\n", f);
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        fprintf(f, "  %-13s %s\n", commands[i].name, commands[i].summary);
    fputs("\nRun 'backplane <command> --help' for a command's options, 'backplane help' for the guides.\n"
          "Environment: BACKPLANE_PLUGIN_PATH, BACKPLANE_BACKENDS, BACKPLANE_DEVICES, "
          "BACKPLANE_LOG.\n", f);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return CLI_EXIT_USAGE;
    }
    const char *name = argv[1];
    if (!strcmp(name, "--help") || !strcmp(name, "-h")) {
        usage(stdout);
        return CLI_EXIT_OK;
    }
    if (!strcmp(name, "--version")) name = "version";
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (!strcmp(name, commands[i].name)) {
            int rc = commands[i].run(argc - 1, argv + 1);
            bp_unload();
            return rc;
        }
    fprintf(stderr, "backplane: unknown command '%s'.\n", name);
    usage(stderr);
    return CLI_EXIT_USAGE;
}
