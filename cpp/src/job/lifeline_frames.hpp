// The lifeline's frames on its Unix stream socket: one type byte, a 32-bit
// little-endian length, then the payload (values encoded by common/wire.hpp).
// What each frame means is in job_protocol.hpp. The two ends are always the
// same build, so there is no versioning; every read is bounds-checked all
// the same.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace davincirun::detail {

enum class Frame : char {
  spec = 'J',         ///< launcher → supervisor: the JobSpec
  started = 'S',      ///< StartedJob
  error = 'E',        ///< the job could not start; see encode_error()
  lines = 'L',        ///< console lines of one rank
  notice = 'N',       ///< the launcher's own messages
  progress = 'P',     ///< a rank's line being redrawn with '\r'
  rank_exited = 'X',  ///< RankExited
  attempt = 'A',      ///< AttemptStarted
  status = 'T',       ///< RanksStatus
  result = 'R',       ///< the JobResult; the last frame
};

/// Payloads above this are refused when read (a corrupt length, not a real frame): 1 GiB.
inline constexpr std::uint32_t max_frame_bytes = 1U << 30;

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
