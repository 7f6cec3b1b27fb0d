// Kernel interfaces newer than the oldest C library headers this tree builds
// against (glibc 2.17 and its kernel headers, as in CentOS 7 and the
// manylinux2014 wheels): each is defined here only when the headers lack it.
// Whether the running kernel has it is checked where it is used (ENOSYS,
// EINVAL). Values from the Linux UAPI headers.
#pragma once

#include <sched.h>
#include <sys/syscall.h>

// getrandom(2), Linux 3.17. Its number differs by architecture; elsewhere
// the caller falls back to /dev/urandom.
#ifndef SYS_getrandom
#if defined(__x86_64__)
#define SYS_getrandom 318
#elif defined(__aarch64__)
#define SYS_getrandom 278
#endif
#endif

// From Linux 5.1 on, new system calls have one number on every architecture.
// pidfd_open(2): Linux 5.3.
#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif
// close_range(2): Linux 5.9; its CLOSE_RANGE_CLOEXEC flag: Linux 5.11.
#ifndef SYS_close_range
#define SYS_close_range 436
#endif
#ifndef CLOSE_RANGE_CLOEXEC
#define CLOSE_RANGE_CLOEXEC (1U << 2)
#endif

// clone(2)'s CLONE_PIDFD: Linux 5.2.
#ifndef CLONE_PIDFD
#define CLONE_PIDFD 0x00001000
#endif

namespace davincirun::detail {
// waitid(2)'s P_PIDFD id type: Linux 5.4 (an enumerator in newer glibc, so
// it cannot be tested with #ifdef).
inline constexpr int p_pidfd = 3;
}  // namespace davincirun::detail
