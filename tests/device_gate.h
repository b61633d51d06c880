/*
 * device_gate.h — skipping only what this machine truly lacks.
 *
 * A suite whose cases need a GPU device puts them in a TCase tagged with the
 * device's name ("vulkan0"). CTest runs the executable twice (see
 * tests/run.cmake): once with CK_EXCLUDE_TAGS=<device> for the cases every
 * machine runs, and once with CK_INCLUDE_TAGS=<device> and SKIP_RETURN_CODE
 * 77, where device_gate_for_tag() exits 77 when the device is absent. Run by
 * hand with neither variable, every case runs and a missing device fails.
 */
#ifndef BP_DEVICE_GATE_H
#define BP_DEVICE_GATE_H

/* Exit status for a run that needs device `name` of plugin family `family`:
 * 0 when it is there; 77 after "SKIP: <why>" when the plugin is loaded but
 * this machine has no such device; 1 after "FAIL: <why>" when the plugin
 * itself is not loaded (a missing build product is not a skip). Loads the
 * plugins and unloads them again: a GPU driver's threads do not survive the
 * fork that check runs each case in. */
int device_gate(const char *family, const char *name);

/* device_gate(family, name) when CK_INCLUDE_TAGS is exactly `name` (CTest's
 * run of the tagged cases), else 0. */
int device_gate_for_tag(const char *family, const char *name);

#endif
