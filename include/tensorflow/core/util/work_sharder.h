/* opforge's TensorFlow C++ layer at TensorFlow's path: Shard.
 * Written for opforge over its C ABI (see opforge/tf/base.h). */
#ifndef OPFORGE_TF_PATH_TENSORFLOW_CORE_UTIL_WORK_SHARDER_H_
#define OPFORGE_TF_PATH_TENSORFLOW_CORE_UTIL_WORK_SHARDER_H_
#include <opforge/tf/kernel.h>
#endif
