// Device locks: one job per NPU at a time on this machine.
//
// Two jobs started on the same devices would both hang in collective
// initialisation. Instead, each job's supervisor process locks every device
// of the job before it starts any rank, and a second job is refused at once
// with DeviceBusyError naming the holder.
//
// A lock is a POSIX record lock (fcntl F_SETLK, a write lock on the whole
// file) on `<dir>/device<N>.lock`, N the physical device id. The kernel
// drops it when the holding process exits or dies, so a crashed job never
// leaves a device locked, and F_GETLK reports the holder's pid (flock()
// cannot). Such locks belong to a process, not to a descriptor: closing ANY
// descriptor of a lock file drops the process's lock on it, and fork()ed
// children do not inherit it. Hence one owner per process: a DeviceLocks
// refuses devices another DeviceLocks of the same process holds, and
// nothing else may open the lock files in a process that holds locks.
//
// Sharing between users (devices are shared hardware): the directory is
// world-writable and sticky like /tmp (no one can remove another's lock
// file), lock files are created mode 0666 whatever the umask, so every
// user's jobs can open them for writing and take the write lock. A
// description of the holder is written into a lock file only by a process
// that owns it; a file of another user is never written nor truncated.
#pragma once

#include <sys/types.h>

#include <memory>
#include <string>
#include <vector>

namespace davincirun {

/// Who takes the locks: written into the lock files (those this process
/// owns) so that a job refused later can name it.
struct DeviceLockHolder {
  std::string job_id;
  std::vector<std::string> command;  ///< shell-quoted in the description, cut at 1 KiB
};

/// The locks of a set of devices, held by this process until destruction
/// (or its exit or death). Move-only.
class DeviceLocks {
 public:
  /// Locks every device in `devices` (physical ids; order and duplicates do
  /// not matter) in `dir`, all or nothing: nothing stays locked when it throws.
  ///
  /// `dir` is created when missing (its parent must exist) with mode 01777.
  /// Refused with ConfigError (naming the path and why): `dir` is a
  /// symbolic link, not a directory, or world-writable without the sticky
  /// bit; a lock file is a symbolic link, not a regular file, has several
  /// hard links, cannot be opened, or belongs to another user and is not
  /// writable (a read-only descriptor cannot take a write lock, and a read
  /// lock would not exclude another such job).
  /// Throws DeviceBusyError when any device is locked by another process
  /// (every busy device is tried and named) or by another DeviceLocks of this
  /// process; SystemError when fcntl or fstat fails.
  DeviceLocks(const std::string& dir, const std::vector<int>& devices, const DeviceLockHolder& holder);
  DeviceLocks(DeviceLocks&&) noexcept;
  DeviceLocks& operator=(DeviceLocks&&) noexcept;
  DeviceLocks(const DeviceLocks&) = delete;
  DeviceLocks& operator=(const DeviceLocks&) = delete;
  /// Releases every lock.
  ~DeviceLocks();

  /// The locked devices, ascending.
  const std::vector<int>& devices() const noexcept;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

/// Checks, without taking a lock or creating anything, whether another
/// process holds any of `devices` in `dir` (a dry run's question: would a job
/// start?). A missing directory or lock file means free. Throws
/// DeviceBusyError as DeviceLocks would (every busy device named);
/// ConfigError when `dir` or a lock file is a symbolic link or of the wrong
/// type; SystemError when fcntl fails. A holder may appear or go right after.
void check_devices_free(const std::string& dir, const std::vector<int>& devices);

}  // namespace davincirun
