// The one source of `davincirun` that differs between the wheels of one
// release: the name of the interpreter the wheel was built for. Kept apart
// so that a wheel built against a prebuilt core compiles only this file
// (cpp/CMakeLists.txt, cmake/prebuilt_core.cmake).
#include "python_script.hpp"

namespace davincirun::cli {

#ifdef DAVINCIRUN_WHEEL_PYTHON
const char* const wheel_python = DAVINCIRUN_WHEEL_PYTHON;
#else
const char* const wheel_python = "";  // `cmake --install`, a development build
#endif

}  // namespace davincirun::cli
