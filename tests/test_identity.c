/* test_identity.c — stable device identity (bp_identity.h): the same GPU
 * through two plugins, selection by uuid:/pci:, the warning for a list or
 * meta device naming one physical device twice, the default never being a
 * software rasterizer, and the real plugins' answers (cpu, lavapipe). */
#include <fcntl.h>
#include <unistd.h>

#include <backplane/bp_meta.h>

#include "loader_test_util.h"
#include "suite_main.h"

#define ID(f) FAULT "/identity/libbackplane-" f ".so"
#define TWINS ID("idgpua") ":" ID("idgpub") ":" ID("idother")

/* Runs fn with stderr captured into log (the host's and plugins' warnings). */
#define CAPTURE_STDERR(log, cap, stmt)                                   \
    do {                                                                 \
        char path_[] = "/tmp/bp_identityXXXXXX";                         \
        int fd_ = mkstemp(path_);                                        \
        ck_assert_int_ge(fd_, 0);                                        \
        fflush(stderr);                                                  \
        int saved_ = dup(2);                                             \
        dup2(fd_, 2);                                                    \
        stmt;                                                            \
        fflush(stderr);                                                  \
        dup2(saved_, 2);                                                 \
        close(saved_);                                                   \
        memset(log, 0, cap);                                             \
        ck_assert_int_ge(pread(fd_, log, (cap) - 1, 0), 0);              \
        close(fd_);                                                      \
        unlink(path_);                                                   \
    } while (0)

static struct bp_device *dev(const char *name)
{
    struct bp_device *d = bp_device_by_name(name);
    ck_assert_msg(d != NULL, "no device %s: %s", name, bp_last_error());
    return d;
}

START_TEST(test_identity_same_uuid_through_two_plugins_is_one_device)
{
    fresh(TWINS, "idgpua,idgpub,idother");
    ck_assert_ptr_eq(bp_device_same_physical(dev("idgpub0")), dev("idgpua0"));
    /* The first in list order is the original, not a copy of the second. */
    ck_assert_ptr_null(bp_device_same_physical(dev("idgpua0")));
    ck_assert_ptr_null(bp_device_same_physical(dev("idother0")));
    struct bp_device_identity id = { .size = sizeof id };
    ck_assert_int_eq(bp_device_identity(dev("idgpub0"), &id), BP_OK);
    ck_assert(id.has_uuid);
    for (int i = 0; i < BP_UUID_BYTES; i++) ck_assert_uint_eq(id.uuid[i], 0xab);
    ck_assert_str_eq(id.pci_bus_id, "0000:65:00.0");
    ck_assert(!id.software);
    char s[40];
    ck_assert_str_eq(bp_identity_uuid_string(&id, s, sizeof s),
                     "abababab-abab-abab-abab-abababababab");
}
END_TEST

START_TEST(test_identity_uuid_prefix_selects_a_device)
{
    fresh(TWINS, "idgpua,idgpub,idother");
    ck_assert_ptr_eq(bp_device_by_name("uuid:acac"), dev("idother0"));
    /* Case, dashes and nvidia-smi's "GPU-" do not matter. */
    ck_assert_ptr_eq(bp_device_by_name("uuid:GPU-ABAB-ab"), dev("idgpua0"));
    ck_assert_ptr_null(bp_device_by_name("uuid:ffff"));
    ck_assert_ptr_nonnull(strstr(bp_last_error(), "uuid:ffff"));
    ck_assert_ptr_null(bp_device_by_name("uuid:zz"));
    ck_assert_ptr_null(bp_device_by_name("uuid:"));
}
END_TEST

START_TEST(test_identity_ambiguous_uuid_prefix_is_refused)
{
    fresh(TWINS, "idgpua,idgpub,idother");
    char log[4096];
    struct bp_device *d = NULL;
    /* "a" starts both abab... and acac..., which are different GPUs. */
    CAPTURE_STDERR(log, sizeof log, d = bp_device_by_name("uuid:a"));
    ck_assert_ptr_null(d);
    ck_assert_msg(strstr(log, "matches both 'idgpua0' and 'idother0'"), "log: %s", log);
}
END_TEST

START_TEST(test_identity_pci_bus_id_selects_a_device_in_any_spelling)
{
    fresh(TWINS, "idgpua,idgpub,idother");
    ck_assert_ptr_eq(bp_device_by_name("pci:0000:b3:00.0"), dev("idother0"));
    ck_assert_ptr_eq(bp_device_by_name("pci:00000000:B3:00.0"), dev("idother0"));
    ck_assert_ptr_eq(bp_device_by_name("pci:65:00.0"), dev("idgpua0"));
    ck_assert_ptr_null(bp_device_by_name("pci:0000:01:00.0"));
    ck_assert_ptr_null(bp_device_by_name("pci:65-00"));
}
END_TEST

START_TEST(test_identity_env_list_takes_selectors_and_warns_on_twins)
{
    fresh(TWINS, "idgpua,idgpub,idother");
    setenv("BACKPLANE_DEVICES", "uuid:acac,pci:0000:65:00.0,idgpub0", 1);
    struct bp_device *out[4] = {0};
    size_t n = 0;
    bp_status st = BP_OK;
    char log[4096];
    CAPTURE_STDERR(log, sizeof log, st = bp_default_devices(out, 4, &n));
    ck_assert_int_eq(st, BP_OK);
    ck_assert_uint_eq(n, 3);
    ck_assert_str_eq(bp_device_name(out[0]), "idother0");
    ck_assert_str_eq(bp_device_name(out[1]), "idgpua0");
    ck_assert_str_eq(bp_device_name(out[2]), "idgpub0");
    ck_assert_msg(strstr(log, "'idgpua0' and 'idgpub0', which are the same physical device"),
                  "no warning in: %s", log);
    /* Different GPUs: no warning. */
    setenv("BACKPLANE_DEVICES", "idgpua0,idother0", 1);
    CAPTURE_STDERR(log, sizeof log, st = bp_default_devices(out, 4, &n));
    ck_assert_int_eq(st, BP_OK);
    ck_assert_ptr_null(strstr(log, "same physical device"));
    unsetenv("BACKPLANE_DEVICES");
}
END_TEST

START_TEST(test_identity_meta_over_twins_warns)
{
    fresh(TWINS, "idgpua,idgpub,meta");
    struct bp_device *subs[2] = {dev("idgpua0"), dev("idgpub0")}, *m = NULL;
    bp_status st = BP_OK;
    char log[4096];
    CAPTURE_STDERR(log, sizeof log, st = bp_meta_device_new(subs, 2, NULL, NULL, NULL, &m));
    ck_assert_int_eq(st, BP_OK);
    ck_assert_msg(strstr(log, "'idgpua0' and 'idgpub0' are the same physical device"),
                  "no warning in: %s", log);
    /* A meta device has no UUID or bus of its own. */
    struct bp_device_identity id = { .size = sizeof id };
    ck_assert_int_eq(bp_device_identity(m, &id), BP_OK);
    ck_assert(!id.has_uuid);
    ck_assert_str_eq(id.pci_bus_id, "");
}
END_TEST

START_TEST(test_identity_default_is_never_a_software_rasterizer)
{
    /* idsoft calls itself a GPU; fakegood is a CPU. In either load order
     * the CPU is the default. */
    static const char *const orders[] = {"idsoft,fakegood", "fakegood,idsoft"};
    for (int k = 0; k < 2; k++) {
        fresh(ID("idsoft") ":" SAFE("fakegood"), orders[k]);
        struct bp_device *out[1] = {0};
        size_t n = 0;
        ck_assert_int_eq(bp_default_devices(out, 1, &n), BP_OK);
        ck_assert_str_eq(bp_device_name(out[0]), "fakegood0");
    }
    /* A real GPU still wins over the CPU. */
    fresh(ID("idsoft") ":" ID("idgpua") ":" SAFE("fakegood"), "idsoft,fakegood,idgpua");
    struct bp_device *out[1] = {0};
    size_t n = 0;
    ck_assert_int_eq(bp_default_devices(out, 1, &n), BP_OK);
    ck_assert_str_eq(bp_device_name(out[0]), "idgpua0");
}
END_TEST

START_TEST(test_identity_short_caller_struct_gets_only_its_bytes)
{
    fresh(TWINS, "idgpua");
    unsigned char raw[sizeof(struct bp_device_identity) + 8];
    memset(raw, 0x77, sizeof raw);
    struct bp_device_identity *id = (struct bp_device_identity *)(void *)raw;
    size_t short_size = offsetof(struct bp_device_identity, pci_bus_id);
    id->size = short_size;
    ck_assert_int_eq(bp_device_identity(dev("idgpua0"), id), BP_OK);
    ck_assert_uint_eq(id->size, short_size);
    ck_assert(id->has_uuid);
    ck_assert_uint_eq(id->uuid[0], 0xab);
    for (size_t i = short_size; i < sizeof raw; i++) ck_assert_uint_eq(raw[i], 0x77);
}
END_TEST

START_TEST(test_identity_plugin_without_identity_is_unknown)
{
    fresh(SAFE("fakegood"), "fakegood");
    struct bp_device_identity id;
    memset(&id, 0x55, sizeof id);
    id.size = sizeof id;
    ck_assert_int_eq(bp_device_identity(dev("fakegood0"), &id), BP_ERR_UNSUPPORTED);
    ck_assert(!id.has_uuid);
    ck_assert_str_eq(id.pci_bus_id, "");
    ck_assert(!id.software);
    ck_assert_int_eq(id.cpu_package, -1);
    ck_assert_int_eq(id.numa_node, -1);
    ck_assert_ptr_null(bp_device_same_physical(dev("fakegood0")));
    id.size = 0;
    ck_assert_int_eq(bp_device_identity(dev("fakegood0"), &id), BP_ERR_INVALID_ARGUMENT);
}
END_TEST

/* The CPU plugin's package and node against sysfs read here: cpu0's
 * package, or -1 when the allowed CPUs span packages; node 0 on a one-node
 * machine. */
START_TEST(test_identity_cpu_reports_package_and_node_from_sysfs)
{
    fresh(NULL, "cpu");
    struct bp_device_identity id = { .size = sizeof id };
    ck_assert_int_eq(bp_device_identity(dev("cpu"), &id), BP_OK);
    ck_assert(!id.has_uuid);
    ck_assert(!id.software);
    FILE *f = fopen("/sys/devices/system/cpu/cpu0/topology/physical_package_id", "r");
    int pkg = -1;
    if (f) { ck_assert_int_eq(fscanf(f, "%d", &pkg), 1); fclose(f); }
    /* On a multi-package machine an unpinned process spans packages: -1. */
    ck_assert_msg(id.cpu_package == pkg || id.cpu_package == -1, "package %d, sysfs %d",
                  id.cpu_package, pkg);
    if (access("/sys/devices/system/node/node1", F_OK) != 0 &&
        access("/sys/devices/system/cpu/cpu0/node0", F_OK) == 0)
        ck_assert_int_eq(id.numa_node, 0);
}
END_TEST

/* lavapipe: a UUID, the CPU device type reported as software, and so never
 * the default while the CPU plugin is there. */
START_TEST(test_identity_lavapipe_is_software_with_a_uuid)
{
    fresh(NULL, "cpu,vulkan");
    struct bp_device *v = dev("vulkan0");
    struct bp_device_identity id = { .size = sizeof id };
    ck_assert_int_eq(bp_device_identity(v, &id), BP_OK);
    ck_assert(id.has_uuid);
    ck_assert(id.software);
    char s[40];
    ck_assert_ptr_eq(bp_device_by_name(strcat(strcpy((char[64]){0}, "uuid:"),
                                               bp_identity_uuid_string(&id, s, sizeof s))), v);
    struct bp_device *out[1] = {0};
    size_t n = 0;
    ck_assert_int_eq(bp_default_devices(out, 1, &n), BP_OK);
    ck_assert_str_eq(bp_device_name(out[0]), "cpu");
}
END_TEST

static bool have_lavapipe(void)
{
    fresh(NULL, "vulkan");
    struct bp_device *v = bp_device_count() ? bp_device_by_name("vulkan0") : NULL;
    return v && strstr(bp_device_description(v), "llvmpipe");
}

/* "test_identity vulkan" runs the lavapipe case alone (exit 77 without
 * lavapipe), so the rest stays a valgrind candidate. */
int main(int argc, char **argv)
{
    if (argc > 1 && !strcmp(argv[1], "vulkan")) {
        if (!have_lavapipe()) {
            fprintf(stderr, "SKIP: no lavapipe vulkan0 on this machine.\n");
            return 77;
        }
        /* Vulkan is already up in this process: a forked child would hang on it. */
        setenv("CK_FORK", "no", 1);
        Suite *s = suite_create("identity_vulkan");
        TCase *vk = tcase_create("lavapipe");
        tcase_add_test(vk, test_identity_lavapipe_is_software_with_a_uuid);
        suite_add_tcase(s, vk);
        return run_suite(s);
    }
    Suite *s = suite_create("identity");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_identity_same_uuid_through_two_plugins_is_one_device);
    tcase_add_test(tc, test_identity_uuid_prefix_selects_a_device);
    tcase_add_test(tc, test_identity_ambiguous_uuid_prefix_is_refused);
    tcase_add_test(tc, test_identity_pci_bus_id_selects_a_device_in_any_spelling);
    tcase_add_test(tc, test_identity_env_list_takes_selectors_and_warns_on_twins);
    tcase_add_test(tc, test_identity_meta_over_twins_warns);
    tcase_add_test(tc, test_identity_default_is_never_a_software_rasterizer);
    tcase_add_test(tc, test_identity_short_caller_struct_gets_only_its_bytes);
    tcase_add_test(tc, test_identity_plugin_without_identity_is_unknown);
    tcase_add_test(tc, test_identity_cpu_reports_package_and_node_from_sysfs);
    suite_add_tcase(s, tc);
    return run_suite(s);
}
