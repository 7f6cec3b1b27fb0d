// The library's version.
#pragma once

namespace davincirun {

/// The library version, e.g. "0.2.0".
const char* version() noexcept;

}  // namespace davincirun
