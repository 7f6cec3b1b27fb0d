// The lifeline's bytes: frames on a Unix stream socket, and the plain binary
// encoding of the values inside them. What each frame means is in
// job_protocol.hpp.
//
// A frame is one type byte, a 32-bit little-endian length, then the payload.
// Payloads are little-endian, fixed-width and length-prefixed, not JSON:
// environment values, arguments and paths may be any bytes. The two ends are
// always the same build, so there is no versioning; every read is
// bounds-checked all the same.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "davincirun/process.hpp"

namespace davincirun::detail {

enum class Frame : char {
  spec = 'J',         ///< launcher → supervisor: the JobSpec
  started = 'S',      ///< StartedJob
  error = 'E',        ///< the job could not start; see encode_error()
  lines = 'L',        ///< console lines of one rank
  notice = 'N',       ///< the launcher's own messages
  progress = 'P',     ///< a rank's line being redrawn with '\r'
  rank_exited = 'X',  ///< RankExited
  result = 'R',       ///< the JobResult; the last frame
};

/// Payloads above this are refused when read (a corrupt length, not a real frame): 1 GiB.
inline constexpr std::uint32_t max_frame_bytes = 1U << 30;

/// Appends values to a payload.
class Writer {
 public:
  void u64(std::uint64_t v);
  void i64(std::int64_t v) { u64(static_cast<std::uint64_t>(v)); }
  void flag(bool v) { out_ += v ? '\1' : '\0'; }
  void str(std::string_view v);
  void strs(const std::vector<std::string>& v);
  void opt_str(const std::optional<std::string>& v);
  void millis(std::chrono::milliseconds v) { i64(v.count()); }
  void time(std::chrono::system_clock::time_point t);
  std::string take() { return std::move(out_); }

 private:
  std::string out_;
};

/// Reads values back, in the order they were written. Every method throws
/// SystemError (EPROTO) when the payload is too short or malformed.
class Reader {
 public:
  explicit Reader(std::string_view data) : data_(data) {}
  std::uint64_t u64();
  std::int64_t i64() { return static_cast<std::int64_t>(u64()); }
  int i32();
  bool flag();
  std::string str();
  std::vector<std::string> strs();
  std::optional<std::string> opt_str();
  std::chrono::milliseconds millis() { return std::chrono::milliseconds(i64()); }
  std::chrono::system_clock::time_point time();
  /// An element count, checked against what is left, so that a corrupt
  /// count cannot make us allocate gigabytes.
  std::size_t count();
  /// The bytes not read yet, all of them (the payload's last field).
  std::string_view rest() noexcept;
  /// Throws unless every byte was read.
  void finish() const;
  /// Throws unless `ok`.
  void check(bool ok) const;

 private:
  void need(std::uint64_t n) const;
  std::string_view data_;
  std::size_t pos_ = 0;
};

/// An exit status in a payload: its kind, then its value (the lifeline's
/// results and the peer channel's events).
void put_status(Writer& w, const ExitStatus& status);
/// The status put_status() wrote; throws as Reader does, also for an unknown kind.
ExitStatus get_status(Reader& r);

/// Writes one frame in full (blocking; EINTR retried; never raises
/// SIGPIPE): its payload is `head` followed by `body`, sent without copying
/// a large body. Returns false when the other end is gone (EPIPE,
/// ECONNRESET). Throws SystemError on other failures.
bool write_frame(int fd, Frame type, std::string_view head, std::string_view body = {});

/// Reads frames from a stream socket, buffered.
class FrameReader {
 public:
  explicit FrameReader(int fd) : fd_(fd) {}
  /// Blocks for the next frame. Returns false at a clean end of stream;
  /// throws SystemError on a read error or a stream cut inside a frame.
  bool next(Frame& type, std::string& payload);
  /// Bytes read past the last frame (e.g. commands that followed the spec).
  std::string take_buffered();

 private:
  bool fill(std::size_t wanted);
  int fd_;
  std::string buffer_;
  std::size_t start_ = 0;
};

}  // namespace davincirun::detail
