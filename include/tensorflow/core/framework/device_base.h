/* opforge's TensorFlow C++ layer at TensorFlow's path: DeviceBase.
 * Written for opforge over its C ABI (see opforge/tf/base.h). */
#ifndef OPFORGE_TF_PATH_TENSORFLOW_CORE_FRAMEWORK_DEVICE_BASE_H_
#define OPFORGE_TF_PATH_TENSORFLOW_CORE_FRAMEWORK_DEVICE_BASE_H_
#include <opforge/tf/kernel.h>
#endif
