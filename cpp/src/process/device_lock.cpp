#include "davincirun/device_lock.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <ctime>
#include <mutex>
#include <optional>
#include <set>
#include <string_view>
#include <tuple>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "common/text.hpp"
#include "davincirun/errors.hpp"
#include "davincirun/unique_fd.hpp"

namespace davincirun {

namespace {

constexpr std::size_t max_command_bytes = 1024;
constexpr std::size_t max_read_bytes = 4096;  // of a lock file or /proc/<pid>/cmdline

// Devices locked by DeviceLocks of this process, by lock directory (device
// and inode) and device id. POSIX locks belong to the process, so a second
// DeviceLocks would "take" a lock this process already holds, and closing
// its descriptor would drop the first one's: it is refused before it opens
// anything.
struct Registry {
  std::mutex mutex;
  std::set<std::tuple<dev_t, ino_t, int>> held;
};

Registry& registry() {
  static Registry instance;
  return instance;
}

// One line: "pid=P started=T job=J command=C". Every field but the last is
// one word, so the line reads back unambiguously.
std::string description_line(const DeviceLockHolder& holder) {
  std::string job = holder.job_id.empty() ? "-" : holder.job_id;
  for (char& c : job) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_' && c != '.') c = '-';
  }
  return fmt::format("pid={} started={} job={} command={}\n", ::getpid(),
                     detail::utc_time(std::time(nullptr), "%Y-%m-%dT%H:%M:%SZ"), job,
                     detail::printable(detail::shell_quote(holder.command, max_command_bytes)));
}

std::string read_some(int fd) {
  char buf[max_read_bytes];
  const ssize_t n = ::pread(fd, buf, sizeof buf, 0);
  return n > 0 ? std::string(buf, static_cast<std::size_t>(n)) : std::string();
}

struct Holder {
  pid_t pid = 0;            // 0: in another PID namespace
  std::string description;  // DeviceBusyError::holder_description()
  std::string summary;      // for the message: "pid P (job J, started T): C"
};

// What is known of the process `pid` holding the lock of `fd`: the lock
// file's description when that process wrote it (a stale one names another
// pid), else its command line.
Holder describe_holder(int fd, pid_t pid) {
  Holder holder{pid, {}, pid > 0 ? fmt::format("pid {}", pid) : "a process in another PID namespace"};
  if (pid <= 0) return holder;
  std::string line = read_some(fd);
  line = line.substr(0, line.find('\n'));
  const std::string prefix = fmt::format("pid={} started=", pid);
  const auto job = line.find(" job=");
  const auto command = line.find(" command=");
  if (line.compare(0, prefix.size(), prefix) == 0 && job != std::string::npos && command != std::string::npos &&
      job < command) {
    const std::string started = detail::printable(line.substr(prefix.size(), job - prefix.size()));
    const std::string job_id = detail::printable(line.substr(job + 5, command - job - 5));
    const std::string cmd = detail::printable(line.substr(command + 9));
    holder.description = fmt::format("job {}, started {}: {}", job_id, started, cmd);
    holder.summary += fmt::format(" (job {}, started {}): {}", job_id, started, cmd);
    return holder;
  }
  UniqueFd proc(::open(fmt::format("/proc/{}/cmdline", pid).c_str(), O_RDONLY | O_CLOEXEC));
  std::string cmdline = proc ? read_some(proc.get()) : std::string();
  std::vector<std::string> args;
  for (std::size_t pos = 0; pos < cmdline.size();) {
    const std::size_t end = std::min(cmdline.find('\0', pos), cmdline.size());
    args.push_back(cmdline.substr(pos, end - pos));
    pos = end + 1;
  }
  if (!args.empty()) {
    holder.description = detail::printable(detail::shell_quote(args, max_command_bytes));
    holder.summary += ": " + holder.description;
  }
  return holder;
}

// Opens (creating it if missing) and checks the lock directory; `st` is its fstat.
UniqueFd open_lock_dir(const std::string& dir, struct stat& st) {
  const bool created = ::mkdir(dir.c_str(), 01777) == 0;
  if (!created && errno != EEXIST) {
    throw ConfigError(fmt::format("cannot create the device lock directory '{}': {}", dir, std::strerror(errno)));
  }
  UniqueFd fd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!fd) {
    const int err = errno;
    struct stat entry{};
    const bool exists = ::lstat(dir.c_str(), &entry) == 0;
    if (exists && S_ISLNK(entry.st_mode)) {
      throw ConfigError(fmt::format("the device lock directory '{}' is a symbolic link; refusing to use it", dir));
    }
    if (exists && !S_ISDIR(entry.st_mode)) {
      throw ConfigError(fmt::format("the device lock directory '{}' is not a directory", dir));
    }
    throw ConfigError(fmt::format("cannot open the device lock directory '{}': {}", dir, std::strerror(err)));
  }
  // Shared by every user's jobs, like /tmp; the umask must not take that away.
  if (created && ::fchmod(fd.get(), 01777) != 0) throw SystemError("chmod " + dir, errno);
  if (::fstat(fd.get(), &st) != 0) throw SystemError("stat " + dir, errno);
  if ((st.st_mode & S_IWOTH) && !(st.st_mode & S_ISVTX)) {
    // Anyone could remove a held lock file and lock a new one in its place.
    throw ConfigError(fmt::format(
        "the device lock directory '{}' is world-writable without the sticky bit (mode {:04o}): anyone could "
        "replace its lock files; make it sticky (chmod +t) or choose another one",
        dir, st.st_mode & 07777));
  }
  return fd;
}

struct LockFile {
  UniqueFd fd;
  bool writable = false;
  struct stat st{};
};

LockFile open_lock_file(int dir_fd, const std::string& path, const std::string& name) {
  // Never O_TRUNC: the file may be another user's. O_NONBLOCK: a FIFO put
  // in its place must not hang us before it is refused.
  const int flags = O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK;
  for (int attempt = 0; attempt < 10; ++attempt) {
    LockFile file;
    file.writable = true;
    file.fd.reset(::openat(dir_fd, name.c_str(), O_RDWR | flags));
    if (!file.fd && errno == ENOENT) {
      file.fd.reset(::openat(dir_fd, name.c_str(), O_RDWR | O_CREAT | O_EXCL | flags, 0666));
      if (!file.fd && errno == EEXIST) continue;  // another job created it meanwhile
      // Every user's jobs must be able to take the write lock.
      if (file.fd && ::fchmod(file.fd.get(), 0666) != 0) throw SystemError("chmod " + path, errno);
    } else if (!file.fd && errno == EACCES) {
      // Another user's file, not writable to us: enough to see who holds it.
      file.writable = false;
      file.fd.reset(::openat(dir_fd, name.c_str(), O_RDONLY | flags));
    }
    if (!file.fd) {
      if (errno == ELOOP) {
        throw ConfigError(fmt::format("the device lock file '{}' is a symbolic link; refusing to use it", path));
      }
      throw ConfigError(fmt::format("cannot open the device lock file '{}': {}", path, std::strerror(errno)));
    }
    if (::fstat(file.fd.get(), &file.st) != 0) throw SystemError("stat " + path, errno);
    if (!S_ISREG(file.st.st_mode)) {
      throw ConfigError(fmt::format("the device lock file '{}' is not a regular file; refusing to use it", path));
    }
    // A hard link could make us write our description into another file.
    if (file.st.st_nlink != 1) {
      throw ConfigError(
          fmt::format("the device lock file '{}' has {} hard links; refusing to use it", path, file.st.st_nlink));
    }
    return file;
  }
  throw ConfigError(fmt::format("cannot open the device lock file '{}': it keeps disappearing", path));
}

// Ascending, each device once.
std::vector<int> sorted_unique(std::vector<int> devices) {
  std::sort(devices.begin(), devices.end());
  devices.erase(std::unique(devices.begin(), devices.end()), devices.end());
  return devices;
}

std::string lock_file_name(int device) { return fmt::format("device{}.lock", device); }

struct flock whole_file(short type) {
  struct flock lock{};
  lock.l_type = type;
  lock.l_whence = SEEK_SET;  // l_start 0, l_len 0: the whole file, however long
  return lock;
}

// Takes the write lock of `file`; nullopt when done, else who holds it.
std::optional<Holder> take_lock(const LockFile& file, const std::string& path) {
  for (int attempt = 0; attempt < 100; ++attempt) {
    if (file.writable) {
      struct flock lock = whole_file(F_WRLCK);
      if (::fcntl(file.fd.get(), F_SETLK, &lock) == 0) return std::nullopt;
      if (errno != EAGAIN && errno != EACCES) throw SystemError("lock " + path, errno);
    }
    struct flock probe = whole_file(F_WRLCK);
    if (::fcntl(file.fd.get(), F_GETLK, &probe) != 0) throw SystemError("test the lock of " + path, errno);
    if (probe.l_type != F_UNLCK) return describe_holder(file.fd.get(), probe.l_pid);
    if (!file.writable) {
      throw ConfigError(fmt::format(
          "the device lock file '{}' belongs to uid {} and is not writable by this user (mode {:04o}), so it "
          "cannot be locked; its owner can make it writable (chmod 0666) or remove it",
          path, file.st.st_uid, file.st.st_mode & 07777));
    }
    // Released between our attempt and the test: try again.
  }
  throw SystemError("lock " + path, EAGAIN);
}

std::string device_list(const std::vector<int>& devices) {
  return fmt::format("{} {}", devices.size() == 1 ? "device" : "devices", fmt::join(devices, ", "));
}

[[noreturn]] void throw_busy(const std::vector<std::pair<int, Holder>>& busy) {
  // One clause per holder, in device order.
  std::vector<pid_t> pids;
  for (const auto& entry : busy) {
    if (std::find(pids.begin(), pids.end(), entry.second.pid) == pids.end()) pids.push_back(entry.second.pid);
  }
  std::vector<int> all;
  std::string message;
  for (pid_t pid : pids) {
    std::vector<int> devices;
    const Holder* holder = nullptr;
    for (const auto& [device, h] : busy) {
      if (h.pid != pid) continue;
      devices.push_back(device);
      holder = &h;
    }
    all.insert(all.end(), devices.begin(), devices.end());
    message += fmt::format("{}{} {} in use by another job: {}", message.empty() ? "" : "; ", device_list(devices),
                           devices.size() == 1 ? "is" : "are", holder->summary);
  }
  std::sort(all.begin(), all.end());
  message += "; wait for it to end, or run on other devices (devices= / --devices)";
  const Holder& first = busy.front().second;
  throw DeviceBusyError(all, first.pid, first.description, message);
}

}  // namespace

struct DeviceLocks::State {
  dev_t dir_dev = 0;
  ino_t dir_ino = 0;
  std::vector<int> devices;   // reserved in the registry
  std::vector<UniqueFd> fds;  // closing one releases its lock

  ~State() {
    fds.clear();  // released before another DeviceLocks of this process may open the files
    Registry& r = registry();
    std::lock_guard<std::mutex> lock(r.mutex);
    for (int device : devices) r.held.erase({dir_dev, dir_ino, device});
  }
};

DeviceLocks::DeviceLocks(const std::string& dir, const std::vector<int>& devices, const DeviceLockHolder& holder)
    : state_(std::make_unique<State>()) {
  const std::vector<int> wanted = sorted_unique(devices);

  struct stat dir_st{};
  const UniqueFd dir_fd = open_lock_dir(dir, dir_st);
  state_->dir_dev = dir_st.st_dev;
  state_->dir_ino = dir_st.st_ino;
  {
    Registry& r = registry();
    std::lock_guard<std::mutex> lock(r.mutex);
    std::vector<int> mine;
    for (int device : wanted) {
      if (r.held.count({dir_st.st_dev, dir_st.st_ino, device})) mine.push_back(device);
    }
    if (!mine.empty()) {
      throw DeviceBusyError(mine, ::getpid(), "this process",
                            fmt::format("{} {} already locked by this process (pid {}) in {}", device_list(mine),
                                        mine.size() == 1 ? "is" : "are", ::getpid(), dir));
    }
    for (int device : wanted) r.held.insert({dir_st.st_dev, dir_st.st_ino, device});
    state_->devices = wanted;
  }

  std::vector<std::pair<int, Holder>> busy;
  std::vector<bool> ours;
  for (int device : wanted) {
    const std::string name = lock_file_name(device);
    const std::string path = dir + "/" + name;
    LockFile file = open_lock_file(dir_fd.get(), path, name);
    if (auto other = take_lock(file, path)) busy.emplace_back(device, std::move(*other));
    // Only into a file of our own: another user's is never written nor truncated.
    ours.push_back(file.writable && file.st.st_uid == ::geteuid());
    state_->fds.push_back(std::move(file.fd));
  }
  if (!busy.empty()) throw_busy(busy);  // ~State releases what was taken

  // Best effort: a full disk must not stop the job, only its description.
  const std::string line = description_line(holder);
  for (std::size_t i = 0; i < wanted.size(); ++i) {
    const int fd = state_->fds[i].get();
    if (ours[i] && ::pwrite(fd, line.data(), line.size(), 0) == static_cast<ssize_t>(line.size())) {
      int ignored = ::ftruncate(fd, static_cast<off_t>(line.size()));
      (void)ignored;
    }
  }
}

void check_devices_free(const std::string& dir, const std::vector<int>& devices) {
  const std::vector<int> wanted = sorted_unique(devices);
  UniqueFd dir_fd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!dir_fd) {
    if (errno == ENOENT) return;  // no job has locked anything there yet
    throw ConfigError(fmt::format("cannot open the device lock directory '{}': {}", dir,
                                  errno == ELOOP ? "it is a symbolic link" : std::strerror(errno)));
  }
  std::vector<std::pair<int, Holder>> busy;
  for (int device : wanted) {
    const std::string name = lock_file_name(device);
    // Read-only: testing a lock needs no write access, and nothing is created.
    UniqueFd fd(::openat(dir_fd.get(), name.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK));
    if (!fd) {
      if (errno == ENOENT) continue;
      throw ConfigError(fmt::format("cannot open the device lock file '{}/{}': {}", dir, name,
                                    errno == ELOOP ? "it is a symbolic link" : std::strerror(errno)));
    }
    struct stat st{};
    if (::fstat(fd.get(), &st) != 0) throw SystemError("stat " + dir + "/" + name, errno);
    if (!S_ISREG(st.st_mode)) {
      throw ConfigError(fmt::format("the device lock file '{}/{}' is not a regular file", dir, name));
    }
    struct flock probe = whole_file(F_WRLCK);
    if (::fcntl(fd.get(), F_GETLK, &probe) != 0) throw SystemError("test the lock of " + dir + "/" + name, errno);
    if (probe.l_type != F_UNLCK) busy.emplace_back(device, describe_holder(fd.get(), probe.l_pid));
  }
  if (!busy.empty()) throw_busy(busy);
}

DeviceLocks::DeviceLocks(DeviceLocks&&) noexcept = default;
DeviceLocks& DeviceLocks::operator=(DeviceLocks&&) noexcept = default;
DeviceLocks::~DeviceLocks() = default;

const std::vector<int>& DeviceLocks::devices() const noexcept {
  static const std::vector<int> none;
  return state_ ? state_->devices : none;
}

}  // namespace davincirun
