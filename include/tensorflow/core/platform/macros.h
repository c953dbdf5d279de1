/* opforge's TensorFlow C++ layer at TensorFlow's path: TF_PREDICT_TRUE and the other macros.
 * Written for opforge over its C ABI (see opforge/tf/base.h). */
#ifndef OPFORGE_TF_PATH_TENSORFLOW_CORE_PLATFORM_MACROS_H_
#define OPFORGE_TF_PATH_TENSORFLOW_CORE_PLATFORM_MACROS_H_
#include <opforge/tf/base.h>
#endif
