// Reading rank table files: load_rank_table (one file, once) and
// wait_for_rank_table (a file or a platform's directory, waiting while the
// platform writes it).
#include "davincirun/rank_table_loader.hpp"

#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string_view>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "common/prefault.hpp"
#include "davincirun/unique_fd.hpp"
#include "rank_table/rank_table_absence.hpp"
#include "rank_table/rank_table_checker.hpp"

namespace davincirun {

namespace {

using Kind = RankTableError::Kind;
using Clock = std::chrono::steady_clock;
// keep_waiting is called at least this often while waiting.
constexpr std::chrono::milliseconds keep_waiting_slice{50};
using std::chrono::milliseconds;

constexpr std::size_t max_file_bytes = std::size_t{64} << 20;  // real ones: a few KiB per server
// Looked up in this order in a directory (ModelArts writes the first).
constexpr const char* table_names[] = {"jobstart_hccl.json", "hccl.json"};

RankTableError io_error(const std::string& path, std::string_view what, int error) {
  return RankTableError(Kind::io, path, std::nullopt, fmt::format("{}: {}", what, std::strerror(error)));
}

// A file's bytes, followed by at least `padding` readable bytes (the fast
// reader's simdjson reads up to 64 past the end: parse_table_text).
class FileText {
 public:
  static constexpr std::size_t padding = 64;

  explicit FileText(std::size_t capacity) : capacity_(capacity), bytes_(new char[capacity + padding]) {}
  char* data() { return bytes_.get(); }
  std::size_t capacity() const { return capacity_; }
  // The end of the text; the padding after it zeroed, as a std::string's
  // would be (simdjson never takes it for JSON, but nothing read is left
  // unwritten).
  void set_size(std::size_t size) {
    size_ = size;
    std::memset(bytes_.get() + size, 0, padding);
  }
  std::string_view view() const { return {bytes_.get(), size_}; }

 private:
  std::size_t capacity_;
  std::size_t size_ = 0;
  std::unique_ptr<char[]> bytes_;  // not zero-filled first: read() writes it, its pages fault in once
};

// The file's bytes; nullopt when it does not exist (which a waiting caller retries).
std::optional<FileText> read_if_exists(const std::string& path) {
  const auto too_large = [&] {
    return RankTableError(Kind::io, path, std::nullopt,
                          fmt::format("file is larger than {} MiB; not a rank table", max_file_bytes >> 20));
  };
  // O_NONBLOCK: opening a FIFO must not wait for a writer (it is refused below).
  const UniqueFd file(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK));
  if (!file && errno == ENOENT) return std::nullopt;
  if (!file) throw io_error(path, "cannot open the rank table", errno);
  const int fd = file.get();

  struct stat info{};
  if (::fstat(fd, &info) != 0) throw io_error(path, "cannot stat the rank table", errno);
  if (S_ISDIR(info.st_mode)) {
    throw io_error(path, "cannot read the rank table (expected the table's .json file)", EISDIR);
  }
  if (!S_ISREG(info.st_mode)) {
    throw RankTableError(Kind::io, path, std::nullopt,
                         "cannot read the rank table: not a regular file (pipe, device or socket)");
  }
  if (static_cast<std::uintmax_t>(info.st_size) > max_file_bytes) throw too_large();

  // Read straight into the text: the size stat gave, plus room to see the
  // file grow while it is read (checked against the limit again). A large
  // file's pages fault in on the other core meanwhile.
  std::optional<FileText> text(std::in_place, static_cast<std::size_t>(info.st_size) + 65536);
  std::optional<detail::Prefault> prefault(std::in_place,
                                           std::initializer_list<detail::FreshArea>{{text->data(), text->capacity()}});
  std::size_t size = 0;
  for (;;) {
    if (size == text->capacity()) {
      if (size >= max_file_bytes + 1) throw too_large();
      prefault.reset();
      FileText larger(std::min(size * 2, max_file_bytes + 1));
      std::memcpy(larger.data(), text->data(), size);
      text = std::move(larger);
    }
    const ssize_t n = ::read(fd, text->data() + size, text->capacity() - size);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw io_error(path, "cannot read the rank table", errno);
    if (n == 0) break;
    size += static_cast<std::size_t>(n);
    if (size > max_file_bytes) throw too_large();
  }
  text->set_size(size);
  return text;
}

// "1 s", "0.5 s", "300 s".
std::string seconds(milliseconds duration) {
  return fmt::format("{:g} s", std::chrono::duration<double>(duration).count());
}

// What is absent, for the words that say what is there instead.
enum class Absent { nothing, file, table_in_dir };

// One look at the table: either it is usable, or why not yet (a state worth
// waiting on). Any other problem is thrown.
struct Attempt {
  std::optional<LoadedRankTable> loaded;
  std::string file;                 // the file looked at (path_or_dir when none was found)
  std::string state;                // e.g. "its status is still 'initializing'"
  Absent absent = Absent::nothing;  // with state, when the file or the table is not there
  Kind kind = Kind::io;             // of the error to throw if the wait ends in this state
};

// The state, and for a missing file or table what is there instead: read
// only when said, as a large folder takes a while to list.
std::string described(const Attempt& seen) {
  switch (seen.absent) {
    case Absent::file: return seen.state + detail::absent_file_note(seen.file);
    case Absent::table_in_dir: {
      const std::vector<std::string_view> wanted(std::begin(table_names), std::end(table_names));
      return seen.state + detail::directory_note(seen.file, wanted);
    }
    case Absent::nothing: break;
  }
  return seen.state;
}

// The error of a table found absent with waiting off.
RankTableError absence_error(const Attempt& seen) {
  if (seen.absent == Absent::table_in_dir) {
    return RankTableError(Kind::io, seen.file, std::nullopt, "no rank table in this directory: " + described(seen));
  }
  if (seen.absent == Absent::file) {
    return RankTableError(
        Kind::io, seen.file, std::nullopt,
        fmt::format("cannot open the rank table: {}{}", std::strerror(ENOENT), detail::absent_file_note(seen.file)));
  }
  throw std::logic_error("wait_for_rank_table: no table and no error");
}

Attempt attempt(const std::string& path_or_dir, bool waiting) {
  Attempt out;
  out.file = path_or_dir;
  struct stat info{};
  if (::stat(path_or_dir.c_str(), &info) == 0 && S_ISDIR(info.st_mode)) {
    const std::string dir = path_or_dir.back() == '/' ? path_or_dir : path_or_dir + '/';
    const auto found = std::find_if(std::begin(table_names), std::end(table_names), [&](auto name) {
      struct stat entry{};
      return ::lstat((dir + name).c_str(), &entry) == 0;  // a dangling link is found, then refused
    });
    if (found == std::end(table_names)) {
      out.state = fmt::format("neither {} nor {} exists in the directory", table_names[0], table_names[1]);
      out.absent = Absent::table_in_dir;
      return out;
    }
    out.file = dir + *found;
  }
  const std::optional<FileText> text = read_if_exists(out.file);
  if (!text) {
    out.state = "it does not exist";
    out.absent = Absent::file;
    return out;
  }
  try {
    RankTable table = detail::parse_table_text(text->view(), out.file, true);
    if (waiting && table.status == "initializing") {
      out.state = "its status is still 'initializing'";
      out.kind = Kind::bad_value;
      return out;
    }
    char* resolved = ::realpath(out.file.c_str(), nullptr);  // HCCL and torch_npu want the real file
    if (resolved == nullptr) throw io_error(out.file, "cannot resolve the rank table's path", errno);
    const std::unique_ptr<char, decltype(&::free)> owner(resolved, &::free);
    out.loaded = LoadedRankTable{std::move(table), resolved};
    return out;
  } catch (const detail::UnfinishedJson& e) {
    // The text stops before its JSON does: the platform is still writing it.
    if (!waiting) throw RankTableError(e);
    out.state = "it is not valid JSON yet (" + e.detail() + ")";
    out.kind = e.kind();
    return out;
  } catch (const RankTableError& e) {
    if (!waiting) throw;
    // A platform may first write {"status": "initializing"} with no servers yet.
    if (detail::top_level_status(text->view()) == "initializing") {
      out.state = "its status is still 'initializing'";
      out.kind = Kind::bad_value;
      return out;
    }
    // Anything else, a syntax error before the end of the text included, is
    // a finished file that is broken: waiting would not mend it.
    if (e.kind() != Kind::empty) throw;
    out.state = "it is still empty";
    out.kind = e.kind();
    return out;
  }
}

}  // namespace

RankTable load_rank_table(const std::string& path) {
  const std::optional<FileText> text = read_if_exists(path);
  if (!text) throw io_error(path, "cannot open the rank table", ENOENT);
  try {
    return detail::parse_table_text(text->view(), path, true);
  } catch (const detail::UnfinishedJson& e) {
    throw RankTableError(e);  // the public type: nobody waits here
  }
}

LoadedRankTable wait_for_rank_table(const std::string& path_or_dir, const RankTableLoadOptions& options) {
  if (path_or_dir.empty()) {
    throw RankTableError(Kind::io, path_or_dir, std::nullopt, "no rank table path given");
  }
  const milliseconds timeout = std::max(options.wait_timeout, milliseconds(0));
  const milliseconds interval = std::max(options.retry_interval, milliseconds(1));
  const bool waiting = timeout > milliseconds(0);
  if (const std::optional<std::string> missing = detail::missing_folder(path_or_dir)) {
    throw RankTableError(Kind::io, path_or_dir, std::nullopt,
                         fmt::format("cannot open the rank table: {}{}", *missing,
                                     waiting ? "; not waited for, as a platform writes its table into a folder "
                                               "that exists"
                                             : ""));
  }
  const auto start = Clock::now();
  const auto deadline = start + timeout;
  auto next_progress = start;
  for (bool first_look = true;; first_look = false) {
    Attempt seen = attempt(path_or_dir, waiting);
    if (seen.loaded) return std::move(*seen.loaded);
    if (!waiting) throw absence_error(seen);
    const auto now = Clock::now();
    if (now >= deadline) {
      throw RankTableError(
          seen.kind, seen.file, std::nullopt,
          fmt::format("timed out after {} waiting for the rank table: {}", seconds(timeout), described(seen)));
    }
    // The first line comes with the second look, not the first: a table a
    // platform rewrites at that moment (truncated, then written, within
    // milliseconds) is found whole by the next look and nothing is said,
    // while one still missing a look later (a mistyped name, a platform
    // still starting) is reported within retry_interval.
    if (options.progress && !first_look && now >= next_progress) {
      const auto waited = std::chrono::duration_cast<std::chrono::seconds>(now - start).count();
      options.progress(fmt::format("waiting for rank table {}: {}; waited {} s of {}; {} stops, {} does not wait",
                                   seen.file, described(seen), waited, seconds(timeout), options.stop_name,
                                   options.no_wait_setting));
      next_progress = now + std::max(options.progress_interval, milliseconds(1));
    }
    // The pause before the next look, in slices: a stop request is answered
    // within one slice, not a whole retry_interval.
    const auto next_look = std::min(now + interval, deadline);
    do {
      if (options.keep_waiting) options.keep_waiting();
      std::this_thread::sleep_for(
          std::min(keep_waiting_slice, std::chrono::duration_cast<milliseconds>(next_look - Clock::now())));
    } while (Clock::now() < next_look);
  }
}

}  // namespace davincirun
