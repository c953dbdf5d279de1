/* opforge's TensorFlow C++ layer: dtypes, TensorShape, TTypes (Eigen maps).
 * See opforge/tf/base.h. */
#ifndef OPFORGE_TF_TYPES_H_
#define OPFORGE_TF_TYPES_H_

#include <opforge/tf/base.h>

#ifndef EIGEN_MAX_ALIGN_BYTES
/* TensorFlow's setting (tf.sysconfig.get_compile_flags() passes it too). */
#define EIGEN_MAX_ALIGN_BYTES 64
#endif
/* The layer's kernel context hands out an Eigen::ThreadPoolDevice, which
 * Eigen declares only with EIGEN_USE_THREADS: defined here when the source
 * did not (TensorFlow's kernels define it before including anything). */
#ifndef EIGEN_USE_THREADS
#define EIGEN_USE_THREADS
#endif
#include <unsupported/Eigen/CXX11/Tensor>

#include <complex>
#include <initializer_list>
#include <limits>

namespace tensorflow {

/** TensorFlow's DataType numbers (opforge's dtypes are the same). */
enum DataType {
  DT_INVALID = 0,
  DT_FLOAT = 1,
  DT_DOUBLE = 2,
  DT_INT32 = 3,
  DT_UINT8 = 4,
  DT_INT16 = 5,
  DT_INT8 = 6,
  DT_STRING = 7,
  DT_COMPLEX64 = 8,
  DT_INT64 = 9,
  DT_BOOL = 10,
  DT_QINT8 = 11,
  DT_QUINT8 = 12,
  DT_QINT32 = 13,
  DT_BFLOAT16 = 14,
  DT_QINT16 = 15,
  DT_QUINT16 = 16,
  DT_UINT16 = 17,
  DT_COMPLEX128 = 18,
  DT_HALF = 19,
  DT_RESOURCE = 20,
  DT_VARIANT = 21,
  DT_UINT32 = 22,
  DT_UINT64 = 23,
};

typedef std::vector<DataType> DataTypeVector;
typedef std::complex<float> complex64;
typedef std::complex<double> complex128;
typedef Eigen::half half;
typedef Eigen::bfloat16 bfloat16;
/** TensorFlow's string element type. Kernels read string inputs as
 *  `tstring` (the layer copies the host's elements) and write string
 *  outputs as `tstring`s the host copies when Compute returns. */
typedef std::string tstring;

/** DataType of a C++ type, and back (TensorFlow's DataTypeToEnum and
 *  EnumToDataType). */
template <typename T>
struct DataTypeToEnum {
  static_assert(sizeof(T) == 0, "this type has no TensorFlow DataType");
};
template <DataType D>
struct EnumToDataType {};

#define OPFORGE_TF_MATCH_(T, ENUM)                      \
  template <>                                           \
  struct DataTypeToEnum<T> {                            \
    static DataType v() { return ENUM; }                \
    static constexpr DataType value = ENUM;             \
  };                                                    \
  template <>                                           \
  struct EnumToDataType<ENUM> {                         \
    typedef T Type;                                     \
  };
OPFORGE_TF_MATCH_(float, DT_FLOAT)
OPFORGE_TF_MATCH_(double, DT_DOUBLE)
OPFORGE_TF_MATCH_(int32, DT_INT32)
OPFORGE_TF_MATCH_(uint32, DT_UINT32)
OPFORGE_TF_MATCH_(uint16, DT_UINT16)
OPFORGE_TF_MATCH_(uint8, DT_UINT8)
OPFORGE_TF_MATCH_(int16, DT_INT16)
OPFORGE_TF_MATCH_(int8, DT_INT8)
OPFORGE_TF_MATCH_(tstring, DT_STRING)
OPFORGE_TF_MATCH_(complex64, DT_COMPLEX64)
OPFORGE_TF_MATCH_(complex128, DT_COMPLEX128)
OPFORGE_TF_MATCH_(int64, DT_INT64)
OPFORGE_TF_MATCH_(uint64, DT_UINT64)
OPFORGE_TF_MATCH_(bool, DT_BOOL)
OPFORGE_TF_MATCH_(half, DT_HALF)
OPFORGE_TF_MATCH_(bfloat16, DT_BFLOAT16)
#undef OPFORGE_TF_MATCH_
/* `long long` where int64 is `long` (TensorFlow maps it to DT_INT64 too). */
template <>
struct DataTypeToEnum<long long> {
  static DataType v() { return sizeof(long long) == 8 ? DT_INT64 : DT_INVALID; }
  static constexpr DataType value = DT_INT64;
};

/** Bytes of one element (0 for types the host gives no dense buffer). */
inline size_t DataTypeSize(DataType d) {
  switch (d) {
    case DT_FLOAT: case DT_INT32: case DT_UINT32: case DT_QINT32: return 4;
    case DT_DOUBLE: case DT_INT64: case DT_UINT64: case DT_COMPLEX64: return 8;
    case DT_COMPLEX128: return 16;
    case DT_UINT8: case DT_INT8: case DT_BOOL: case DT_QINT8: case DT_QUINT8: return 1;
    case DT_INT16: case DT_UINT16: case DT_HALF: case DT_BFLOAT16: case DT_QINT16:
    case DT_QUINT16: return 2;
    default: return 0;
  }
}

/** TensorFlow's names ("float", "int32", ...). */
inline std::string DataTypeString(DataType d) {
  switch (d) {
    case DT_INVALID: return "INVALID";
    case DT_FLOAT: return "float";
    case DT_DOUBLE: return "double";
    case DT_INT32: return "int32";
    case DT_UINT8: return "uint8";
    case DT_INT16: return "int16";
    case DT_INT8: return "int8";
    case DT_STRING: return "string";
    case DT_COMPLEX64: return "complex64";
    case DT_INT64: return "int64";
    case DT_BOOL: return "bool";
    case DT_QINT8: return "qint8";
    case DT_QUINT8: return "quint8";
    case DT_QINT32: return "qint32";
    case DT_BFLOAT16: return "bfloat16";
    case DT_QINT16: return "qint16";
    case DT_QUINT16: return "quint16";
    case DT_UINT16: return "uint16";
    case DT_COMPLEX128: return "complex128";
    case DT_HALF: return "half";
    case DT_RESOURCE: return "resource";
    case DT_VARIANT: return "variant";
    case DT_UINT32: return "uint32";
    case DT_UINT64: return "uint64";
  }
  return "unknown dtype " + std::to_string(static_cast<int>(d));
}
inline std::string DataTypeSliceString(const DataTypeVector& v) {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + DataTypeString(v[i]);
  return s;
}
inline bool DataTypeCanUseMemcpy(DataType d) { return DataTypeSize(d) != 0; }
inline bool DataTypeIsFloating(DataType d) {
  return d == DT_FLOAT || d == DT_DOUBLE || d == DT_HALF || d == DT_BFLOAT16;
}
inline bool DataTypeIsInteger(DataType d) {
  return d == DT_INT8 || d == DT_UINT8 || d == DT_INT16 || d == DT_UINT16 || d == DT_INT32 ||
         d == DT_UINT32 || d == DT_INT64 || d == DT_UINT64;
}

/** The shape of a tensor: known dims (TensorFlow's TensorShape). */
class TensorShape {
 public:
  TensorShape() = default;
  TensorShape(std::initializer_list<int64> dims) : dims_(dims) {}
  explicit TensorShape(const std::vector<int64>& dims) : dims_(dims) {}
  template <typename It>
  TensorShape(It begin, It end) : dims_(begin, end) {}

  int dims() const { return static_cast<int>(dims_.size()); }
  int64 dim_size(int d) const {
    if (d < 0 || d >= dims()) {
      throw opforge_tf::CheckFailure("TensorShape::dim_size(" + std::to_string(d) +
                                     ") of a shape of rank " + std::to_string(dims()));
    }
    return dims_[d];
  }
  int64 num_elements() const {
    int64 n = 1;
    for (int64 d : dims_) n *= d;
    return n;
  }
  void AddDim(int64 size) { dims_.push_back(size); }
  Status AddDimWithStatus(int64 size) {
    if (size < 0) return errors::InvalidArgument("Expected a non-negative size, got ", size);
    dims_.push_back(size);
    return Status();
  }
  void AppendShape(const TensorShape& s) { dims_.insert(dims_.end(), s.dims_.begin(), s.dims_.end()); }
  void InsertDim(int d, int64 size) { dims_.insert(dims_.begin() + d, size); }
  void RemoveDim(int d) { dims_.erase(dims_.begin() + d); }
  void RemoveLastDims(int n) { dims_.resize(dims_.size() - n); }
  void RemoveDimRange(int begin, int end) { dims_.erase(dims_.begin() + begin, dims_.begin() + end); }
  void set_dim(int d, int64 size) { dims_.at(d) = size; }
  void Clear() { dims_.clear(); }
  bool IsSameSize(const TensorShape& o) const { return dims_ == o.dims_; }
  bool operator==(const TensorShape& o) const { return dims_ == o.dims_; }
  bool operator!=(const TensorShape& o) const { return dims_ != o.dims_; }
  const std::vector<int64>& dim_sizes() const { return dims_; }
  std::string DebugString() const {
    std::string s = "[";
    for (size_t i = 0; i < dims_.size(); ++i) s += (i ? "," : "") + std::to_string(dims_[i]);
    return s + "]";
  }
  std::string ShortDebugString() const { return DebugString(); }

  /** The dims as an Eigen DSizes of rank N (TensorFlow's AsEigenDSizes). */
  template <int N, typename IndexType = Eigen::DenseIndex>
  Eigen::DSizes<IndexType, N> AsEigenDSizes() const {
    if (dims() != N) {
      throw opforge_tf::CheckFailure("shape " + DebugString() + " is not of rank " +
                                     std::to_string(N));
    }
    Eigen::DSizes<IndexType, N> d;
    for (int i = 0; i < N; ++i) d[i] = static_cast<IndexType>(dims_[i]);
    return d;
  }
  template <int N, typename IndexType = Eigen::DenseIndex>
  Eigen::DSizes<IndexType, N> AsEigenDSizesWithPadding() const {
    Eigen::DSizes<IndexType, N> d;
    for (int i = 0; i < N; ++i) d[i] = i < dims() ? static_cast<IndexType>(dims_[i]) : 1;
    return d;
  }

 private:
  std::vector<int64> dims_;
};

inline std::ostream& operator<<(std::ostream& os, const TensorShape& s) {
  return os << s.DebugString();
}

/** TensorFlow's TensorShapeUtils. */
class TensorShapeUtils {
 public:
  static bool IsScalar(const TensorShape& s) { return s.dims() == 0; }
  static bool IsVector(const TensorShape& s) { return s.dims() == 1; }
  static bool IsVectorOrHigher(const TensorShape& s) { return s.dims() >= 1; }
  static bool IsMatrix(const TensorShape& s) { return s.dims() == 2; }
  static bool IsSquareMatrix(const TensorShape& s) {
    return s.dims() == 2 && s.dim_size(0) == s.dim_size(1);
  }
  static bool IsMatrixOrHigher(const TensorShape& s) { return s.dims() >= 2; }
  template <typename T>
  static Status MakeShape(const T* dims, int64 n, TensorShape* out) {
    *out = TensorShape();
    for (int64 i = 0; i < n; ++i) TF_RETURN_IF_ERROR(out->AddDimWithStatus(dims[i]));
    return Status();
  }
  static Status MakeShape(const std::vector<int64>& dims, TensorShape* out) {
    return MakeShape(dims.data(), static_cast<int64>(dims.size()), out);
  }
  static Status MakeShape(const std::vector<int32>& dims, TensorShape* out) {
    return MakeShape(dims.data(), static_cast<int64>(dims.size()), out);
  }
  static std::string ShapeListString(const std::vector<TensorShape>& shapes) {
    std::string s = "[";
    for (size_t i = 0; i < shapes.size(); ++i) s += (i ? ", " : "") + shapes[i].DebugString();
    return s + "]";
  }
};

/** A shape with unknown parts, as an attr value (TensorFlow's
 *  PartialTensorShape): rank -1 unknown, a dim -1 unknown. */
class PartialTensorShape {
 public:
  PartialTensorShape() = default;
  explicit PartialTensorShape(const std::vector<int64>& dims) : rank_(static_cast<int>(dims.size())), dims_(dims) {}
  int dims() const { return rank_; }
  bool unknown_rank() const { return rank_ < 0; }
  int64 dim_size(int d) const { return dims_.at(d); }
  bool IsFullyDefined() const {
    if (rank_ < 0) return false;
    for (int64 d : dims_) if (d < 0) return false;
    return true;
  }
  bool AsTensorShape(TensorShape* out) const {
    if (!IsFullyDefined()) return false;
    *out = TensorShape(dims_);
    return true;
  }
  const std::vector<int64>& dim_sizes() const { return dims_; }
  std::string DebugString() const {
    if (rank_ < 0) return "<unknown>";
    std::string s = "[";
    for (size_t i = 0; i < dims_.size(); ++i)
      s += (i ? "," : "") + (dims_[i] < 0 ? std::string("?") : std::to_string(dims_[i]));
    return s + "]";
  }

 private:
  int rank_ = -1;
  std::vector<int64> dims_;
};

/** The Eigen types of tensor views (TensorFlow's TTypes): maps aligned as
 *  TensorFlow's are (Eigen::Aligned), row-major, Eigen::DenseIndex. */
template <typename T, int NDIMS = 1, typename IndexType = Eigen::DenseIndex>
struct TTypes {
  typedef Eigen::TensorMap<Eigen::Tensor<T, NDIMS, Eigen::RowMajor, IndexType>, Eigen::Aligned>
      Tensor;
  typedef Eigen::TensorMap<Eigen::Tensor<const T, NDIMS, Eigen::RowMajor, IndexType>,
                           Eigen::Aligned>
      ConstTensor;
  typedef Eigen::TensorMap<Eigen::Tensor<T, NDIMS, Eigen::RowMajor, IndexType>> UnalignedTensor;
  typedef Eigen::TensorMap<Eigen::Tensor<const T, NDIMS, Eigen::RowMajor, IndexType>>
      UnalignedConstTensor;
  typedef Eigen::TensorMap<Eigen::TensorFixedSize<T, Eigen::Sizes<>, Eigen::RowMajor, IndexType>,
                           Eigen::Aligned>
      Scalar;
  typedef Eigen::TensorMap<
      Eigen::TensorFixedSize<const T, Eigen::Sizes<>, Eigen::RowMajor, IndexType>, Eigen::Aligned>
      ConstScalar;
  typedef Eigen::TensorMap<Eigen::Tensor<T, 1, Eigen::RowMajor, IndexType>, Eigen::Aligned> Flat;
  typedef Eigen::TensorMap<Eigen::Tensor<const T, 1, Eigen::RowMajor, IndexType>, Eigen::Aligned>
      ConstFlat;
  typedef Eigen::TensorMap<Eigen::Tensor<T, 1, Eigen::RowMajor, IndexType>, Eigen::Aligned> Vec;
  typedef Eigen::TensorMap<Eigen::Tensor<const T, 1, Eigen::RowMajor, IndexType>, Eigen::Aligned>
      ConstVec;
  typedef Eigen::TensorMap<Eigen::Tensor<T, 1, Eigen::RowMajor, IndexType>> UnalignedFlat;
  typedef Eigen::TensorMap<Eigen::Tensor<const T, 1, Eigen::RowMajor, IndexType>>
      UnalignedConstFlat;
  typedef Eigen::TensorMap<Eigen::Tensor<T, 2, Eigen::RowMajor, IndexType>, Eigen::Aligned>
      Matrix;
  typedef Eigen::TensorMap<Eigen::Tensor<const T, 2, Eigen::RowMajor, IndexType>, Eigen::Aligned>
      ConstMatrix;
};

}  // namespace tensorflow

#endif /* OPFORGE_TF_TYPES_H_ */
