/*
 * A hostile test library: it breaks the ABI's rules on purpose and checks
 * that the host refuses each breach cleanly (never a crash, never a
 * misleading message). Built by crates/opforge-loader/tests/hostile.rs.
 * C99, header only.
 *
 *  - R3: callbacks returning codes the header never defined (12345, -1).
 *  - R7: shape, dim and value handles kept from an earlier call, whose
 *    indices are valid in the new call.
 *  - R9: forged context pointers (unmapped, garbage, misaligned, a context
 *    of another kind, a finished create's), contexts used from parallel_for
 *    work functions, and an outer gradient context used from a kernel the
 *    gradient callback runs (nested on the same thread).
 *  - Ranks above TensorFlow's 254 everywhere a plugin makes a shape.
 *
 * Ops whose checks fail return INTERNAL with a message naming the breach
 * the host let through; "propagate" modes return the host's refusal
 * itself, so the test can read its code and message.
 */
#include <opforge/opforge.h>

#include <stdint.h>
#include <stdlib.h>

OPFORGE_LIBRARY("hostile", "0.0.1");

static const OpforgeHostApi* host;

#define INIT_VIEW(v)          \
  memset(&(v), 0, sizeof(v)); \
  (v).struct_size = sizeof(v)

#define TRY(x)            \
  do {                    \
    OpforgeCode c_ = (x); \
    if (c_) return c_;    \
  } while (0)

/* A failure with a message. */
static OpforgeCode fail(OpforgeStatus* st, const char* msg) {
  host->set_status(st, OPFORGE_INTERNAL, opforge_str(msg));
  return OPFORGE_INTERNAL;
}

/* Fails with `msg` unless `cond` holds. */
#define EXPECT(cond, msg) \
  do {                    \
    if (!(cond)) return fail(st, msg); \
  } while (0)

static int64_t attr_int(OpforgeKernelCtx* ctx, const char* name, OpforgeStatus* st) {
  OpforgeAttrValue v;
  INIT_VIEW(v);
  if (host->kernel->attr(ctx, opforge_str(name), &v, st)) return -999;
  return v.i;
}

/* y = x (float), through allocate_output. */
static OpforgeCode copy_input(OpforgeKernelCtx* ctx, OpforgeStatus* st) {
  OpforgeTensor in, out;
  INIT_VIEW(in);
  INIT_VIEW(out);
  TRY(host->kernel->input(ctx, 0, &in, st));
  TRY(host->kernel->allocate_output(ctx, 0, in.dims, in.rank, &out, st));
  if (in.byte_len) memcpy(out.data, in.data, (size_t)in.byte_len);
  return OPFORGE_OK;
}

/* Output 0 has the shape of input 0. */
static OpforgeCode same_shape(OpforgeShapeCtx* ctx, void* user, OpforgeStatus* st) {
  (void)user;
  return host->shape->set_output(ctx, 0, host->shape->input(ctx, 0), st);
}

/* ---- R3: unknown codes ---------------------------------------------------- */

/* HostileComputeCode(x) -> y; attr code: returned without a message. */
static OpforgeCode code_compute(void* s, OpforgeKernelCtx* ctx, OpforgeStatus* st) {
  (void)s;
  return (OpforgeCode)attr_int(ctx, "code", st);
}

/* HostileCreateCode(x) -> y; attr code: create returns it, no message. */
static OpforgeCode code_create(const OpforgeKernelInit* init, void* user, void** state,
                               OpforgeStatus* st) {
  OpforgeAttrValue v;
  (void)user;
  (void)state;
  INIT_VIEW(v);
  if (host->kernel->init_attr(init, opforge_str("code"), &v, st)) return OPFORGE_INTERNAL;
  return (OpforgeCode)v.i;
}

static OpforgeCode copy_compute(void* s, OpforgeKernelCtx* ctx, OpforgeStatus* st) {
  (void)s;
  return copy_input(ctx, st);
}

/* HostileShapeCode(x) -> y: the shape function returns 12345 with a
 * message set under that code. */
static OpforgeCode code_shape(OpforgeShapeCtx* ctx, void* user, OpforgeStatus* st) {
  (void)ctx;
  (void)user;
  host->set_status(st, 12345, opforge_str("the shape function says no"));
  return 12345;
}

/* HostileGradCode(x) -> y: the gradient callback returns -1, no message. */
static OpforgeCode code_grad(OpforgeGradCtx* g, void* user, OpforgeStatus* st) {
  (void)g;
  (void)user;
  (void)st;
  return -1;
}

/* ---- R7: handles of an earlier call ----------------------------------------- */

static int stale_shape_calls;
static OpforgeShape saved_shape;
static OpforgeDim saved_dim;

/* HostileStaleShape(x) -> y; attr which: 0 a shape handle, 1 a dim handle.
 * The first call keeps input 0's shape and its dim 0; every later call
 * uses the kept handle and returns what the host answered. */
static OpforgeCode stale_shape(OpforgeShapeCtx* ctx, void* user, OpforgeStatus* st) {
  const OpforgeShapeApi* sh = host->shape;
  OpforgeAttrValue v;
  OpforgeShape in = sh->input(ctx, 0);
  OpforgeDim out;
  (void)user;
  if (stale_shape_calls++ == 0) {
    saved_shape = in;
    TRY(sh->dim(ctx, in, 0, &saved_dim, st));
    return sh->set_output(ctx, 0, in, st);
  }
  /* Queries answer "unknown" for a stale handle. */
  if (sh->rank(ctx, saved_shape) != OPFORGE_UNKNOWN_RANK) return fail(st, "rank of a stale shape");
  if (sh->value(ctx, saved_dim) != OPFORGE_UNKNOWN_DIM) return fail(st, "value of a stale dim");
  INIT_VIEW(v);
  TRY(sh->attr(ctx, opforge_str("which"), &v, st));
  if (v.i == 0) return sh->set_output(ctx, 0, saved_shape, st);
  return sh->with_value(ctx, saved_dim, 3, &out, st);
}

static int stale_grad_calls;
static OpforgeSym saved_sym;

/* HostileStaleGrad(x) -> y: the first gradient call keeps input 0's value
 * handle; every later call sets it as the gradient and returns what the
 * host answered. */
static OpforgeCode stale_grad(OpforgeGradCtx* g, void* user, OpforgeStatus* st) {
  OpforgeSym dy;
  (void)user;
  if (!host->grad->output_grad(g, 0, &dy)) return OPFORGE_OK;
  if (stale_grad_calls++ == 0) {
    saved_sym = host->grad->input(g, 0);
    return host->grad->set_input_grad(g, 0, dy, st);
  }
  if (host->grad->dtype(g, saved_sym) != OPFORGE_DT_INVALID) return fail(st, "dtype of a stale value");
  return host->grad->set_input_grad(g, 0, saved_sym, st);
}

/* ---- R9: forged contexts ---------------------------------------------------- */

static const OpforgeKernelInit* saved_init;
static OpforgeGradCtx* outer_grad;

/* Pointers no callback was given: unmapped, garbage, misaligned. */
static uint64_t garbage[16];
static void* forged(int i, void* real) {
  switch (i) {
    case 0: return (void*)(uintptr_t)0x1000;
    case 1: return garbage;
    default: return (char*)real + 1;
  }
}

/* Every kernel-context function refuses `k`. */
static OpforgeCode kernel_refuses(OpforgeKernelCtx* k, OpforgeStatus* st) {
  OpforgeTensor v;
  OpforgeAttrValue a;
  INIT_VIEW(v);
  INIT_VIEW(a);
  EXPECT(host->kernel->num_inputs(k) == 0, "num_inputs of a forged ctx");
  EXPECT(host->kernel->input_dtype(k, 0) == OPFORGE_DT_INVALID, "input_dtype of a forged ctx");
  EXPECT(host->kernel->node_name(k).len == 0, "node_name of a forged ctx");
  EXPECT(host->kernel->input(k, 0, &v, st) == OPFORGE_INVALID_ARGUMENT, "input of a forged ctx");
  EXPECT(host->kernel->allocate_output(k, 0, NULL, 0, &v, st) == OPFORGE_INVALID_ARGUMENT,
         "allocate_output of a forged ctx");
  EXPECT(host->kernel->attr(k, opforge_str("mode"), &a, st) == OPFORGE_INVALID_ARGUMENT,
         "attr of a forged ctx");
  return OPFORGE_OK;
}

static OpforgeCode shape_refuses(OpforgeShapeCtx* s, OpforgeStatus* st) {
  OpforgeShape out;
  EXPECT(host->shape->num_inputs(s) == 0, "shape num_inputs of a forged ctx");
  EXPECT(host->shape->input(s, 0) == OPFORGE_NO_HANDLE, "shape input of a forged ctx");
  EXPECT(host->shape->set_output(s, 0, 1, st) == OPFORGE_INVALID_ARGUMENT,
         "shape set_output of a forged ctx");
  EXPECT(host->shape->make_shape_from_values(s, NULL, 0, &out, st) == OPFORGE_INVALID_ARGUMENT,
         "make_shape_from_values of a forged ctx");
  return OPFORGE_OK;
}

static OpforgeCode grad_refuses(OpforgeGradCtx* g, OpforgeStatus* st) {
  OpforgeSym out;
  EXPECT(host->grad->num_inputs(g) == 0, "grad num_inputs of a forged ctx");
  EXPECT(host->grad->input(g, 0) == OPFORGE_NO_HANDLE, "grad input of a forged ctx");
  EXPECT(host->grad->set_input_grad(g, 0, 1, st) == OPFORGE_INVALID_ARGUMENT,
         "set_input_grad of a forged ctx");
  EXPECT(host->grad->call(g, opforge_str("Identity"), NULL, 0, NULL, 0, &out, 1, NULL, st) ==
             OPFORGE_INVALID_ARGUMENT,
         "call of a forged ctx");
  return OPFORGE_OK;
}

static OpforgeCode init_refuses(const OpforgeKernelInit* i, OpforgeStatus* st) {
  OpforgeAttrValue a;
  INIT_VIEW(a);
  EXPECT(host->kernel->init_num_inputs(i) == 0, "init_num_inputs of a forged init");
  EXPECT(host->kernel->init_op_name(i).len == 0, "init_op_name of a forged init");
  EXPECT(host->kernel->init_attr(i, opforge_str("mode"), &a, st) == OPFORGE_INVALID_ARGUMENT,
         "init_attr of a forged init");
  return OPFORGE_OK;
}

typedef struct {
  OpforgeKernelCtx* ctx;
  int propagate;
  int accepted; /* shards where a context call was not refused */
} ForgeJob;

/* A parallel_for work function that (wrongly) uses the kernel context. */
static OpforgeCode forge_shard(uint64_t b, uint64_t e, void* user, OpforgeStatus* st) {
  ForgeJob* j = (ForgeJob*)user;
  OpforgeTensor v;
  OpforgeCode c;
  (void)b;
  (void)e;
  INIT_VIEW(v);
  c = host->kernel->input(j->ctx, 0, &v, st);
  if (j->propagate) return c;
  if (c != OPFORGE_INVALID_ARGUMENT || host->kernel->num_inputs(j->ctx) != 0)
    __atomic_fetch_add(&j->accepted, 1, __ATOMIC_SEQ_CST);
  host->set_status(st, OPFORGE_OK, opforge_str(""));
  return OPFORGE_OK;
}

static OpforgeCode forge_create(const OpforgeKernelInit* init, void* user, void** state,
                                OpforgeStatus* st) {
  int i;
  (void)user;
  (void)state;
  for (i = 0; i < 3; ++i) TRY(init_refuses((const OpforgeKernelInit*)forged(i, (void*)init), st));
  /* The init passed as a compute context. */
  TRY(kernel_refuses((OpforgeKernelCtx*)init, st));
  EXPECT(host->kernel->init_num_inputs(init) == 1, "the real init was refused");
  saved_init = init;
  host->set_status(st, OPFORGE_OK, opforge_str(""));
  return OPFORGE_OK;
}

/* HostileForge(x) -> y; attr mode: 0 run every check, then y = x;
 * 1 return the host's answer to input() on an unmapped ctx; 2 return a
 * parallel_for whose work functions return their answer to input(). */
static OpforgeCode forge_compute(void* s, OpforgeKernelCtx* ctx, OpforgeStatus* st) {
  OpforgeTensor v;
  ForgeJob job;
  int64_t mode = attr_int(ctx, "mode", st);
  int i;
  (void)s;
  INIT_VIEW(v);
  if (mode == 1) return host->kernel->input((OpforgeKernelCtx*)forged(0, ctx), 0, &v, st);
  job.ctx = ctx;
  job.propagate = mode == 2;
  job.accepted = 0;
  if (mode == 2) return host->kernel->parallel_for(ctx, 64, 1000000, forge_shard, &job, st);
  for (i = 0; i < 3; ++i) {
    TRY(kernel_refuses((OpforgeKernelCtx*)forged(i, ctx), st));
    TRY(shape_refuses((OpforgeShapeCtx*)forged(i, ctx), st));
    TRY(grad_refuses((OpforgeGradCtx*)forged(i, ctx), st));
  }
  /* The live compute context passed as another kind, and a finished
   * create's init. */
  TRY(shape_refuses((OpforgeShapeCtx*)ctx, st));
  TRY(grad_refuses((OpforgeGradCtx*)ctx, st));
  TRY(init_refuses((const OpforgeKernelInit*)ctx, st));
  TRY(init_refuses(saved_init, st));
  /* Work functions on the pool's threads and on this one. */
  TRY(host->kernel->parallel_for(ctx, 64, 1000000, forge_shard, &job, st));
  EXPECT(job.accepted == 0, "a parallel_for work function used the kernel context");
  /* The real context still works. */
  EXPECT(host->kernel->num_inputs(ctx) == 1, "the real ctx was refused");
  host->set_status(st, OPFORGE_OK, opforge_str(""));
  return copy_input(ctx, st);
}

static OpforgeCode forge_shape(OpforgeShapeCtx* ctx, void* user, OpforgeStatus* st) {
  int i;
  (void)user;
  for (i = 0; i < 3; ++i) {
    TRY(shape_refuses((OpforgeShapeCtx*)forged(i, ctx), st));
    TRY(kernel_refuses((OpforgeKernelCtx*)forged(i, ctx), st));
  }
  TRY(kernel_refuses((OpforgeKernelCtx*)ctx, st));
  TRY(grad_refuses((OpforgeGradCtx*)ctx, st));
  EXPECT(host->shape->num_inputs(ctx) == 1, "the real shape ctx was refused");
  host->set_status(st, OPFORGE_OK, opforge_str(""));
  return same_shape(ctx, NULL, st);
}

/* The gradient of HostileForge: forged contexts, then dx = HostileNested(dy),
 * whose kernel (run by `call`, on this thread) tries the outer context. */
static OpforgeCode forge_grad(OpforgeGradCtx* g, void* user, OpforgeStatus* st) {
  OpforgeSym dy, dx;
  OpforgeSymArg arg;
  size_t n = 0;
  int i;
  (void)user;
  for (i = 0; i < 3; ++i) {
    TRY(grad_refuses((OpforgeGradCtx*)forged(i, g), st));
    TRY(kernel_refuses((OpforgeKernelCtx*)forged(i, g), st));
  }
  TRY(kernel_refuses((OpforgeKernelCtx*)g, st));
  TRY(shape_refuses((OpforgeShapeCtx*)g, st));
  EXPECT(host->grad->num_inputs(g) == 1, "the real grad ctx was refused");
  host->set_status(st, OPFORGE_OK, opforge_str(""));
  if (!host->grad->output_grad(g, 0, &dy)) return OPFORGE_OK;
  memset(&arg, 0, sizeof arg);
  arg.struct_size = sizeof arg;
  arg.syms = &dy;
  arg.num_syms = 1;
  outer_grad = g;
  TRY(host->grad->call(g, opforge_str("HostileNested"), &arg, 1, NULL, 0, &dx, 1, &n, st));
  outer_grad = NULL;
  return host->grad->set_input_grad(g, 0, dx, st);
}

/* HostileNested(x) -> y = x: its kernel and shape function run inside the
 * gradient callback's `call`; the outer gradient context is held by that
 * call, so every use of it must be refused. */
static OpforgeCode nested_compute(void* s, OpforgeKernelCtx* ctx, OpforgeStatus* st) {
  (void)s;
  if (outer_grad) TRY(grad_refuses(outer_grad, st));
  host->set_status(st, OPFORGE_OK, opforge_str(""));
  return copy_input(ctx, st);
}

static OpforgeCode nested_shape(OpforgeShapeCtx* ctx, void* user, OpforgeStatus* st) {
  (void)user;
  if (outer_grad) TRY(grad_refuses(outer_grad, st));
  host->set_status(st, OPFORGE_OK, opforge_str(""));
  return same_shape(ctx, NULL, st);
}

/* ---- ranks above 254 ----------------------------------------------------------- */

static int64_t ones[100000];

/* HostileRank(x) -> y; attr how: the host's answer to a shape of too many
 * dimensions made by 0 allocate_output (rank 100000), 1 allocate_temp
 * (255), 2 forward_input_or_allocate_output (255), 3 set_output_foreign
 * (255); 4 allocate_output of rank 254, which works. */
static void release_nothing(void* data, void* user) {
  (void)data;
  (void)user;
}

static OpforgeCode rank_compute(void* s, OpforgeKernelCtx* ctx, OpforgeStatus* st) {
  OpforgeTensor v;
  OpforgeForeignTensor f;
  size_t cand = 0;
  int64_t from;
  static float one = 1;
  (void)s;
  INIT_VIEW(v);
  switch (attr_int(ctx, "how", st)) {
    case 0: return host->kernel->allocate_output(ctx, 0, ones, 100000, &v, st);
    case 1: return host->kernel->allocate_temp(ctx, OPFORGE_DT_FLOAT, ones, 255, &v, st);
    case 2:
      return host->kernel->forward_input_or_allocate_output(ctx, &cand, 1, 0, ones, 255, &from, &v, st);
    case 3:
      INIT_VIEW(f);
      f.dtype = OPFORGE_DT_FLOAT;
      f.rank = 255;
      f.dims = ones;
      f.data = &one;
      f.byte_len = sizeof one;
      f.release = release_nothing;
      return host->kernel->set_output_foreign(ctx, 0, &f, st);
    default:
      TRY(host->kernel->allocate_output(ctx, 0, ones, 254, &v, st));
      *(float*)v.data = 7;
      return OPFORGE_OK;
  }
}

/* Every way a shape function makes a shape refuses a rank above 254;
 * attr how 10: return the host's answer to make_shape_from_values of rank
 * 100000. */
static OpforgeCode rank_shape(OpforgeShapeCtx* ctx, void* user, OpforgeStatus* st) {
  const OpforgeShapeApi* sh = host->shape;
  static OpforgeDim dims[255];
  OpforgeShape out, a, b;
  OpforgeAttrValue how;
  int i;
  (void)user;
  INIT_VIEW(how);
  TRY(sh->attr(ctx, opforge_str("how"), &how, st));
  if (how.i == 10) return sh->make_shape_from_values(ctx, ones, 100000, &out, st);
  EXPECT(sh->make_shape_from_values(ctx, ones, 255, &out, st) == OPFORGE_INVALID_ARGUMENT,
         "make_shape_from_values of rank 255");
  EXPECT(sh->unknown_shape(ctx, 100000) == OPFORGE_NO_HANDLE, "unknown_shape of rank 100000");
  EXPECT(sh->with_rank(ctx, sh->input(ctx, 0), 255, &out, st) == OPFORGE_INVALID_ARGUMENT,
         "with_rank 255");
  dims[0] = sh->make_dim(ctx, 1);
  for (i = 1; i < 255; ++i) dims[i] = dims[0];
  EXPECT(sh->make_shape(ctx, dims, 255, &out, st) == OPFORGE_INVALID_ARGUMENT, "make_shape of 255 dims");
  TRY(sh->make_shape(ctx, dims, 200, &a, st));
  TRY(sh->make_shape_from_values(ctx, ones, 200, &b, st));
  EXPECT(sh->concatenate(ctx, a, b, &out, st) == OPFORGE_INVALID_ARGUMENT, "concatenate to rank 400");
  /* 254 is allowed. */
  TRY(sh->make_shape_from_values(ctx, ones, 254, &out, st));
  EXPECT(sh->rank(ctx, out) == 254, "rank 254");
  host->set_status(st, OPFORGE_OK, opforge_str(""));
  return same_shape(ctx, NULL, st);
}

/* The gradient of HostileRank: the host's answer to a constant of rank 255. */
static OpforgeCode rank_grad(OpforgeGradCtx* g, void* user, OpforgeStatus* st) {
  OpforgeTensor c;
  OpforgeSym out;
  static float one = 1;
  (void)user;
  INIT_VIEW(c);
  c.dtype = OPFORGE_DT_FLOAT;
  c.rank = 255;
  c.dims = ones;
  c.data = &one;
  c.byte_len = sizeof one;
  c.num_elements = 1;
  return host->grad->constant(g, &c, &out, st);
}

/* ---- registration ---------------------------------------------------------- */

static OpforgeCode reg(OpforgeRegistrar* r, const char* name, const char* attr,
                       OpforgeShapeFn shape_fn, OpforgeKernelCreateFn create,
                       OpforgeKernelComputeFn compute, OpforgeGradFn grad, OpforgeStatus* st) {
  OpforgeOpDef op;
  OpforgeKernelDef k;
  OpforgeStr in = opforge_str("x: float"), out = opforge_str("y: float"), a = opforge_str(attr);
  memset(&op, 0, sizeof op);
  op.struct_size = sizeof op;
  op.name = opforge_str(name);
  op.inputs = &in;
  op.num_inputs = 1;
  op.outputs = &out;
  op.num_outputs = 1;
  op.attrs = &a;
  op.num_attrs = attr[0] ? 1 : 0;
  op.shape_fn = shape_fn;
  TRY(host->registration->op(r, &op, st));
  memset(&k, 0, sizeof k);
  k.struct_size = sizeof k;
  k.op = opforge_str(name);
  k.device_type = opforge_str("CPU");
  k.create = create;
  k.compute = compute;
  TRY(host->registration->kernel(r, &k, st));
  if (grad) TRY(host->registration->gradient_fn(r, opforge_str(name), grad, NULL, st));
  return OPFORGE_OK;
}

OPFORGE_EXPORT OpforgeCode opforge_plugin_init_v1(const OpforgeHostApi* h, OpforgeRegistrar* r,
                                                  OpforgeStatus* st) {
  size_t i;
  host = h;
  for (i = 0; i < sizeof ones / sizeof ones[0]; ++i) ones[i] = 1;
  TRY(reg(r, "HostileComputeCode", "code: int", same_shape, NULL, code_compute, NULL, st));
  TRY(reg(r, "HostileCreateCode", "code: int", same_shape, code_create, copy_compute, NULL, st));
  TRY(reg(r, "HostileShapeCode", "", code_shape, NULL, copy_compute, NULL, st));
  TRY(reg(r, "HostileGradCode", "", same_shape, NULL, copy_compute, code_grad, st));
  TRY(reg(r, "HostileStaleShape", "which: int = 0", stale_shape, NULL, copy_compute, NULL, st));
  TRY(reg(r, "HostileStaleGrad", "", same_shape, NULL, copy_compute, stale_grad, st));
  TRY(reg(r, "HostileForge", "mode: int = 0", forge_shape, forge_create, forge_compute, forge_grad, st));
  TRY(reg(r, "HostileNested", "", nested_shape, NULL, nested_compute, NULL, st));
  TRY(reg(r, "HostileRank", "how: int = 4", rank_shape, NULL, rank_compute, rank_grad, st));
  return OPFORGE_OK;
}
