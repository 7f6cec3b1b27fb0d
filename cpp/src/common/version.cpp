#include "davincirun/version.hpp"

namespace davincirun {

const char* version() noexcept { return DAVINCIRUN_VERSION; }

}  // namespace davincirun
