/* opforge's TensorFlow C++ layer at TensorFlow's path: Status.
 * Written for opforge over its C ABI (see opforge/tf/base.h). */
#ifndef OPFORGE_TF_PATH_TENSORFLOW_CORE_LIB_CORE_STATUS_H_
#define OPFORGE_TF_PATH_TENSORFLOW_CORE_LIB_CORE_STATUS_H_
#include <opforge/tf/base.h>
#endif
