/*
 * ZeroOut in C: TensorFlow's "adding an op" example as an opforge op
 * library. It uses only include/opforge/opforge.h (C99) and links against
 * nothing of opforge:
 *
 *   cc -std=c99 -shared -fPIC -I include -o libzero_out_c.so \
 *      examples/c_zero_out/zero_out.c
 *
 * ZeroOut(to_zero: int32) -> zeroed: int32: a tensor of the input's shape
 * whose first element is the input's first element and every other
 * element is 0. Its shape function gives the output the input's shape.
 *
 * Built against a 1.1 header (this repository's) the kernel gives the
 * views entry only (compute_views, ABI 1.1): it declares its output like
 * its input (output_like, OPFORGE_OUTPUT_FORWARD), so the host hands it the
 * input's view and the output already set, and it makes no host call but
 * parallel_for. Its library then needs a 1.1 host (OPFORGE_MIN_HOST_MINOR
 * defaults to 1 with that header), and a 1.0 host refuses it unloaded.
 * Built against the frozen 1.0 header
 * (-I crates/opforge-abi/tests/frozen/1.0) it is a 1.0 library: the 1.0
 * compute, asking the host for each view; any 1.x host runs it.
 *
 * Compile-time switches (used by the loader's tests to forge variants):
 *   ZERO_OUT_ABI_MAJOR / ZERO_OUT_ABI_MINOR  the ABI version the manifest
 *       claims (default: this header's); OPFORGE_MIN_HOST_MINOR as usual.
 *   ZERO_OUT_BOTH_ENTRIES  (1.1 header) give the 1.0 compute as well as
 *       compute_views: the library may then say OPFORGE_MIN_HOST_MINOR=0.
 *   ZERO_OUT_FAIL_INIT   init registers the op, then fails.
 *   ZERO_OUT_LIB_NAME / ZERO_OUT_T  the library name and the element type
 *       in the op's spec (a different T makes a conflicting OpDef).
 *   ZERO_OUT_NO_DECLARATION  no op/kernel records in the manifest (a
 *       library that registers by code: `opforge lib seal` records them).
 *   ZERO_OUT_ABORT_INIT / ZERO_OUT_HANG_INIT  init calls abort() / never
 *       returns (what `opforge lib seal` must survive).
 *   ZERO_OUT_MARKER  a string literal: a file the library's constructor
 *       creates when the library is loaded.
 */
#include <opforge/opforge.h>

#include <stdio.h>
#include <stdlib.h>

#ifndef ZERO_OUT_ABI_MAJOR
#define ZERO_OUT_ABI_MAJOR OPFORGE_ABI_MAJOR
#endif
#ifndef ZERO_OUT_ABI_MINOR
#define ZERO_OUT_ABI_MINOR OPFORGE_ABI_MINOR
#endif
#ifndef ZERO_OUT_LIB_NAME
#define ZERO_OUT_LIB_NAME "zero_out_c"
#endif
#ifndef ZERO_OUT_T
#define ZERO_OUT_T "int32"
#endif

/* The manifest: read by the host from the file before anything runs. */
OPFORGE_LIBRARY_EX(ZERO_OUT_LIB_NAME, "0.1.0", ZERO_OUT_ABI_MAJOR,
                   ZERO_OUT_ABI_MINOR, OPFORGE_MIN_HOST_MINOR);
#ifndef ZERO_OUT_NO_DECLARATION
OPFORGE_MANIFEST_OP("\"name\":\"ZeroOut\",\"inputs\":[\"to_zero: " ZERO_OUT_T
                    "\"],\"outputs\":[\"zeroed: " ZERO_OUT_T
                    "\"],\"doc\":\"Zeroes all but the first element.\","
                    "\"shape_fn\":true");
OPFORGE_MANIFEST_KERNEL("\"op\":\"ZeroOut\",\"device\":\"CPU\"");
#endif

/* Proof for the tests that inspecting the file runs none of its code: built
 * with -DZERO_OUT_MARKER='"/path"', loading the library (which runs this
 * constructor) creates that file. */
#if defined(ZERO_OUT_MARKER) && (defined(__GNUC__) || defined(__clang__))
__attribute__((constructor)) static void zero_out_mark_loaded(void) {
  FILE* f = fopen(ZERO_OUT_MARKER, "w");
  if (f != NULL) {
    fputs("zero_out_c was loaded\n", f);
    fclose(f);
  }
}
#endif

static const OpforgeHostApi* host;

/* Zeroes elements [begin, end) of the output; one shard of parallel_for. */
static OpforgeCode zero_range(uint64_t begin, uint64_t end, void* user,
                              OpforgeStatus* status) {
  int32_t* out = (int32_t*)user;
  uint64_t i;
  (void)status;
  for (i = begin; i < end; ++i) out[i] = 0;
  return OPFORGE_OK;
}

/* Counts of each entry's calls (read by the loader's tests; computes may
 * run concurrently, R9). */
OPFORGE_EXPORT uint64_t zero_out_c_compute_calls = 0;
OPFORGE_EXPORT uint64_t zero_out_c_compute_views_calls = 0;
#if defined(__GNUC__) || defined(__clang__)
#define ZERO_OUT_COUNT(c) __atomic_fetch_add(&(c), 1, __ATOMIC_RELAXED)
#else
#define ZERO_OUT_COUNT(c) ((void)0)
#endif

#if OPFORGE_ABI_MINOR < 1 || defined(ZERO_OUT_BOTH_ENTRIES)
/* The 1.0 entry: asks the host for the input's view and for the output. */
static OpforgeCode zero_out_compute(void* state, OpforgeKernelCtx* ctx,
                                    OpforgeStatus* status) {
  OpforgeTensor in, out;
  OpforgeCode code;
  const int32_t* src;
  int32_t* dst;
  (void)state;
  memset(&in, 0, sizeof in);
  in.struct_size = sizeof in;
  memset(&out, 0, sizeof out);
  out.struct_size = sizeof out;
  ZERO_OUT_COUNT(zero_out_c_compute_calls);
  code = host->kernel->input(ctx, 0, &in, status);
  if (code != OPFORGE_OK) return code;
  code = host->kernel->allocate_output(ctx, 0, in.dims, in.rank, &out, status);
  if (code != OPFORGE_OK) return code;
  if (in.num_elements == 0) return OPFORGE_OK;
  src = (const int32_t*)in.data;
  dst = (int32_t*)out.data;
  code = host->kernel->parallel_for(ctx, (uint64_t)in.num_elements, 1,
                                    zero_range, dst, status);
  if (code != OPFORGE_OK) return code;
  dst[0] = src[0];
  return OPFORGE_OK;
}
#endif

#if OPFORGE_ABI_MINOR >= 1
/* The 1.1 entry: the input's view and the output (declared like the input
 * below) are made before the call. */
static OpforgeCode zero_out_compute_views(void* state, OpforgeKernelCtx* ctx,
                                          const OpforgeKernelViews* views,
                                          OpforgeStatus* status) {
  const OpforgeTensor* in;
  const OpforgeTensor* out;
  int32_t first;
  (void)state;
  ZERO_OUT_COUNT(zero_out_c_compute_views_calls);
  in = OPFORGE_ARRAY_AT(OpforgeTensor, views->inputs, 0);
  out = OPFORGE_ARRAY_AT(OpforgeTensor, views->outputs, 0);
  if (in->num_elements == 0) return OPFORGE_OK;
  /* Read the input before writing the output: when the host forwarded the
   * input (forwarded_from[0] == 0), they are the same memory. */
  first = ((const int32_t*)in->data)[0];
  if (views->forwarded_from[0] == 0 && in->num_elements == 1)
    return OPFORGE_OK; /* in place, and nothing to zero */
  {
    OpforgeCode code = host->kernel->parallel_for(
        ctx, (uint64_t)out->num_elements, 1, zero_range, out->data, status);
    if (code != OPFORGE_OK) return code;
  }
  ((int32_t*)out->data)[0] = first;
  return OPFORGE_OK;
}
#endif

static OpforgeCode zero_out_shape(OpforgeShapeCtx* ctx, void* user,
                                  OpforgeStatus* status) {
  OpforgeShape in;
  (void)user;
  in = host->shape->input(ctx, 0);
  return host->shape->set_output(ctx, 0, in, status);
}

OPFORGE_EXPORT OpforgeCode opforge_plugin_init_v1(const OpforgeHostApi* h,
                                                  OpforgeRegistrar* registrar,
                                                  OpforgeStatus* status) {
  static const OpforgeStr inputs[] = {OPFORGE_STR_LIT("to_zero: " ZERO_OUT_T)};
  static const OpforgeStr outputs[] = {OPFORGE_STR_LIT("zeroed: " ZERO_OUT_T)};
  OpforgeOpDef op;
  OpforgeKernelDef kernel;
  OpforgeCode code;
  if (h->abi_major != OPFORGE_ABI_MAJOR) return OPFORGE_FAILED_PRECONDITION;
  host = h;
#ifdef ZERO_OUT_ABORT_INIT
  abort();
#endif
#ifdef ZERO_OUT_HANG_INIT
  for (;;) {
  }
#endif

  memset(&op, 0, sizeof op);
  op.struct_size = sizeof op;
  op.name = opforge_str("ZeroOut");
  op.inputs = inputs;
  op.num_inputs = 1;
  op.outputs = outputs;
  op.num_outputs = 1;
  op.doc = opforge_str("Zeroes all but the first element.");
  op.shape_fn = zero_out_shape;
  code = host->registration->op(registrar, &op, status);
  if (code != OPFORGE_OK) return code;

#ifdef ZERO_OUT_FAIL_INIT
  host->set_status(status, OPFORGE_ABORTED,
                   opforge_str("zero_out_c: init failed on purpose"));
  return OPFORGE_ABORTED;
#endif

  memset(&kernel, 0, sizeof kernel);
  kernel.struct_size = sizeof kernel;
  kernel.op = opforge_str("ZeroOut");
  kernel.device_type = opforge_str("CPU");
#if OPFORGE_ABI_MINOR < 1 || defined(ZERO_OUT_BOTH_ENTRIES)
  kernel.compute = zero_out_compute;
#endif
#if OPFORGE_ABI_MINOR >= 1
  {
    /* Output 0 has input 0's dims, and may take over its buffer. */
    OpforgeOutputLike like;
    memset(&like, 0, sizeof like);
    like.struct_size = sizeof like;
    like.output = 0;
    like.input = 0;
    like.flags = OPFORGE_OUTPUT_FORWARD;
    kernel.compute_views = zero_out_compute_views;
    kernel.output_like = &like;
    kernel.num_output_like = 1;
    /* The host copies the declarations before it returns (R5). */
    return host->registration->kernel(registrar, &kernel, status);
  }
#else
  return host->registration->kernel(registrar, &kernel, status);
#endif
}

OPFORGE_EXPORT void opforge_plugin_fini_v1(void) { host = NULL; }
