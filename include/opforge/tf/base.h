/* opforge's TensorFlow C++ layer: the base (statuses, errors, StrCat,
 * integer types, logging checks, the library's registration queue and its
 * init entry point).
 *
 * The layer lets a TensorFlow custom-op source (REGISTER_OP, OpKernel,
 * REGISTER_KERNEL_BUILDER, shape functions, Eigen expressions) compile
 * unchanged into an opforge op library: the headers under tensorflow/ have
 * TensorFlow's paths and names and are implemented here, inline, over the
 * versioned C ABI of opforge/opforge.h. Nothing crosses into the host but C
 * structs and functions, so the library does not depend on the compiler,
 * standard library or opforge version the host was built with.
 *
 * Written for opforge from TensorFlow's documented API (the custom-op guide
 * and the public headers' declarations); no TensorFlow code is copied.
 */
#ifndef OPFORGE_TF_BASE_H_
#define OPFORGE_TF_BASE_H_

#if __cplusplus < 201703L
#error "opforge's TensorFlow layer needs C++17 (-std=c++17), as TensorFlow does"
#endif

#include <opforge/opforge.h>

#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

/* The layer's own namespace is hidden: one copy of its statics per library,
 * merged across the library's files by the linker, never shared with
 * another library (default visibility would make the statics of inline
 * functions STB_GNU_UNIQUE symbols: one per process, and a library holding
 * one is never unloaded). */
#pragma GCC visibility push(hidden)

namespace opforge_tf {

/** The host table this library's init received (null before init). One per
 *  library: an inline function's static is merged across its files. */
inline const OpforgeHostApi*& host_slot() {
  static const OpforgeHostApi* host = nullptr;
  return host;
}
inline const OpforgeHostApi* host() { return host_slot(); }

inline OpforgeStr str(const std::string& s) {
  OpforgeStr r;
  r.ptr = s.data();
  r.len = s.size();
  return r;
}
inline std::string to_string(OpforgeStr s) {
  return s.ptr ? std::string(s.ptr, s.len) : std::string();
}

}  // namespace opforge_tf

#pragma GCC visibility pop

namespace tensorflow {

typedef int8_t int8;
typedef int16_t int16;
typedef int32_t int32;
typedef int64_t int64;
typedef uint8_t uint8;
typedef uint16_t uint16;
typedef uint32_t uint32;
typedef uint64_t uint64;

namespace error {
/** TensorFlow's canonical codes (equal to OPFORGE_* codes). */
enum Code {
  OK = 0,
  CANCELLED = 1,
  UNKNOWN = 2,
  INVALID_ARGUMENT = 3,
  DEADLINE_EXCEEDED = 4,
  NOT_FOUND = 5,
  ALREADY_EXISTS = 6,
  PERMISSION_DENIED = 7,
  RESOURCE_EXHAUSTED = 8,
  FAILED_PRECONDITION = 9,
  ABORTED = 10,
  OUT_OF_RANGE = 11,
  UNIMPLEMENTED = 12,
  INTERNAL = 13,
  UNAVAILABLE = 14,
  DATA_LOSS = 15,
  UNAUTHENTICATED = 16,
};
}  // namespace error

/** A code and a message (TensorFlow's Status; absl::Status in 2.x). */
class Status {
 public:
  Status() = default;
  Status(error::Code code, std::string message)
      : code_(code), message_(code == error::OK ? std::string() : std::move(message)) {}
  static Status OK() { return Status(); }
  bool ok() const { return code_ == error::OK; }
  error::Code code() const { return code_; }
  const std::string& error_message() const { return message_; }
  const std::string& message() const { return message_; }
  std::string ToString() const {
    if (ok()) return "OK";
    const char* name = "UNKNOWN";
    switch (code_) {
      case error::OK: name = "OK"; break;
      case error::CANCELLED: name = "CANCELLED"; break;
      case error::UNKNOWN: name = "UNKNOWN"; break;
      case error::INVALID_ARGUMENT: name = "INVALID_ARGUMENT"; break;
      case error::DEADLINE_EXCEEDED: name = "DEADLINE_EXCEEDED"; break;
      case error::NOT_FOUND: name = "NOT_FOUND"; break;
      case error::ALREADY_EXISTS: name = "ALREADY_EXISTS"; break;
      case error::PERMISSION_DENIED: name = "PERMISSION_DENIED"; break;
      case error::RESOURCE_EXHAUSTED: name = "RESOURCE_EXHAUSTED"; break;
      case error::FAILED_PRECONDITION: name = "FAILED_PRECONDITION"; break;
      case error::ABORTED: name = "ABORTED"; break;
      case error::OUT_OF_RANGE: name = "OUT_OF_RANGE"; break;
      case error::UNIMPLEMENTED: name = "UNIMPLEMENTED"; break;
      case error::INTERNAL: name = "INTERNAL"; break;
      case error::UNAVAILABLE: name = "UNAVAILABLE"; break;
      case error::DATA_LOSS: name = "DATA_LOSS"; break;
      case error::UNAUTHENTICATED: name = "UNAUTHENTICATED"; break;
    }
    return std::string(name) + ": " + message_;
  }
  /** Keeps the first error (TensorFlow's Status::Update). */
  void Update(const Status& other) {
    if (ok() && !other.ok()) *this = other;
  }
  bool operator==(const Status& o) const { return code_ == o.code_ && message_ == o.message_; }
  bool operator!=(const Status& o) const { return !(*this == o); }
  void IgnoreError() const {}

 private:
  error::Code code_ = error::OK;
  std::string message_;
};

inline Status OkStatus() { return Status(); }

inline std::ostream& operator<<(std::ostream& os, const Status& s) {
  return os << s.ToString();
}

namespace strings {
namespace internal {
inline void append(std::ostringstream& os) { (void)os; }
template <typename T, typename... Rest>
void append(std::ostringstream& os, const T& first, const Rest&... rest) {
  os << first;
  append(os, rest...);
}
}  // namespace internal

/** Concatenates the text of every argument (TensorFlow's StrCat). */
template <typename... Args>
std::string StrCat(const Args&... args) {
  std::ostringstream os;
  internal::append(os, args...);
  return os.str();
}
template <typename... Args>
void StrAppend(std::string* out, const Args&... args) {
  *out += StrCat(args...);
}
}  // namespace strings

namespace errors {
#define OPFORGE_TF_ERROR_(Name, CODE)                                  \
  template <typename... Args>                                          \
  Status Name(const Args&... args) {                                   \
    return Status(error::CODE, ::tensorflow::strings::StrCat(args...)); \
  }                                                                    \
  inline bool Is##Name(const Status& s) { return s.code() == error::CODE; }
OPFORGE_TF_ERROR_(Cancelled, CANCELLED)
OPFORGE_TF_ERROR_(Unknown, UNKNOWN)
OPFORGE_TF_ERROR_(InvalidArgument, INVALID_ARGUMENT)
OPFORGE_TF_ERROR_(DeadlineExceeded, DEADLINE_EXCEEDED)
OPFORGE_TF_ERROR_(NotFound, NOT_FOUND)
OPFORGE_TF_ERROR_(AlreadyExists, ALREADY_EXISTS)
OPFORGE_TF_ERROR_(PermissionDenied, PERMISSION_DENIED)
OPFORGE_TF_ERROR_(ResourceExhausted, RESOURCE_EXHAUSTED)
OPFORGE_TF_ERROR_(FailedPrecondition, FAILED_PRECONDITION)
OPFORGE_TF_ERROR_(Aborted, ABORTED)
OPFORGE_TF_ERROR_(OutOfRange, OUT_OF_RANGE)
OPFORGE_TF_ERROR_(Unimplemented, UNIMPLEMENTED)
OPFORGE_TF_ERROR_(Internal, INTERNAL)
OPFORGE_TF_ERROR_(Unavailable, UNAVAILABLE)
OPFORGE_TF_ERROR_(DataLoss, DATA_LOSS)
OPFORGE_TF_ERROR_(Unauthenticated, UNAUTHENTICATED)
#undef OPFORGE_TF_ERROR_
}  // namespace errors

}  // namespace tensorflow

namespace absl {
using Status = ::tensorflow::Status;
inline Status OkStatus() { return Status(); }
}  // namespace absl

/** Returns the status of `expr` from the enclosing function if it is an
 *  error (TensorFlow's TF_RETURN_IF_ERROR). */
#define TF_RETURN_IF_ERROR(...)                                   \
  do {                                                            \
    ::tensorflow::Status opforge_tf_status_ = (__VA_ARGS__);      \
    if (!opforge_tf_status_.ok()) return opforge_tf_status_;      \
  } while (0)

#define TF_PREDICT_FALSE(x) (__builtin_expect(!!(x), 0))
#define TF_PREDICT_TRUE(x) (__builtin_expect(!!(x), 1))
#define TF_MUST_USE_RESULT __attribute__((warn_unused_result))
#define TF_ATTRIBUTE_UNUSED __attribute__((unused))
#define TF_DISALLOW_COPY_AND_ASSIGN(T) \
  T(const T&) = delete;                \
  void operator=(const T&) = delete

#pragma GCC visibility push(hidden)

namespace opforge_tf {

/** A failed CHECK or a detected misuse: thrown, caught at the callback's
 *  boundary and reported as INTERNAL (the host stays up). */
struct CheckFailure : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/** Collects a CHECK's streamed message and throws when it goes out of scope
 *  at the end of the full expression. */
class CheckMessage {
 public:
  CheckMessage(const char* file, int line, const char* cond) {
    os_ << file << ":" << line << ": check failed: " << cond << " ";
  }
  template <typename T>
  CheckMessage& operator<<(const T& v) {
    os_ << v;
    return *this;
  }
  [[noreturn]] ~CheckMessage() noexcept(false) { throw CheckFailure(os_.str()); }

 private:
  std::ostringstream os_;
};

/** A LOG statement: its text goes to the host's log at its level when the
 *  statement ends. */
class LogMessage {
 public:
  explicit LogMessage(uint32_t level) : level_(level) {}
  template <typename T>
  LogMessage& operator<<(const T& v) {
    os_ << v;
    return *this;
  }
  ~LogMessage() {
    const OpforgeHostApi* h = host();
    if (h && OPFORGE_HAS_SLOT(h, log)) {
      std::string s = os_.str();
      h->log(h, level_, str(s));
    }
  }

 private:
  uint32_t level_;
  std::ostringstream os_;
};

/** Sets an OpforgeStatus from a Status; returns its code. */
inline OpforgeCode set_status(OpforgeStatus* out, const ::tensorflow::Status& s) {
  const OpforgeHostApi* h = host();
  if (h && out) h->set_status(out, static_cast<OpforgeCode>(s.code()), str(s.message()));
  return static_cast<OpforgeCode>(s.code());
}

/** A Status from an OpforgeStatus the host wrote. */
inline ::tensorflow::Status from_status(const OpforgeStatus* s) {
  const OpforgeHostApi* h = host();
  OpforgeCode code = h->status_code(s);
  if (code == OPFORGE_OK) return ::tensorflow::Status();
  return ::tensorflow::Status(static_cast<::tensorflow::error::Code>(code),
                              to_string(h->status_message(s)));
}

/** A status owned by the layer for one host call. */
class HostStatus {
 public:
  HostStatus() : s_(host()->status_new()) {}
  ~HostStatus() { host()->status_delete(s_); }
  HostStatus(const HostStatus&) = delete;
  HostStatus& operator=(const HostStatus&) = delete;
  OpforgeStatus* get() { return s_; }
  ::tensorflow::Status status() const { return from_status(s_); }

 private:
  OpforgeStatus* s_;
};

/** Runs `f` (returning a Status) and reports its result, or an exception it
 *  threw, through `out`, as the host expects of a callback. */
template <typename F>
OpforgeCode guarded(OpforgeStatus* out, F&& f) noexcept {
  try {
    return set_status(out, f());
  } catch (const std::exception& e) {
    return opforge_guard_fail_(host(), out, e.what());
  } catch (...) {
    return opforge_guard_fail_(host(), out, "unknown exception");
  }
}

/** One registration replayed in init (REGISTER_OP, REGISTER_KERNEL_BUILDER,
 *  REGISTER_OP_GRADIENT run as static initializers, before any host). */
using Registration =
    std::function<::tensorflow::Status(const OpforgeHostApi*, OpforgeRegistrar*)>;

/** What a registration registers: init replays ops first, then kernels,
 *  then gradients, whatever order the library's files initialise in. */
enum RegistrationKind { kOps = 0, kKernels = 1, kGradients = 2 };

inline std::vector<std::pair<RegistrationKind, Registration>>& registrations() {
  static std::vector<std::pair<RegistrationKind, Registration>> q;
  return q;
}

/** Queues a registration. */
inline void enqueue(RegistrationKind kind, Registration r) {
  registrations().emplace_back(kind, std::move(r));
}

}  // namespace opforge_tf

#pragma GCC visibility pop

#define OPFORGE_TF_UNIQUE_(prefix, ctr) OPFORGE_CONCAT(prefix, ctr)

#define CHECK(cond) \
  if (cond) {       \
  } else            \
    ::opforge_tf::CheckMessage(__FILE__, __LINE__, #cond)
#define CHECK_EQ(a, b) CHECK((a) == (b))
#define CHECK_NE(a, b) CHECK((a) != (b))
#define CHECK_LT(a, b) CHECK((a) < (b))
#define CHECK_LE(a, b) CHECK((a) <= (b))
#define CHECK_GT(a, b) CHECK((a) > (b))
#define CHECK_GE(a, b) CHECK((a) >= (b))
#define TF_CHECK_OK(expr) CHECK((expr).ok())
#ifdef NDEBUG
#define DCHECK(cond) \
  while (false) CHECK(cond)
#else
#define DCHECK(cond) CHECK(cond)
#endif
#define DCHECK_EQ(a, b) DCHECK((a) == (b))
#define DCHECK_NE(a, b) DCHECK((a) != (b))
#define DCHECK_LT(a, b) DCHECK((a) < (b))
#define DCHECK_LE(a, b) DCHECK((a) <= (b))
#define DCHECK_GT(a, b) DCHECK((a) > (b))
#define DCHECK_GE(a, b) DCHECK((a) >= (b))
#define TF_DCHECK_OK(expr) DCHECK((expr).ok())

#define OPFORGE_TF_LOG_INFO ::opforge_tf::LogMessage(OPFORGE_LOG_INFO)
#define OPFORGE_TF_LOG_WARNING ::opforge_tf::LogMessage(OPFORGE_LOG_WARNING)
#define OPFORGE_TF_LOG_ERROR ::opforge_tf::LogMessage(OPFORGE_LOG_ERROR)
#define OPFORGE_TF_LOG_FATAL \
  ::opforge_tf::CheckMessage(__FILE__, __LINE__, "LOG(FATAL)")
#define LOG(severity) OPFORGE_TF_LOG_##severity
#define VLOG(level) \
  while (false) ::opforge_tf::LogMessage(OPFORGE_LOG_DEBUG)

/* ------------------------------------------------------------------ */
/* The library record and the init entry point, once per library       */
/* ------------------------------------------------------------------ */

#ifndef OPFORGE_LIBRARY_VERSION
/** The library's version (define it on the command line to set it). */
#define OPFORGE_LIBRARY_VERSION "0.0.0"
#endif

#ifdef OPFORGE_LIBRARY_NAME
#define OPFORGE_TF_NAME_JSON_ "\"name\":\"" OPFORGE_LIBRARY_NAME "\","
#else
/* An empty name: the host names the library after its file
 * (libzero_out.so is zero_out) when it loads or seals it. */
#define OPFORGE_TF_NAME_JSON_ "\"name\":\"\","
#endif

#define OPFORGE_TF_LIBRARY_JSON_                                                 \
  "{\"kind\":\"library\"," OPFORGE_TF_NAME_JSON_ "\"version\":\"" OPFORGE_LIBRARY_VERSION \
  "\",\"abi\":{\"major\":" OPFORGE_XSTR(OPFORGE_ABI_MAJOR) ",\"minor\":" OPFORGE_XSTR(  \
      OPFORGE_ABI_MINOR) ",\"min_host_minor\":" OPFORGE_XSTR(OPFORGE_MIN_HOST_MINOR)    \
  ",\"layout_hash\":\"" OPFORGE_LAYOUT_HASH_STR                                       \
  "\"},\"sdk\":{\"lang\":\"c++\",\"layer\":\"tensorflow\"}}"

#pragma GCC visibility push(hidden)

namespace opforge_tf {

/** A manifest record of a JSON literal of `N` bytes (with its NUL). */
template <size_t N>
struct ManifestRecord {
  OpforgeManifestHeader header;
  char json[(N + 7) / 8 * 8];
};

/** The library record: an inline variable, so that a library built from
 *  several files that include the layer holds it exactly once (the linker
 *  keeps one copy of its COMDAT group). */
OPFORGE_MANIFEST_SECTION_ATTR_ OPFORGE_RETAIN_ inline const ManifestRecord<sizeof(
    OPFORGE_TF_LIBRARY_JSON_)>
    library_record = {{{'O', 'P', 'F', 'M'},
                       {OPFORGE_LE32_(OPFORGE_MANIFEST_FORMAT)},
                       {OPFORGE_LE32_(sizeof(OPFORGE_TF_LIBRARY_JSON_) - 1)},
                       {0, 0, 0, 0}},
                      OPFORGE_TF_LIBRARY_JSON_};

}  // namespace opforge_tf

#pragma GCC visibility pop

/* The exported anchor (see opforge.h): a weak definition in each file, of
 * which the linker keeps one (an inline variable of default visibility
 * would be an STB_GNU_UNIQUE symbol). */
extern "C" {
OPFORGE_EXPORT OPFORGE_RETAIN_ __attribute__((weak)) extern const void* const
    opforge_manifest_anchor_v1 = &::opforge_tf::library_record;

/** The library's init: replays every queued registration. */
OPFORGE_EXPORT __attribute__((used)) inline OpforgeCode opforge_plugin_init_v1(
    const OpforgeHostApi* host, OpforgeRegistrar* registrar, OpforgeStatus* status) {
  ::opforge_tf::host_slot() = host;
  return ::opforge_tf::guarded(status, [&]() -> ::tensorflow::Status {
    for (int kind = ::opforge_tf::kOps; kind <= ::opforge_tf::kGradients; ++kind) {
      for (auto& r : ::opforge_tf::registrations()) {
        if (r.first != kind) continue;
        ::tensorflow::Status s = r.second(host, registrar);
        if (!s.ok()) return s;
      }
    }
    return ::tensorflow::Status();
  });
}
}

#endif /* OPFORGE_TF_BASE_H_ */
