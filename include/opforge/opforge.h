/*
 * opforge/opforge.h -- the opforge op-library C ABI, version 1.1.
 *
 * This header is normative: it IS the ABI. The Rust crate `opforge-abi`
 * mirrors it field for field (same order, same names), and a test
 * (crates/opforge-abi/tests/layout.rs) compiles this file with the system C
 * compiler and compares every size, alignment, offset and constant with the
 * Rust side. A frozen copy of every released minor is kept under
 * crates/opforge-abi/tests/frozen/ (1.0: tests/frozen/1.0/opforge/opforge.h).
 * The versioning rules are in crates/opforge-abi/README.md.
 *
 * What each minor added (everything else is 1.0):
 *   1.1  the views compute entry of a kernel: OpforgeKernelDef.compute_views
 *        (OpforgeKernelComputeViewsFn, OpforgeKernelViews) and its output
 *        declarations OpforgeKernelDef.output_like (OpforgeOutputLike,
 *        OPFORGE_OUTPUT_FORWARD). The host makes every input's view, and
 *        sets every declared output, before it calls the kernel, so an
 *        elementwise kernel makes no host call at all. See "Registration:
 *        kernels".
 *
 * An op library ("plugin") is a shared library that exports
 *   opforge_plugin_init_v1   (required)  and
 *   opforge_plugin_fini_v1   (optional),
 * carries a manifest in the section `opforge_manifest` (OPFORGE_LIBRARY
 * below; read by the host WITHOUT loading the library), and imports no
 * symbol of opforge: everything it calls, it calls through the tables of
 * function pointers the host hands to init (OpforgeHostApi and its
 * sub-tables). It can be written in C99, C++11 or later, Rust (through the
 * `opforge-plugin` SDK) or any language that speaks the C calling
 * convention.
 *
 * ---------------------------------------------------------------------
 * THE RULES (every struct, function and constant below follows them)
 * ---------------------------------------------------------------------
 *
 * R1. struct_size first, append-only. Every struct except OpforgeStr and
 *     OpforgeManifestHeader starts with `size_t struct_size`, which the side
 *     that fills the struct sets to sizeof(struct) of the header it was
 *     compiled with. Fields are only ever appended, in a new minor version;
 *     none is removed, reordered, retyped or renamed within a major.
 *       - In-structs (filled by the plugin, read by the host: OpforgeOpDef,
 *         OpforgeKernelDef, ...): the host reads min(struct_size, its own
 *         sizeof); fields past the plugin's struct_size take their default,
 *         which is always the zero value and always means "as in 1.0". A
 *         struct_size below the struct's first size (its size in 1.0, or
 *         in the minor that introduced it) is INVALID_ARGUMENT.
 *       - Out-structs (filled by the callee into memory the caller owns:
 *         OpforgeTensor views, OpforgeAttrValue): the CALLER sets
 *         struct_size, and the callee writes only the fields that fit.
 *       - Tables (OpforgeHostApi and its sub-tables): the host sets
 *         struct_size; a plugin checks a slot with OPFORGE_HAS_SLOT before
 *         calling it (a table from an older host is shorter).
 *       - Arrays of structs are read with the stride of their first
 *         element's struct_size (every element must carry the same value):
 *         use OPFORGE_ARRAY_AT to index an array the host gives you.
 *     Zero is the default of every appended field, so a plugin that zeroes
 *     a struct (memset, `= {0}`) before filling it stays correct when it is
 *     rebuilt against a newer header.
 *
 * R2. Fixed-width integers. Counts, sizes and indices are size_t; dims,
 *     strides and element counts are int64_t; booleans are uint8_t (0 or 1);
 *     no bitfields; no long, no enum types; alignment is at most 8. The 1.0
 *     ABI is defined for 64-bit targets only (size_t and pointers of 8
 *     bytes); this header refuses to compile elsewhere.
 *
 * R3. Enums cross as integers: OpforgeCode and OpforgeDType are int32_t, every
 *     other enumeration (attr kinds, flags, requests, sources, ...) is a
 *     uint32_t field with OPFORGE_* constants. A value unknown to the
 *     receiver survives the crossing as its integer: the receiver never
 *     converts it to a narrower type or assumes it is one of the constants
 *     it knows. Where it must interpret it, it answers INVALID_ARGUMENT (a
 *     value never defined) or UNIMPLEMENTED (a value of a newer minor), with
 *     the integer in the message. Unknown bits in a flags field are
 *     UNIMPLEMENTED. An unknown code returned by a callback is reported as
 *     UNKNOWN with the integer in the message.
 *
 * R4. Dtypes are TensorFlow's DataType numbers (OPFORGE_DT_FLOAT = 1, ...),
 *     without the *_REF types; codes are TensorFlow's canonical codes 0..16
 *     (OPFORGE_OK = 0, OPFORGE_CANCELLED = 1, ..., OPFORGE_UNAUTHENTICATED =
 *     16).
 *
 * R5. Strings are OpforgeStr {ptr, len}: not NUL-terminated, ptr may be NULL
 *     when len is 0. Names, specs, docs and messages are UTF-8; attr strings
 *     and string-tensor elements are bytes (they may hold NUL). The host
 *     COPIES every string and array it is given before the call returns, so
 *     the plugin may pass stack memory.
 *
 * R6. Whoever allocates memory frees it. No allocator crosses the boundary:
 *     the plugin never frees what the host returned, and the host never frees
 *     the plugin's memory except by calling the plugin's own release
 *     callback (OpforgeForeignTensor). Statuses the plugin creates with
 *     status_new are freed with status_delete.
 *
 * R7. Lifetimes of what the host lends (never free it, never keep it longer):
 *       - OpforgeHostApi and its sub-tables: from init until fini returns
 *         (keep the pointer in a global). Each library gets its own
 *         OpforgeHostApi (the sub-tables may be shared), and functions that
 *         act for the library rather than for a context (log) take it as
 *         their first argument: pass the pointer init received.
 *       - OpforgeRegistrar: during init only (later calls answer
 *         FAILED_PRECONDITION).
 *       - OpforgeKernelInit: during create only; BUT the attr values read
 *         from it (init_attr: strings, lists, shapes, tensors, funcs) stay
 *         valid until destroy of the kernel instance returns, so a kernel may
 *         keep pointers into them in its state.
 *       - OpforgeKernelCtx, OpforgeShapeCtx, OpforgeGradCtx, OpforgeStatus
 *         passed to a callback, and everything read through them (views,
 *         dims, strides, attr values, names, handles): until the callback
 *         returns. Exception: the view of an input dies when that input is
 *         forwarded or moved to an output (forward_input_or_allocate_output,
 *         set_output_from_input); use the output's view from then on.
 *       - Handles (OpforgeShape, OpforgeDim, OpforgeSym): values of one
 *         context; a handle of another context, of an earlier call, or
 *         forged, is rejected with INVALID_ARGUMENT (never a crash).
 *       - Strings returned by value (OpforgeStr, e.g. status_message,
 *         node_name): as the object they describe.
 *     What the plugin lends: user pointers given at registration must stay
 *     valid until fini; kernel state from create until destroy; foreign
 *     output memory until its release callback runs (possibly after the
 *     compute returned, on any thread, but always before fini).
 *
 * R8. Errors. Every fallible function returns OpforgeCode and takes an
 *     OpforgeStatus*: on failure it returns the code and writes the message
 *     into the status. Callbacks do the same: the code a callback returns is
 *     authoritative; the status (set with host->set_status, which copies the
 *     message) carries the message. A failing callback that set no message
 *     gets a generic one naming the library and the callback. The host adds
 *     " [library NAME VERSION]" and the op or node to every message.
 *     Functions that cannot fail, or whose failure is a value (a -1 rank, a
 *     NULL extension, OPFORGE_NO_HANDLE, a 0 flag), take no status.
 *
 * R9. Threads. Host functions may be called from any thread, except that a
 *     context (kernel, shape, gradient, init) belongs to the thread of the
 *     callback it was passed to; work functions of parallel_for must not
 *     call kernel-context functions (they read views obtained before). A
 *     kernel's compute may run concurrently on one state unless the kernel
 *     is registered with OPFORGE_KERNEL_NOT_THREAD_SAFE.
 *
 * R10. No unwinding across the boundary. A C++ exception or Rust panic that
 *      leaves a callback terminates the process: catch it (OPFORGE_GUARD
 *      below for C++; the Rust SDK catches panics) and return
 *      OPFORGE_INTERNAL. Host functions never unwind into plugin frames.
 *
 * ---------------------------------------------------------------------
 * VERSION NEGOTIATION (the host refuses what it cannot serve, before
 * running any code of the library)
 * ---------------------------------------------------------------------
 *  1. Manifest: the host reads the library record (OPFORGE_LIBRARY) from the
 *     file, without loading it: abi.major must equal the host's major,
 *     abi.min_host_minor must be <= abi.minor and <= the host's minor, and,
 *     when abi.minor <= the host's minor, abi.layout_hash must be the hash
 *     the host has pinned for (major, abi.minor). (A library built against
 *     a NEWER minor than the host's, with a low enough min_host_minor, is
 *     accepted without a hash check: the host cannot know a later minor's
 *     hash, and R1 makes the newer structs extensions of the host's.)
 *     Otherwise the library is refused with FAILED_PRECONDITION naming both
 *     versions and the remedy. `opforge_abi::negotiate` is the reference.
 *  2. Symbol: the host calls opforge_plugin_init_v<major>.
 *  3. Table: the plugin checks host->abi_major and, before using any slot
 *     newer than its min_host_minor, OPFORGE_HAS_SLOT; a slot the host does
 *     not have is UNIMPLEMENTED at its use (the SDK does this for you).
 *  In-structs go the other way: a host older than a field ignores it (R1).
 *  A library that cannot work without a field of minor m (a kernel with
 *  compute_views but no compute, 1.1) declares min_host_minor >= m; a host
 *  of minor >= m refuses such a registration from a library declaring less.
 */
#ifndef OPFORGE_OPFORGE_H_
#define OPFORGE_OPFORGE_H_

#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* ------------------------------------------------------------------ */
/* Versions                                                            */
/* ------------------------------------------------------------------ */

/** The ABI major this header defines: a library and a host of different
 *  majors never load each other. Also the suffix of the entry points. */
#define OPFORGE_ABI_MAJOR 1
/** The ABI minor this header defines: what a library built with it has
 *  available (the library record's `abi.minor`). */
#define OPFORGE_ABI_MINOR 1

/** The layout hash of this header: FNV-1a 64 (offset basis
 *  0xcbf29ce484222325, prime 0x100000001b3) over every struct of this
 *  header in header order, each as its name, a 0 byte, then sizeof,
 *  alignment and number of fields as 8 little-endian bytes each, then per
 *  field its name, a 0 byte, offsetof and sizeof as 8 little-endian bytes
 *  each (`opforge_abi::layout::hash_structs`). Pinned per minor
 *  (`opforge_abi::KNOWN_LAYOUTS`); it goes into the library record, and a
 *  host refuses a library of a minor it knows whose hash differs (a header
 *  edited by hand, or a compiler that lays the structs out differently). */
#define OPFORGE_LAYOUT_HASH 0xd369ae65736de423ULL
/** OPFORGE_LAYOUT_HASH as the 16 lower-case hex digits of the manifest. */
#define OPFORGE_LAYOUT_HASH_STR "d369ae65736de423"

#ifndef OPFORGE_MIN_HOST_MINOR
/** The lowest host minor this library needs (the library record's
 *  `abi.min_host_minor`). Defaults to the minor of this header, which is
 *  always safe. Define it lower (as a plain decimal literal, before
 *  including this header) only if the library checks every slot newer than
 *  that minor with OPFORGE_HAS_SLOT before calling it. */
#define OPFORGE_MIN_HOST_MINOR OPFORGE_ABI_MINOR
#endif

/* ------------------------------------------------------------------ */
/* Platform                                                            */
/* ------------------------------------------------------------------ */

#if defined(_WIN32) || defined(__CYGWIN__)
#define OPFORGE_EXPORT __declspec(dllexport)
#elif defined(__GNUC__) || defined(__clang__)
#define OPFORGE_EXPORT __attribute__((visibility("default")))
#else
#define OPFORGE_EXPORT
#endif

#define OPFORGE_STRINGIFY_(x) #x
/** The decimal text of a macro's value: OPFORGE_XSTR(OPFORGE_ABI_MAJOR) is "1". */
#define OPFORGE_XSTR(x) OPFORGE_STRINGIFY_(x)
#define OPFORGE_CONCAT_(a, b) a##b
/** Token pasting after expansion. */
#define OPFORGE_CONCAT(a, b) OPFORGE_CONCAT_(a, b)

#ifdef __cplusplus
extern "C" {
#endif

/* R2: the 1.0 ABI is defined for 64-bit targets (LP64 and LLP64). */
typedef char opforge_abi_requires_a_64_bit_target_
    [(sizeof(void*) == 8 && sizeof(size_t) == 8) ? 1 : -1];

/* ------------------------------------------------------------------ */
/* Codes                                                               */
/* ------------------------------------------------------------------ */

/** A status code: 0 = OK, 1..16 = TensorFlow's canonical codes (R3, R4). */
typedef int32_t OpforgeCode;

#define OPFORGE_OK 0
#define OPFORGE_CANCELLED 1
#define OPFORGE_UNKNOWN 2
#define OPFORGE_INVALID_ARGUMENT 3
#define OPFORGE_DEADLINE_EXCEEDED 4
#define OPFORGE_NOT_FOUND 5
#define OPFORGE_ALREADY_EXISTS 6
#define OPFORGE_PERMISSION_DENIED 7
#define OPFORGE_RESOURCE_EXHAUSTED 8
#define OPFORGE_FAILED_PRECONDITION 9
#define OPFORGE_ABORTED 10
#define OPFORGE_OUT_OF_RANGE 11
#define OPFORGE_UNIMPLEMENTED 12
#define OPFORGE_INTERNAL 13
#define OPFORGE_UNAVAILABLE 14
#define OPFORGE_DATA_LOSS 15
#define OPFORGE_UNAUTHENTICATED 16

/* ------------------------------------------------------------------ */
/* Dtypes                                                              */
/* ------------------------------------------------------------------ */

/** A tensor element type: TensorFlow's DataType number (R4). Element layout
 *  in a dense buffer: the C type of that width; BOOL one byte 0/1; HALF and
 *  BFLOAT16 two bytes; COMPLEX64/128 (real, imag) pairs; the 8-, 4- and 2-bit
 *  types one byte per element; STRING one OpforgeStr per element (bytes, see
 *  OpforgeTensor). RESOURCE and VARIANT tensors are not readable through the
 *  1.0 ABI (UNIMPLEMENTED). */
typedef int32_t OpforgeDType;

#define OPFORGE_DT_INVALID 0
#define OPFORGE_DT_FLOAT 1
#define OPFORGE_DT_DOUBLE 2
#define OPFORGE_DT_INT32 3
#define OPFORGE_DT_UINT8 4
#define OPFORGE_DT_INT16 5
#define OPFORGE_DT_INT8 6
#define OPFORGE_DT_STRING 7
#define OPFORGE_DT_COMPLEX64 8
#define OPFORGE_DT_INT64 9
#define OPFORGE_DT_BOOL 10
#define OPFORGE_DT_QINT8 11
#define OPFORGE_DT_QUINT8 12
#define OPFORGE_DT_QINT32 13
#define OPFORGE_DT_BFLOAT16 14
#define OPFORGE_DT_QINT16 15
#define OPFORGE_DT_QUINT16 16
#define OPFORGE_DT_UINT16 17
#define OPFORGE_DT_COMPLEX128 18
#define OPFORGE_DT_HALF 19
#define OPFORGE_DT_RESOURCE 20
#define OPFORGE_DT_VARIANT 21
#define OPFORGE_DT_UINT32 22
#define OPFORGE_DT_UINT64 23
#define OPFORGE_DT_FLOAT8_E5M2 24
#define OPFORGE_DT_FLOAT8_E4M3FN 25
#define OPFORGE_DT_FLOAT8_E4M3FNUZ 26
#define OPFORGE_DT_FLOAT8_E4M3B11FNUZ 27
#define OPFORGE_DT_FLOAT8_E5M2FNUZ 28
#define OPFORGE_DT_INT4 29
#define OPFORGE_DT_UINT4 30
#define OPFORGE_DT_INT2 31
#define OPFORGE_DT_UINT2 32
#define OPFORGE_DT_FLOAT4_E2M1FN 33

/* ------------------------------------------------------------------ */
/* Handles, sentinels                                                  */
/* ------------------------------------------------------------------ */

/** A shape in a shape-inference context (TensorFlow's ShapeHandle). Handles
 *  are opaque 64-bit values of one context (R7): compare them with == for
 *  identity (merge keeps identity, as in TensorFlow), never do arithmetic on
 *  them. OPFORGE_NO_HANDLE is never a valid handle. */
typedef uint64_t OpforgeShape;
/** A dimension in a shape-inference context (TensorFlow's DimensionHandle). */
typedef uint64_t OpforgeDim;
/** A value (graph output or eager tensor) in a gradient context. */
typedef uint64_t OpforgeSym;

/** The invalid handle: returned where no handle can be produced (an index
 *  out of range), rejected with INVALID_ARGUMENT where one is required. */
#define OPFORGE_NO_HANDLE 0
/** A rank or dim that is not known (shape inference, attr shapes). */
#define OPFORGE_UNKNOWN_RANK (-1)
#define OPFORGE_UNKNOWN_DIM (-1)
/** subshape: `end` meaning "to the end of the shape" (INT64_MAX). */
#define OPFORGE_TO_END 0x7fffffffffffffff
/** forward_input_or_allocate_output: no input was forwarded. */
#define OPFORGE_NOT_FORWARDED (-1)

/* ------------------------------------------------------------------ */
/* Strings                                                             */
/* ------------------------------------------------------------------ */

/** A string: pointer + length, not NUL-terminated (R5). */
typedef struct OpforgeStr {
  const char* ptr;
  size_t len;
} OpforgeStr;

/** An initializer for an OpforgeStr from a string literal, usable in C and
 *  C++ aggregate initializers: `OpforgeStr s = OPFORGE_STR_LIT("T");`. */
#define OPFORGE_STR_LIT(literal) { (literal), sizeof(literal) - 1 }

/** An OpforgeStr over a NUL-terminated string (NULL gives the empty string). */
static inline OpforgeStr opforge_str(const char* s) {
  OpforgeStr r;
  r.ptr = s;
  r.len = s ? strlen(s) : 0;
  return r;
}

/* ------------------------------------------------------------------ */
/* Struct sizes and slots (R1)                                         */
/* ------------------------------------------------------------------ */

/** Whether the struct at `ptr` (of any struct type of this header that
 *  starts with struct_size, as a pointer) is long enough to hold `field`:
 *  the field ends within the struct_size the struct carries. Evaluates
 *  `ptr` more than once. */
#define OPFORGE_HAS_FIELD(ptr, field)                                    \
  ((ptr) != NULL &&                                                      \
   (size_t)((const char*)&(ptr)->field - (const char*)(ptr)) +           \
           sizeof((ptr)->field) <=                                       \
       (ptr)->struct_size)

/** Whether a host table has the function slot `field` and it is set: check
 *  it before calling any slot newer than your OPFORGE_MIN_HOST_MINOR, and
 *  answer OPFORGE_UNIMPLEMENTED yourself when it is missing.
 *  Example: `if (!OPFORGE_HAS_SLOT(host->kernel, output_request)) ...` */
#define OPFORGE_HAS_SLOT(table, field) \
  (OPFORGE_HAS_FIELD(table, field) && (table)->field != NULL)

/** Element `i` of an array of structs of type `type` that starts at `base`,
 *  stepping by the first element's struct_size (R1). */
#define OPFORGE_ARRAY_AT(type, base, i)                                  \
  ((const type*)(const void*)((const char*)(base) +                      \
                              (size_t)(i) * ((const type*)(base))->struct_size))

/* ------------------------------------------------------------------ */
/* Opaque host objects                                                 */
/* ------------------------------------------------------------------ */

/** A status: a code and a message, written by host->set_status. */
typedef struct OpforgeStatus OpforgeStatus;
/** Where init registers the library's ops, kernels and gradients (init only). */
typedef struct OpforgeRegistrar OpforgeRegistrar;
/** What a kernel's create reads: attrs, dtypes, names (create only). */
typedef struct OpforgeKernelInit OpforgeKernelInit;
/** One run of a kernel: inputs, outputs, temporaries, threads. */
typedef struct OpforgeKernelCtx OpforgeKernelCtx;
/** One shape-function call (TensorFlow's InferenceContext). */
typedef struct OpforgeShapeCtx OpforgeShapeCtx;
/** One gradient-function call: the forward op and the graph builder. */
typedef struct OpforgeGradCtx OpforgeGradCtx;

/* ------------------------------------------------------------------ */
/* Values                                                              */
/* ------------------------------------------------------------------ */

/** OpforgeTensor.flags: the view's data may be written. */
#define OPFORGE_TENSOR_WRITABLE 1
/** OpforgeTensor.flags: dense row-major, strides are the row-major ones. */
#define OPFORGE_TENSOR_CONTIGUOUS 2
/** OpforgeTensor.flags: data is host memory the CPU may read (always set by
 *  1.0 hosts; a later minor may hand device memory to device kernels). */
#define OPFORGE_TENSOR_HOST_MEMORY 4

/** A borrowed view of a tensor (an out-struct: the caller sets struct_size).
 *
 *  Made by the host (inputs, outputs, temporaries, constant inputs of shape
 *  functions, tensor attrs): dims and strides have `rank` entries (they may
 *  be NULL when rank is 0) and live as the view (R7); data is aligned to at
 *  least its element size, and memory from allocate_output/allocate_temp to
 *  64 bytes. Element (i0, ..., ik) is at data + sum(i_j * strides[j]) *
 *  element size. 1.0 hosts always give CONTIGUOUS views.
 *  DT_STRING views: data points to num_elements OpforgeStr (the elements'
 *  bytes), read-only, living as the view; byte_len is num_elements *
 *  sizeof(OpforgeStr). String outputs are set with set_output_strings.
 *
 *  Made by the plugin (a constant for a gradient): strides NULL means
 *  row-major; for DT_STRING, data points to num_elements OpforgeStr. */
typedef struct OpforgeTensor {
  size_t struct_size;
  OpforgeDType dtype;
  uint32_t rank;
  /** `rank` sizes. */
  const int64_t* dims;
  /** `rank` strides, in ELEMENTS (not bytes). */
  const int64_t* strides;
  /** The first element. Writable only with OPFORGE_TENSOR_WRITABLE. */
  void* data;
  /** Bytes from data to one past the last element. */
  uint64_t byte_len;
  /** The product of dims (1 for a scalar). */
  int64_t num_elements;
  /** OPFORGE_TENSOR_* bits. */
  uint32_t flags;
} OpforgeTensor;

/** A shape as a value (shape attrs): rank OPFORGE_UNKNOWN_RANK = unknown
 *  rank; a dim OPFORGE_UNKNOWN_DIM = unknown size. */
typedef struct OpforgeShapeValue {
  size_t struct_size;
  int32_t rank;
  /** `rank` dims (NULL when rank <= 0). */
  const int64_t* dims;
} OpforgeShapeValue;

/* OpforgeAttrValue.kind: one of these, possibly with OPFORGE_ATTR_LIST. */
#define OPFORGE_ATTR_NONE 0
/** `int`: field i. */
#define OPFORGE_ATTR_INT 1
/** `float`: field f. */
#define OPFORGE_ATTR_FLOAT 2
/** `bool`: field b. */
#define OPFORGE_ATTR_BOOL 3
/** `type`: field type. */
#define OPFORGE_ATTR_TYPE 4
/** `string`: field s (bytes). */
#define OPFORGE_ATTR_STRING 5
/** `shape`: field shape. */
#define OPFORGE_ATTR_SHAPE 6
/** `tensor`: field tensor (read-only view). */
#define OPFORGE_ATTR_TENSOR 7
/** `func`: field func (a function name with attrs bound to it). */
#define OPFORGE_ATTR_FUNC 8
/** A reference to an attr of the forward op, by name in field s
 *  (TensorFlow's `$T` in function bodies). Only in the attrs of a
 *  declarative gradient's nodes (OpforgeGradNode). */
#define OPFORGE_ATTR_PLACEHOLDER 9
/** Flag: a list. `list` points at `list_len` elements of the element kind
 *  (kind & OPFORGE_ATTR_KIND_MASK): int64_t (INT), float (FLOAT), uint8_t
 *  (BOOL), OpforgeDType (TYPE), OpforgeStr (STRING), OpforgeShapeValue
 *  (SHAPE), OpforgeTensor (TENSOR), OpforgeFuncValue (FUNC); arrays of
 *  structs step by struct_size (OPFORGE_ARRAY_AT). The host gives an empty
 *  list attr the element kind of its OpDef type. */
#define OPFORGE_ATTR_LIST 0x100
/** The element kind of an OpforgeAttrValue.kind. */
#define OPFORGE_ATTR_KIND_MASK 0xff

struct OpforgeNamedAttr;

/** A `func` attr value (TensorFlow's NameAttrList). */
typedef struct OpforgeFuncValue {
  size_t struct_size;
  /** The function's name. */
  OpforgeStr name;
  /** Its attrs. */
  const struct OpforgeNamedAttr* attrs;
  size_t num_attrs;
} OpforgeFuncValue;

/** An attr value of any type: a tagged record whose `kind` says which field
 *  holds the value (the other fields are zero). Filled by the host (kernel,
 *  shape and gradient attrs: an out-struct, the caller sets struct_size) or
 *  by the plugin (attrs of gradient calls and declarative gradient nodes).
 *  Everything it points to lives as the value (R7). */
typedef struct OpforgeAttrValue {
  size_t struct_size;
  /** OPFORGE_ATTR_* (| OPFORGE_ATTR_LIST). */
  uint32_t kind;
  /** TYPE. */
  OpforgeDType type;
  /** INT. */
  int64_t i;
  /** FLOAT. */
  float f;
  /** BOOL (0 or 1). */
  uint8_t b;
  /** STRING (bytes); PLACEHOLDER (the forward op's attr name). */
  OpforgeStr s;
  /** SHAPE. */
  const OpforgeShapeValue* shape;
  /** TENSOR. */
  const OpforgeTensor* tensor;
  /** FUNC. */
  const OpforgeFuncValue* func;
  /** LIST: the elements (see OPFORGE_ATTR_LIST). */
  const void* list;
  size_t list_len;
} OpforgeAttrValue;

/** An attr by name. */
typedef struct OpforgeNamedAttr {
  size_t struct_size;
  OpforgeStr name;
  const OpforgeAttrValue* value;
} OpforgeNamedAttr;

/* ------------------------------------------------------------------ */
/* Callbacks the plugin gives the host                                 */
/* ------------------------------------------------------------------ */

/** Makes a kernel instance for one node (or eager call signature): reads
 *  attrs and dtypes from `init` (valid during this call), validates them
 *  (a failure fails the node's construction, as TensorFlow's constructor
 *  errors do), and stores its state in *state (may stay NULL). `user` is
 *  OpforgeKernelDef.user. */
typedef OpforgeCode (*OpforgeKernelCreateFn)(const OpforgeKernelInit* init,
                                             void* user, void** state,
                                             OpforgeStatus* status);
/** Runs the kernel once. Concurrent calls on one state are possible unless
 *  the kernel is OPFORGE_KERNEL_NOT_THREAD_SAFE (R9). */
typedef OpforgeCode (*OpforgeKernelComputeFn)(void* state,
                                              OpforgeKernelCtx* ctx,
                                              OpforgeStatus* status);
/** Frees a kernel instance's state; called once, after its last compute. */
typedef void (*OpforgeKernelDestroyFn)(void* state, void* user);
/** A shape function: reads input shapes, sets every output's shape. */
typedef OpforgeCode (*OpforgeShapeFn)(OpforgeShapeCtx* ctx, void* user,
                                      OpforgeStatus* status);
/** A gradient function over the host's graph builder: reads the forward op
 *  and its output gradients from `ctx`, calls registered ops through
 *  host->grad->call, and sets each input's gradient. */
typedef OpforgeCode (*OpforgeGradFn)(OpforgeGradCtx* ctx, void* user,
                                     OpforgeStatus* status);
/** One shard of a parallel_for: units [begin, end). Each shard has its own
 *  status; the first failing shard's code and message win. */
typedef OpforgeCode (*OpforgeWorkFn)(uint64_t begin, uint64_t end, void* user,
                                     OpforgeStatus* status);
/** Releases plugin memory that backed an output (OpforgeForeignTensor):
 *  called exactly once, on any thread, when the last tensor using it is
 *  gone, always before fini. */
typedef void (*OpforgeReleaseFn)(void* data, void* user);

/* ------------------------------------------------------------------ */
/* Registration: ops                                                   */
/* ------------------------------------------------------------------ */

/** OpforgeOpDef.flags (TensorFlow's OpDef booleans). */
#define OPFORGE_OP_STATEFUL 1
#define OPFORGE_OP_COMMUTATIVE 2
#define OPFORGE_OP_AGGREGATE 4
#define OPFORGE_OP_ALLOWS_UNINITIALIZED_INPUT 8
#define OPFORGE_OP_DISTRIBUTED_COMMUNICATION 16

/** An op, in the spec language of REGISTER_OP / register_op!:
 *    attrs   "T: {float, double, int32} = DT_INT32", "preserve_index: int = 0"
 *    inputs  "to_zero: T", "values: N * T", "ref: Ref(T)"
 *    outputs "zeroed: T"
 *  The host builds the OpDef with the same builder as register_op!, so the
 *  parsing, validation and error texts are opforge's own. */
typedef struct OpforgeOpDef {
  size_t struct_size;
  OpforgeStr name;
  const OpforgeStr* attrs;
  size_t num_attrs;
  const OpforgeStr* inputs;
  size_t num_inputs;
  const OpforgeStr* outputs;
  size_t num_outputs;
  /** Names of control outputs (rare). */
  const OpforgeStr* control_outputs;
  size_t num_control_outputs;
  /** OPFORGE_OP_* bits. */
  uint32_t flags;
  /** The GraphDef version that deprecated the op; 0: not deprecated. */
  int32_t deprecation_version;
  /** Why, and what to use instead (with deprecation_version). */
  OpforgeStr deprecation_explanation;
  /** The documentation, in REGISTER_OP's .Doc() format: a summary line, a
   *  blank line, the description, then `arg: text` lines per argument. */
  OpforgeStr doc;
  /** The op's shape function (TensorFlow's SetShapeFn); NULL: outputs of
   *  unknown shape. */
  OpforgeShapeFn shape_fn;
  void* shape_fn_user;
} OpforgeOpDef;

/* ------------------------------------------------------------------ */
/* Registration: kernels                                               */
/* ------------------------------------------------------------------ */

/** The kernel's compute is not thread-safe: the host serialises computes of
 *  one instance. */
#define OPFORGE_KERNEL_NOT_THREAD_SAFE 1
/** parallel_for runs shards whose waiting thread runs nothing else
 *  (ThreadPool::shard_isolated): for kernels that shard while holding a lock
 *  another kernel may take. */
#define OPFORGE_KERNEL_PARALLEL_ISOLATED 2
/** The kernel handles every output request (output_request: NULL, WRITE,
 *  INPLACE, ADD). Without it the host asks only for WRITE. 1.0 hosts always
 *  ask for WRITE. */
#define OPFORGE_KERNEL_OUTPUT_REQUESTS 4

/** The dtypes a kernel accepts for one `type` or `list(type)` attr. */
typedef struct OpforgeTypeConstraint {
  size_t struct_size;
  OpforgeStr attr;
  const OpforgeDType* types;
  size_t num_types;
} OpforgeTypeConstraint;

/* --- 1.1: the views compute entry ---------------------------------
 *
 * A 1.0 kernel's compute asks the host for everything: each input's view
 * (input), each output (allocate_output, forward_input_or_allocate_output),
 * each one a call through the kernel table. A 1.1 kernel may give
 * compute_views instead (or as well): the host calls it with a view of
 * every input already made, and with every output the kernel DECLARED
 * (output_like) already set, forwarded from its input or allocated, and its
 * writable view made. An elementwise kernel then makes no host call at all.
 * Everything else (undeclared outputs, temporaries, attrs, parallel_for,
 * strings) goes through the context functions as in 1.0, with the same ctx.
 *
 * Which entry runs: a 1.1 host calls compute_views when it is set, else
 * compute. A 1.0 host reads only the 1.0 prefix of OpforgeKernelDef (R1) and
 * calls compute. So:
 *   - a kernel with compute AND compute_views runs on every 1.x host (the
 *     library may keep min_host_minor 0; the two entries must compute the
 *     same thing, each in its own way);
 *   - a kernel with compute_views only (compute NULL) runs on 1.1+ hosts:
 *     its library MUST declare min_host_minor >= 1 (OPFORGE_MIN_HOST_MINOR,
 *     the default with this header), so that a 1.0 host refuses it before
 *     running any of its code (VERSION NEGOTIATION, step 1). A 1.1 host
 *     refuses such a kernel of a library declaring min_host_minor 0 at
 *     registration (FAILED_PRECONDITION).
 */

/** OpforgeOutputLike.flags: the host may give the output the input's own
 *  buffer (forward_input_or_allocate_output with the input as the only
 *  candidate: when the input has the output's dtype and is not shared);
 *  the kernel then computes in place. Without it the host allocates. (1.1) */
#define OPFORGE_OUTPUT_FORWARD 1

/** (1.1) One declaration of OpforgeKernelDef.output_like: flat output
 *  `output` has the dims of flat input `input` (and the output's own
 *  dtype). Before each compute_views call the host sets that output, as the
 *  kernel would with forward_input_or_allocate_output (OPFORGE_OUTPUT_FORWARD)
 *  or allocate_output, and passes its writable view in
 *  OpforgeKernelViews.outputs. The indices are checked against each node
 *  when its kernel instance is made (out of range, or a DT_STRING,
 *  RESOURCE or VARIANT output: the instance fails with INVALID_ARGUMENT). */
typedef struct OpforgeOutputLike {
  size_t struct_size;
  /** The flat output index (at most one declaration per output). */
  size_t output;
  /** The flat input index whose dims the output takes. */
  size_t input;
  /** OPFORGE_OUTPUT_* bits. */
  uint32_t flags;
} OpforgeOutputLike;

/** (1.1) What compute_views receives, made by the host for this call and
 *  valid until it returns (R7; host-filled: read fields past the 1.1 ones
 *  only if OPFORGE_HAS_FIELD says they are there).
 *
 *  inputs: one read-only view per flat input, in order, exactly what input()
 *  would give (step by inputs[0].struct_size: OPFORGE_ARRAY_AT). A view the
 *  host cannot lend (a RESOURCE or VARIANT tensor) has its dtype, rank and
 *  dims but NULL data, byte_len 0 and flags 0; input() says why.
 *
 *  outputs: one view per flat output, in order. A declared output
 *  (output_like) is set and its view is writable, exactly what output()
 *  would give. An undeclared output is not set yet: its view has the
 *  output's dtype, rank 0, NULL dims, strides and data, byte_len 0 and
 *  flags 0 (set it with the context functions and use the view they give;
 *  this array is not updated).
 *
 *  forwarded_from: one entry per flat output: the flat input whose buffer
 *  the output took (compute in place), or OPFORGE_NOT_FORWARDED. A
 *  forwarded input's entry in `inputs` still describes it, and its data IS
 *  the output's memory: it holds the input's values until the kernel writes
 *  the output (reading element k before writing element k is in-place
 *  elementwise computing). input() answers FAILED_PRECONDITION for it, as
 *  after forward_input_or_allocate_output in 1.0. */
typedef struct OpforgeKernelViews {
  size_t struct_size;
  const OpforgeTensor* inputs;
  size_t num_inputs;
  const OpforgeTensor* outputs;
  size_t num_outputs;
  const int64_t* forwarded_from;
} OpforgeKernelViews;

/** (1.1) Runs the kernel once, with its views made (OpforgeKernelViews).
 *  Everything OpforgeKernelComputeFn says holds: `ctx` is the same context
 *  (every context function works on it), concurrent calls and R9 alike. */
typedef OpforgeCode (*OpforgeKernelComputeViewsFn)(
    void* state, OpforgeKernelCtx* ctx, const OpforgeKernelViews* views,
    OpforgeStatus* status);

/** A kernel (TensorFlow's REGISTER_KERNEL_BUILDER): which op, device and
 *  dtypes it serves, and its callbacks. Selection is TensorFlow's (device,
 *  constraints, label, then the highest priority). */
typedef struct OpforgeKernelDef {
  size_t struct_size;
  /** The op (registered by this library, an earlier one, or built in). */
  OpforgeStr op;
  /** "CPU" (1.0 hosts answer UNIMPLEMENTED for other device types). */
  OpforgeStr device_type;
  const OpforgeTypeConstraint* constraints;
  size_t num_constraints;
  /** Input or output argument names kept in host memory (HostMemory). */
  const OpforgeStr* host_memory_args;
  size_t num_host_memory_args;
  /** The kernel label ("" for none; selected by the `_kernel` attr). */
  OpforgeStr label;
  /** Higher wins among matching kernels; 0 is the default. */
  int32_t priority;
  /** OPFORGE_KERNEL_* bits. */
  uint32_t flags;
  /** NULL: the state is `user` itself. */
  OpforgeKernelCreateFn create;
  /** Required in 1.0. From 1.1 it may be NULL when compute_views is set
   *  (the library's min_host_minor must then be >= 1; see above). */
  OpforgeKernelComputeFn compute;
  /** NULL: nothing to free. */
  OpforgeKernelDestroyFn destroy;
  /** Passed to create and destroy; valid until fini (R7). */
  void* user;
  /* --- 1.1 --- */
  /** The views entry; NULL: compute only (as in 1.0). A 1.1 host calls it
   *  instead of compute when it is set. (1.1) */
  OpforgeKernelComputeViewsFn compute_views;
  /** The outputs the host sets before compute_views runs, one declaration
   *  per output (step by output_like[0].struct_size; copied at
   *  registration). Only with compute_views (INVALID_ARGUMENT without). */
  const OpforgeOutputLike* output_like;
  size_t num_output_like;
} OpforgeKernelDef;

/* ------------------------------------------------------------------ */
/* Registration: declarative gradients (FunctionDef-style)             */
/* ------------------------------------------------------------------ */
/*
 * A gradient as data: a list of nodes over registered ops, evaluated by the
 * host at autodiff time with no plugin code (TensorFlow's
 * REGISTER_OP_GRADIENT / FunctionDef gradients map onto it). The host runs
 * each node through the same graph builder as a gradient callback (the tape
 * eagerly, GraphOps in graphs), so higher-order gradients work whenever the
 * nodes' ops are differentiable. Example, the gradient of y = Square(x)
 * (node positions on the left; x is the forward input `x`, dy the gradient
 * flowing into the output `y`, $T the forward op's attr T):
 *
 *   0: two_i = Const(value = scalar int32 tensor 2, dtype = int32)
 *   1: two   = Cast(two_i, SrcT = int32, DstT = $T)
 *   2: a     = Mul(x, two)
 *   3: dx    = Mul(dy, a)
 *   input_grads = [ {NODE 3, output "z"} ]
 */

/** OpforgeGradSource.kind: no value (only in input_grads: no gradient). */
#define OPFORGE_GRAD_SRC_NONE 0
/** An input of the forward op. */
#define OPFORGE_GRAD_SRC_INPUT 1
/** An output of the forward op. */
#define OPFORGE_GRAD_SRC_OUTPUT 2
/** The gradient flowing into an output of the forward op; where none flows,
 *  zeros of that output's shape and dtype (ZerosLike of it). */
#define OPFORGE_GRAD_SRC_OUTPUT_GRAD 3
/** An output of an earlier node of the list. */
#define OPFORGE_GRAD_SRC_NODE 4

/** OpforgeGradSource.index: the whole argument (a list argument as a list). */
#define OPFORGE_GRAD_WHOLE_ARG (-1)

/** Where a value comes from.
 *  - INPUT / OUTPUT / OUTPUT_GRAD: `arg` names an input (INPUT) or output
 *    argument of the forward op, and `index` is the element of a list
 *    argument or OPFORGE_GRAD_WHOLE_ARG (a single-tensor argument takes 0 or
 *    WHOLE_ARG); or `arg` is empty and `index` is a FLAT input/output index.
 *  - NODE: `node` is the position of an earlier node in the list (any node
 *    for input_grads); `arg` names an output argument of that node's op,
 *    with `index` as above, or is empty with `index` a flat output index.
 *  - NONE: `node`, `arg` and `index` are ignored. */
typedef struct OpforgeGradSource {
  size_t struct_size;
  /** OPFORGE_GRAD_SRC_*. */
  uint32_t kind;
  uint32_t node;
  OpforgeStr arg;
  int64_t index;
} OpforgeGradSource;

/** One argument: a single tensor (is_list 0: exactly one source that names
 *  one tensor) or a list (is_list 1: the sources' tensors in order, a
 *  WHOLE_ARG list source spliced in). In input_grads, zero sources mean "no
 *  gradient" for the whole argument. */
typedef struct OpforgeGradArg {
  size_t struct_size;
  const OpforgeGradSource* sources;
  size_t num_sources;
  uint8_t is_list;
} OpforgeGradArg;

/** One node: a call of a registered op. Attrs not given take the op's
 *  defaults, and type attrs are inferred from the inputs' dtypes, exactly as
 *  for host->grad->call; a value of kind OPFORGE_ATTR_PLACEHOLDER takes the
 *  forward op's attr of that name. */
typedef struct OpforgeGradNode {
  size_t struct_size;
  /** Optional: names the node in graphs and messages ("" for none). */
  OpforgeStr name;
  OpforgeStr op;
  /** One per input argument of `op`, in order. */
  const OpforgeGradArg* inputs;
  size_t num_inputs;
  const OpforgeNamedAttr* attrs;
  size_t num_attrs;
} OpforgeGradNode;

/** The gradient of `op` as a node list. */
typedef struct OpforgeGradientFunction {
  size_t struct_size;
  /** The forward op. */
  OpforgeStr op;
  const OpforgeGradNode* nodes;
  size_t num_nodes;
  /** One per input ARGUMENT of the forward op, in order: its gradient. */
  const OpforgeGradArg* input_grads;
  size_t num_input_grads;
} OpforgeGradientFunction;

/* ------------------------------------------------------------------ */
/* Kernel outputs from plugin memory, output requests                  */
/* ------------------------------------------------------------------ */

/** An output backed by memory the plugin allocated (set_output_foreign). On
 *  success the host owns it and calls release(data, release_user) exactly
 *  once when the last tensor sharing it is gone (R7); on failure the plugin
 *  still owns it. data must be aligned to the element size; 1.0 hosts
 *  require row-major memory (strides NULL or the row-major strides). */
typedef struct OpforgeForeignTensor {
  size_t struct_size;
  /** Must be the output's dtype (not DT_STRING). */
  OpforgeDType dtype;
  uint32_t rank;
  const int64_t* dims;
  /** In elements; NULL: row-major. */
  const int64_t* strides;
  void* data;
  uint64_t byte_len;
  OpforgeReleaseFn release;
  void* release_user;
} OpforgeForeignTensor;

/* What the host asks of an output (MXNet's OpReqType; output_request). */
/** The output is not needed: do not compute it, leave it unset. */
#define OPFORGE_REQ_NULL 0
/** Set the output (allocate, forward or set it) and write it: the only
 *  request of 1.0 hosts. */
#define OPFORGE_REQ_WRITE 1
/** The output is already bound to an input's memory (read its view with
 *  output()); write the result there. */
#define OPFORGE_REQ_INPLACE 2
/** The output is already bound and holds values (output()); add the result
 *  into it. */
#define OPFORGE_REQ_ADD 3

/* ------------------------------------------------------------------ */
/* Gradient callbacks: arguments of calls                              */
/* ------------------------------------------------------------------ */

/** One input argument of host->grad->call: a single value (is_list 0, one
 *  sym) or a list. */
typedef struct OpforgeSymArg {
  size_t struct_size;
  const OpforgeSym* syms;
  size_t num_syms;
  uint8_t is_list;
} OpforgeSymArg;

/* ------------------------------------------------------------------ */
/* Dim arithmetic, logging, statuses                                   */
/* ------------------------------------------------------------------ */

/** host->shape->dim_op: TensorFlow's Add, Subtract, Multiply, Divide (with
 *  evenly_divisible false / true), Min, Max on dims. */
#define OPFORGE_DIM_ADD 1
#define OPFORGE_DIM_SUB 2
#define OPFORGE_DIM_MUL 3
#define OPFORGE_DIM_DIV 4
#define OPFORGE_DIM_DIV_EXACT 5
#define OPFORGE_DIM_MIN 6
#define OPFORGE_DIM_MAX 7

/** host->log levels. */
#define OPFORGE_LOG_DEBUG 0
#define OPFORGE_LOG_INFO 1
#define OPFORGE_LOG_WARNING 2
#define OPFORGE_LOG_ERROR 3

/** Status flag: the error comes from a panic or exception the plugin caught
 *  (the host then evicts the kernel instance, which may be inconsistent). */
#define OPFORGE_STATUS_PANICKED 1

/* ------------------------------------------------------------------ */
/* Extensions                                                          */
/* ------------------------------------------------------------------ */

/** The start of every extension table host->extension returns: its
 *  struct_size (R1, as a host table) and its version (>= the min_version
 *  asked for). The table's own slots follow. */
typedef struct OpforgeExtensionHeader {
  size_t struct_size;
  uint32_t version;
} OpforgeExtensionHeader;

/* ------------------------------------------------------------------ */
/* The host tables                                                     */
/* ------------------------------------------------------------------ */

/** Registration (inside init only; R7). Everything given is copied. A
 *  registration the host refuses (a bad spec, an unknown op, a conflict)
 *  fails here, and a failed init leaves nothing registered. */
typedef struct OpforgeRegistrationApi {
  size_t struct_size;
  /** Registers an op. An OpDef identical to a registered one is shared; a
   *  different one is ALREADY_EXISTS naming both origins. */
  OpforgeCode (*op)(OpforgeRegistrar* registrar, const OpforgeOpDef* def,
                    OpforgeStatus* status);
  /** Registers a kernel for a registered (or staged) op. Overlapping
   *  constraints with an existing kernel of the same device, label and
   *  priority are ALREADY_EXISTS. */
  OpforgeCode (*kernel)(OpforgeRegistrar* registrar,
                        const OpforgeKernelDef* def, OpforgeStatus* status);
  /** Registers a gradient callback for `op`. */
  OpforgeCode (*gradient_fn)(OpforgeRegistrar* registrar, OpforgeStr op,
                             OpforgeGradFn fn, void* user,
                             OpforgeStatus* status);
  /** Registers a declarative gradient (validated now: ops, arguments,
   *  attr references, node order; list lengths at autodiff time). */
  OpforgeCode (*gradient_function)(OpforgeRegistrar* registrar,
                                   const OpforgeGradientFunction* def,
                                   OpforgeStatus* status);
  /** Declares `op` not differentiable (no gradient flows through it). */
  OpforgeCode (*not_differentiable)(OpforgeRegistrar* registrar,
                                    OpforgeStr op, OpforgeStatus* status);
} OpforgeRegistrationApi;

/** Kernel construction and compute (OpKernelConstruction and
 *  OpKernelContext). Indices are FLAT argument indices (a list argument of
 *  N tensors takes N); arg_range maps an argument name to its range. A bad
 *  index or name is INVALID_ARGUMENT (dtypes: OPFORGE_DT_INVALID; views of
 *  RESOURCE/VARIANT tensors: UNIMPLEMENTED). */
typedef struct OpforgeKernelApi {
  size_t struct_size;
  /* --- construction: OpforgeKernelInit (during create) --- */
  /** The op's name. */
  OpforgeStr (*init_op_name)(const OpforgeKernelInit* init);
  /** The node's name (the op's name for eager calls). */
  OpforgeStr (*init_node_name)(const OpforgeKernelInit* init);
  /** The device type the kernel is built for ("CPU"). */
  OpforgeStr (*init_device_type)(const OpforgeKernelInit* init);
  size_t (*init_num_inputs)(const OpforgeKernelInit* init);
  OpforgeDType (*init_input_dtype)(const OpforgeKernelInit* init, size_t i);
  size_t (*init_num_outputs)(const OpforgeKernelInit* init);
  OpforgeDType (*init_output_dtype)(const OpforgeKernelInit* init, size_t i);
  /** The flat range [*start, *stop) of the input (is_output 0) or output
   *  argument `name`. */
  OpforgeCode (*init_arg_range)(const OpforgeKernelInit* init, OpforgeStr name,
                                uint8_t is_output, size_t* start, size_t* stop,
                                OpforgeStatus* status);
  /** Attr `name` of the node, of any type (NOT_FOUND if the node has none of
   *  that name). The value lives until the instance's destroy (R7). */
  OpforgeCode (*init_attr)(const OpforgeKernelInit* init, OpforgeStr name,
                           OpforgeAttrValue* value, OpforgeStatus* status);
  /* --- compute: OpforgeKernelCtx (during compute) --- */
  OpforgeStr (*op_name)(const OpforgeKernelCtx* ctx);
  OpforgeStr (*node_name)(const OpforgeKernelCtx* ctx);
  size_t (*num_inputs)(const OpforgeKernelCtx* ctx);
  size_t (*num_outputs)(const OpforgeKernelCtx* ctx);
  OpforgeDType (*input_dtype)(const OpforgeKernelCtx* ctx, size_t i);
  /** The dtype output `i` must have. */
  OpforgeDType (*output_dtype)(const OpforgeKernelCtx* ctx, size_t i);
  OpforgeCode (*arg_range)(const OpforgeKernelCtx* ctx, OpforgeStr name,
                           uint8_t is_output, size_t* start, size_t* stop,
                           OpforgeStatus* status);
  /** A read-only view of input `i` (FAILED_PRECONDITION once it was
   *  forwarded or moved to an output). */
  OpforgeCode (*input)(const OpforgeKernelCtx* ctx, size_t i,
                       OpforgeTensor* view, OpforgeStatus* status);
  /** A writable view of output `i` once it is set (allocated, forwarded, or
   *  pre-bound by an INPLACE/ADD request; read-only for DT_STRING);
   *  FAILED_PRECONDITION before. */
  OpforgeCode (*output)(const OpforgeKernelCtx* ctx, size_t i,
                        OpforgeTensor* view, OpforgeStatus* status);
  /** What the host asks of output `i`: OPFORGE_REQ_* (always WRITE on 1.0
   *  hosts, and for kernels without OPFORGE_KERNEL_OUTPUT_REQUESTS). */
  uint32_t (*output_request)(const OpforgeKernelCtx* ctx, size_t i);
  /** Allocates output `i` of the given shape (contents unspecified) and
   *  returns its writable view (DT_STRING outputs: INVALID_ARGUMENT, use
   *  set_output_strings). */
  OpforgeCode (*allocate_output)(OpforgeKernelCtx* ctx, size_t i,
                                 const int64_t* dims, uint32_t rank,
                                 OpforgeTensor* view, OpforgeStatus* status);
  /** Reuses the buffer of the first of `candidates` inputs that has output
   *  `i`'s dtype and this shape and is not shared (the input moves to the
   *  output: compute in place), else allocates. *forwarded_from (may be
   *  NULL) receives the input index or OPFORGE_NOT_FORWARDED. DT_STRING
   *  outputs: INVALID_ARGUMENT, as allocate_output. */
  OpforgeCode (*forward_input_or_allocate_output)(
      OpforgeKernelCtx* ctx, const size_t* candidates, size_t num_candidates,
      size_t i, const int64_t* dims, uint32_t rank, int64_t* forwarded_from,
      OpforgeTensor* view, OpforgeStatus* status);
  /** Output `output` is input `input` (same dtype), shared, not copied. */
  OpforgeCode (*set_output_from_input)(OpforgeKernelCtx* ctx, size_t output,
                                       size_t input, OpforgeStatus* status);
  /** Output `i` wraps plugin memory (see OpforgeForeignTensor). */
  OpforgeCode (*set_output_foreign)(OpforgeKernelCtx* ctx, size_t i,
                                    const OpforgeForeignTensor* tensor,
                                    OpforgeStatus* status);
  /** Sets DT_STRING output `i` to these elements (num_elements of them,
   *  row-major), copied. */
  OpforgeCode (*set_output_strings)(OpforgeKernelCtx* ctx, size_t i,
                                    const int64_t* dims, uint32_t rank,
                                    const OpforgeStr* elements,
                                    OpforgeStatus* status);
  /** A scratch tensor, freed when compute returns (not DT_STRING). */
  OpforgeCode (*allocate_temp)(OpforgeKernelCtx* ctx, OpforgeDType dtype,
                               const int64_t* dims, uint32_t rank,
                               OpforgeTensor* view, OpforgeStatus* status);
  /** Attr `name` of the node (lives until compute returns; prefer reading
   *  attrs once, in create). */
  OpforgeCode (*attr)(const OpforgeKernelCtx* ctx, OpforgeStr name,
                      OpforgeAttrValue* value, OpforgeStatus* status);
  /** Threads of the pool parallel_for runs on (1: no parallelism). */
  uint32_t (*num_threads)(const OpforgeKernelCtx* ctx);
  /** TensorFlow's Shard: splits [0, total) into shards by cost_per_unit (a
   *  rough count of cycles per unit), runs work on the host pool and the
   *  calling thread, and returns when every shard is done. R9 applies. */
  OpforgeCode (*parallel_for)(OpforgeKernelCtx* ctx, uint64_t total,
                              uint64_t cost_per_unit, OpforgeWorkFn work,
                              void* user, OpforgeStatus* status);
} OpforgeKernelApi;

/** Shape inference (TensorFlow's InferenceContext, same semantics and error
 *  texts). Queries never fail: an unknown or invalid handle reads as
 *  unknown (-1). Operations that take a status reject invalid handles with
 *  INVALID_ARGUMENT. */
typedef struct OpforgeShapeApi {
  size_t struct_size;
  size_t (*num_inputs)(const OpforgeShapeCtx* ctx);
  size_t (*num_outputs)(const OpforgeShapeCtx* ctx);
  /** The shape of input `i` (OPFORGE_NO_HANDLE if out of range). */
  OpforgeShape (*input)(const OpforgeShapeCtx* ctx, size_t i);
  /** The flat range [*start, *stop) of the input (is_output 0) or output
   *  argument `name` (TensorFlow's input(name, &list)). */
  OpforgeCode (*arg_range)(const OpforgeShapeCtx* ctx, OpforgeStr name,
                           uint8_t is_output, size_t* start, size_t* stop,
                           OpforgeStatus* status);
  OpforgeCode (*set_output)(OpforgeShapeCtx* ctx, size_t i, OpforgeShape shape,
                            OpforgeStatus* status);
  /** The shape output `i` was set to (OPFORGE_NO_HANDLE if not set yet or
   *  out of range). */
  OpforgeShape (*output)(const OpforgeShapeCtx* ctx, size_t i);
  /** The rank, or OPFORGE_UNKNOWN_RANK. */
  int32_t (*rank)(const OpforgeShapeCtx* ctx, OpforgeShape shape);
  /** Dim `index` (negative counts from the end); a new unknown dim for a
   *  shape of unknown rank; INVALID_ARGUMENT out of range. */
  OpforgeCode (*dim)(OpforgeShapeCtx* ctx, OpforgeShape shape, int64_t index,
                     OpforgeDim* out, OpforgeStatus* status);
  /** The size, or OPFORGE_UNKNOWN_DIM. */
  int64_t (*value)(const OpforgeShapeCtx* ctx, OpforgeDim dim);
  /** The number of elements, or -1 if not fully defined. */
  int64_t (*num_elements)(const OpforgeShapeCtx* ctx, OpforgeShape shape);
  /** A new dim of this size (OPFORGE_UNKNOWN_DIM: unknown;
   *  OPFORGE_NO_HANDLE for other negative values). */
  OpforgeDim (*make_dim)(OpforgeShapeCtx* ctx, int64_t value);
  /** A new shape of these dims (identity kept). */
  OpforgeCode (*make_shape)(OpforgeShapeCtx* ctx, const OpforgeDim* dims,
                            size_t rank, OpforgeShape* out,
                            OpforgeStatus* status);
  /** A new shape of these sizes (OPFORGE_UNKNOWN_DIM: unknown dim). */
  OpforgeCode (*make_shape_from_values)(OpforgeShapeCtx* ctx,
                                        const int64_t* dims, size_t rank,
                                        OpforgeShape* out,
                                        OpforgeStatus* status);
  /** A shape of this rank with unknown dims; OPFORGE_UNKNOWN_RANK: of
   *  unknown rank (OPFORGE_NO_HANDLE for other negative values). */
  OpforgeShape (*unknown_shape)(OpforgeShapeCtx* ctx, int32_t rank);
  OpforgeCode (*with_rank)(OpforgeShapeCtx* ctx, OpforgeShape shape,
                           int32_t rank, OpforgeShape* out,
                           OpforgeStatus* status);
  OpforgeCode (*with_rank_at_least)(OpforgeShapeCtx* ctx, OpforgeShape shape,
                                    int32_t rank, OpforgeShape* out,
                                    OpforgeStatus* status);
  OpforgeCode (*with_rank_at_most)(OpforgeShapeCtx* ctx, OpforgeShape shape,
                                   int32_t rank, OpforgeShape* out,
                                   OpforgeStatus* status);
  OpforgeCode (*with_value)(OpforgeShapeCtx* ctx, OpforgeDim dim,
                            int64_t value, OpforgeDim* out,
                            OpforgeStatus* status);
  OpforgeCode (*merge)(OpforgeShapeCtx* ctx, OpforgeShape a, OpforgeShape b,
                       OpforgeShape* out, OpforgeStatus* status);
  OpforgeCode (*merge_dim)(OpforgeShapeCtx* ctx, OpforgeDim a, OpforgeDim b,
                           OpforgeDim* out, OpforgeStatus* status);
  /** Merges `prefix` into the leading dims of `shape`. */
  OpforgeCode (*merge_prefix)(OpforgeShapeCtx* ctx, OpforgeShape shape,
                              OpforgeShape prefix, OpforgeShape* shape_out,
                              OpforgeShape* prefix_out, OpforgeStatus* status);
  /** Dims [start, end) by stride (TensorFlow's Subshape; negative indices
   *  count from the end; end OPFORGE_TO_END: to the end). */
  OpforgeCode (*subshape)(OpforgeShapeCtx* ctx, OpforgeShape shape,
                          int64_t start, int64_t end, int64_t stride,
                          OpforgeShape* out, OpforgeStatus* status);
  OpforgeCode (*concatenate)(OpforgeShapeCtx* ctx, OpforgeShape a,
                             OpforgeShape b, OpforgeShape* out,
                             OpforgeStatus* status);
  /** `shape` with dim `index` replaced by `dim`. */
  OpforgeCode (*replace_dim)(OpforgeShapeCtx* ctx, OpforgeShape shape,
                             int64_t index, OpforgeDim dim, OpforgeShape* out,
                             OpforgeStatus* status);
  /** `a op b` for op an OPFORGE_DIM_* (unknown in, unknown out). */
  OpforgeCode (*dim_op)(OpforgeShapeCtx* ctx, uint32_t op, OpforgeDim a,
                        OpforgeDim b, OpforgeDim* out, OpforgeStatus* status);
  /** The value of input `i` if it is a constant known at graph
   *  construction: 1 and a read-only view; else 0. */
  uint8_t (*input_tensor)(const OpforgeShapeCtx* ctx, size_t i,
                          OpforgeTensor* view);
  /** Input `i` (a 1-D int32/int64 shape tensor) as a shape, as much as is
   *  known (MakeShapeFromShapeTensor). */
  OpforgeCode (*input_as_shape)(OpforgeShapeCtx* ctx, size_t i,
                                OpforgeShape* out, OpforgeStatus* status);
  /** Attr `name` of the node. */
  OpforgeCode (*attr)(const OpforgeShapeCtx* ctx, OpforgeStr name,
                      OpforgeAttrValue* value, OpforgeStatus* status);
  /** A shape as text, "[2,?,3]" or "?" (for messages). */
  OpforgeStr (*shape_string)(const OpforgeShapeCtx* ctx, OpforgeShape shape);
} OpforgeShapeApi;

/** Gradient callbacks (autodiff's Ops interface plus the forward op), the
 *  same model as a Rust or Python gradient: every value is an OpforgeSym of
 *  this context; the graph built from `call`s is made of registered ops. */
typedef struct OpforgeGradApi {
  size_t struct_size;
  /** The forward op's name. */
  OpforgeStr (*op_name)(const OpforgeGradCtx* ctx);
  /** Attr `name` of the forward node. */
  OpforgeCode (*attr)(const OpforgeGradCtx* ctx, OpforgeStr name,
                      OpforgeAttrValue* value, OpforgeStatus* status);
  /** The forward op's flat inputs and outputs (OPFORGE_NO_HANDLE if out of
   *  range). */
  size_t (*num_inputs)(const OpforgeGradCtx* ctx);
  OpforgeSym (*input)(const OpforgeGradCtx* ctx, size_t i);
  size_t (*num_outputs)(const OpforgeGradCtx* ctx);
  OpforgeSym (*output)(const OpforgeGradCtx* ctx, size_t i);
  /** The flat range of the forward op's input/output argument `name`. */
  OpforgeCode (*arg_range)(const OpforgeGradCtx* ctx, OpforgeStr name,
                           uint8_t is_output, size_t* start, size_t* stop,
                           OpforgeStatus* status);
  /** The gradient flowing into output `i`: 1 and *grad, or 0 if none flows. */
  uint8_t (*output_grad)(const OpforgeGradCtx* ctx, size_t i,
                         OpforgeSym* grad);
  /** The dtype of a value (OPFORGE_DT_INVALID for an invalid handle). */
  OpforgeDType (*dtype)(const OpforgeGradCtx* ctx, OpforgeSym sym);
  /** What is known of a value's shape: returns the rank (or
   *  OPFORGE_UNKNOWN_RANK, also for an invalid handle) and writes the first
   *  min(rank, cap) dims (OPFORGE_UNKNOWN_DIM where unknown). */
  int32_t (*shape)(const OpforgeGradCtx* ctx, OpforgeSym sym, int64_t* dims,
                   size_t cap);
  /** Calls registered op `op` on `args` (one per input argument, in order)
   *  with `attrs` (defaults and type inference as in a graph), writes the
   *  first min(n, cap) of its n flat outputs to `outs`, and n to *num_outs
   *  (may be NULL). */
  OpforgeCode (*call)(OpforgeGradCtx* ctx, OpforgeStr op,
                      const OpforgeSymArg* args, size_t num_args,
                      const OpforgeNamedAttr* attrs, size_t num_attrs,
                      OpforgeSym* outs, size_t cap, size_t* num_outs,
                      OpforgeStatus* status);
  /** A constant (the view's memory is copied). */
  OpforgeCode (*constant)(OpforgeGradCtx* ctx, const OpforgeTensor* value,
                          OpforgeSym* out, OpforgeStatus* status);
  /** Sets the gradient of flat input `i`; an input left unset has none. */
  OpforgeCode (*set_input_grad)(OpforgeGradCtx* ctx, size_t i, OpforgeSym grad,
                                OpforgeStatus* status);
} OpforgeGradApi;

/** The table the host passes to init: everything a plugin may call. */
typedef struct OpforgeHostApi {
  size_t struct_size;
  /** The host's ABI version (abi_major == OPFORGE_ABI_MAJOR always holds for
   *  a library the host agreed to load). */
  uint32_t abi_major;
  uint32_t abi_minor;
  /** The host's own version, e.g. "opforge 0.1.0" (for messages). */
  OpforgeStr host_version;
  /** The sub-tables (never NULL; each has its own struct_size). */
  const OpforgeRegistrationApi* registration;
  const OpforgeKernelApi* kernel;
  const OpforgeShapeApi* shape;
  const OpforgeGradApi* grad;
  /** Sets a status's code and message (copied). OPFORGE_OK clears it. */
  void (*set_status)(OpforgeStatus* status, OpforgeCode code,
                     OpforgeStr message);
  OpforgeCode (*status_code)(const OpforgeStatus* status);
  /** The message (valid until the status changes or is deleted). */
  OpforgeStr (*status_message)(const OpforgeStatus* status);
  /** Sets OPFORGE_STATUS_* flags (the Rust SDK marks caught panics). */
  void (*set_status_flags)(OpforgeStatus* status, uint32_t flags);
  uint32_t (*status_flags)(const OpforgeStatus* status);
  /** A new OK status, owned by the plugin: free it with status_delete. */
  OpforgeStatus* (*status_new)(void);
  void (*status_delete)(OpforgeStatus* status);
  /** Logs a message (copied) at an OPFORGE_LOG_* level, prefixed with the
   *  library's name: `host` is the table this library's init received (the
   *  host knows the library by it; any other pointer logs unattributed). */
  void (*log)(const struct OpforgeHostApi* host, uint32_t level,
              OpforgeStr message);
  /** An extension table by name ("vendor.name"; "opforge." is reserved) of
   *  at least `min_version`, or NULL. An extension table starts with an
   *  OpforgeExtensionHeader and lives as the host table. 1.0 hosts define
   *  no extension. */
  const void* (*extension)(OpforgeStr name, uint32_t min_version);
} OpforgeHostApi;

/* ------------------------------------------------------------------ */
/* Entry points (exported by the plugin)                               */
/* ------------------------------------------------------------------ */

/** Called once after the host loaded the library (the major is in the name,
 *  so a library for another major is never called). Registers everything
 *  through host->registration and `registrar` (nothing is visible until init
 *  returns OPFORGE_OK; a failure leaves nothing registered), and may keep
 *  `host` until fini. Must not call back into the host from other threads
 *  while it runs. Init may run again after fini in the same process image
 *  (when the platform could not unmap the library): fini must leave the
 *  library ready for it. */
OPFORGE_EXPORT OpforgeCode opforge_plugin_init_v1(const OpforgeHostApi* host,
                                                  OpforgeRegistrar* registrar,
                                                  OpforgeStatus* status);
/** Optional. Called once, when nothing can call into the library any more:
 *  after every kernel instance was destroyed and every foreign output
 *  released, just before the library is unmapped. */
OPFORGE_EXPORT void opforge_plugin_fini_v1(void);

/** The types of the entry points, for hosts. */
typedef OpforgeCode (*OpforgePluginInitFn)(const OpforgeHostApi* host,
                                           OpforgeRegistrar* registrar,
                                           OpforgeStatus* status);
typedef void (*OpforgePluginFiniFn)(void);

/** The entry points' symbol names. */
#define OPFORGE_PLUGIN_INIT_SYMBOL "opforge_plugin_init_v1"
#define OPFORGE_PLUGIN_FINI_SYMBOL "opforge_plugin_fini_v1"
/** The exported anchor of the manifest (see OPFORGE_LIBRARY). */
#define OPFORGE_MANIFEST_ANCHOR_SYMBOL "opforge_manifest_anchor_v1"

/* ------------------------------------------------------------------ */
/* The manifest                                                        */
/* ------------------------------------------------------------------ */
/*
 * What the library registers, stored in the file so that a reader finds it
 * without loading the library (ELF: the section `opforge_manifest`; Mach-O:
 * `__DATA,__opforge_mf`; PE: `.opfmf$b`). The section is a sequence of
 * RECORDS, each starting at an offset that is a multiple of 8:
 *
 *   offset 0   4 bytes  magic "OPFM"
 *   offset 4   u32 LE   format = OPFORGE_MANIFEST_FORMAT (1)
 *   offset 8   u32 LE   len: bytes of JSON
 *   offset 12  u32 LE   crc32 of the JSON bytes (CRC-32/ISO-HDLC, as zlib);
 *                       0 = not computed (C compilers cannot compute it)
 *   offset 16  len bytes of UTF-8 JSON: one object
 *   then zero bytes up to the next multiple of 8.
 *
 * Readers skip zero bytes between records (linkers pad), and report a bad
 * magic, format, length, CRC or JSON as DATA_LOSS naming the offset. Keys a
 * reader does not know are ignored; records of an unknown "kind" are
 * ignored. The header's integers are little-endian on every target.
 *
 * Record kinds (keys; [] = optional, with its default):
 *
 *   library (exactly one; MANDATORY -- version negotiation reads it):
 *     {"kind":"library", "name":STR, "version":STR,
 *      "abi":{"major":INT, "minor":INT, "min_host_minor":INT,
 *             "layout_hash":"16 hex digits"},
 *      ["sdk":{"lang":"c"|"c++"|"rust", "version":STR}],
 *      ["panic":"unwind"|"abort"]            (Rust SDK: the plugin's build)
 *      ["extensions":[{"name":STR, "min_version":INT}]] (required by it)}
 *     An empty name ("") names the library after its file: the file name
 *     without its directory, its platform prefix ("lib") and everything
 *     from its first '.' (the TensorFlow C++ layer writes it when the
 *     library is built without OPFORGE_LIBRARY_NAME).
 *
 *   op (one per op init registers):
 *     {"kind":"op", "name":STR, ["attrs":[SPEC]], ["inputs":[SPEC]],
 *      ["outputs":[SPEC]], ["control_outputs":[STR]],
 *      ["flags":["stateful"|"commutative"|"aggregate"|
 *                "allows_uninitialized_input"|"distributed_communication"]],
 *      ["doc":STR], ["deprecation":{"version":INT, "explanation":STR}],
 *      ["shape_fn":false]}
 *     The SPEC strings of OpforgeOpDef, not an OpDef: the reader builds the
 *     OpDef from them with the same builder registration uses, so that
 *     `opforge lib inspect` prints exactly the OpDef that loading registers.
 *
 *   kernel (one per kernel):
 *     {"kind":"kernel", "op":STR, "device":STR,
 *      ["constraints":{"T":["DT_FLOAT", ...], ...}], ["host_memory":[STR]],
 *      ["label":""], ["priority":0],
 *      ["flags":["not_thread_safe"|"parallel_isolated"|"output_requests"]]}
 *
 *   gradient (one per op whose gradient init registers):
 *     {"kind":"gradient", "op":STR, "form":"fn"|"nodes"|"not_differentiable"}
 *
 * The op, kernel and gradient records together are the library's
 * DECLARATION. A file with at least one of them declares everything init
 * registers, and the host checks init against it (a difference fails the
 * load). A file with none declares nothing (a library that registers by
 * code, e.g. hand-written C): it loads normally, and `opforge lib inspect`
 * prints null for its lists until `opforge lib seal` records them.
 *
 * The sealed declaration (ELF only). `opforge lib seal FILE` runs the init
 * of a library that declares nothing, in a child process with a fresh
 * registry, and writes what init registered into FILE as the section
 * `opforge_manifest_sealed`: SHT_PROGBITS, sh_flags 0 (not allocated: the
 * dynamic linker never maps it, and the library loads as before),
 * sh_addralign 8. It is appended after the file's existing contents together
 * with a copy of `.shstrtab` that names it and a new section header table
 * (the ELF header's e_shoff and e_shnum point at them; program headers,
 * segments and every existing section keep their bytes and indices). Its
 * bytes are RECORDS in the format above, every crc32 computed (a record
 * with crc32 0 is DATA_LOSS here):
 *
 *   first exactly one seal record, binding the section to the file:
 *     {"kind":"seal",
 *      "library":{"name":STR, "version":STR, "layout_hash":"16 hex digits"},
 *      "image_fnv1a64":"16 hex digits", ["sealed_by":STR]}
 *     library: the name, version and abi.layout_hash of the file's library
 *     record. image_fnv1a64: FNV-1a 64 (offset basis 0xcbf29ce484222325,
 *     prime 0x100000001b3) over, for each section with SHF_ALLOC in
 *     section-header order, its byte count in the file as 8 little-endian
 *     bytes (0 for SHT_NOBITS) followed by those bytes;
 *   then one op, kernel and gradient record per op, kernel and gradient
 *     init registered, in registration order, exactly as above (op records
 *     always carry "shape_fn"; kernel records "host_memory", "label",
 *     "priority" and "flags"). No library record.
 *
 * A reader takes a sealed declaration as the file's declaration (`lib
 * inspect` prints its lists and "sealed":true, and the host checks init
 * against it at load) only if the seal record matches the file: a
 * different name, version, layout hash or image digest is
 * FAILED_PRECONDITION (the library changed after it was sealed: seal it
 * again), a corrupt record DATA_LOSS, and a sealed section in a file whose
 * manifest declares its ops FAILED_PRECONDITION. Sealing again replaces the
 * section (the same declaration gives the same bytes); sealing a library
 * whose manifest declares its ops changes nothing.
 *
 * `opforge lib inspect FILE` prints one JSON object:
 *   {"name", "version", "abi":{"major", "minor", "min_host_minor"},
 *    "ops":[OpDef in proto3 JSON, as `opforge ops show --format json`] | null,
 *    "kernels":[{"op", "device", "constraints":{"T":["DT_FLOAT"]}}] | null,
 *    "shape_fns":[op names] | null,
 *    "gradients":[{"op", "form"}] | null,
 *    "sealed": true if the lists come from a sealed declaration}
 * (kernels may carry their other record keys too; more top-level keys may
 * follow these).
 */

/** The magic of a record (4 bytes, no NUL). */
#define OPFORGE_MANIFEST_MAGIC "OPFM"
/** The record format this header writes and reads. */
#define OPFORGE_MANIFEST_FORMAT 1
/** Records start at multiples of this. */
#define OPFORGE_MANIFEST_ALIGN 8
/** Bytes of OpforgeManifestHeader. */
#define OPFORGE_MANIFEST_HEADER_SIZE 16
/** The ELF section (a C identifier, so the linker defines
 *  __start_opforge_manifest / __stop_opforge_manifest). */
#define OPFORGE_MANIFEST_SECTION "opforge_manifest"

/** The 16 bytes before a record's JSON (integers little-endian, as bytes so
 *  that the layout is the same on every target). Not a versioned struct: a
 *  new layout is a new `format`. */
typedef struct OpforgeManifestHeader {
  uint8_t magic[4];
  uint8_t format[4];
  uint8_t len[4];
  uint8_t crc32[4];
} OpforgeManifestHeader;

/* The anchor: an exported pointer to the library record, so that the
 * record survives --gc-sections (exported symbols are roots) on linkers
 * without SHF_GNU_RETAIN support. Defined by OPFORGE_LIBRARY. */
OPFORGE_EXPORT extern const void* const opforge_manifest_anchor_v1;

#ifdef __cplusplus
} /* extern "C" */
#endif

/* --- record placement (internal) --- */
#if defined(__APPLE__)
#define OPFORGE_MANIFEST_SECTION_ATTR_ __attribute__((section("__DATA,__opforge_mf")))
#elif defined(_MSC_VER) && !defined(__clang__)
#pragma section(".opfmf$b", read)
#define OPFORGE_MANIFEST_SECTION_ATTR_ __declspec(allocate(".opfmf$b"))
#else
#define OPFORGE_MANIFEST_SECTION_ATTR_ __attribute__((section("opforge_manifest")))
#endif

#if defined(__GNUC__) || defined(__clang__)
#if defined(__has_attribute)
#if __has_attribute(retain) && !defined(__APPLE__) && !defined(_WIN32)
#define OPFORGE_RETAIN_ __attribute__((used, retain, aligned(8)))
#endif
#endif
#ifndef OPFORGE_RETAIN_
#define OPFORGE_RETAIN_ __attribute__((used, aligned(8)))
#endif
#else
#define OPFORGE_RETAIN_
#endif

/* Four little-endian bytes of a constant expression. */
#define OPFORGE_LE32_(x)                                                  \
  (uint8_t)((x) & 0xffu), (uint8_t)(((x) >> 8) & 0xffu),                  \
      (uint8_t)(((x) >> 16) & 0xffu), (uint8_t)(((x) >> 24) & 0xffu)

/** A manifest record named `id` whose JSON is the string literal
 *  `json_literal` (crc32 0: not computed). At file scope, followed by `;`.
 *  The JSON must be a literal: no escapes are added. */
#define OPFORGE_MANIFEST_RECORD(id, json_literal)                          \
  OPFORGE_MANIFEST_SECTION_ATTR_ OPFORGE_RETAIN_ static const struct {     \
    OpforgeManifestHeader header;                                          \
    char json[(sizeof(json_literal) + 7) / 8 * 8];                         \
  } id = {{{'O', 'P', 'F', 'M'},                                           \
           {OPFORGE_LE32_(OPFORGE_MANIFEST_FORMAT)},                       \
           {OPFORGE_LE32_(sizeof(json_literal) - 1)},                      \
           {0, 0, 0, 0}},                                                  \
          json_literal}

#ifdef __cplusplus
#define OPFORGE_SDK_LANG_ "c++"
#else
#define OPFORGE_SDK_LANG_ "c"
#endif

/** The library record with explicit ABI fields (decimal literals). Use
 *  OPFORGE_LIBRARY; this form exists for tests that forge other versions. */
#define OPFORGE_LIBRARY_EX(name, version, major, minor, min_host_minor)       \
  OPFORGE_MANIFEST_RECORD(                                                    \
      opforge_manifest_library_record_,                                       \
      "{\"kind\":\"library\",\"name\":\"" name "\",\"version\":\"" version    \
      "\",\"abi\":{\"major\":" OPFORGE_XSTR(major) ",\"minor\":" OPFORGE_XSTR( \
          minor) ",\"min_host_minor\":" OPFORGE_XSTR(min_host_minor)          \
      ",\"layout_hash\":\"" OPFORGE_LAYOUT_HASH_STR                           \
      "\"},\"sdk\":{\"lang\":\"" OPFORGE_SDK_LANG_ "\"}}");                   \
  OPFORGE_RETAIN_ const void* const opforge_manifest_anchor_v1 =              \
      &opforge_manifest_library_record_

/** The mandatory library record, once per library, at file scope, followed
 *  by `;`: `OPFORGE_LIBRARY("zero_out_c", "0.1.0");`. `name` and `version`
 *  are string literals without quotes or backslashes. The ABI fields come
 *  from this header (OPFORGE_ABI_MAJOR, OPFORGE_ABI_MINOR,
 *  OPFORGE_MIN_HOST_MINOR, OPFORGE_LAYOUT_HASH). */
#define OPFORGE_LIBRARY(name, version)                                    \
  OPFORGE_LIBRARY_EX(name, version, OPFORGE_ABI_MAJOR, OPFORGE_ABI_MINOR, \
                     OPFORGE_MIN_HOST_MINOR)

/** An op record: `json` is a string literal holding the record's members
 *  after "kind" (see "Record kinds"), e.g.
 *  OPFORGE_MANIFEST_OP("\"name\":\"ZeroOut\",\"inputs\":[\"to_zero: int32\"],"
 *                      "\"outputs\":[\"zeroed: int32\"],\"shape_fn\":true");
 *  At file scope, at most one per line, followed by `;`. Put the records in
 *  the file of OPFORGE_LIBRARY: the exported anchor then keeps them alive
 *  under --gc-sections even where `retain` is not supported. */
#define OPFORGE_MANIFEST_OP(json)                                          \
  OPFORGE_MANIFEST_RECORD(OPFORGE_CONCAT(opforge_manifest_op_, __LINE__),  \
                          "{\"kind\":\"op\"," json "}")
/** A kernel record (members after "kind"), as OPFORGE_MANIFEST_OP. */
#define OPFORGE_MANIFEST_KERNEL(json)                                          \
  OPFORGE_MANIFEST_RECORD(OPFORGE_CONCAT(opforge_manifest_kernel_, __LINE__),  \
                          "{\"kind\":\"kernel\"," json "}")
/** A gradient record (members after "kind"), as OPFORGE_MANIFEST_OP. */
#define OPFORGE_MANIFEST_GRADIENT(json)                                         \
  OPFORGE_MANIFEST_RECORD(OPFORGE_CONCAT(opforge_manifest_gradient_, __LINE__), \
                          "{\"kind\":\"gradient\"," json "}")

/* ------------------------------------------------------------------ */
/* C++ helpers                                                         */
/* ------------------------------------------------------------------ */
#ifdef __cplusplus
#include <exception>

/** The host table OPFORGE_GUARD uses: by default a variable named
 *  `opforge_host` in scope (typically a global set in init). */
#ifndef OPFORGE_HOST
#define OPFORGE_HOST opforge_host
#endif

/** Reports a caught exception: INTERNAL with its text, marked PANICKED. */
static inline OpforgeCode opforge_guard_fail_(const OpforgeHostApi* host,
                                              OpforgeStatus* status,
                                              const char* what) {
  static const char prefix[] = "C++ exception: ";
  char buf[512];
  size_t n = sizeof(prefix) - 1;
  size_t w = what ? strlen(what) : 0;
  if (w > sizeof(buf) - n) w = sizeof(buf) - n;
  memcpy(buf, prefix, n);
  if (w) memcpy(buf + n, what, w);
  if (host && status) {
    OpforgeStr msg;
    msg.ptr = buf;
    msg.len = n + w;
    host->set_status(status, OPFORGE_INTERNAL, msg);
    if (OPFORGE_HAS_SLOT(host, set_status_flags))
      host->set_status_flags(status, OPFORGE_STATUS_PANICKED);
  }
  return OPFORGE_INTERNAL;
}

/** Logs a caught exception at ERROR (for callbacks that return nothing). */
static inline void opforge_guard_log_(const OpforgeHostApi* host,
                                      const char* what) {
  if (host && OPFORGE_HAS_SLOT(host, log)) {
    OpforgeStr msg = opforge_str(what ? what : "unknown C++ exception");
    host->log(host, OPFORGE_LOG_ERROR, msg);
  }
}

/** Runs the statements (a block that returns an OpforgeCode) and turns any
 *  exception into OPFORGE_INTERNAL carrying what(), through `host`:
 *    OpforgeCode compute(void* s, OpforgeKernelCtx* ctx, OpforgeStatus* st) {
 *      OPFORGE_GUARD_HOST(my_host, st, {
 *        ...;
 *        return OPFORGE_OK;
 *      })
 *    }
 *  An exception that escapes a callback unguarded terminates the process. */
#define OPFORGE_GUARD_HOST(host, status, ...)                            \
  try __VA_ARGS__ catch (const std::exception& opforge_exception_) {     \
    return opforge_guard_fail_((host), (status), opforge_exception_.what()); \
  }                                                                      \
  catch (...) {                                                          \
    return opforge_guard_fail_((host), (status), "unknown exception");   \
  }

/** OPFORGE_GUARD_HOST with OPFORGE_HOST: `OPFORGE_GUARD(status, { ... })`. */
#define OPFORGE_GUARD(status, ...) \
  OPFORGE_GUARD_HOST(OPFORGE_HOST, status, __VA_ARGS__)

/** For callbacks returning void (destroy, release): runs the block and logs
 *  any exception at ERROR instead of letting it escape. */
#define OPFORGE_GUARD_VOID(...)                                         \
  try __VA_ARGS__ catch (const std::exception& opforge_exception_) {    \
    opforge_guard_log_(OPFORGE_HOST, opforge_exception_.what());        \
  }                                                                     \
  catch (...) {                                                         \
    opforge_guard_log_(OPFORGE_HOST, "unknown exception");              \
  }
#endif /* __cplusplus */

#endif /* OPFORGE_OPFORGE_H_ */
