/* opforge's TensorFlow C++ layer: OpKernel, its construction and context,
 * REGISTER_KERNEL_BUILDER, thread pools and Shard. See opforge/tf/base.h. */
#ifndef OPFORGE_TF_KERNEL_H_
#define OPFORGE_TF_KERNEL_H_

#include <opforge/tf/op.h>

#include <atomic>
#include <condition_variable>

namespace tensorflow {

class OpKernelContext;

namespace thread {

/** The host's worker pool as a kernel sees it (TensorFlow's
 *  thread::ThreadPool): ParallelFor and the thread count. Work runs on the
 *  host's pool through the C ABI's parallel_for, within the current kernel
 *  call. */
class ThreadPool {
 public:
  explicit ThreadPool(OpforgeKernelCtx* ctx) : ctx_(ctx) {}
  int NumThreads() const {
    return ctx_ ? static_cast<int>(opforge_tf::host()->kernel->num_threads(ctx_)) : 1;
  }
  int CurrentThreadId() const { return -1; }
  /** Runs fn over [0, total) in shards sized by cost_per_unit (cycles per
   *  unit), on the pool and the calling thread; returns when all are done.
   *  An exception in a shard becomes the kernel's error. */
  void ParallelFor(int64 total, int64 cost_per_unit, const std::function<void(int64, int64)>& fn) {
    Status s = TryParallelFor(total, cost_per_unit, fn);
    if (!s.ok()) throw opforge_tf::CheckFailure(s.message());
  }
  Status TryParallelFor(int64 total, int64 cost_per_unit,
                        const std::function<void(int64, int64)>& fn) {
    if (total <= 0) return Status();
    if (!ctx_) {
      fn(0, total);
      return Status();
    }
    opforge_tf::HostStatus st;
    auto shard = [](uint64_t begin, uint64_t end, void* user, OpforgeStatus* status) -> OpforgeCode {
      return opforge_tf::guarded(status, [&]() -> Status {
        (*static_cast<const std::function<void(int64, int64)>*>(user))(static_cast<int64>(begin),
                                                                        static_cast<int64>(end));
        return Status();
      });
    };
    if (opforge_tf::host()->kernel->parallel_for(
            ctx_, static_cast<uint64_t>(total),
            static_cast<uint64_t>(cost_per_unit < 1 ? 1 : cost_per_unit), shard,
            const_cast<std::function<void(int64, int64)>*>(&fn), st.get()) != OPFORGE_OK)
      return st.status();
    return Status();
  }

 private:
  OpforgeKernelCtx* ctx_;
};

}  // namespace thread

/** TensorFlow's Shard: fn over [0, total) on `workers` (a max_parallelism
 *  of 1 runs it on the calling thread). */
inline void Shard(int max_parallelism, thread::ThreadPool* workers, int64 total, int64 cost_per_unit,
                  std::function<void(int64, int64)> work) {
  if (total <= 0) return;
  if (max_parallelism <= 1 || workers == nullptr) {
    work(0, total);
    return;
  }
  workers->ParallelFor(total, cost_per_unit, work);
}

namespace opforge_detail {

/** The Eigen thread-pool interface kernels' expressions run on. The C ABI
 *  of this opforge (1.1) runs sharded work through parallel_for but cannot
 *  schedule a closure: the device runs with one thread (Eigen then
 *  evaluates expressions on the calling thread), and Schedule, never
 *  called by a one-thread device, runs the closure at once. */
class InlineThreadPool : public Eigen::ThreadPoolInterface {
 public:
  void Schedule(std::function<void()> fn) override { fn(); }
  int NumThreads() const override { return 1; }
  int CurrentThreadId() const override { return 0; }
};

/* Hidden: one device per library (see the visibility note in base.h). */
#pragma GCC visibility push(hidden)
inline Eigen::ThreadPoolDevice& eigen_cpu_device() {
  static InlineThreadPool pool;
  static Eigen::ThreadPoolDevice device(&pool, 1);
  return device;
}
#pragma GCC visibility pop

}  // namespace opforge_detail

/** The device a kernel runs on (TensorFlow's DeviceBase, the parts CPU
 *  kernels use). */
class DeviceBase {
 public:
  struct CpuWorkerThreads {
    int num_threads = 1;
    thread::ThreadPool* workers = nullptr;
  };
  explicit DeviceBase(OpforgeKernelCtx* ctx) : pool_(ctx) {
    threads_.num_threads = pool_.NumThreads();
    threads_.workers = &pool_;
  }
  const CpuWorkerThreads* tensorflow_cpu_worker_threads() const { return &threads_; }
  const std::string& name() const { return name_; }

 private:
  std::string name_ = "/job:localhost/replica:0/task:0/device:CPU:0";
  thread::ThreadPool pool_;
  CpuWorkerThreads threads_;
};

static const char* const DEVICE_CPU = "CPU";
static const char* const DEVICE_GPU = "GPU";
static const char* const DEVICE_DEFAULT = "DEFAULT";

/** A list of the tensors of one list argument (TensorFlow's OpInputList). */
class OpInputList {
 public:
  OpInputList() = default;
  OpInputList(OpKernelContext* ctx, int start, int stop) : ctx_(ctx), start_(start), stop_(stop) {}
  int size() const { return stop_ - start_; }
  const Tensor& operator[](int i) const;
  class Iterator {
   public:
    Iterator(const OpInputList* l, int i) : l_(l), i_(i) {}
    const Tensor& operator*() const { return (*l_)[i_]; }
    Iterator& operator++() {
      ++i_;
      return *this;
    }
    bool operator!=(const Iterator& o) const { return i_ != o.i_; }

   private:
    const OpInputList* l_;
    int i_;
  };
  Iterator begin() const { return Iterator(this, 0); }
  Iterator end() const { return Iterator(this, size()); }

 private:
  OpKernelContext* ctx_ = nullptr;
  int start_ = 0, stop_ = 0;
};

/** The outputs of one list argument (TensorFlow's OpOutputList). */
class OpOutputList {
 public:
  OpOutputList() = default;
  OpOutputList(OpKernelContext* ctx, int start, int stop) : ctx_(ctx), start_(start), stop_(stop) {}
  int size() const { return stop_ - start_; }
  Status allocate(int i, const TensorShape& shape, Tensor** out);
  void set(int i, const Tensor& t);
  Tensor* operator[](int i);

 private:
  OpKernelContext* ctx_ = nullptr;
  int start_ = 0, stop_ = 0;
};

namespace opforge_detail {
/** The status a kernel's construction or call collects (the first error
 *  wins), with TensorFlow's CtxFailure spellings OP_REQUIRES uses. */
class KernelStatus {
 public:
  void SetStatus(const Status& s) { status_.Update(s); }
  const Status& status() const { return status_; }
  void CtxFailure(const Status& s) { SetStatus(s); }
  void CtxFailure(const char* file, int line, const Status& s) {
    (void)file;
    (void)line;
    SetStatus(s);
  }
  void CtxFailureWithWarning(const Status& s) { SetStatus(s); }
  void CtxFailureWithWarning(const char* file, int line, const Status& s) { CtxFailure(file, line, s); }

 private:
  Status status_;
};
}  // namespace opforge_detail

/** What a kernel's constructor reads (TensorFlow's OpKernelConstruction). */
class OpKernelConstruction : public opforge_detail::KernelStatus {
 public:
  explicit OpKernelConstruction(const OpforgeKernelInit* init)
      : init_(init), api_(opforge_tf::host()->kernel) {}
  template <typename T>
  Status GetAttr(const std::string& name, T* value) const {
    return opforge_attr::read(
        [&](OpforgeStr n, OpforgeAttrValue* v, OpforgeStatus* st) {
          return api_->init_attr(init_, n, v, st);
        },
        name, value);
  }
  bool HasAttr(const std::string& name) const {
    opforge_tf::HostStatus st;
    OpforgeAttrValue v;
    std::memset(&v, 0, sizeof v);
    v.struct_size = sizeof v;
    return api_->init_attr(init_, opforge_tf::str(name), &v, st.get()) == OPFORGE_OK;
  }
  int num_inputs() const { return static_cast<int>(api_->init_num_inputs(init_)); }
  int num_outputs() const { return static_cast<int>(api_->init_num_outputs(init_)); }
  DataType input_type(int i) const {
    return static_cast<DataType>(api_->init_input_dtype(init_, static_cast<size_t>(i)));
  }
  DataType output_type(int i) const {
    return static_cast<DataType>(api_->init_output_dtype(init_, static_cast<size_t>(i)));
  }
  DataTypeVector input_types() const {
    DataTypeVector v;
    for (int i = 0; i < num_inputs(); ++i) v.push_back(input_type(i));
    return v;
  }
  DataTypeVector output_types() const {
    DataTypeVector v;
    for (int i = 0; i < num_outputs(); ++i) v.push_back(output_type(i));
    return v;
  }
  /** Checks the node's dtypes against these (TensorFlow's MatchSignature). */
  Status MatchSignature(const DataTypeVector& inputs, const DataTypeVector& outputs) const {
    if (inputs != input_types() || outputs != output_types())
      return errors::InvalidArgument("Signature mismatch, have: ",
                                     DataTypeSliceString(input_types()), "->",
                                     DataTypeSliceString(output_types()),
                                     " expected: ", DataTypeSliceString(inputs), "->",
                                     DataTypeSliceString(outputs));
    return Status();
  }
  std::string name() const { return opforge_tf::to_string(api_->init_node_name(init_)); }
  std::string type_string() const { return opforge_tf::to_string(api_->init_op_name(init_)); }
  std::string device_type() const { return opforge_tf::to_string(api_->init_device_type(init_)); }

 private:
  const OpforgeKernelInit* init_;
  const OpforgeKernelApi* api_;
};

/** A kernel (TensorFlow's OpKernel): constructed once per node (or eager
 *  signature), Compute called for each run, possibly concurrently. */
class OpKernel {
 public:
  explicit OpKernel(OpKernelConstruction* context)
      : name_(context->name()), type_string_(context->type_string()) {}
  virtual ~OpKernel() = default;
  virtual void Compute(OpKernelContext* context) = 0;
  virtual bool IsExpensive() { return true; }
  const std::string& name() const { return name_; }
  const std::string& type_string() const { return type_string_; }

 private:
  std::string name_, type_string_;
};

class AsyncOpKernel : public OpKernel {
 public:
  using OpKernel::OpKernel;
  typedef std::function<void()> DoneCallback;
  virtual void ComputeAsync(OpKernelContext* context, DoneCallback done) = 0;
  /** This opforge's C ABI (1.1) has no completion callback yet: the layer
   *  runs ComputeAsync and waits for `done` on the calling thread. */
  void Compute(OpKernelContext* context) override;
};

/** One run of a kernel (TensorFlow's OpKernelContext) over the host's
 *  OpforgeKernelCtx. */
class OpKernelContext : public opforge_detail::KernelStatus {
 public:
  OpKernelContext(OpforgeKernelCtx* ctx, OpKernel* kernel)
      : ctx_(ctx), api_(opforge_tf::host()->kernel), kernel_(kernel), device_(ctx) {
    inputs_.resize(static_cast<size_t>(num_inputs()));
    forwarded_.assign(static_cast<size_t>(num_inputs()), -1);
    outputs_.resize(static_cast<size_t>(num_outputs()));
  }
  OpKernelContext(const OpKernelContext&) = delete;
  OpKernelContext& operator=(const OpKernelContext&) = delete;

  int num_inputs() const { return static_cast<int>(api_->num_inputs(ctx_)); }
  int num_outputs() const { return static_cast<int>(api_->num_outputs(ctx_)); }
  DataType input_dtype(int i) const {
    return static_cast<DataType>(api_->input_dtype(ctx_, static_cast<size_t>(i)));
  }
  DataType expected_output_dtype(int i) const {
    return static_cast<DataType>(api_->output_dtype(ctx_, static_cast<size_t>(i)));
  }

  /** Input `i` (a bad index, or an input already forwarded, is a clean
   *  error of the kernel). */
  const Tensor& input(int i) {
    if (i < 0 || i >= num_inputs())
      throw opforge_tf::CheckFailure("input(" + std::to_string(i) + "): the op has " +
                                     std::to_string(num_inputs()) + " inputs");
    auto& slot = inputs_[static_cast<size_t>(i)];
    if (!slot && forwarded_[static_cast<size_t>(i)] >= 0) {
      // Forwarded to an output: its buffer is that output's, as in
      // TensorFlow (it holds the input's values until the kernel writes).
      Tensor* o = outputs_[static_cast<size_t>(forwarded_[static_cast<size_t>(i)])].get();
      if (o) return *o;
    }
    if (!slot) {
      OpforgeTensor v = blank();
      opforge_tf::HostStatus st;
      if (api_->input(ctx_, static_cast<size_t>(i), &v, st.get()) != OPFORGE_OK)
        throw opforge_tf::CheckFailure("input(" + std::to_string(i) + "): " + st.status().message());
      slot = std::make_unique<Tensor>(opforge_detail::Access::from_view(v, i));
    }
    return *slot;
  }
  Status input(const std::string& name, const Tensor** tensor) {
    int start = 0, stop = 0;
    TF_RETURN_IF_ERROR(range(name, false, &start, &stop));
    if (stop - start != 1)
      return errors::InvalidArgument("OpKernel used list-valued input name '", name,
                                     "' when single-valued input was expected");
    *tensor = &input(start);
    return Status();
  }
  Status input_list(const std::string& name, OpInputList* list) {
    int start = 0, stop = 0;
    TF_RETURN_IF_ERROR(range(name, false, &start, &stop));
    *list = OpInputList(this, start, stop);
    return Status();
  }
  Status output_list(const std::string& name, OpOutputList* list) {
    int start = 0, stop = 0;
    TF_RETURN_IF_ERROR(range(name, true, &start, &stop));
    *list = OpOutputList(this, start, stop);
    return Status();
  }

  Status allocate_output(int i, const TensorShape& shape, Tensor** out) {
    TF_RETURN_IF_ERROR(check_output(i));
    if (expected_output_dtype(i) == DT_STRING) return string_output(i, Tensor(DT_STRING, shape), out);
    OpforgeTensor v = blank();
    opforge_tf::HostStatus st;
    const auto& d = shape.dim_sizes();
    if (api_->allocate_output(ctx_, static_cast<size_t>(i), d.data(), static_cast<uint32_t>(d.size()),
                              &v, st.get()) != OPFORGE_OK)
      return st.status();
    return set_view(i, v, out);
  }
  Status allocate_output(const std::string& name, const TensorShape& shape, Tensor** out) {
    int start = 0, stop = 0;
    TF_RETURN_IF_ERROR(range(name, true, &start, &stop));
    if (stop - start != 1)
      return errors::InvalidArgument("OpKernel used list-valued output name '", name,
                                     "' when single-valued output was expected");
    return allocate_output(start, shape, out);
  }
  /** A scratch tensor (64-byte aligned, owned by the kernel's copies of it;
   *  it may become an output with set_output). */
  Status allocate_temp(DataType dtype, const TensorShape& shape, Tensor* out) {
    if (dtype == DT_STRING || DataTypeSize(dtype) != 0) {
      *out = Tensor(dtype, shape);
      return Status();
    }
    return errors::InvalidArgument("allocate_temp: dtype ", DataTypeString(dtype),
                                   " has no buffer");
  }
  template <typename AttrT>
  Status allocate_temp(DataType dtype, const TensorShape& shape, Tensor* out, AttrT) {
    return allocate_temp(dtype, shape, out);
  }
  Status forward_input_or_allocate_output(std::initializer_list<int> candidates, int output,
                                          const TensorShape& shape, Tensor** out,
                                          int* forwarded_input = nullptr) {
    return forward_or_allocate(std::vector<int>(candidates), output, shape, out, forwarded_input);
  }
  Status forward_input_or_allocate_output(std::initializer_list<std::string> candidates,
                                          const std::string& output, const TensorShape& shape,
                                          Tensor** out) {
    std::vector<int> idx;
    for (auto& n : candidates) {
      int start = 0, stop = 0;
      TF_RETURN_IF_ERROR(range(n, false, &start, &stop));
      idx.push_back(start);
    }
    int o = 0, stop = 0;
    TF_RETURN_IF_ERROR(range(output, true, &o, &stop));
    return forward_or_allocate(idx, o, shape, out, nullptr);
  }

  /** Output `i` is `t`: an input of this call is shared; a tensor the
   *  kernel made (allocate_temp, Tensor(dtype, shape)) is handed to the
   *  host without a copy; an input with a new shape (CopyFrom) is copied. */
  void set_output(int i, const Tensor& t) {
    Status s = try_set_output(i, t);
    if (!s.ok()) SetStatus(s);
  }
  Status set_output(const std::string& name, const Tensor& t) {
    int start = 0, stop = 0;
    TF_RETURN_IF_ERROR(range(name, true, &start, &stop));
    return try_set_output(start, t);
  }
  Tensor* mutable_output(int i) {
    if (i < 0 || i >= num_outputs()) return nullptr;
    return outputs_[static_cast<size_t>(i)].get();
  }


  template <typename Device>
  const Device& eigen_device() const;
  const Eigen::ThreadPoolDevice& eigen_cpu_device() const {
    return opforge_detail::eigen_cpu_device();
  }
  DeviceBase* device() { return &device_; }
  const OpKernel& op_kernel() const { return *kernel_; }
  /** The node's attr (prefer reading attrs once, in the constructor). */
  template <typename T>
  Status GetAttr(const std::string& name, T* value) const {
    return opforge_attr::read(
        [&](OpforgeStr n, OpforgeAttrValue* v, OpforgeStatus* st) { return api_->attr(ctx_, n, v, st); },
        name, value);
  }
  OpforgeKernelCtx* opforge_context() const { return ctx_; }

  /** After Compute: hands the string outputs to the host. */
  Status opforge_finish() {
    for (int i : pending_strings_) {
      const Tensor& t = *outputs_[static_cast<size_t>(i)];
      const tstring* e = static_cast<const tstring*>(opforge_detail::Access::data(t));
      std::vector<OpforgeStr> strs;
      for (int64 k = 0; k < t.NumElements(); ++k) strs.push_back(opforge_tf::str(e[k]));
      const auto& d = t.shape().dim_sizes();
      opforge_tf::HostStatus st;
      if (api_->set_output_strings(ctx_, static_cast<size_t>(i), d.data(),
                                   static_cast<uint32_t>(d.size()), strs.data(), st.get()) != OPFORGE_OK)
        return st.status();
    }
    pending_strings_.clear();
    return Status();
  }

 private:
  static OpforgeTensor blank() {
    OpforgeTensor v;
    std::memset(&v, 0, sizeof v);
    v.struct_size = sizeof v;
    return v;
  }
  Status range(const std::string& name, bool output, int* start, int* stop) const {
    size_t a = 0, b = 0;
    opforge_tf::HostStatus st;
    if (api_->arg_range(ctx_, opforge_tf::str(name), output ? 1 : 0, &a, &b, st.get()) != OPFORGE_OK)
      return st.status();
    *start = static_cast<int>(a);
    *stop = static_cast<int>(b);
    return Status();
  }
  /** Output `output` in the first of `candidates` inputs the host can
   *  forward (same dtype and size, not shared), else allocated. */
  Status forward_or_allocate(const std::vector<int>& candidates, int output,
                             const TensorShape& shape, Tensor** out, int* forwarded_input) {
    TF_RETURN_IF_ERROR(check_output(output));
    if (forwarded_input) *forwarded_input = -1;
    if (expected_output_dtype(output) == DT_STRING) return allocate_output(output, shape, out);
    std::vector<size_t> c;
    for (int x : candidates) {
      if (x < 0 || x >= num_inputs())
        return errors::InvalidArgument("forward_input_or_allocate_output: input ", x,
                                       " out of range");
      c.push_back(static_cast<size_t>(x));
    }
    OpforgeTensor v = blank();
    opforge_tf::HostStatus st;
    int64_t from = OPFORGE_NOT_FORWARDED;
    const auto& d = shape.dim_sizes();
    if (api_->forward_input_or_allocate_output(ctx_, c.data(), c.size(), static_cast<size_t>(output),
                                               d.data(), static_cast<uint32_t>(d.size()), &from, &v,
                                               st.get()) != OPFORGE_OK)
      return st.status();
    if (from != OPFORGE_NOT_FORWARDED) {
      forwarded_[static_cast<size_t>(from)] = output;
      if (forwarded_input) *forwarded_input = static_cast<int>(from);
    }
    return set_view(output, v, out);
  }
  Status check_output(int i) const {
    if (i < 0 || i >= num_outputs())
      return errors::InvalidArgument("output index ", i, " out of range: the op has ",
                                     num_outputs(), " outputs");
    return Status();
  }
  /** A string output: the layer's tstrings, which the host receives (copied,
   *  the C ABI's set_output_strings) when Compute returns. */
  Status string_output(int i, const Tensor& t, Tensor** out) {
    outputs_[static_cast<size_t>(i)] = std::make_unique<Tensor>(t);
    pending_strings_.push_back(i);
    if (out) *out = outputs_[static_cast<size_t>(i)].get();
    return Status();
  }
  Status set_view(int i, const OpforgeTensor& v, Tensor** out) {
    if (v.data && reinterpret_cast<uintptr_t>(v.data) % opforge_tf::kAlign != 0)
      return errors::Internal("the host gave output ", i, " memory not aligned to 64 bytes");
    outputs_[static_cast<size_t>(i)] =
        std::make_unique<Tensor>(opforge_detail::Access::from_view(v, -1));
    *out = outputs_[static_cast<size_t>(i)].get();
    return Status();
  }
  Status try_set_output(int i, const Tensor& t) {
    TF_RETURN_IF_ERROR(check_output(i));
    if (t.dtype() != expected_output_dtype(i))
      return errors::InvalidArgument("set_output(", i, "): a ", DataTypeString(t.dtype()),
                                     " tensor for an output of type ",
                                     DataTypeString(expected_output_dtype(i)));
    if (t.dtype() == DT_STRING) return string_output(i, t, nullptr);
    opforge_tf::HostStatus st;
    int from = opforge_detail::Access::host_input(t);
    const auto& buf = opforge_detail::Access::buffer(t);
    if (from >= 0 && !buf && inputs_[static_cast<size_t>(from)] &&
        inputs_[static_cast<size_t>(from)]->shape() == t.shape()) {
      if (api_->set_output_from_input(ctx_, static_cast<size_t>(i), static_cast<size_t>(from),
                                      st.get()) != OPFORGE_OK)
        return st.status();
    } else if (buf && from < 0) {
      // The host takes a reference to the layer's buffer and releases it.
      auto* keep = new std::shared_ptr<void>(buf);
      const auto& d = t.shape().dim_sizes();
      OpforgeForeignTensor f;
      std::memset(&f, 0, sizeof f);
      f.struct_size = sizeof f;
      f.dtype = static_cast<OpforgeDType>(t.dtype());
      f.rank = static_cast<uint32_t>(d.size());
      f.dims = d.data();
      f.data = opforge_detail::Access::data(t);
      f.byte_len = t.TotalBytes();
      f.release = [](void*, void* user) { delete static_cast<std::shared_ptr<void>*>(user); };
      f.release_user = keep;
      if (api_->set_output_foreign(ctx_, static_cast<size_t>(i), &f, st.get()) != OPFORGE_OK) {
        delete keep;
        return st.status();
      }
    } else {
      Tensor* out = nullptr;
      TF_RETURN_IF_ERROR(allocate_output(i, t.shape(), &out));
      std::memcpy(opforge_detail::Access::data(*out), opforge_detail::Access::data(t), t.TotalBytes());
      return Status();
    }
    outputs_[static_cast<size_t>(i)] = std::make_unique<Tensor>(t);
    return Status();
  }

  OpforgeKernelCtx* ctx_;
  const OpforgeKernelApi* api_;
  OpKernel* kernel_;
  DeviceBase device_;
  std::vector<std::unique_ptr<Tensor>> inputs_, outputs_;
  /** Per input: the output it was forwarded to, or -1. */
  std::vector<int> forwarded_;
  /** String outputs set in the layer, handed over by opforge_finish. */
  std::vector<int> pending_strings_;

  friend class OpInputList;
  friend class OpOutputList;
};

template <>
inline const Eigen::ThreadPoolDevice& OpKernelContext::eigen_device<Eigen::ThreadPoolDevice>() const {
  return opforge_detail::eigen_cpu_device();
}

inline const Tensor& OpInputList::operator[](int i) const {
  if (i < 0 || i >= size())
    throw opforge_tf::CheckFailure("OpInputList index " + std::to_string(i) + " out of range");
  return ctx_->input(start_ + i);
}
inline Status OpOutputList::allocate(int i, const TensorShape& shape, Tensor** out) {
  if (i < 0 || i >= size())
    return errors::InvalidArgument("OpOutputList index ", i, " out of range");
  return ctx_->allocate_output(start_ + i, shape, out);
}
inline void OpOutputList::set(int i, const Tensor& t) {
  if (i < 0 || i >= size())
    throw opforge_tf::CheckFailure("OpOutputList index " + std::to_string(i) + " out of range");
  ctx_->set_output(start_ + i, t);
}
inline Tensor* OpOutputList::operator[](int i) {
  if (i < 0 || i >= size()) return nullptr;
  return ctx_->mutable_output(start_ + i);
}

inline void AsyncOpKernel::Compute(OpKernelContext* context) {
  std::mutex m;
  std::condition_variable cv;
  bool done = false;
  ComputeAsync(context, [&]() {
    std::lock_guard<std::mutex> l(m);
    done = true;
    cv.notify_all();
  });
  std::unique_lock<std::mutex> l(m);
  cv.wait(l, [&] { return done; });
}

/** REGISTER_KERNEL_BUILDER's first argument (TensorFlow's
 *  KernelDefBuilder, made by Name("Op")). */
class KernelDefBuilder {
 public:
  explicit KernelDefBuilder(const char* op) : op_(op) {}
  KernelDefBuilder& Device(const char* type) {
    device_ = type;
    return *this;
  }
  template <typename T>
  KernelDefBuilder& TypeConstraint(const char* attr) {
    return TypeConstraint(attr, DataTypeToEnum<T>::v());
  }
  KernelDefBuilder& TypeConstraint(const char* attr, DataType d) {
    return TypeConstraint(attr, DataTypeVector{d});
  }
  KernelDefBuilder& TypeConstraint(const char* attr, const DataTypeVector& types) {
    for (auto& c : constraints_) {
      if (c.first == attr) {
        c.second.insert(c.second.end(), types.begin(), types.end());
        return *this;
      }
    }
    constraints_.emplace_back(attr, types);
    return *this;
  }
  KernelDefBuilder& HostMemory(const char* arg) {
    host_memory_.push_back(arg);
    return *this;
  }
  KernelDefBuilder& Label(const char* label) {
    label_ = label;
    return *this;
  }
  KernelDefBuilder& Priority(int32 p) {
    priority_ = p;
    return *this;
  }
  /** Attr constraints need the ABI's kernel AttrConstraint (not in 1.1):
   *  a kernel using one fails to register, rather than serving values it
   *  was not written for. */
  template <typename T>
  KernelDefBuilder& AttrConstraint(const char* attr, T) {
    attr_constraint_ = attr;
    return *this;
  }
  KernelDefBuilder& IsDefault() { return *this; }

  typedef std::function<OpKernel*(OpKernelConstruction*)> Factory;

  Status Register(const OpforgeHostApi* host, OpforgeRegistrar* registrar, Factory* factory) const {
    if (!attr_constraint_.empty())
      return errors::Unimplemented("kernel for ", op_, ": AttrConstraint(\"", attr_constraint_,
                                   "\") needs a newer opforge C ABI than 1.1");
    std::vector<std::vector<OpforgeDType>> types;
    std::vector<OpforgeTypeConstraint> cons;
    for (auto& c : constraints_) types.emplace_back(c.second.begin(), c.second.end());
    for (size_t i = 0; i < constraints_.size(); ++i) {
      OpforgeTypeConstraint tc;
      std::memset(&tc, 0, sizeof tc);
      tc.struct_size = sizeof tc;
      tc.attr = opforge_tf::str(constraints_[i].first);
      tc.types = types[i].data();
      tc.num_types = types[i].size();
      cons.push_back(tc);
    }
    std::vector<OpforgeStr> host_mem;
    for (auto& h : host_memory_) host_mem.push_back(opforge_tf::str(h));
    OpforgeKernelDef def;
    std::memset(&def, 0, sizeof def);
    def.struct_size = sizeof def;
    def.op = opforge_tf::str(op_);
    def.device_type = opforge_tf::str(device_);
    def.constraints = cons.data();
    def.num_constraints = cons.size();
    def.host_memory_args = host_mem.data();
    def.num_host_memory_args = host_mem.size();
    def.label = opforge_tf::str(label_);
    def.priority = priority_;
    def.create = &KernelDefBuilder::create;
    def.compute = &KernelDefBuilder::compute;
    def.destroy = &KernelDefBuilder::destroy;
    def.user = factory;
    opforge_tf::HostStatus st;
    if (host->registration->kernel(registrar, &def, st.get()) != OPFORGE_OK) return st.status();
    return Status();
  }

 private:
  static OpforgeCode create(const OpforgeKernelInit* init, void* user, void** state,
                            OpforgeStatus* status) {
    return opforge_tf::guarded(status, [&]() -> Status {
      OpKernelConstruction c(init);
      std::unique_ptr<OpKernel> k((*static_cast<Factory*>(user))(&c));
      if (!c.status().ok()) return c.status();
      *state = k.release();
      return Status();
    });
  }
  static OpforgeCode compute(void* state, OpforgeKernelCtx* ctx, OpforgeStatus* status) {
    return opforge_tf::guarded(status, [&]() -> Status {
      OpKernel* k = static_cast<OpKernel*>(state);
      OpKernelContext c(ctx, k);
      k->Compute(&c);
      if (!c.status().ok()) return c.status();
      return c.opforge_finish();
    });
  }
  static void destroy(void* state, void*) {
    try {
      delete static_cast<OpKernel*>(state);
    } catch (...) {
      opforge_guard_log_(opforge_tf::host(), "a kernel's destructor threw");
    }
  }

  std::string op_, device_ = DEVICE_CPU, label_, attr_constraint_;
  std::vector<std::pair<std::string, DataTypeVector>> constraints_;
  std::vector<std::string> host_memory_;
  int32 priority_ = 0;
};

typedef KernelDefBuilder Name;

namespace kernel_factory {
/** Queues a REGISTER_KERNEL_BUILDER for init. */
struct OpKernelRegistrar {
  OpKernelRegistrar(const KernelDefBuilder& b, KernelDefBuilder::Factory f) {
    auto factory = std::make_shared<KernelDefBuilder::Factory>(std::move(f));
    opforge_tf::enqueue(opforge_tf::kKernels, [b, factory](const OpforgeHostApi* host, OpforgeRegistrar* registrar) {
      return b.Register(host, registrar, factory.get());
    });
  }
};
}  // namespace kernel_factory

}  // namespace tensorflow

#define REGISTER_KERNEL_BUILDER(kernel_builder, ...) \
  OPFORGE_TF_REGISTER_KERNEL_UNIQ_(__COUNTER__, kernel_builder, __VA_ARGS__)
#define OPFORGE_TF_REGISTER_KERNEL_UNIQ_(ctr, kernel_builder, ...)                          \
  static ::tensorflow::kernel_factory::OpKernelRegistrar OPFORGE_CONCAT(                    \
      opforge_tf_register_kernel_, ctr) TF_ATTRIBUTE_UNUSED(                                \
      ::tensorflow::KernelDefBuilder(kernel_builder),                                       \
      [](::tensorflow::OpKernelConstruction* c) -> ::tensorflow::OpKernel* {                \
        return new __VA_ARGS__(c);                                                          \
      })

/** Fails the kernel with `status` and returns from the enclosing function
 *  when `cond` is false (TensorFlow's OP_REQUIRES). */
#define OP_REQUIRES(CTX, EXP, STATUS)                     \
  do {                                                    \
    if (!TF_PREDICT_TRUE(EXP)) {                          \
      (CTX)->CtxFailure(__FILE__, __LINE__, (STATUS));    \
      return;                                             \
    }                                                     \
  } while (0)
#define OP_REQUIRES_OK(CTX, ...)                                   \
  do {                                                             \
    ::tensorflow::Status opforge_tf_s_ = (__VA_ARGS__);            \
    if (!TF_PREDICT_TRUE(opforge_tf_s_.ok())) {                    \
      (CTX)->CtxFailureWithWarning(__FILE__, __LINE__, opforge_tf_s_); \
      return;                                                      \
    }                                                              \
  } while (0)
#define OP_REQUIRES_ASYNC(CTX, EXP, STATUS, CALLBACK)  \
  do {                                                 \
    if (!TF_PREDICT_TRUE(EXP)) {                       \
      (CTX)->CtxFailure(__FILE__, __LINE__, (STATUS)); \
      (CALLBACK)();                                    \
      return;                                          \
    }                                                  \
  } while (0)
#define OP_REQUIRES_OK_ASYNC(CTX, STATUS, CALLBACK)                    \
  do {                                                                 \
    ::tensorflow::Status opforge_tf_s_ = (STATUS);                     \
    if (!TF_PREDICT_TRUE(opforge_tf_s_.ok())) {                        \
      (CTX)->CtxFailureWithWarning(__FILE__, __LINE__, opforge_tf_s_); \
      (CALLBACK)();                                                    \
      return;                                                          \
    }                                                                  \
  } while (0)

#endif /* OPFORGE_TF_KERNEL_H_ */
