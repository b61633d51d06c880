/* fault_helper.c — a library that the missingdep fault plugin links against
 * and that the loader tests deliberately leave off every library path. */
int bp_fault_helper(void);

int bp_fault_helper(void)
{
    return 42;
}
