#include "davincirun/log_streamer.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

#include <fmt/format.h>

#include "common/text.hpp"
#include "davincirun/errors.hpp"
#include "output/log_tail.hpp"

namespace davincirun {

RankLog::RankLog(std::size_t index, const std::string& label, UniqueFd pipe, std::string log_path, LineSink& console)
    : index_(index),
      prefix_("[" + label + "] "),
      cont_prefix_("[" + label + "]+ "),
      pipe_(std::move(pipe)),
      log_path_(std::move(log_path)),
      console_(&console) {
  // Read and write: the end of what splice(2) moved is read back (pass_spliced_end()).
  file_.reset(::open(log_path_.c_str(), O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
  if (!file_) throw SystemError("create log file " + log_path_, errno);
  const int flags = ::fcntl(pipe_.get(), F_GETFL);
  ::fcntl(pipe_.get(), F_SETFL, flags | O_NONBLOCK);
}

RankLog::ReadResult RankLog::read_available(StreamScratch& scratch, std::size_t budget, Drain drain) {
  if (splicing()) {
    const Spliced moved = splice_some(budget, drain);
    pass_spliced_end(scratch, moved.bytes);
    if (splice_) return moved.result;  // else splice(2) was refused: read(2) takes over from where it stopped
  }
  std::vector<char>& buffer = scratch.input;
  std::size_t taken = 0;
  while (pipe_) {
    if (taken >= budget) return ReadResult::budget_spent;
    const ssize_t n = ::read(pipe_.get(), buffer.data(), buffer.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN) return ReadResult::would_block;
      return ReadResult::eof;  // EIO and the like: treat the stream as ended
    }
    if (n == 0) return ReadResult::eof;
    const auto size = static_cast<std::size_t>(n);
    taken += size;
    bytes_ += size;
    write_file(buffer.data(), size);  // the file first: it is the record of truth
    if (console_->wants_output()) console_->output(index_, std::string_view(buffer.data(), size));
    if (console_->wants_lines()) emit_lines(buffer.data(), size, scratch.console);
    // A pipe's read(2) returns all it holds, up to the size asked: a short
    // read emptied it. Asking again would only hear EAGAIN, one system call
    // per wake-up for nothing; epoll reports what arrives after.
    if (size < buffer.size() && drain == Drain::available) return ReadResult::would_block;
  }
  return ReadResult::eof;
}

bool RankLog::splicing() const noexcept {
  return splice_ && pipe_ && !console_->wants_lines() && !console_->wants_progress();
}

RankLog::Spliced RankLog::splice_some(std::size_t budget, Drain drain) {
  // With no console lines to make, the bytes never need to enter this
  // process: splice(2) moves them from the pipe into the log file's page
  // cache, one copy instead of a read and a write.
  std::uint64_t taken = 0;
  const auto ended = [&taken](ReadResult result) { return Spliced{result, taken}; };
  while (pipe_) {
    if (taken >= budget) return ended(ReadResult::budget_spent);
    const std::size_t want = std::min(budget - static_cast<std::size_t>(taken), max_splice_bytes);
    const ssize_t n = ::splice(pipe_.get(), nullptr, file_.get(), nullptr, want, SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
    if (n < 0) {
      if (errno == EINTR) continue;
      // EAGAIN: empty for now. Anything else: the file system refuses
      // splice (EINVAL), or the write failed (the bytes stay in the pipe):
      // read(2) and write(2) take over, and report a write error as they
      // always do.
      if (errno != EAGAIN) splice_ = false;
      return ended(ReadResult::would_block);
    }
    if (n == 0) return ended(ReadResult::eof);
    const auto size = static_cast<std::size_t>(n);
    taken += size;
    bytes_ += size;
    if (size < want && drain == Drain::available) return ended(ReadResult::would_block);
  }
  return ended(ReadResult::eof);
}

void RankLog::pass_spliced_end(StreamScratch& scratch, std::uint64_t moved) {
  // A watch of the output looks at the last lines of what came: the end of
  // the move, still in the page cache, costs a small read where taking all
  // of it would double the copying of a flood.
  if (moved == 0 || !console_->wants_output()) return;
  const auto size = static_cast<std::size_t>(moved);
  const std::size_t window = std::min({size, spliced_output_window, scratch.input.size()});
  const auto at = static_cast<off_t>(bytes_ - window);  // the file holds every byte so far
  ssize_t n = -1;
  do {
    n = ::pread(file_.get(), scratch.input.data(), window, at);
  } while (n < 0 && errno == EINTR);
  // Short or failed (it should not be: the bytes were just written): all skipped.
  const std::size_t got = n == static_cast<ssize_t>(window) ? window : 0;
  if (got < size) console_->output_skipped(index_, size - got);
  if (got > 0) console_->output(index_, std::string_view(scratch.input.data(), got));
}

void RankLog::write_file(const char* data, std::size_t size) {
  if (!file_ || file_error_) return;
  std::size_t done = 0;
  while (done < size) {
    const ssize_t n = ::write(file_.get(), data + done, size - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      file_error_ = fmt::format("{} at byte {}", std::strerror(errno), bytes_ - size + done);
      return;
    }
    done += static_cast<std::size_t>(n);
  }
}

void RankLog::emit_lines(const char* data, std::size_t size, std::string& out) {
  // Build one block of whole, prefixed lines per read so that a sink writes
  // it at once and lines of different ranks never interleave mid-line.
  out.clear();  // keeps its capacity
  // Most output has no '\r' at all: one scan of the read decides.
  const bool read_has_cr = std::memchr(data, '\r', size) != nullptr;
  const char* end = data + size;
  while (data < end) {
    const char* nl = static_cast<const char*>(std::memchr(data, '\n', static_cast<std::size_t>(end - data)));
    if (!nl) {
      partial_.append(data, static_cast<std::size_t>(end - data));
      if (read_has_cr || redrawing_) collapse_redrawn();
      emit_full_chunks(out);
      break;
    }
    const auto length = static_cast<std::size_t>(nl - data);  // without the '\n'
    if (partial_.empty() && length <= max_line_bytes && !(read_has_cr && std::memchr(data, '\r', length))) {
      out += prefix_;  // the common case: a whole line inside one read
      out.append(data, length + 1);
    } else {
      partial_.append(data, length);
      if (read_has_cr || redrawing_) {
        collapse_redrawn();
        while (!partial_.empty() && partial_.back() == '\r') partial_.pop_back();  // "\r\n"
      }
      if (redrawing_ && moves_cursor_up(partial_)) {
        // One bar of a multi-line progress display (tqdm's nested bars move
        // the cursor up after drawing): a redraw, not a line of its own.
        positioned_progress_.assign(partial_, 0, std::min(partial_.size(), max_progress_bytes + 8));
      } else {
        emit_full_chunks(out);
        out += partial_is_continuation_ ? cont_prefix_ : prefix_;
        out += partial_;
        out += '\n';
        positioned_progress_.clear();
      }
      partial_.clear();
      partial_is_continuation_ = false;
      redrawing_ = false;
    }
    data = nl + 1;
  }
  if (!out.empty()) console_->write(index_, out);
  if (console_->wants_progress()) report_progress();
}

bool RankLog::moves_cursor_up(std::string_view line) {
  // ESC [ A or ESC [ <n> A (CUU), as terminals read it.
  for (std::size_t at = line.find("\x1b["); at != std::string_view::npos; at = line.find("\x1b[", at + 2)) {
    std::size_t i = at + 2;
    while (i < line.size() && line[i] >= '0' && line[i] <= '9') ++i;
    if (i < line.size() && line[i] == 'A') return true;
  }
  return false;
}

void RankLog::collapse_redrawn() {
  // Keep what a terminal shows of the line. Trailing '\r's are kept as one:
  // it may be the first half of "\r\n", or the end of a redraw
  // (`print(x, end="\r")`) whose text stays current.
  const std::string_view shown = detail::shown_line(partial_);
  const auto begin = static_cast<std::size_t>(shown.data() - partial_.data());
  const std::size_t end = begin + shown.size();
  if (begin == 0 && end == partial_.size()) return;  // an ordinary partial line
  redrawing_ = true;
  partial_.resize(end < partial_.size() ? end + 1 : end);
  partial_.erase(0, begin);
}

void RankLog::report_progress() {
  // What the rank's current line shows: the unfinished line (the state of a
  // bar redrawn with '\r', or text still waiting for its '\n', such as a
  // row of dots), else the last bar of a multi-line progress display.
  std::string_view text = partial_;
  while (!text.empty() && text.back() == '\r') text.remove_suffix(1);
  if (text.empty()) {
    if (redrawing_ && !partial_.empty()) return;  // a bare '\r' erases nothing: the last state stays
    text = positioned_progress_;
  }
  text = text.substr(0, detail::utf8_prefix_length(text, max_progress_bytes));
  if (text == progress_shown_) return;
  progress_shown_.assign(text);
  console_->progress(index_, progress_shown_);
}

void RankLog::emit_full_chunks(std::string& out) {
  // An overlong line goes out in marked chunks so memory stays bounded.
  std::size_t offset = 0;
  while (partial_.size() - offset > max_line_bytes) {
    out += partial_is_continuation_ ? cont_prefix_ : prefix_;
    out.append(partial_, offset, max_line_bytes);
    out += '\n';
    offset += max_line_bytes;
    partial_is_continuation_ = true;
  }
  partial_.erase(0, offset);
}

void RankLog::finish() {
  if (redrawing_) {
    while (!partial_.empty() && partial_.back() == '\r') partial_.pop_back();
  }
  if (!partial_.empty()) {
    std::string out = (partial_is_continuation_ ? cont_prefix_ : prefix_) + partial_ + "\n";
    partial_.clear();
    console_->write(index_, out);
  }
  redrawing_ = false;
  positioned_progress_.clear();
  if (console_->wants_progress()) report_progress();
  pipe_.reset();
  file_.reset();
}

}  // namespace davincirun
