/*
 * A test library whose kernel reads its output requests through the 1.0
 * compute entry (no views entry): ReqC(x: float) -> (y: float, seen: int32),
 * registered with OPFORGE_KERNEL_OUTPUT_REQUESTS. y = 2x honouring y's
 * request (WRITE allocates, INPLACE doubles the bound output, ADD adds 2x into
 * it, NULL leaves it unset); seen (shape [3], unless its own request is NULL)
 * = the request codes of y and seen, and 1 if input() refused x (it moved to
 * an output). Built by crates/opforge-loader/tests/output_requests.rs. C99.
 */
#include <opforge/opforge.h>

OPFORGE_LIBRARY("requests", "0.0.1");

static const OpforgeHostApi* host;

#define INIT_VIEW(v)          \
  memset(&(v), 0, sizeof(v)); \
  (v).struct_size = sizeof(v)

static OpforgeCode req_compute(void* s, OpforgeKernelCtx* ctx, OpforgeStatus* st) {
  uint32_t r0 = host->kernel->output_request(ctx, 0);
  uint32_t r1 = host->kernel->output_request(ctx, 1);
  int32_t refused = 0;
  int64_t i, three = 3;
  OpforgeTensor in, out, seen;
  OpforgeCode c;
  (void)s;
  INIT_VIEW(in);
  INIT_VIEW(out);
  INIT_VIEW(seen);
  c = host->kernel->input(ctx, 0, &in, st);
  if (c == OPFORGE_FAILED_PRECONDITION) {
    refused = 1;
    host->set_status(st, OPFORGE_OK, opforge_str(""));
  } else if (c) {
    return c;
  }
  if (r0 == OPFORGE_REQ_WRITE) {
    c = host->kernel->allocate_output(ctx, 0, in.dims, in.rank, &out, st);
    if (c) return c;
    for (i = 0; i < out.num_elements; ++i) ((float*)out.data)[i] = 2.0f * ((const float*)in.data)[i];
  } else if (r0 == OPFORGE_REQ_INPLACE || r0 == OPFORGE_REQ_ADD) {
    c = host->kernel->output(ctx, 0, &out, st);
    if (c) return c;
    for (i = 0; i < out.num_elements; ++i) {
      float* o = &((float*)out.data)[i];
      *o = r0 == OPFORGE_REQ_INPLACE ? 2.0f * *o : *o + 2.0f * ((const float*)in.data)[i];
    }
  }
  if (r1 != OPFORGE_REQ_NULL) {
    c = host->kernel->allocate_output(ctx, 1, &three, 1, &seen, st);
    if (c) return c;
    ((int32_t*)seen.data)[0] = (int32_t)r0;
    ((int32_t*)seen.data)[1] = (int32_t)r1;
    ((int32_t*)seen.data)[2] = refused;
  }
  return OPFORGE_OK;
}

OPFORGE_EXPORT OpforgeCode opforge_plugin_init_v1(const OpforgeHostApi* h, OpforgeRegistrar* r,
                                                  OpforgeStatus* st) {
  static const OpforgeStr ins[] = {OPFORGE_STR_LIT("x: float")};
  static const OpforgeStr outs[] = {OPFORGE_STR_LIT("y: float"), OPFORGE_STR_LIT("seen: int32")};
  OpforgeOpDef op;
  OpforgeKernelDef k;
  OpforgeCode c;
  host = h;
  memset(&op, 0, sizeof op);
  op.struct_size = sizeof op;
  op.name = opforge_str("ReqC");
  op.inputs = ins;
  op.num_inputs = 1;
  op.outputs = outs;
  op.num_outputs = 2;
  c = host->registration->op(r, &op, st);
  if (c) return c;
  memset(&k, 0, sizeof k);
  k.struct_size = sizeof k;
  k.op = opforge_str("ReqC");
  k.device_type = opforge_str("CPU");
  k.compute = req_compute;
  k.flags = OPFORGE_KERNEL_OUTPUT_REQUESTS;
  return host->registration->kernel(r, &k, st);
}

OPFORGE_EXPORT void opforge_plugin_fini_v1(void) { host = NULL; }
