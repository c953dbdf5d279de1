/* opforge's TensorFlow C++ layer: gradients as TensorFlow C++ registers
 * them (REGISTER_OP_GRADIENT with a FunctionDefHelper body). See
 * opforge/tf/base.h.
 *
 * The gradient function runs when autodiff reaches the op (eagerly under a
 * tape or in a graph): it gets the forward node's attrs, returns a
 * FunctionDef, and the layer evaluates its nodes through the host's
 * gradient builder (every node a call of a registered op), binding the
 * function's arguments to the forward op's inputs and the gradients of its
 * outputs (zeros where none flows), and its return values to the inputs'
 * gradients. Node inputs name an argument, a node ("n": its first output)
 * or a node's output by flat index ("n:0", or "n:out:i" for an op whose
 * outputs are single tensors: "out" is then not checked). */
#ifndef OPFORGE_TF_FUNCTION_H_
#define OPFORGE_TF_FUNCTION_H_

#include <opforge/tf/kernel.h>

#include <map>
#include <set>

namespace tensorflow {

/** An attr value in a FunctionDef node: a concrete value, or "$name" (the
 *  forward node's attr `name`). */
class AttrValue {
 public:
  enum Kind { NONE, INT, FLOAT, BOOL, TYPE, STRING, PLACEHOLDER, INT_LIST, TYPE_LIST, TENSOR };
  AttrValue() = default;
  Kind kind = NONE;
  int64 i = 0;
  float f = 0;
  bool b = false;
  DataType type = DT_INVALID;
  std::string s;
  std::vector<int64> ints;
  std::vector<DataType> types;
  Tensor tensor;
};

/** The forward node's attrs, as a gradient function reads them
 *  (TensorFlow's AttrSlice). */
class AttrSlice {
 public:
  explicit AttrSlice(const OpforgeGradCtx* ctx) : ctx_(ctx) {}
  template <typename T>
  Status Get(const std::string& name, T* value) const {
    return opforge_attr::read(
        [&](OpforgeStr n, OpforgeAttrValue* v, OpforgeStatus* st) {
          return opforge_tf::host()->grad->attr(ctx_, n, v, st);
        },
        name, value);
  }
  const OpforgeGradCtx* opforge_context() const { return ctx_; }

 private:
  const OpforgeGradCtx* ctx_;
};

/** TensorFlow's GetNodeAttr over an AttrSlice. */
template <typename T>
Status GetNodeAttr(const AttrSlice& attrs, const std::string& name, T* value) {
  return attrs.Get(name, value);
}

/** A function: arguments, return values and nodes (the parts of
 *  TensorFlow's FunctionDef a gradient uses). */
struct FunctionDef {
  struct Node {
    std::vector<std::string> ret;
    std::string op;
    std::vector<std::string> arg;
    std::vector<std::pair<std::string, AttrValue>> attr;
    std::vector<std::string> dep;
  };
  std::vector<std::string> arg_names;
  /** Return value name -> the node output it is ("node:out:i" or a node's
   *  name). */
  std::vector<std::pair<std::string, std::string>> ret;
  std::vector<Node> nodes;
};

/** TensorFlow's FunctionDefHelper: builds a FunctionDef from lists. */
class FunctionDefHelper {
 public:
  /** An attr value written inline: a number, a bool, a dtype, "$T", a list,
   *  a tensor. */
  struct AttrValueWrapper {
    AttrValue proto;
    AttrValueWrapper() = default;
    template <typename T, typename std::enable_if<std::is_integral<T>::value &&
                                                      !std::is_same<T, bool>::value,
                                                  int>::type = 0>
    AttrValueWrapper(T v) {  // NOLINT
      proto.kind = AttrValue::INT;
      proto.i = static_cast<int64>(v);
    }
    AttrValueWrapper(float v) {  // NOLINT
      proto.kind = AttrValue::FLOAT;
      proto.f = v;
    }
    AttrValueWrapper(double v) : AttrValueWrapper(static_cast<float>(v)) {}  // NOLINT
    AttrValueWrapper(bool v) {  // NOLINT
      proto.kind = AttrValue::BOOL;
      proto.b = v;
    }
    AttrValueWrapper(DataType v) {  // NOLINT
      proto.kind = AttrValue::TYPE;
      proto.type = v;
    }
    AttrValueWrapper(const char* v) : AttrValueWrapper(std::string(v)) {}  // NOLINT
    AttrValueWrapper(const std::string& v) {  // NOLINT
      proto.kind = !v.empty() && v[0] == '$' ? AttrValue::PLACEHOLDER : AttrValue::STRING;
      proto.s = proto.kind == AttrValue::PLACEHOLDER ? v.substr(1) : v;
    }
    AttrValueWrapper(std::initializer_list<int> v) {  // NOLINT
      proto.kind = AttrValue::INT_LIST;
      for (int x : v) proto.ints.push_back(x);
    }
    AttrValueWrapper(const std::vector<int64>& v) {  // NOLINT
      proto.kind = AttrValue::INT_LIST;
      proto.ints = v;
    }
    AttrValueWrapper(std::initializer_list<DataType> v) {  // NOLINT
      proto.kind = AttrValue::TYPE_LIST;
      proto.types = v;
    }
    AttrValueWrapper(const Tensor& t) {  // NOLINT
      proto.kind = AttrValue::TENSOR;
      proto.tensor = t;
    }
  };

  /** A node: {{outputs}, "Op", {inputs}, {{"attr", value}}, {deps}}. */
  struct Node {
    std::vector<std::string> ret = {};
    std::string op = {};
    std::vector<std::string> arg = {};
    std::vector<std::pair<std::string, AttrValueWrapper>> attr = {};
    std::vector<std::string> dep = {};
    std::string device = {};

    FunctionDef::Node ToNodeDef() const {
      FunctionDef::Node n;
      n.ret = ret;
      n.op = op;
      n.arg = arg;
      for (auto& a : attr) n.attr.emplace_back(a.first, a.second.proto);
      n.dep = dep;
      return n;
    }
  };

  /** A function whose return values are outputs of its nodes named like
   *  them (`ret_def` "dx: T" is the node output "dx"). */
  static FunctionDef Define(const std::string& name, const std::vector<std::string>& arg_def,
                            const std::vector<std::string>& ret_def,
                            const std::vector<std::string>& attr_def,
                            const std::vector<Node>& node_def) {
    (void)name;
    return Define(arg_def, ret_def, attr_def, node_def);
  }
  static FunctionDef Define(const std::vector<std::string>& arg_def,
                            const std::vector<std::string>& ret_def,
                            const std::vector<std::string>& attr_def,
                            const std::vector<Node>& node_def) {
    (void)attr_def;
    FunctionDef f;
    for (auto& a : arg_def) f.arg_names.push_back(arg_name(a));
    for (auto& r : ret_def) f.ret.emplace_back(arg_name(r), arg_name(r));
    for (auto& n : node_def) f.nodes.push_back(n.ToNodeDef());
    return f;
  }
  /** A function with an explicit return mapping (`ret_def` name -> node
   *  output "node:out:i"). */
  static FunctionDef Create(const std::string& name, const std::vector<std::string>& arg_def,
                            const std::vector<std::string>& ret_def,
                            const std::vector<std::string>& attr_def,
                            const std::vector<Node>& node_def,
                            const std::vector<std::pair<std::string, std::string>>& ret_map) {
    (void)name;
    (void)attr_def;
    FunctionDef f;
    for (auto& a : arg_def) f.arg_names.push_back(arg_name(a));
    for (auto& r : ret_def) {
      std::string n = arg_name(r), target = n;
      for (auto& m : ret_map)
        if (m.first == n) target = m.second;
      f.ret.emplace_back(n, target);
    }
    for (auto& n : node_def) f.nodes.push_back(n.ToNodeDef());
    return f;
  }

  /** A Const node holding `value`. */
  template <typename T>
  static Node Const(const std::string& name, const T& value) {
    Tensor t(DataTypeToEnum<T>::value, TensorShape({}));
    t.flat<T>()(0) = value;
    return Node{{name}, "Const", {}, {{"value", t}, {"dtype", DataTypeToEnum<T>::value}}, {}, ""};
  }
  template <typename T>
  static Node Const(const std::string& name, const std::vector<T>& values) {
    Tensor t(DataTypeToEnum<T>::value, TensorShape({static_cast<int64>(values.size())}));
    for (size_t i = 0; i < values.size(); ++i) t.flat<T>()(static_cast<int64>(i)) = values[i];
    return Node{{name}, "Const", {}, {{"value", t}, {"dtype", DataTypeToEnum<T>::value}}, {}, ""};
  }

 private:
  static std::string arg_name(const std::string& def) {
    size_t colon = def.find(':');
    std::string n = def.substr(0, colon);
    while (!n.empty() && n.back() == ' ') n.pop_back();
    return n;
  }
};

/** A gradient function (TensorFlow's gradient::Creator). */
typedef std::function<Status(const AttrSlice&, FunctionDef*)> GradientCreator;

namespace opforge_detail {

/** Evaluates a gradient FunctionDef through the host's gradient builder. */
class GradientRunner {
 public:
  explicit GradientRunner(OpforgeGradCtx* ctx) : ctx_(ctx), api_(opforge_tf::host()->grad) {}

  Status Run(const FunctionDef& f) {
    const size_t n_in = api_->num_inputs(ctx_), n_out = api_->num_outputs(ctx_);
    if (f.arg_names.size() != n_in + n_out)
      return errors::InvalidArgument("the gradient function of ", op_name(), " has ",
                                     f.arg_names.size(), " arguments; the op has ", n_in,
                                     " inputs and ", n_out, " outputs (one argument each)");
    if (f.ret.size() != n_in)
      return errors::InvalidArgument("the gradient function of ", op_name(), " returns ",
                                     f.ret.size(), " values for ", n_in, " inputs");
    for (size_t i = 0; i < n_in; ++i) values_[f.arg_names[i]] = {api_->input(ctx_, i)};
    for (size_t i = 0; i < n_out; ++i) {
      OpforgeSym g = OPFORGE_NO_HANDLE;
      if (!api_->output_grad(ctx_, i, &g)) {
        // No gradient flows into this output: zeros of its shape.
        std::vector<OpforgeSym> z;
        TF_RETURN_IF_ERROR(Call("ZerosLike", {{api_->output(ctx_, i)}}, {}, &z));
        g = z.at(0);
      }
      values_[f.arg_names[n_in + i]] = {g};
    }
    for (const auto& node : f.nodes) TF_RETURN_IF_ERROR(Eval(node));
    for (size_t i = 0; i < n_in; ++i) {
      OpforgeSym s = OPFORGE_NO_HANDLE;
      TF_RETURN_IF_ERROR(Resolve(f.ret[i].second, &s));
      opforge_tf::HostStatus st;
      if (api_->set_input_grad(ctx_, i, s, st.get()) != OPFORGE_OK) return st.status();
    }
    return Status();
  }

 private:
  std::string op_name() const { return opforge_tf::to_string(api_->op_name(ctx_)); }

  Status Resolve(const std::string& ref, OpforgeSym* out) {
    std::string name = ref;
    size_t index = 0;
    size_t c1 = ref.find(':');
    if (c1 != std::string::npos) {
      name = ref.substr(0, c1);
      std::string rest = ref.substr(c1 + 1);
      size_t c2 = rest.find(':');
      std::string idx = c2 == std::string::npos ? rest : rest.substr(c2 + 1);
      char* end = nullptr;
      unsigned long long v = std::strtoull(idx.c_str(), &end, 10);
      if (idx.empty() || *end != '\0')
        return errors::InvalidArgument("the gradient of ", op_name(), ": bad input '", ref, "'");
      index = static_cast<size_t>(v);
      if (c2 != std::string::npos && multi_.count(name))
        return errors::Unimplemented(
            "the gradient of ", op_name(), ": '", ref, "' names an output argument of a node ",
            "with several outputs; this opforge C ABI (1.1) does not give other ops' OpDefs to ",
            "gradients: use the flat index ('", name, ":<index>')");
    }
    auto it = values_.find(name);
    if (it == values_.end())
      return errors::InvalidArgument("the gradient of ", op_name(), ": no argument or node named '",
                                     name, "'");
    if (index >= it->second.size())
      return errors::InvalidArgument("the gradient of ", op_name(), ": '", ref, "' is out of range (",
                                     it->second.size(), " outputs)");
    *out = it->second[index];
    return Status();
  }

  Status Attr(const AttrValue& v, std::deque<OpforgeAttrValue>& store,
              std::deque<std::vector<int64_t>>& ints, std::deque<std::vector<OpforgeDType>>& types,
              std::deque<OpforgeTensor>& tensors, std::deque<std::string>& strs) {
    OpforgeAttrValue a;
    std::memset(&a, 0, sizeof a);
    a.struct_size = sizeof a;
    switch (v.kind) {
      case AttrValue::INT: a.kind = OPFORGE_ATTR_INT; a.i = v.i; break;
      case AttrValue::FLOAT: a.kind = OPFORGE_ATTR_FLOAT; a.f = v.f; break;
      case AttrValue::BOOL: a.kind = OPFORGE_ATTR_BOOL; a.b = v.b ? 1 : 0; break;
      case AttrValue::TYPE: a.kind = OPFORGE_ATTR_TYPE; a.type = static_cast<OpforgeDType>(v.type); break;
      case AttrValue::STRING:
        strs.push_back(v.s);
        a.kind = OPFORGE_ATTR_STRING;
        a.s = opforge_tf::str(strs.back());
        break;
      case AttrValue::PLACEHOLDER: {
        // The forward node's attr: the host's value, passed on as it is.
        opforge_tf::HostStatus st;
        if (api_->attr(ctx_, opforge_tf::str(v.s), &a, st.get()) != OPFORGE_OK)
          return errors::InvalidArgument("the gradient of ", op_name(), ": '$", v.s,
                                         "': ", st.status().message());
        break;
      }
      case AttrValue::INT_LIST:
        ints.emplace_back(v.ints.begin(), v.ints.end());
        a.kind = OPFORGE_ATTR_INT | OPFORGE_ATTR_LIST;
        a.list = ints.back().data();
        a.list_len = ints.back().size();
        break;
      case AttrValue::TYPE_LIST:
        types.emplace_back(v.types.begin(), v.types.end());
        a.kind = OPFORGE_ATTR_TYPE | OPFORGE_ATTR_LIST;
        a.list = types.back().data();
        a.list_len = types.back().size();
        break;
      case AttrValue::TENSOR: {
        tensors.push_back(opforge_detail::Access::view(v.tensor));
        a.kind = OPFORGE_ATTR_TENSOR;
        a.tensor = &tensors.back();
        break;
      }
      case AttrValue::NONE:
        return errors::InvalidArgument("the gradient of ", op_name(), ": an attr without a value");
    }
    store.push_back(a);
    return Status();
  }

  Status Call(const std::string& op, const std::vector<std::vector<OpforgeSym>>& args,
              const std::vector<std::pair<std::string, AttrValue>>& attrs,
              std::vector<OpforgeSym>* outs) {
    std::deque<OpforgeAttrValue> values;
    std::deque<std::vector<int64_t>> ints;
    std::deque<std::vector<OpforgeDType>> types;
    std::deque<OpforgeTensor> tensors;
    std::deque<std::string> strs;
    std::vector<OpforgeNamedAttr> named;
    for (auto& a : attrs) {
      TF_RETURN_IF_ERROR(Attr(a.second, values, ints, types, tensors, strs));
      OpforgeNamedAttr n;
      std::memset(&n, 0, sizeof n);
      n.struct_size = sizeof n;
      n.name = opforge_tf::str(a.first);
      n.value = &values.back();
      named.push_back(n);
    }
    std::vector<OpforgeSymArg> sym_args;
    for (auto& a : args) {
      OpforgeSymArg s;
      std::memset(&s, 0, sizeof s);
      s.struct_size = sizeof s;
      s.syms = a.data();
      s.num_syms = a.size();
      s.is_list = 0;
      sym_args.push_back(s);
    }
    OpforgeSym buf[16];
    size_t n = 0;
    opforge_tf::HostStatus st;
    if (api_->call(ctx_, opforge_tf::str(op), sym_args.data(), sym_args.size(), named.data(),
                   named.size(), buf, 16, &n, st.get()) != OPFORGE_OK)
      return st.status();
    if (n > 16)
      return errors::Unimplemented("the gradient of ", op_name(), ": ", op, " has ", n,
                                   " outputs (at most 16 here)");
    outs->assign(buf, buf + n);
    return Status();
  }

  Status Eval(const FunctionDef::Node& node) {
    if (node.ret.empty())
      return errors::InvalidArgument("the gradient of ", op_name(), ": a ", node.op,
                                     " node without a name");
    const std::string& name = node.ret[0];
    std::vector<OpforgeSym> outs;
    if (node.op == "Const") {
      const AttrValue* value = nullptr;
      for (auto& a : node.attr)
        if (a.first == "value") value = &a.second;
      if (!value || value->kind != AttrValue::TENSOR)
        return errors::InvalidArgument("the gradient of ", op_name(), ": Const '", name,
                                       "' has no tensor value");
      OpforgeTensor v = opforge_detail::Access::view(value->tensor);
      OpforgeSym s = OPFORGE_NO_HANDLE;
      opforge_tf::HostStatus st;
      if (api_->constant(ctx_, &v, &s, st.get()) != OPFORGE_OK) return st.status();
      outs.push_back(s);
    } else {
      // One argument per input (a single tensor each: list arguments of
      // other ops need their OpDefs, which ABI 1.1 gradients do not get).
      std::vector<std::vector<OpforgeSym>> args;
      for (auto& in : node.arg) {
        if (!in.empty() && in[0] == '^') continue;  // a control input
        OpforgeSym s = OPFORGE_NO_HANDLE;
        TF_RETURN_IF_ERROR(Resolve(in, &s));
        args.push_back({s});
      }
      TF_RETURN_IF_ERROR(Call(node.op, args, node.attr, &outs));
    }
    if (outs.size() > 1) multi_.insert(name);
    values_[name] = outs;
    return Status();
  }

  OpforgeGradCtx* ctx_;
  const OpforgeGradApi* api_;
  std::map<std::string, std::vector<OpforgeSym>> values_;
  std::set<std::string> multi_;
};

}  // namespace opforge_detail

namespace gradient {
/** Queues a REGISTER_OP_GRADIENT for init. */
struct GradientRegistrar {
  GradientRegistrar(const char* op, GradientCreator fn) {
    auto creator = std::make_shared<GradientCreator>(std::move(fn));
    std::string name = op;
    opforge_tf::enqueue(opforge_tf::kGradients, [name, creator](const OpforgeHostApi* host, OpforgeRegistrar* registrar) {
      opforge_tf::HostStatus st;
      if (!*creator) {
        if (host->registration->not_differentiable(registrar, opforge_tf::str(name), st.get()) !=
            OPFORGE_OK)
          return st.status();
        return Status();
      }
      if (host->registration->gradient_fn(registrar, opforge_tf::str(name), &GradientRegistrar::run,
                                          creator.get(), st.get()) != OPFORGE_OK)
        return st.status();
      return Status();
    });
  }
  static OpforgeCode run(OpforgeGradCtx* ctx, void* user, OpforgeStatus* status) {
    return opforge_tf::guarded(status, [&]() -> Status {
      AttrSlice attrs(ctx);
      FunctionDef f;
      TF_RETURN_IF_ERROR((*static_cast<GradientCreator*>(user))(attrs, &f));
      opforge_detail::GradientRunner r(ctx);
      return r.Run(f);
    });
  }
};
}  // namespace gradient

}  // namespace tensorflow

/** Registers `fn` (Status(const AttrSlice&, FunctionDef*)) as the gradient
 *  of op `name` (TensorFlow's REGISTER_OP_GRADIENT). */
#define REGISTER_OP_GRADIENT(name, fn) OPFORGE_TF_REGISTER_GRAD_UNIQ_(__COUNTER__, name, fn)
#define REGISTER_OP_NO_GRADIENT(name) OPFORGE_TF_REGISTER_GRAD_UNIQ_(__COUNTER__, name, nullptr)
#define OPFORGE_TF_REGISTER_GRAD_UNIQ_(ctr, name, fn)                                       \
  static ::tensorflow::gradient::GradientRegistrar OPFORGE_CONCAT(opforge_tf_register_grad_, \
                                                                  ctr) TF_ATTRIBUTE_UNUSED(   \
      name, fn)

#endif /* OPFORGE_TF_FUNCTION_H_ */
