// Random bytes from the kernel: job tags and the peer channel's nonces.
#pragma once

#include <cstddef>
#include <string>

namespace davincirun::detail {

/// `size` bytes from getrandom(2) (its system call: the C library's wrapper
/// needs glibc 2.25), else /dev/urandom on kernels before 3.17. Throws
/// SystemError when neither works.
std::string random_bytes(std::size_t size);

}  // namespace davincirun::detail
