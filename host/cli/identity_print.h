/* identity_print.h — a device's identity for people (one line) and for
 * tools (a JSON object), shared by `devices` and `check --report`. */
#ifndef BP_CLI_IDENTITY_PRINT_H
#define BP_CLI_IDENTITY_PRINT_H

#include <stddef.h>

#include <backplane/backplane.h>

#include "json.h"

/* "uuid 6f1e…, pci 0000:65:00.0, software; same GPU as cuda0" into buf, or
 * "" when the device reports nothing. Returns buf. */
const char *cli_identity_text(struct bp_device *dev, char *buf, size_t cap);
/* An "identity" object (uuid, pci_bus_id, software, cpu_package, numa_node,
 * same_device_as) inside the current JSON object. */
void cli_identity_json(struct json_writer *w, struct bp_device *dev);

#endif
