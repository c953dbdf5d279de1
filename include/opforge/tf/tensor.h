/* opforge's TensorFlow C++ layer: Tensor, attr values.
 * See opforge/tf/base.h. */
#ifndef OPFORGE_TF_TENSOR_H_
#define OPFORGE_TF_TENSOR_H_

#include <opforge/tf/types.h>

#include <cstdlib>
#include <new>

namespace opforge_tf {

/** Bytes the layer aligns tensor memory to (TensorFlow's
 *  EIGEN_MAX_ALIGN_BYTES). */
constexpr size_t kAlign = 64;

/** A 64-byte-aligned buffer of `bytes` bytes owned by the layer. */
inline std::shared_ptr<void> aligned_buffer(size_t bytes) {
  size_t n = (bytes + kAlign - 1) / kAlign * kAlign;
  void* p = std::aligned_alloc(kAlign, n ? n : kAlign);
  if (!p) throw std::bad_alloc();
  return std::shared_ptr<void>(p, [](void* q) { std::free(q); });
}

/** `n` empty strings in a 64-byte-aligned buffer (string tensors are
 *  mapped as aligned too), destroyed with it. */
inline std::shared_ptr<void> string_buffer(size_t n) {
  std::shared_ptr<void> raw = aligned_buffer(n * sizeof(std::string));
  std::string* p = static_cast<std::string*>(raw.get());
  for (size_t i = 0; i < n; ++i) new (p + i) std::string();
  return std::shared_ptr<void>(p, [raw, n](void* q) {
    std::string* s = static_cast<std::string*>(q);
    for (size_t i = 0; i < n; ++i) s[i].~basic_string();
  });
}

}  // namespace opforge_tf

namespace tensorflow {

class Tensor;

namespace opforge_detail {
struct Access;
}

/** A tensor: a dtype, a shape and a buffer shared by copies (TensorFlow's
 *  Tensor). Views of the host's tensors (inputs, outputs) point into host
 *  memory for the duration of a kernel call; tensors the kernel makes
 *  (`Tensor(dtype, shape)`, allocate_temp) own 64-byte-aligned memory of the
 *  layer. Element access checks the dtype and rank, and a mismatch is a
 *  clean INTERNAL error of the kernel (TensorFlow aborts the process). */
class Tensor {
 public:
  Tensor() : dtype_(DT_FLOAT) {}
  /** An owned tensor of this dtype and shape (contents unspecified). */
  Tensor(DataType dtype, const TensorShape& shape) : dtype_(dtype), shape_(shape) {
    if (dtype == DT_STRING) {
      buf_ = opforge_tf::string_buffer(static_cast<size_t>(shape.num_elements()));
      data_ = buf_.get();
    } else {
      size_t es = DataTypeSize(dtype);
      if (es == 0) {
        throw opforge_tf::CheckFailure("a Tensor of dtype " + DataTypeString(dtype) +
                                       " has no buffer in this layer");
      }
      buf_ = opforge_tf::aligned_buffer(es * static_cast<size_t>(shape.num_elements()));
      data_ = buf_.get();
    }
    initialized_ = true;
  }
  explicit Tensor(DataType dtype) : dtype_(dtype) {}
  /** A scalar of a C++ value (TensorFlow's Tensor(T value)). */
  template <typename T, typename = decltype(DataTypeToEnum<T>::value)>
  explicit Tensor(T value) : Tensor(DataTypeToEnum<T>::value, TensorShape()) {
    *static_cast<T*>(data_) = value;
  }

  DataType dtype() const { return dtype_; }
  const TensorShape& shape() const { return shape_; }
  int dims() const { return shape_.dims(); }
  int64 dim_size(int d) const { return shape_.dim_size(d); }
  int64 NumElements() const { return shape_.num_elements(); }
  bool IsInitialized() const { return initialized_; }
  bool IsSameSize(const Tensor& o) const { return shape_ == o.shape_; }
  size_t TotalBytes() const { return DataTypeSize(dtype_) * static_cast<size_t>(NumElements()); }
  size_t AllocatedBytes() const { return TotalBytes(); }
  bool SharesBufferWith(const Tensor& o) const { return data_ != nullptr && data_ == o.data_; }
  bool IsAligned() const {
    return reinterpret_cast<uintptr_t>(data_) % opforge_tf::kAlign == 0;
  }

  /** This tensor's buffer with another shape of as many elements (false if
   *  the counts differ). */
  bool CopyFrom(const Tensor& other, const TensorShape& shape) {
    if (other.NumElements() != shape.num_elements()) return false;
    *this = other;
    shape_ = shape;
    return true;
  }
  /** Same as CopyFrom but checks the count (TensorFlow's BitcastFrom needs
   *  equal byte counts; the dtype must match here). */
  Status BitcastFrom(const Tensor& other, DataType dtype, const TensorShape& shape) {
    if (DataTypeSize(dtype) * static_cast<size_t>(shape.num_elements()) != other.TotalBytes())
      return errors::InvalidArgument("BitcastFrom: byte counts differ");
    *this = other;
    dtype_ = dtype;
    shape_ = shape;
    return Status();
  }

  template <typename T> typename TTypes<T>::Flat flat() { return shaped<T, 1>({NumElements()}); }
  template <typename T> typename TTypes<T>::ConstFlat flat() const {
    return shaped<T, 1>({NumElements()});
  }
  template <typename T> typename TTypes<T>::UnalignedFlat unaligned_flat() {
    return typename TTypes<T>::UnalignedFlat(data<T>(), NumElements());
  }
  template <typename T> typename TTypes<T>::UnalignedConstFlat unaligned_flat() const {
    return typename TTypes<T>::UnalignedConstFlat(data<T>(), NumElements());
  }
  template <typename T> typename TTypes<T>::Vec vec() { return tensor<T, 1>(); }
  template <typename T> typename TTypes<T>::ConstVec vec() const { return tensor<T, 1>(); }
  template <typename T> typename TTypes<T>::Matrix matrix() { return tensor<T, 2>(); }
  template <typename T> typename TTypes<T>::ConstMatrix matrix() const { return tensor<T, 2>(); }
  template <typename T> typename TTypes<T>::Scalar scalar() {
    check_elements<T>(1, "scalar");
    return typename TTypes<T>::Scalar(aligned_data<T>());
  }
  template <typename T> typename TTypes<T>::ConstScalar scalar() const {
    check_elements<T>(1, "scalar");
    return typename TTypes<T>::ConstScalar(aligned_data<T>());
  }
  template <typename T, size_t NDIMS> typename TTypes<T, NDIMS>::Tensor tensor() {
    check_rank<T>(NDIMS);
    return typename TTypes<T, NDIMS>::Tensor(aligned_data<T>(), shape_.AsEigenDSizes<NDIMS>());
  }
  template <typename T, size_t NDIMS> typename TTypes<T, NDIMS>::ConstTensor tensor() const {
    check_rank<T>(NDIMS);
    return typename TTypes<T, NDIMS>::ConstTensor(aligned_data<T>(),
                                                  shape_.AsEigenDSizes<NDIMS>());
  }
  /** The elements as a tensor of these dims (same count). */
  template <typename T, size_t NDIMS>
  typename TTypes<T, NDIMS>::Tensor shaped(const std::vector<int64>& dims) {
    return typename TTypes<T, NDIMS>::Tensor(aligned_data<T>(), shaped_dims<T, NDIMS>(dims));
  }
  template <typename T, size_t NDIMS>
  typename TTypes<T, NDIMS>::ConstTensor shaped(const std::vector<int64>& dims) const {
    return typename TTypes<T, NDIMS>::ConstTensor(aligned_data<T>(), shaped_dims<T, NDIMS>(dims));
  }
  /** All leading dims folded into the first (TensorFlow's flat_inner_dims). */
  template <typename T, size_t NDIMS = 2> typename TTypes<T, NDIMS>::Tensor flat_inner_dims() {
    return shaped<T, NDIMS>(inner_dims(NDIMS));
  }
  template <typename T, size_t NDIMS = 2>
  typename TTypes<T, NDIMS>::ConstTensor flat_inner_dims() const {
    return shaped<T, NDIMS>(inner_dims(NDIMS));
  }
  /** All trailing dims folded into the last (TensorFlow's flat_outer_dims). */
  template <typename T, size_t NDIMS = 2> typename TTypes<T, NDIMS>::Tensor flat_outer_dims() {
    return shaped<T, NDIMS>(outer_dims(NDIMS));
  }
  template <typename T, size_t NDIMS = 2>
  typename TTypes<T, NDIMS>::ConstTensor flat_outer_dims() const {
    return shaped<T, NDIMS>(outer_dims(NDIMS));
  }

  /** The raw bytes (TensorFlow's tensor_data()). */
  std::string tensor_data() const {
    return std::string(static_cast<const char*>(data_), TotalBytes());
  }
  void* opforge_data() const { return data_; }
  std::string DebugString(int num_values = 3) const {
    (void)num_values;
    return "Tensor<type: " + DataTypeString(dtype_) + " shape: " + shape_.DebugString() + ">";
  }
  std::string SummarizeValue(int64 max_entries) const {
    (void)max_entries;
    return DebugString();
  }

 private:
  friend struct opforge_detail::Access;

  template <typename T>
  void check_dtype() const {
    if (!initialized_) throw opforge_tf::CheckFailure("the Tensor is not initialized");
    if (DataTypeToEnum<T>::v() != dtype_) {
      throw opforge_tf::CheckFailure("a Tensor of dtype " + DataTypeString(dtype_) +
                                     " read as " + DataTypeString(DataTypeToEnum<T>::v()));
    }
  }
  template <typename T>
  void check_rank(size_t n) const {
    check_dtype<T>();
    if (static_cast<size_t>(shape_.dims()) != n) {
      throw opforge_tf::CheckFailure("a Tensor of shape " + shape_.DebugString() +
                                     " read as rank " + std::to_string(n));
    }
  }
  template <typename T>
  void check_elements(int64 n, const char* what) const {
    check_dtype<T>();
    if (NumElements() != n) {
      throw opforge_tf::CheckFailure("a Tensor of shape " + shape_.DebugString() + " read as " +
                                     what);
    }
  }
  template <typename T>
  T* data() const {
    check_dtype<T>();
    return static_cast<T*>(data_);
  }
  /** Data for an Eigen::Aligned map: the layer keeps tensors aligned. */
  template <typename T>
  T* aligned_data() const {
    T* p = data<T>();
    if (reinterpret_cast<uintptr_t>(p) % EIGEN_MAX_ALIGN_BYTES != 0 && NumElements() != 0) {
      throw opforge_tf::CheckFailure("a Tensor's data is not aligned for Eigen");
    }
    return p;
  }
  template <typename T, size_t NDIMS>
  Eigen::DSizes<Eigen::DenseIndex, NDIMS> shaped_dims(const std::vector<int64>& dims) const {
    check_dtype<T>();
    if (dims.size() != NDIMS) throw opforge_tf::CheckFailure("shaped: wrong number of dims");
    Eigen::DSizes<Eigen::DenseIndex, NDIMS> d;
    int64 n = 1;
    for (size_t i = 0; i < NDIMS; ++i) {
      d[i] = static_cast<Eigen::DenseIndex>(dims[i]);
      n *= dims[i];
    }
    if (n != NumElements()) {
      throw opforge_tf::CheckFailure("shaped: " + std::to_string(n) + " elements for a Tensor of " +
                                     std::to_string(NumElements()));
    }
    return d;
  }
  std::vector<int64> inner_dims(size_t n) const {
    std::vector<int64> out(n, 1);
    int r = shape_.dims();
    if (n == 0) return out;
    int64 lead = 1;
    int keep = static_cast<int>(n) - 1;
    for (int i = 0; i < r - keep; ++i) lead *= shape_.dim_size(i);
    out[0] = lead;
    for (int i = 1; i < static_cast<int>(n); ++i) {
      int src = r - keep + i - 1;
      out[i] = src >= 0 ? shape_.dim_size(src) : 1;
    }
    return out;
  }
  std::vector<int64> outer_dims(size_t n) const {
    std::vector<int64> out(n, 1);
    int r = shape_.dims();
    if (n == 0) return out;
    int keep = static_cast<int>(n) - 1;
    for (int i = 0; i < keep; ++i) out[i] = i < r ? shape_.dim_size(i) : 1;
    int64 tail = 1;
    for (int i = keep; i < r; ++i) tail *= shape_.dim_size(i);
    out[n - 1] = tail;
    return out;
  }

  DataType dtype_;
  TensorShape shape_;
  void* data_ = nullptr;
  /** Owned memory (the layer's), or null for a view of host memory. */
  std::shared_ptr<void> buf_;
  bool initialized_ = false;
  /** The host view this tensor is (input or output index; -1: none). */
  int host_input_ = -1;
};

namespace opforge_detail {
/** The layer's access to a Tensor's internals. */
struct Access {
  /** A Tensor over a host view (copied to aligned memory when the host's
   *  is not 64-byte aligned; DT_STRING elements copied to tstrings). */
  static Tensor from_view(const OpforgeTensor& v, int host_input) {
    Tensor t(static_cast<DataType>(v.dtype));
    t.shape_ = TensorShape(v.dims, v.dims + v.rank);
    t.initialized_ = true;
    t.host_input_ = host_input;
    if (v.dtype == OPFORGE_DT_STRING) {
      t.buf_ = opforge_tf::string_buffer(static_cast<size_t>(v.num_elements));
      t.data_ = t.buf_.get();
      const OpforgeStr* e = static_cast<const OpforgeStr*>(v.data);
      tstring* out = static_cast<tstring*>(t.data_);
      for (int64 i = 0; i < v.num_elements; ++i) out[i] = opforge_tf::to_string(e[i]);
      return t;
    }
    t.data_ = v.data;
    if (v.data && reinterpret_cast<uintptr_t>(v.data) % opforge_tf::kAlign != 0) {
      t.buf_ = opforge_tf::aligned_buffer(v.byte_len);
      std::memcpy(t.buf_.get(), v.data, v.byte_len);
      t.data_ = t.buf_.get();
    }
    return t;
  }
  /** A read-only host view of a (non-string) tensor, living as `t`. */
  static OpforgeTensor view(const Tensor& t) {
    OpforgeTensor v;
    std::memset(&v, 0, sizeof v);
    v.struct_size = sizeof v;
    v.dtype = static_cast<OpforgeDType>(t.dtype_);
    v.rank = static_cast<uint32_t>(t.dims());
    v.dims = t.shape_.dim_sizes().data();
    v.data = t.data_;
    v.byte_len = t.TotalBytes();
    v.num_elements = t.NumElements();
    v.flags = OPFORGE_TENSOR_CONTIGUOUS | OPFORGE_TENSOR_HOST_MEMORY;
    return v;
  }
  static const std::shared_ptr<void>& buffer(const Tensor& t) { return t.buf_; }
  static int host_input(const Tensor& t) { return t.host_input_; }
  static void* data(const Tensor& t) { return t.data_; }
};
}  // namespace opforge_detail

/** An attr's value converted to the C++ type a source asks for
 *  (OpKernelConstruction::GetAttr, InferenceContext::GetAttr). */
namespace opforge_attr {

inline Status kind_error(const std::string& name, const OpforgeAttrValue& v, const char* want) {
  (void)v;
  return errors::InvalidArgument("Attr ", name, " has a value that is not ", want);
}
inline bool is(const OpforgeAttrValue& v, uint32_t kind) { return v.kind == kind; }
inline bool is_list(const OpforgeAttrValue& v, uint32_t kind) {
  return v.kind == (kind | OPFORGE_ATTR_LIST);
}

inline Status get(const std::string& n, const OpforgeAttrValue& v, int64* out) {
  if (!is(v, OPFORGE_ATTR_INT)) return kind_error(n, v, "an int");
  *out = v.i;
  return Status();
}
inline Status get(const std::string& n, const OpforgeAttrValue& v, int32* out) {
  if (!is(v, OPFORGE_ATTR_INT)) return kind_error(n, v, "an int");
  if (v.i < std::numeric_limits<int32>::min() || v.i > std::numeric_limits<int32>::max())
    return errors::InvalidArgument("Attr ", n, " has value ", v.i,
                                   " out of range for an int32");
  *out = static_cast<int32>(v.i);
  return Status();
}
inline Status get(const std::string& n, const OpforgeAttrValue& v, float* out) {
  if (!is(v, OPFORGE_ATTR_FLOAT)) return kind_error(n, v, "a float");
  *out = v.f;
  return Status();
}
inline Status get(const std::string& n, const OpforgeAttrValue& v, bool* out) {
  if (!is(v, OPFORGE_ATTR_BOOL)) return kind_error(n, v, "a bool");
  *out = v.b != 0;
  return Status();
}
inline Status get(const std::string& n, const OpforgeAttrValue& v, DataType* out) {
  if (!is(v, OPFORGE_ATTR_TYPE)) return kind_error(n, v, "a type");
  *out = static_cast<DataType>(v.type);
  return Status();
}
inline Status get(const std::string& n, const OpforgeAttrValue& v, std::string* out) {
  if (!is(v, OPFORGE_ATTR_STRING)) return kind_error(n, v, "a string");
  *out = opforge_tf::to_string(v.s);
  return Status();
}
inline PartialTensorShape partial(const OpforgeShapeValue& s) {
  if (s.rank < 0) return PartialTensorShape();
  return PartialTensorShape(std::vector<int64>(s.dims, s.dims + s.rank));
}
inline Status get(const std::string& n, const OpforgeAttrValue& v, PartialTensorShape* out) {
  if (!is(v, OPFORGE_ATTR_SHAPE) || !v.shape) return kind_error(n, v, "a shape");
  *out = partial(*v.shape);
  return Status();
}
inline Status get(const std::string& n, const OpforgeAttrValue& v, TensorShape* out) {
  PartialTensorShape p;
  TF_RETURN_IF_ERROR(get(n, v, &p));
  if (!p.AsTensorShape(out))
    return errors::InvalidArgument("Attr ", n, " has shape ", p.DebugString(),
                                   " that is not fully defined");
  return Status();
}
inline Status get(const std::string& n, const OpforgeAttrValue& v, Tensor* out) {
  if (!is(v, OPFORGE_ATTR_TENSOR) || !v.tensor) return kind_error(n, v, "a tensor");
  Tensor view = opforge_detail::Access::from_view(*v.tensor, -1);
  // An attr's tensor lives as the value: keep a copy the kernel owns.
  if (view.dtype() == DT_STRING) {
    *out = view;
    return Status();
  }
  Tensor copy(view.dtype(), view.shape());
  std::memcpy(opforge_detail::Access::data(copy), opforge_detail::Access::data(view),
              view.TotalBytes());
  *out = copy;
  return Status();
}

template <typename T, typename E>
Status get_list(const std::string& n, const OpforgeAttrValue& v, uint32_t kind, const char* want,
                std::vector<T>* out) {
  if (!is_list(v, kind)) return kind_error(n, v, want);
  out->clear();
  const E* e = static_cast<const E*>(v.list);
  for (size_t i = 0; i < v.list_len; ++i) out->push_back(static_cast<T>(e[i]));
  return Status();
}
inline Status get(const std::string& n, const OpforgeAttrValue& v, std::vector<int64>* out) {
  return get_list<int64, int64_t>(n, v, OPFORGE_ATTR_INT, "a list of ints", out);
}
inline Status get(const std::string& n, const OpforgeAttrValue& v, std::vector<int32>* out) {
  std::vector<int64> w;
  TF_RETURN_IF_ERROR(get(n, v, &w));
  out->clear();
  for (int64 x : w) {
    if (x < std::numeric_limits<int32>::min() || x > std::numeric_limits<int32>::max())
      return errors::InvalidArgument("Attr ", n, " has value ", x, " out of range for an int32");
    out->push_back(static_cast<int32>(x));
  }
  return Status();
}
inline Status get(const std::string& n, const OpforgeAttrValue& v, std::vector<float>* out) {
  return get_list<float, float>(n, v, OPFORGE_ATTR_FLOAT, "a list of floats", out);
}
inline Status get(const std::string& n, const OpforgeAttrValue& v, std::vector<bool>* out) {
  return get_list<bool, uint8_t>(n, v, OPFORGE_ATTR_BOOL, "a list of bools", out);
}
inline Status get(const std::string& n, const OpforgeAttrValue& v, std::vector<DataType>* out) {
  return get_list<DataType, OpforgeDType>(n, v, OPFORGE_ATTR_TYPE, "a list of types", out);
}
inline Status get(const std::string& n, const OpforgeAttrValue& v, std::vector<std::string>* out) {
  if (!is_list(v, OPFORGE_ATTR_STRING)) return kind_error(n, v, "a list of strings");
  out->clear();
  const OpforgeStr* e = static_cast<const OpforgeStr*>(v.list);
  for (size_t i = 0; i < v.list_len; ++i) out->push_back(opforge_tf::to_string(e[i]));
  return Status();
}
inline Status get(const std::string& n, const OpforgeAttrValue& v,
                  std::vector<PartialTensorShape>* out) {
  if (!is_list(v, OPFORGE_ATTR_SHAPE)) return kind_error(n, v, "a list of shapes");
  out->clear();
  for (size_t i = 0; i < v.list_len; ++i)
    out->push_back(partial(*OPFORGE_ARRAY_AT(OpforgeShapeValue, v.list, i)));
  return Status();
}
inline Status get(const std::string& n, const OpforgeAttrValue& v, std::vector<TensorShape>* out) {
  std::vector<PartialTensorShape> p;
  TF_RETURN_IF_ERROR(get(n, v, &p));
  out->clear();
  for (auto& s : p) {
    TensorShape t;
    if (!s.AsTensorShape(&t))
      return errors::InvalidArgument("Attr ", n, " has shape ", s.DebugString(),
                                     " that is not fully defined");
    out->push_back(t);
  }
  return Status();
}

/** Reads attr `name` through `fetch(name, &value, status)` (a host slot)
 *  into `out`. */
template <typename Fetch, typename T>
Status read(Fetch&& fetch, const std::string& name, T* out) {
  opforge_tf::HostStatus st;
  OpforgeAttrValue v;
  std::memset(&v, 0, sizeof v);
  v.struct_size = sizeof v;
  if (fetch(opforge_tf::str(name), &v, st.get()) != OPFORGE_OK) {
    Status s = st.status();
    if (s.code() == error::NOT_FOUND)
      return errors::NotFound("No attr named '", name, "' in NodeDef");
    return s;
  }
  return get(name, v, out);
}

}  // namespace opforge_attr

}  // namespace tensorflow

#endif /* OPFORGE_TF_TENSOR_H_ */
