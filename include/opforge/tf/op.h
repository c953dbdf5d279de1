/* opforge's TensorFlow C++ layer: REGISTER_OP. See opforge/tf/base.h. */
#ifndef OPFORGE_TF_OP_H_
#define OPFORGE_TF_OP_H_

#include <opforge/tf/shape.h>

namespace tensorflow {
namespace register_op {

/** What REGISTER_OP("Name").Input(...)... collects: the spec strings,
 *  passed to the host unchanged (the host parses them with its
 *  OpDefBuilder, TensorFlow's spec language and error texts). */
class OpDefBuilderWrapper {
 public:
  explicit OpDefBuilderWrapper(const char* name) : name_(name) {}
  OpDefBuilderWrapper& Attr(std::string spec) {
    attrs_.push_back(std::move(spec));
    return *this;
  }
  OpDefBuilderWrapper& Input(std::string spec) {
    inputs_.push_back(std::move(spec));
    return *this;
  }
  OpDefBuilderWrapper& Output(std::string spec) {
    outputs_.push_back(std::move(spec));
    return *this;
  }
  OpDefBuilderWrapper& ControlOutput(std::string name) {
    control_outputs_.push_back(std::move(name));
    return *this;
  }
  OpDefBuilderWrapper& SetIsCommutative() {
    flags_ |= OPFORGE_OP_COMMUTATIVE;
    return *this;
  }
  OpDefBuilderWrapper& SetIsAggregate() {
    flags_ |= OPFORGE_OP_AGGREGATE;
    return *this;
  }
  OpDefBuilderWrapper& SetIsStateful() {
    flags_ |= OPFORGE_OP_STATEFUL;
    return *this;
  }
  OpDefBuilderWrapper& SetAllowsUninitializedInput() {
    flags_ |= OPFORGE_OP_ALLOWS_UNINITIALIZED_INPUT;
    return *this;
  }
  OpDefBuilderWrapper& SetIsDistributedCommunication() {
    flags_ |= OPFORGE_OP_DISTRIBUTED_COMMUNICATION;
    return *this;
  }
  OpDefBuilderWrapper& Deprecated(int version, std::string explanation) {
    deprecation_version_ = version;
    deprecation_ = std::move(explanation);
    return *this;
  }
  OpDefBuilderWrapper& Doc(std::string text) {
    doc_ = std::move(text);
    return *this;
  }
  OpDefBuilderWrapper& SetShapeFn(OpShapeInferenceFn fn) {
    shape_fn_ = std::make_shared<OpShapeInferenceFn>(std::move(fn));
    return *this;
  }
  /** Type constructors and forward type functions are TensorFlow's
   *  full-type machinery, which opforge's OpDefs do not carry: accepted and
   *  ignored. */
  template <typename T>
  OpDefBuilderWrapper& SetTypeConstructor(T&&) {
    return *this;
  }
  template <typename T>
  OpDefBuilderWrapper& SetForwardTypeFn(T&&) {
    return *this;
  }

  /** Registers the op through the host (in init). */
  Status Register(const OpforgeHostApi* host, OpforgeRegistrar* registrar) const {
    auto strs = [](const std::vector<std::string>& v) {
      std::vector<OpforgeStr> r;
      for (auto& s : v) r.push_back(opforge_tf::str(s));
      return r;
    };
    std::vector<OpforgeStr> attrs = strs(attrs_), inputs = strs(inputs_), outputs = strs(outputs_),
                            controls = strs(control_outputs_);
    OpforgeOpDef def;
    std::memset(&def, 0, sizeof def);
    def.struct_size = sizeof def;
    def.name = opforge_tf::str(name_);
    def.attrs = attrs.data();
    def.num_attrs = attrs.size();
    def.inputs = inputs.data();
    def.num_inputs = inputs.size();
    def.outputs = outputs.data();
    def.num_outputs = outputs.size();
    def.control_outputs = controls.data();
    def.num_control_outputs = controls.size();
    def.flags = flags_;
    def.deprecation_version = deprecation_version_;
    def.deprecation_explanation = opforge_tf::str(deprecation_);
    def.doc = opforge_tf::str(doc_);
    if (shape_fn_) {
      def.shape_fn = &OpDefBuilderWrapper::run_shape_fn;
      // The function lives as long as the registration queue (the library).
      def.shape_fn_user = shape_fn_.get();
    }
    opforge_tf::HostStatus st;
    if (host->registration->op(registrar, &def, st.get()) != OPFORGE_OK) return st.status();
    return Status();
  }

 private:
  static OpforgeCode run_shape_fn(OpforgeShapeCtx* ctx, void* user, OpforgeStatus* status) {
    return opforge_tf::guarded(status, [&]() -> Status {
      shape_inference::InferenceContext c(ctx);
      return (*static_cast<OpShapeInferenceFn*>(user))(&c);
    });
  }

  std::string name_;
  std::vector<std::string> attrs_, inputs_, outputs_, control_outputs_;
  uint32_t flags_ = 0;
  int deprecation_version_ = 0;
  std::string deprecation_, doc_;
  std::shared_ptr<OpShapeInferenceFn> shape_fn_;
};

/** Queues a REGISTER_OP chain for init. */
struct OpDefBuilderReceiver {
  OpDefBuilderReceiver(const OpDefBuilderWrapper& w) {  // NOLINT: implicit, as TensorFlow's
    opforge_tf::enqueue(opforge_tf::kOps, [w](const OpforgeHostApi* host, OpforgeRegistrar* registrar) {
      return w.Register(host, registrar);
    });
  }
};

}  // namespace register_op
}  // namespace tensorflow

#define REGISTER_OP(name) OPFORGE_TF_REGISTER_OP_UNIQ_(__COUNTER__, name)
#define OPFORGE_TF_REGISTER_OP_UNIQ_(ctr, name)                                          \
  static ::tensorflow::register_op::OpDefBuilderReceiver OPFORGE_CONCAT(                 \
      opforge_tf_register_op_, ctr) TF_ATTRIBUTE_UNUSED =                                \
      ::tensorflow::register_op::OpDefBuilderWrapper(name)

#endif /* OPFORGE_TF_OP_H_ */
