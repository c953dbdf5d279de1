// A C++ op library whose kernel and shape function throw, guarded by the
// header's OPFORGE_GUARD macros: the host must see INTERNAL errors carrying
// the exception's text, and the process must go on. Built by
// crates/opforge-loader/tests/cpp_exceptions.rs with the system C++ compiler.
#include <opforge/opforge.h>

#include <cstring>
#include <stdexcept>
#include <vector>

OPFORGE_LIBRARY("throwing_cpp", "0.0.1");

static const OpforgeHostApi* opforge_host;

static OpforgeCode throw_compute(void*, OpforgeKernelCtx* ctx, OpforgeStatus* st) {
  OPFORGE_GUARD(st, {
    OpforgeTensor in;
    std::memset(&in, 0, sizeof in);
    in.struct_size = sizeof in;
    OpforgeCode c = opforge_host->kernel->input(ctx, 0, &in, st);
    if (c != OPFORGE_OK) return c;
    float first = static_cast<const float*>(in.data)[0];
    if (first < 0) throw std::runtime_error("negative input in C++");
    if (first > 100) throw 42;  // not a std::exception
    OpforgeTensor out;
    std::memset(&out, 0, sizeof out);
    out.struct_size = sizeof out;
    c = opforge_host->kernel->allocate_output(ctx, 0, in.dims, in.rank, &out, st);
    if (c != OPFORGE_OK) return c;
    std::vector<float> v(static_cast<const float*>(in.data),
                         static_cast<const float*>(in.data) + in.num_elements);
    for (size_t i = 0; i < v.size(); ++i) static_cast<float*>(out.data)[i] = v[i];
    return OPFORGE_OK;
  })
}

static OpforgeCode throw_shape(OpforgeShapeCtx* ctx, void*, OpforgeStatus* st) {
  OPFORGE_GUARD(st, {
    OpforgeShape in = opforge_host->shape->input(ctx, 0);
    if (opforge_host->shape->rank(ctx, in) == 3) throw std::logic_error("rank 3 is not supported");
    return opforge_host->shape->set_output(ctx, 0, in, st);
  })
}

extern "C" OPFORGE_EXPORT OpforgeCode opforge_plugin_init_v1(const OpforgeHostApi* h,
                                                             OpforgeRegistrar* r,
                                                             OpforgeStatus* st) {
  opforge_host = h;
  OPFORGE_GUARD(st, {
    static const OpforgeStr inputs[] = {OPFORGE_STR_LIT("x: float")};
    static const OpforgeStr outputs[] = {OPFORGE_STR_LIT("y: float")};
    OpforgeOpDef op;
    std::memset(&op, 0, sizeof op);
    op.struct_size = sizeof op;
    op.name = opforge_str("CppThrow");
    op.inputs = inputs;
    op.num_inputs = 1;
    op.outputs = outputs;
    op.num_outputs = 1;
    op.shape_fn = throw_shape;
    OpforgeCode c = h->registration->op(r, &op, st);
    if (c != OPFORGE_OK) return c;
    OpforgeKernelDef k;
    std::memset(&k, 0, sizeof k);
    k.struct_size = sizeof k;
    k.op = opforge_str("CppThrow");
    k.device_type = opforge_str("CPU");
    k.compute = throw_compute;
    return h->registration->kernel(r, &k, st);
  })
}
