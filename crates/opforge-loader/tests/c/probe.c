/*
 * A test library that exercises the host's kernel and shape APIs: forwarding,
 * pass-through, foreign outputs, attrs read at creation, temporaries,
 * parallel_for errors, error codes, and calls the host must reject (bad
 * indices, forged handles, the registrar after init) without crashing.
 * Built by crates/opforge-loader/tests/probe.rs. C99, header only.
 */
#include <opforge/opforge.h>

#include <stdlib.h>

OPFORGE_LIBRARY("probe", "0.0.1");

static const OpforgeHostApi* host;
static OpforgeRegistrar* saved_registrar;
static int released;
static int destroyed;
static int fini_calls;

/* For the tests, through dlsym. */
OPFORGE_EXPORT int probe_released(void) { return released; }
OPFORGE_EXPORT int probe_destroyed(void) { return __atomic_load_n(&destroyed, __ATOMIC_SEQ_CST); }
OPFORGE_EXPORT int probe_fini_calls(void) { return fini_calls; }

#define INIT_VIEW(v)          \
  memset(&(v), 0, sizeof(v)); \
  (v).struct_size = sizeof(v)

static OpforgeCode fail(OpforgeStatus* st, OpforgeCode code, const char* msg) {
  host->set_status(st, code, opforge_str(msg));
  return code;
}

/* ProbeForward(x: float) -> y: float, y = 2x, in place when possible. */
static OpforgeCode forward_compute(void* s, OpforgeKernelCtx* ctx, OpforgeStatus* st) {
  OpforgeTensor in, out;
  size_t cand = 0;
  int64_t from = -2;
  int64_t i;
  float tmp0;
  OpforgeCode c;
  (void)s;
  INIT_VIEW(in);
  INIT_VIEW(out);
  c = host->kernel->input(ctx, 0, &in, st);
  if (c) return c;
  tmp0 = in.num_elements ? ((const float*)in.data)[0] : 0.0f;
  c = host->kernel->forward_input_or_allocate_output(ctx, &cand, 1, 0, in.dims, in.rank, &from, &out, st);
  if (c) return c;
  if (from == 0) {
    /* The input's view is dead now: input() must refuse it. */
    OpforgeTensor again;
    INIT_VIEW(again);
    if (host->kernel->input(ctx, 0, &again, st) != OPFORGE_FAILED_PRECONDITION)
      return fail(st, OPFORGE_INTERNAL, "input after forward was not refused");
    host->set_status(st, OPFORGE_OK, opforge_str(""));
    if (!(out.flags & OPFORGE_TENSOR_WRITABLE)) return fail(st, OPFORGE_INTERNAL, "not writable");
    for (i = 0; i < out.num_elements; ++i) ((float*)out.data)[i] *= 2.0f;
  } else if (from == OPFORGE_NOT_FORWARDED) {
    for (i = 0; i < out.num_elements; ++i) ((float*)out.data)[i] = 2.0f * ((const float*)in.data)[i];
  } else {
    return fail(st, OPFORGE_INTERNAL, "bad forwarded_from");
  }
  (void)tmp0;
  return OPFORGE_OK;
}

/* ProbePass(x: T) -> y: T: the output is the input. */
static OpforgeCode pass_compute(void* s, OpforgeKernelCtx* ctx, OpforgeStatus* st) {
  (void)s;
  return host->kernel->set_output_from_input(ctx, 0, 0, st);
}

/* ProbeForeign(n: int32) -> y: float: n floats 0, 1, ... from malloc. */
static void release_floats(void* data, void* user) {
  (void)user;
  free(data);
  released++;
}

static OpforgeCode foreign_compute(void* s, OpforgeKernelCtx* ctx, OpforgeStatus* st) {
  OpforgeTensor in;
  OpforgeForeignTensor f;
  int64_t n, i;
  float* data;
  OpforgeCode c;
  (void)s;
  INIT_VIEW(in);
  c = host->kernel->input(ctx, 0, &in, st);
  if (c) return c;
  n = *(const int32_t*)in.data;
  data = (float*)malloc((size_t)(n > 0 ? n : 1) * sizeof(float));
  for (i = 0; i < n; ++i) data[i] = (float)i;
  INIT_VIEW(f);
  f.dtype = OPFORGE_DT_FLOAT;
  f.rank = 1;
  f.dims = &n;
  f.data = data;
  f.byte_len = (uint64_t)n * sizeof(float);
  f.release = release_floats;
  c = host->kernel->set_output_foreign(ctx, 0, &f, st);
  if (c) free(data); /* on failure the plugin still owns it */
  return c;
}

/* ProbeAttrs(x: float) -> y: float; attrs scale: float, offsets: list(int),
 * mode: string; y = x * scale + sum(offsets) + len(mode). */
typedef struct { float scale; int64_t offset; size_t mode_len; } AttrState;

static OpforgeCode attrs_create(const OpforgeKernelInit* init, void* user, void** state, OpforgeStatus* st) {
  OpforgeAttrValue v;
  AttrState* a;
  size_t i;
  OpforgeCode c;
  (void)user;
  a = (AttrState*)calloc(1, sizeof *a);
  INIT_VIEW(v);
  c = host->kernel->init_attr(init, opforge_str("scale"), &v, st);
  if (c) { free(a); return c; }
  if (v.kind != OPFORGE_ATTR_FLOAT) { free(a); return fail(st, OPFORGE_INTERNAL, "scale kind"); }
  a->scale = v.f;
  INIT_VIEW(v);
  c = host->kernel->init_attr(init, opforge_str("offsets"), &v, st);
  if (c) { free(a); return c; }
  if (v.kind != (OPFORGE_ATTR_INT | OPFORGE_ATTR_LIST)) { free(a); return fail(st, OPFORGE_INTERNAL, "offsets kind"); }
  for (i = 0; i < v.list_len; ++i) a->offset += ((const int64_t*)v.list)[i];
  INIT_VIEW(v);
  c = host->kernel->init_attr(init, opforge_str("mode"), &v, st);
  if (c) { free(a); return c; }
  a->mode_len = v.s.len;
  if (a->scale < 0) { free(a); return fail(st, OPFORGE_INVALID_ARGUMENT, "scale must be >= 0"); }
  INIT_VIEW(v);
  if (host->kernel->init_attr(init, opforge_str("nope"), &v, st) != OPFORGE_NOT_FOUND) {
    free(a);
    return fail(st, OPFORGE_INTERNAL, "a missing attr was not NOT_FOUND");
  }
  host->set_status(st, OPFORGE_OK, opforge_str(""));
  *state = a;
  return OPFORGE_OK;
}

static OpforgeCode attrs_compute(void* s, OpforgeKernelCtx* ctx, OpforgeStatus* st) {
  const AttrState* a = (const AttrState*)s;
  OpforgeTensor in, out;
  int64_t i;
  OpforgeCode c;
  INIT_VIEW(in);
  INIT_VIEW(out);
  c = host->kernel->input(ctx, 0, &in, st);
  if (c) return c;
  c = host->kernel->allocate_output(ctx, 0, in.dims, in.rank, &out, st);
  if (c) return c;
  for (i = 0; i < in.num_elements; ++i)
    ((float*)out.data)[i] = ((const float*)in.data)[i] * a->scale + (float)a->offset + (float)a->mode_len;
  return OPFORGE_OK;
}

static void attrs_destroy(void* s, void* user) {
  (void)user;
  free(s);
  __atomic_fetch_add(&destroyed, 1, __ATOMIC_SEQ_CST);
}

/* ProbeError(x: float) -> y: float; attr code: int. Returns `code`
 * (message unless code is 13), after checking that bad calls are refused. */
static OpforgeCode error_compute(void* s, OpforgeKernelCtx* ctx, OpforgeStatus* st) {
  OpforgeAttrValue v;
  OpforgeTensor t;
  OpforgeOpDef op;
  int64_t dims[1] = {-5};
  (void)s;
  INIT_VIEW(t);
  if (host->kernel->input(ctx, 99, &t, st) != OPFORGE_INVALID_ARGUMENT)
    return fail(st, OPFORGE_INTERNAL, "input 99 was not INVALID_ARGUMENT");
  if (host->kernel->output(ctx, 0, &t, st) != OPFORGE_FAILED_PRECONDITION)
    return fail(st, OPFORGE_INTERNAL, "an unset output was not FAILED_PRECONDITION");
  if (host->kernel->allocate_output(ctx, 0, dims, 1, &t, st) != OPFORGE_INVALID_ARGUMENT)
    return fail(st, OPFORGE_INTERNAL, "a negative dim was not INVALID_ARGUMENT");
  if (host->kernel->output_request(ctx, 0) != OPFORGE_REQ_WRITE)
    return fail(st, OPFORGE_INTERNAL, "output_request is not WRITE");
  if (host->kernel->input_dtype(ctx, 7) != OPFORGE_DT_INVALID)
    return fail(st, OPFORGE_INTERNAL, "input_dtype(7) is not DT_INVALID");
  t.struct_size = 8; /* below the struct's first size */
  if (host->kernel->input(ctx, 0, &t, st) != OPFORGE_INVALID_ARGUMENT)
    return fail(st, OPFORGE_INTERNAL, "a short struct_size was not INVALID_ARGUMENT");
  memset(&op, 0, sizeof op);
  op.struct_size = sizeof op;
  op.name = opforge_str("Late");
  if (host->registration->op(saved_registrar, &op, st) != OPFORGE_FAILED_PRECONDITION)
    return fail(st, OPFORGE_INTERNAL, "the registrar worked after init");
  if (host->grad->call(NULL, opforge_str("X"), NULL, 0, NULL, 0, NULL, 0, NULL, st) != OPFORGE_INVALID_ARGUMENT)
    return fail(st, OPFORGE_INTERNAL, "grad->call without a context was not INVALID_ARGUMENT");
  host->set_status(st, OPFORGE_OK, opforge_str(""));
  INIT_VIEW(v);
  if (host->kernel->attr(ctx, opforge_str("code"), &v, st)) return OPFORGE_INTERNAL;
  if (v.i == 13) return (OpforgeCode)v.i;
  return fail(st, (OpforgeCode)v.i, "probe failed on purpose");
}

/* ProbeTemp(x: float) -> y: float (scalar): the sum of x through a
 * temporary and parallel_for; a negative x[0] makes a shard fail. */
typedef struct { const float* x; float* partial; } SumJob;

static OpforgeCode sum_shard(uint64_t b, uint64_t e, void* user, OpforgeStatus* st) {
  SumJob* j = (SumJob*)user;
  uint64_t i;
  if (j->x[0] < 0) {
    host->set_status(st, OPFORGE_OUT_OF_RANGE, opforge_str("negative first element"));
    return OPFORGE_OUT_OF_RANGE;
  }
  for (i = b; i < e; ++i) j->partial[i] = j->x[i];
  return OPFORGE_OK;
}

static OpforgeCode temp_compute(void* s, OpforgeKernelCtx* ctx, OpforgeStatus* st) {
  OpforgeTensor in, tmp, out;
  SumJob job;
  float sum = 0;
  int64_t i;
  OpforgeCode c;
  (void)s;
  INIT_VIEW(in);
  INIT_VIEW(tmp);
  INIT_VIEW(out);
  c = host->kernel->input(ctx, 0, &in, st);
  if (c) return c;
  c = host->kernel->allocate_temp(ctx, OPFORGE_DT_FLOAT, in.dims, in.rank, &tmp, st);
  if (c) return c;
  {
    /* Setting an output twice keeps the first one's memory valid until
     * compute returns (R7): writing through the old view is harmless. */
    OpforgeTensor first;
    INIT_VIEW(first);
    c = host->kernel->allocate_output(ctx, 0, in.dims, in.rank, &first, st);
    if (c) return c;
    c = host->kernel->allocate_output(ctx, 0, NULL, 0, &out, st);
    if (c) return c;
    if (first.num_elements > 0) ((float*)first.data)[0] = 1.0f;
    INIT_VIEW(out);
  }
  job.x = (const float*)in.data;
  job.partial = (float*)tmp.data;
  if (in.num_elements > 0) {
    c = host->kernel->parallel_for(ctx, (uint64_t)in.num_elements, 1000, sum_shard, &job, st);
    if (c) return c;
  }
  for (i = 0; i < in.num_elements; ++i) sum += job.partial[i];
  c = host->kernel->allocate_output(ctx, 0, NULL, 0, &out, st);
  if (c) return c;
  *(float*)out.data = sum;
  return OPFORGE_OK;
}

/* The shape function of ProbeShape(x: float) -> y: float: checks that
 * forged handles and bad indices are refused, then y = [x0, 7]. */
static OpforgeCode probe_shape(OpforgeShapeCtx* ctx, void* user, OpforgeStatus* st) {
  const OpforgeShapeApi* sh = host->shape;
  OpforgeShape in = sh->input(ctx, 0), out;
  OpforgeDim d0, seven, dims[2];
  (void)user;
  if (sh->set_output(ctx, 0, 123456789, st) != OPFORGE_INVALID_ARGUMENT)
    return fail(st, OPFORGE_INTERNAL, "a forged shape was accepted");
  if (sh->set_output(ctx, 0, OPFORGE_NO_HANDLE, st) != OPFORGE_INVALID_ARGUMENT)
    return fail(st, OPFORGE_INTERNAL, "NO_HANDLE was accepted");
  if (sh->rank(ctx, 987654) != OPFORGE_UNKNOWN_RANK) return fail(st, OPFORGE_INTERNAL, "rank of forged");
  if (sh->value(ctx, 987654) != OPFORGE_UNKNOWN_DIM) return fail(st, OPFORGE_INTERNAL, "value of forged");
  if (sh->input(ctx, 5) != OPFORGE_NO_HANDLE) return fail(st, OPFORGE_INTERNAL, "input 5");
  if (sh->dim_op(ctx, 99, in, in, &d0, st) != OPFORGE_INVALID_ARGUMENT)
    return fail(st, OPFORGE_INTERNAL, "a forged dim was accepted");
  if (sh->with_rank(ctx, in, 1, &in, st)) return OPFORGE_INVALID_ARGUMENT; /* message from the host */
  if (sh->dim(ctx, in, 3, &d0, st) != OPFORGE_INVALID_ARGUMENT)
    return fail(st, OPFORGE_INTERNAL, "dim 3 of a vector was accepted");
  if (sh->dim(ctx, in, 0, &d0, st)) return OPFORGE_INTERNAL;
  seven = sh->make_dim(ctx, 7);
  dims[0] = d0;
  dims[1] = seven;
  if (sh->make_shape(ctx, dims, 2, &out, st)) return OPFORGE_INTERNAL;
  host->set_status(st, OPFORGE_OK, opforge_str(""));
  return sh->set_output(ctx, 0, out, st);
}

static OpforgeCode probe_shape_compute(void* s, OpforgeKernelCtx* ctx, OpforgeStatus* st) {
  OpforgeTensor in, out;
  int64_t dims[2];
  OpforgeCode c;
  (void)s;
  INIT_VIEW(in);
  INIT_VIEW(out);
  c = host->kernel->input(ctx, 0, &in, st);
  if (c) return c;
  dims[0] = in.dims[0];
  dims[1] = 7;
  c = host->kernel->allocate_output(ctx, 0, dims, 2, &out, st);
  if (c) return c;
  memset(out.data, 0, (size_t)out.byte_len);
  return OPFORGE_OK;
}

/* ProbeScale(x: float) -> y: float, y = 3x; its gradient dx = dy * 3 is
 * built from the registered ops Mul and a constant. */
static OpforgeCode scale_compute(void* s, OpforgeKernelCtx* ctx, OpforgeStatus* st) {
  OpforgeTensor in, out;
  int64_t i;
  OpforgeCode c;
  (void)s;
  INIT_VIEW(in);
  INIT_VIEW(out);
  c = host->kernel->input(ctx, 0, &in, st);
  if (c) return c;
  c = host->kernel->allocate_output(ctx, 0, in.dims, in.rank, &out, st);
  if (c) return c;
  for (i = 0; i < in.num_elements; ++i) ((float*)out.data)[i] = 3.0f * ((const float*)in.data)[i];
  return OPFORGE_OK;
}

static OpforgeCode scale_grad(OpforgeGradCtx* g, void* user, OpforgeStatus* st) {
  const OpforgeGradApi* gr = host->grad;
  OpforgeSym dy, three, dx, pair[2];
  OpforgeSymArg args[2];
  OpforgeTensor c;
  float v = 3.0f;
  size_t n = 0;
  OpforgeCode code;
  (void)user;
  if (gr->num_inputs(g) != 1 || gr->num_outputs(g) != 1) return fail(st, OPFORGE_INTERNAL, "arity");
  if (gr->dtype(g, gr->input(g, 0)) != OPFORGE_DT_FLOAT) return fail(st, OPFORGE_INTERNAL, "dtype");
  if (gr->dtype(g, 4242) != OPFORGE_DT_INVALID) return fail(st, OPFORGE_INTERNAL, "forged dtype");
  if (!gr->output_grad(g, 0, &dy)) return OPFORGE_OK; /* no gradient flows */
  INIT_VIEW(c);
  c.dtype = OPFORGE_DT_FLOAT;
  c.rank = 0;
  c.data = &v;
  c.byte_len = sizeof v;
  c.num_elements = 1;
  code = gr->constant(g, &c, &three, st);
  if (code) return code;
  pair[0] = dy;
  pair[1] = three;
  memset(args, 0, sizeof args);
  args[0].struct_size = sizeof args[0];
  args[0].syms = &pair[0];
  args[0].num_syms = 1;
  args[1].struct_size = sizeof args[1];
  args[1].syms = &pair[1];
  args[1].num_syms = 1;
  code = gr->call(g, opforge_str("Mul"), args, 2, NULL, 0, &dx, 1, &n, st);
  if (code) return code;
  if (n != 1) return fail(st, OPFORGE_INTERNAL, "Mul has one output");
  if (gr->set_input_grad(g, 0, 999999, st) != OPFORGE_INVALID_ARGUMENT)
    return fail(st, OPFORGE_INTERNAL, "a forged gradient handle was accepted");
  if (gr->call(g, opforge_str("NoSuchOp"), NULL, 0, NULL, 0, NULL, 0, NULL, st) != OPFORGE_NOT_FOUND)
    return fail(st, OPFORGE_INTERNAL, "an unknown op was callable");
  host->set_status(st, OPFORGE_OK, opforge_str(""));
  return gr->set_input_grad(g, 0, dx, st);
}

/* ProbeSquare(x: T) -> y: T, y = x * x, with the declarative gradient
 *   0: s  = AddV2(x, x)          (T = $T)
 *   1: dx = Mul(dy, s)
 *   input_grads = [node 1 "z"] */
static OpforgeCode square_compute(void* s, OpforgeKernelCtx* ctx, OpforgeStatus* st) {
  OpforgeTensor in, out;
  int64_t i;
  OpforgeCode c;
  (void)s;
  INIT_VIEW(in);
  INIT_VIEW(out);
  c = host->kernel->input(ctx, 0, &in, st);
  if (c) return c;
  c = host->kernel->allocate_output(ctx, 0, in.dims, in.rank, &out, st);
  if (c) return c;
  for (i = 0; i < in.num_elements; ++i) {
    float v = ((const float*)in.data)[i];
    ((float*)out.data)[i] = v * v;
  }
  return OPFORGE_OK;
}

static OpforgeGradSource src(uint32_t kind, uint32_t node, const char* arg, int64_t index) {
  OpforgeGradSource s;
  memset(&s, 0, sizeof s);
  s.struct_size = sizeof s;
  s.kind = kind;
  s.node = node;
  s.arg = opforge_str(arg);
  s.index = index;
  return s;
}

static OpforgeGradArg one(const OpforgeGradSource* s) {
  OpforgeGradArg a;
  memset(&a, 0, sizeof a);
  a.struct_size = sizeof a;
  a.sources = s;
  a.num_sources = 1;
  return a;
}

static OpforgeCode register_square_gradient(OpforgeRegistrar* r, OpforgeStatus* st) {
  OpforgeGradSource x = src(OPFORGE_GRAD_SRC_INPUT, 0, "x", OPFORGE_GRAD_WHOLE_ARG);
  OpforgeGradSource dy = src(OPFORGE_GRAD_SRC_OUTPUT_GRAD, 0, "y", 0);
  OpforgeGradSource n0 = src(OPFORGE_GRAD_SRC_NODE, 0, "z", OPFORGE_GRAD_WHOLE_ARG);
  OpforgeGradSource n1 = src(OPFORGE_GRAD_SRC_NODE, 1, "z", OPFORGE_GRAD_WHOLE_ARG);
  OpforgeGradSource late = src(OPFORGE_GRAD_SRC_NODE, 1, "z", OPFORGE_GRAD_WHOLE_ARG);
  OpforgeGradArg add_in[2], mul_in[2], grads[1], bad_in[2];
  OpforgeAttrValue t;
  OpforgeNamedAttr attr;
  OpforgeGradNode nodes[2];
  OpforgeGradientFunction f;
  add_in[0] = one(&x);
  add_in[1] = one(&x);
  mul_in[0] = one(&dy);
  mul_in[1] = one(&n0);
  grads[0] = one(&n1);
  memset(&t, 0, sizeof t);
  t.struct_size = sizeof t;
  t.kind = OPFORGE_ATTR_PLACEHOLDER;
  t.s = opforge_str("T");
  memset(&attr, 0, sizeof attr);
  attr.struct_size = sizeof attr;
  attr.name = opforge_str("T");
  attr.value = &t;
  memset(nodes, 0, sizeof nodes);
  nodes[0].struct_size = sizeof nodes[0];
  nodes[0].name = opforge_str("twice_x");
  nodes[0].op = opforge_str("AddV2");
  nodes[0].inputs = add_in;
  nodes[0].num_inputs = 2;
  nodes[0].attrs = &attr;
  nodes[0].num_attrs = 1;
  nodes[1].struct_size = sizeof nodes[1];
  nodes[1].op = opforge_str("Mul");
  nodes[1].inputs = mul_in;
  nodes[1].num_inputs = 2;
  memset(&f, 0, sizeof f);
  f.struct_size = sizeof f;
  f.op = opforge_str("ProbeSquare");
  f.nodes = nodes;
  f.num_nodes = 2;
  f.input_grads = grads;
  f.num_input_grads = 1;
  /* A node that reads a later node is refused at registration. */
  bad_in[0] = one(&late);
  bad_in[1] = one(&x);
  nodes[0].inputs = bad_in;
  if (host->registration->gradient_function(r, &f, st) != OPFORGE_INVALID_ARGUMENT)
    return fail(st, OPFORGE_INTERNAL, "a node reading a later node was accepted");
  nodes[0].inputs = add_in;
  return host->registration->gradient_function(r, &f, st);
}

/* ProbePanic(x: float) -> y: float (scalar): y is the serial number of the
 * kernel state (1, 2, ... in creation order); a negative x[0] reports a
 * caught "panic" (INTERNAL + OPFORGE_STATUS_PANICKED), after which the host
 * must destroy the state and create a new one. */
static int panic_states;
/* States ProbePanic's create made (computes and evictions run on many
 * threads: the counters are atomic). */
OPFORGE_EXPORT int probe_panic_states(void) {
  return __atomic_load_n(&panic_states, __ATOMIC_SEQ_CST);
}

static OpforgeCode panic_create(const OpforgeKernelInit* init, void* user, void** state,
                                OpforgeStatus* st) {
  int* serial = (int*)malloc(sizeof(int));
  (void)init;
  (void)user;
  (void)st;
  *serial = __atomic_add_fetch(&panic_states, 1, __ATOMIC_SEQ_CST);
  *state = serial;
  return OPFORGE_OK;
}

static void panic_destroy(void* s, void* user) {
  (void)user;
  free(s);
  __atomic_fetch_add(&destroyed, 1, __ATOMIC_SEQ_CST);
}

static OpforgeCode panic_compute(void* s, OpforgeKernelCtx* ctx, OpforgeStatus* st) {
  OpforgeTensor in, out;
  OpforgeCode c;
  INIT_VIEW(in);
  INIT_VIEW(out);
  c = host->kernel->input(ctx, 0, &in, st);
  if (c) return c;
  if (((const float*)in.data)[0] < 0) {
    host->set_status(st, OPFORGE_INTERNAL, opforge_str("panicked: state poisoned"));
    host->set_status_flags(st, OPFORGE_STATUS_PANICKED);
    return OPFORGE_INTERNAL;
  }
  c = host->kernel->allocate_output(ctx, 0, NULL, 0, &out, st);
  if (c) return c;
  *(float*)out.data = (float)*(const int*)s;
  return OPFORGE_OK;
}

static OpforgeCode reg_op(OpforgeRegistrar* r, const char* name, const char* in, const char* out,
                          const OpforgeStr* attrs, size_t num_attrs, OpforgeShapeFn shape_fn,
                          OpforgeStatus* st) {
  OpforgeOpDef op;
  OpforgeStr i = opforge_str(in), o = opforge_str(out);
  memset(&op, 0, sizeof op);
  op.struct_size = sizeof op;
  op.name = opforge_str(name);
  op.inputs = &i;
  op.num_inputs = 1;
  op.outputs = &o;
  op.num_outputs = 1;
  op.attrs = attrs;
  op.num_attrs = num_attrs;
  op.shape_fn = shape_fn;
  return host->registration->op(r, &op, st);
}

static OpforgeCode reg_kernel(OpforgeRegistrar* r, const char* op, OpforgeKernelCreateFn create,
                              OpforgeKernelComputeFn compute, OpforgeKernelDestroyFn destroy,
                              uint32_t flags, OpforgeStatus* st) {
  OpforgeKernelDef k;
  memset(&k, 0, sizeof k);
  k.struct_size = sizeof k;
  k.op = opforge_str(op);
  k.device_type = opforge_str("CPU");
  k.create = create;
  k.compute = compute;
  k.destroy = destroy;
  k.flags = flags;
  return host->registration->kernel(r, &k, st);
}

#define TRY(x)               \
  do {                       \
    OpforgeCode c_ = (x);    \
    if (c_) return c_;       \
  } while (0)

OPFORGE_EXPORT OpforgeCode opforge_plugin_init_v1(const OpforgeHostApi* h, OpforgeRegistrar* r,
                                                  OpforgeStatus* st) {
  static const OpforgeStr pass_attrs[] = {OPFORGE_STR_LIT("T: type")};
  static const OpforgeStr attr_attrs[] = {OPFORGE_STR_LIT("scale: float = 2.0"),
                                          OPFORGE_STR_LIT("offsets: list(int) = [1, 2]"),
                                          OPFORGE_STR_LIT("mode: string = 'abc'")};
  static const OpforgeStr error_attrs[] = {OPFORGE_STR_LIT("code: int")};
  OpforgeKernelDef bad;
  host = h;
  saved_registrar = r;
  TRY(reg_op(r, "ProbeForward", "x: float", "y: float", NULL, 0, NULL, st));
  TRY(reg_kernel(r, "ProbeForward", NULL, forward_compute, NULL, 0, st));
  TRY(reg_op(r, "ProbePass", "x: T", "y: T", pass_attrs, 1, NULL, st));
  TRY(reg_kernel(r, "ProbePass", NULL, pass_compute, NULL, OPFORGE_KERNEL_NOT_THREAD_SAFE, st));
  TRY(reg_op(r, "ProbeForeign", "n: int32", "y: float", NULL, 0, NULL, st));
  TRY(reg_kernel(r, "ProbeForeign", NULL, foreign_compute, NULL, 0, st));
  TRY(reg_op(r, "ProbeAttrs", "x: float", "y: float", attr_attrs, 3, NULL, st));
  TRY(reg_kernel(r, "ProbeAttrs", attrs_create, attrs_compute, attrs_destroy, 0, st));
  TRY(reg_op(r, "ProbeError", "x: float", "y: float", error_attrs, 1, NULL, st));
  TRY(reg_kernel(r, "ProbeError", NULL, error_compute, NULL, 0, st));
  TRY(reg_op(r, "ProbePanic", "x: float", "y: float", NULL, 0, NULL, st));
  TRY(reg_kernel(r, "ProbePanic", panic_create, panic_compute, panic_destroy, 0, st));
  TRY(reg_op(r, "ProbeTemp", "x: float", "y: float", NULL, 0, NULL, st));
  TRY(reg_kernel(r, "ProbeTemp", NULL, temp_compute, NULL, OPFORGE_KERNEL_PARALLEL_ISOLATED, st));
  TRY(reg_op(r, "ProbeShape", "x: float", "y: float", NULL, 0, probe_shape, st));
  TRY(reg_kernel(r, "ProbeShape", NULL, probe_shape_compute, NULL, 0, st));
  /* Refusals during init must be clean errors, and init may go on. */
  if (reg_op(r, "bad name", "x: float", "y: float", NULL, 0, NULL, st) != OPFORGE_INVALID_ARGUMENT)
    return fail(st, OPFORGE_INTERNAL, "a bad op name was accepted");
  if (reg_kernel(r, "NoSuchOp", NULL, pass_compute, NULL, 0, st) != OPFORGE_NOT_FOUND)
    return fail(st, OPFORGE_INTERNAL, "a kernel of an unknown op was accepted");
  if (reg_kernel(r, "ProbePass", NULL, NULL, NULL, 0, st) != OPFORGE_INVALID_ARGUMENT)
    return fail(st, OPFORGE_INTERNAL, "a kernel without compute was accepted");
  memset(&bad, 0, sizeof bad);
  bad.struct_size = sizeof bad;
  bad.op = opforge_str("ProbePass");
  bad.device_type = opforge_str("GPU");
  bad.compute = pass_compute;
  if (host->registration->kernel(r, &bad, st) != OPFORGE_UNIMPLEMENTED)
    return fail(st, OPFORGE_INTERNAL, "a GPU kernel was accepted");
  if (host->registration->gradient_fn(r, opforge_str("ProbePass"), NULL, NULL, st) != OPFORGE_INVALID_ARGUMENT)
    return fail(st, OPFORGE_INTERNAL, "a NULL gradient_fn was accepted");
  TRY(reg_op(r, "ProbeScale", "x: float", "y: float", NULL, 0, NULL, st));
  TRY(reg_kernel(r, "ProbeScale", NULL, scale_compute, NULL, 0, st));
  TRY(host->registration->gradient_fn(r, opforge_str("ProbeScale"), scale_grad, NULL, st));
  {
    static const OpforgeStr square_attrs[] = {OPFORGE_STR_LIT("T: {float, double}")};
    OpforgeTypeConstraint c;
    OpforgeKernelDef k;
    static const OpforgeDType f32[] = {OPFORGE_DT_FLOAT};
    TRY(reg_op(r, "ProbeSquare", "x: T", "y: T", square_attrs, 1, NULL, st));
    memset(&c, 0, sizeof c);
    c.struct_size = sizeof c;
    c.attr = opforge_str("T");
    c.types = f32;
    c.num_types = 1;
    memset(&k, 0, sizeof k);
    k.struct_size = sizeof k;
    k.op = opforge_str("ProbeSquare");
    k.device_type = opforge_str("CPU");
    k.constraints = &c;
    k.num_constraints = 1;
    k.compute = square_compute;
    TRY(host->registration->kernel(r, &k, st));
    TRY(register_square_gradient(r, st));
  }
  TRY(host->registration->not_differentiable(r, opforge_str("ProbeShape"), st));
  {
    /* R1: a struct from a newer header (longer, trailing fields unknown to
     * this host) is read up to the host's size; one below the first
     * released size is INVALID_ARGUMENT. */
    struct {
      OpforgeOpDef d;
      uint64_t future[2];
    } newer;
    OpforgeStr o = opforge_str("y: float");
    memset(&newer, 0, sizeof newer);
    newer.d.struct_size = sizeof newer;
    newer.d.name = opforge_str("ProbeNewer");
    newer.d.outputs = &o;
    newer.d.num_outputs = 1;
    newer.future[0] = 0xdeadbeef;
    TRY(host->registration->op(r, &newer.d, st));
    newer.d.struct_size = 8;
    newer.d.name = opforge_str("ProbeTooShort");
    if (host->registration->op(r, &newer.d, st) != OPFORGE_INVALID_ARGUMENT)
      return fail(st, OPFORGE_INTERNAL, "a struct_size of 8 was accepted");
  }
  host->set_status(st, OPFORGE_OK, opforge_str(""));
  return OPFORGE_OK;
}

OPFORGE_EXPORT void opforge_plugin_fini_v1(void) {
  fini_calls++;
  host = NULL;
}
