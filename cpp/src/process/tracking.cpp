#include "process/tracking.hpp"

#include "common/text.hpp"
#include "davincirun/errors.hpp"
#include "davincirun/process.hpp"

namespace davincirun::detail {

ProcessTracking resolve_tracking(const SupervisorOptions& options) {
  switch (options.tracking) {
    case ProcessTracking::pidfd:
      if (!pidfd_supported()) {
        throw ConfigError(
            "process tracking 'pidfd' needs Linux >= 5.4 (pidfd_open, waitid P_PIDFD); "
            "this kernel lacks it: use 'sigchld' or 'automatic'");
      }
      return ProcessTracking::pidfd;
    case ProcessTracking::sigchld:
      if (!options.owns_all_children) {
        throw ConfigError(
            "process tracking 'sigchld' is only for a process that owns all its children "
            "(SupervisorOptions::owns_all_children)");
      }
      return ProcessTracking::sigchld;
    case ProcessTracking::automatic:
      if (pidfd_supported()) return ProcessTracking::pidfd;
      if (options.owns_all_children) return ProcessTracking::sigchld;
      throw ConfigError(
          "this kernel has no pidfds (Linux < 5.4), so ranks can only be supervised from a "
          "process that owns all its children (the davincirun-supervisor process)");
  }
  return ProcessTracking::pidfd;
}

bool may_fall_back_to_sigchld(const SupervisorOptions& options, ProcessTracking resolved) noexcept {
  return options.tracking == ProcessTracking::automatic && options.owns_all_children &&
         resolved == ProcessTracking::pidfd;
}

std::string tracking_fallback_reason(int error) {
  // pidfd_open worked (pidfd_supported()), so the kernel has the flag: what
  // refuses it is a seccomp filter or an emulator (qemu-user 7.2).
  return "clone() refused CLONE_PIDFD with " + errno_text(error) +
         ", as qemu-user or a seccomp filter do although the kernel has pidfds";
}

}  // namespace davincirun::detail
