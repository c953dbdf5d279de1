/* opforge's TensorFlow C++ layer at TensorFlow's path: errors::InvalidArgument and the other canonical errors.
 * Written for opforge over its C ABI (see opforge/tf/base.h). */
#ifndef OPFORGE_TF_PATH_TENSORFLOW_CORE_LIB_CORE_ERRORS_H_
#define OPFORGE_TF_PATH_TENSORFLOW_CORE_LIB_CORE_ERRORS_H_
#include <opforge/tf/base.h>
#endif
