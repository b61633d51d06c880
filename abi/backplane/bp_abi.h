/* bp_abi.h — everything a plugin author includes: #include <backplane/bp_abi.h> */
#ifndef BP_ABI_H
#define BP_ABI_H
#include "bp_status.h"
#include "bp_types.h"
#include "bp_ops.h"
#include "bp_tensor.h"
#include "bp_op_shapes.h"
#include "bp_plugin.h"
#include "bp_quant.h"
#include "bp_host_helpers.h"
#include "bp_custom_op.h"
#include "bp_identity.h"
#include "bp_profile.h"
#endif
