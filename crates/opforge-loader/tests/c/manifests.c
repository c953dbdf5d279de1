/*
 * A test library for the manifest rules (crates/opforge-loader/tests/
 * manifests.rs and the CLI's `lib inspect` tests): its manifest declares
 * one op (ManifestOp(x: int32) -> y: int32), its CPU kernel and its
 * gradient, and init registers them. Defines make the manifest
 * inconsistent, or different from what init registers:
 *   MANIFEST_TWICE       the op record appears twice;
 *   MANIFEST_GRAD_TWICE  the gradient record appears twice;
 *   MANIFEST_GRAD_FORM   the gradient's form in the manifest (a string
 *                        literal; default "fn", what init registers);
 *   INIT_T               the input and output type init registers (a
 *                        string literal; default "int32", the manifest's);
 *   INIT_NO_KERNEL       init registers no kernel;
 *   NO_LIBRARY_RECORD    the manifest has no library record.
 * C99, header only.
 */
#include <opforge/opforge.h>

#ifndef MANIFEST_GRAD_FORM
#define MANIFEST_GRAD_FORM "fn"
#endif
#ifndef INIT_T
#define INIT_T "int32"
#endif

#ifndef NO_LIBRARY_RECORD
OPFORGE_LIBRARY("manifests", "0.0.1");
#endif
OPFORGE_MANIFEST_OP("\"name\":\"ManifestOp\",\"inputs\":[\"x: int32\"],\"outputs\":[\"y: int32\"]");
#ifdef MANIFEST_TWICE
OPFORGE_MANIFEST_OP("\"name\":\"ManifestOp\",\"inputs\":[\"x: int32\"],\"outputs\":[\"y: int32\"]");
#endif
OPFORGE_MANIFEST_KERNEL("\"op\":\"ManifestOp\",\"device\":\"CPU\"");
OPFORGE_MANIFEST_GRADIENT("\"op\":\"ManifestOp\",\"form\":\"" MANIFEST_GRAD_FORM "\"");
#ifdef MANIFEST_GRAD_TWICE
OPFORGE_MANIFEST_GRADIENT("\"op\":\"ManifestOp\",\"form\":\"fn\"");
#endif

static const OpforgeHostApi* host;

#ifndef INIT_NO_KERNEL
/* y = x. */
static OpforgeCode identity(void* state, OpforgeKernelCtx* ctx, OpforgeStatus* status) {
  (void)state;
  return host->kernel->set_output_from_input(ctx, 0, 0, status);
}
#endif

/* dx = dy. */
static OpforgeCode gradient(OpforgeGradCtx* ctx, void* user, OpforgeStatus* status) {
  OpforgeSym dy;
  (void)user;
  if (!host->grad->output_grad(ctx, 0, &dy)) return OPFORGE_OK;
  return host->grad->set_input_grad(ctx, 0, dy, status);
}

OPFORGE_EXPORT OpforgeCode opforge_plugin_init_v1(const OpforgeHostApi* h,
                                                  OpforgeRegistrar* registrar,
                                                  OpforgeStatus* status) {
  static const OpforgeStr inputs[] = {OPFORGE_STR_LIT("x: " INIT_T)};
  static const OpforgeStr outputs[] = {OPFORGE_STR_LIT("y: " INIT_T)};
  OpforgeOpDef op;
  OpforgeCode code;
  if (h->abi_major != OPFORGE_ABI_MAJOR) return OPFORGE_FAILED_PRECONDITION;
  host = h;
  memset(&op, 0, sizeof op);
  op.struct_size = sizeof op;
  op.name = opforge_str("ManifestOp");
  op.inputs = inputs;
  op.num_inputs = 1;
  op.outputs = outputs;
  op.num_outputs = 1;
  code = host->registration->op(registrar, &op, status);
  if (code != OPFORGE_OK) return code;
#ifndef INIT_NO_KERNEL
  {
    OpforgeKernelDef kernel;
    memset(&kernel, 0, sizeof kernel);
    kernel.struct_size = sizeof kernel;
    kernel.op = opforge_str("ManifestOp");
    kernel.device_type = opforge_str("CPU");
    kernel.compute = identity;
    code = host->registration->kernel(registrar, &kernel, status);
    if (code != OPFORGE_OK) return code;
  }
#endif
  return host->registration->gradient_fn(registrar, opforge_str("ManifestOp"), gradient, NULL,
                                         status);
}
