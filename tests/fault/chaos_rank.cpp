// chaos_rank: the rank program of the randomized fault run (fault_driver.py).
//
//   chaos_rank PLAN LEDGER          run as rank $RANK_ID, as line RANK_ID of PLAN says
//   chaos_rank verify RUN_DIR N [FIRST]
//                                   per rank FIRST..FIRST+N-1 (FIRST 0 by default), on device
//                                   rank-FIRST of its server: "<rank> <valid prefix> <file size>"
//   chaos_rank emit RANK BYTES      the first BYTES bytes of RANK's stream, to stdout
//
// A rank writes a deterministic stream of records (derived from the rank and
// the record number only, so a log can be checked as an exact prefix of it):
// ordinary lines, lines without a newline, '\r' redraws, "\r\n" ends,
// invalid UTF-8, NUL bytes and rare lines of 70-200 KiB. After every
// successful write(2) it stores its total in a MAP_SHARED ledger, so after a
// SIGKILL the driver still knows the least the log must hold.
//
// PLAN: a first line with the rank count, then per rank:
//   action T_ms pace_ms flood daemon close_after code signal ignore_term after_rank
// action: exit (code), crash (raise(signal)) or hang (sleep forever); the
// rank writes for T_ms first (a record every pace_ms, or as fast as it can
// when flood is 1), then, if after_rank >= 0, waits until that rank has
// died. daemon: 0 none, 1 a double-forked setsid() process with stdout and
// stderr on /dev/null, 2 the same holding the rank's output pipe.
// close_after >= 0: close stdout once that many bytes are written and go on
// writing to stderr. ignore_term: SIGTERM ignored.
//
// LEDGER: 3*N little-endian 64-bit slots: bytes written by rank i, its pid,
// its state (1 running, 2 ending on its own).
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

// ---- the stream ---------------------------------------------------------

std::uint32_t record_hash(std::uint32_t rank, std::uint32_t k) {
  std::uint32_t h = rank * 0x9E3779B1u + k * 0x85EBCA77u + 0x165667B1u;
  h ^= h >> 15;
  h *= 0x2C1B3C6Du;
  h ^= h >> 12;
  h *= 0x297A2D39u;
  h ^= h >> 15;
  return h;
}

const char alphabet[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_";

void payload(std::string& out, std::uint32_t h, std::size_t len) {
  const std::uint32_t step = 1 + (h & 7);
  for (std::size_t i = 0; i < len; ++i) out += alphabet[(h + i * step) & 63];
}

// Appends record k of `rank`; fault_stream.py's expected_stream() is the same.
void append_record(std::string& out, std::uint32_t rank, std::uint32_t k) {
  const std::uint32_t h = record_hash(rank, k);
  out += "r" + std::to_string(rank) + " k" + std::to_string(k) + " ";
  const std::uint32_t kind = h % 16;
  const std::uint32_t size = (h >> 8) % 100;
  if (kind == 9) {  // no newline: the next record continues this line
    payload(out, h, 10 + size % 30);
  } else if (kind == 10) {  // a progress bar redrawn in place
    for (std::uint32_t i = 0; i < 4; ++i) {
      out += std::to_string(i * 25) + "%|" + std::string(i, '#') + "\r";
    }
    out += "done\n";
  } else if (kind == 11) {  // not UTF-8
    out += "\xff\xfe\xc3\x28\xa0\xa1\xe2\x82\n";
  } else if (kind == 12) {
    out += std::string("\0\0nul\0", 6) + "\n";
  } else if (kind == 13) {
    payload(out, h, 5 + size);
    out += "\r\n";
  } else if (kind == 14 && (h >> 20) % 8 == 0) {  // 1 record in 128: a line longer than 64 KiB
    payload(out, h, 70 * 1024 + (h >> 8) % (130 * 1024));
    out += "\n";
  } else if (kind == 15) {
    out += "\xc3\xa9\xe4\xb8\xad ";  // valid multi-byte UTF-8
    payload(out, h, 5 + size);
    out += "\n";
  } else {
    payload(out, h, 20 + size);
    out += "\n";
  }
}

class StreamSource {
 public:
  explicit StreamSource(std::uint32_t rank) : rank_(rank) {}
  // At least `want` more bytes at pending(), never fewer than one record.
  void fill(std::size_t want) {
    do append_record(buf_, rank_, next_++);
    while (buf_.size() - pos_ < want);
  }
  const char* pending() const { return buf_.data() + pos_; }
  std::size_t pending_size() const { return buf_.size() - pos_; }
  void consume(std::size_t n) {
    pos_ += n;
    if (pos_ > (1u << 20) && pos_ * 2 > buf_.size()) {
      buf_.erase(0, pos_);
      pos_ = 0;
    }
  }

 private:
  std::uint32_t rank_;
  std::uint32_t next_ = 0;
  std::string buf_;
  std::size_t pos_ = 0;
};

// ---- verify and emit ----------------------------------------------------

bool read_file(const std::string& path, std::string& out) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  char buf[1 << 16];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    out.append(buf, static_cast<std::size_t>(n));
  }
  ::close(fd);
  return true;
}

// The ranks of one server hold its devices 0..N-1 in rank order.
int verify(const char* run_dir, int ranks, int first) {
  for (int r = first; r < first + ranks; ++r) {
    std::string path =
        std::string(run_dir) + "/rank_" + std::to_string(r) + ".device_" + std::to_string(r - first) + ".log";
    std::string log;
    if (!read_file(path, log)) {
      std::printf("%d -1 -1\n", r);
      continue;
    }
    StreamSource src(static_cast<std::uint32_t>(r));
    std::size_t matched = 0;
    while (matched < log.size()) {
      src.fill(1);
      const std::size_t n = std::min(src.pending_size(), log.size() - matched);
      const char* want = src.pending();
      std::size_t i = 0;
      while (i < n && want[i] == log[matched + i]) ++i;
      matched += i;
      if (i < n) break;
      src.consume(n);
    }
    std::printf("%d %zu %zu\n", r, matched, log.size());
  }
  return 0;
}

int emit(std::uint32_t rank, std::size_t bytes) {
  StreamSource src(rank);
  while (bytes > 0) {
    src.fill(1);
    std::size_t n = std::min(src.pending_size(), bytes);
    if (std::fwrite(src.pending(), 1, n, stdout) != n) return 1;
    src.consume(n);
    bytes -= n;
  }
  return std::fflush(stdout) == 0 ? 0 : 1;
}

// ---- running as a rank --------------------------------------------------

struct Plan {
  char action[16] = "";
  long t_ms = 0, pace_ms = 0;
  int flood = 0, daemon = 0;
  long close_after = -1;
  int code = 0, sig = 0, ignore_term = 0, after_rank = -1;
};

[[noreturn]] void die(const char* what) {
  std::fprintf(stderr, "chaos_rank: %s: %s\n", what, std::strerror(errno));
  std::_Exit(97);
}

double now_ms() {
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

void sleep_ms(long ms) {
  timespec ts{ms / 1000, (ms % 1000) * 1000000L};
  while (::nanosleep(&ts, &ts) < 0 && errno == EINTR) {}
}

bool read_plan(const char* path, int rank, int& ranks, Plan& p) {
  std::FILE* f = std::fopen(path, "r");
  if (!f) return false;
  bool ok = std::fscanf(f, "%d", &ranks) == 1 && rank >= 0 && rank < ranks;
  for (int r = 0; ok && r <= rank; ++r) {
    ok = std::fscanf(f, "%15s %ld %ld %d %d %ld %d %d %d %d", p.action, &p.t_ms, &p.pace_ms, &p.flood, &p.daemon,
                     &p.close_after, &p.code, &p.sig, &p.ignore_term, &p.after_rank) == 10;
  }
  std::fclose(f);
  return ok;
}

// A process outside the rank's group and session that outlives the rank.
void start_daemon(bool hold_output) {
  pid_t child = ::fork();
  if (child < 0) die("fork");
  if (child == 0) {
    ::setsid();
    pid_t grandchild = ::fork();
    if (grandchild != 0) std::_Exit(grandchild < 0 ? 1 : 0);
    if (!hold_output) {
      int null = ::open("/dev/null", O_WRONLY);
      ::dup2(null, 1);
      ::dup2(null, 2);
      if (null > 2) ::close(null);
    }
    for (;;) ::pause();
  }
  int status = 0;
  while (::waitpid(child, &status, 0) < 0 && errno == EINTR) {}
}

bool is_dead(pid_t pid) {
  std::string stat;
  if (!read_file("/proc/" + std::to_string(pid) + "/stat", stat)) return true;
  const std::size_t paren = stat.rfind(')');
  return paren == std::string::npos || paren + 2 >= stat.size() || stat[paren + 2] == 'Z' || stat[paren + 2] == 'X';
}

int run(const char* plan_path, const char* ledger_path) {
  const char* rank_env = std::getenv("RANK_ID");
  if (!rank_env) {
    std::fprintf(stderr, "chaos_rank: RANK_ID is not set\n");
    return 98;
  }
  const int rank = std::atoi(rank_env);
  int ranks = 0;
  Plan p;
  if (!read_plan(plan_path, rank, ranks, p)) {
    std::fprintf(stderr, "chaos_rank: no plan for rank %d in %s\n", rank, plan_path);
    return 98;
  }
  int fd = ::open(ledger_path, O_RDWR | O_CLOEXEC);
  if (fd < 0) die("open the ledger");
  void* map = ::mmap(nullptr, sizeof(std::uint64_t) * 3 * ranks, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (map == MAP_FAILED) die("mmap the ledger");
  ::close(fd);
  auto* ledger = static_cast<std::uint64_t*>(map);
  std::uint64_t* written_slot = &ledger[rank];
  std::uint64_t* state_slot = &ledger[2 * ranks + rank];

  if (p.ignore_term) ::signal(SIGTERM, SIG_IGN);
  if (p.daemon) start_daemon(p.daemon == 2);
  __atomic_store_n(&ledger[ranks + rank], static_cast<std::uint64_t>(::getpid()), __ATOMIC_RELEASE);
  __atomic_store_n(state_slot, 1, __ATOMIC_RELEASE);

  StreamSource src(static_cast<std::uint32_t>(rank));
  std::uint64_t total = 0;
  int out = 1;
  constexpr std::uint64_t flood_cap = 16u << 20;
  const double end = now_ms() + static_cast<double>(p.t_ms);
  bool first = true;  // even T = 0 writes one record
  while (first || now_ms() < end) {
    first = false;
    if (p.flood && total >= flood_cap) break;
    if (p.flood && src.pending_size() < (64u << 10)) src.fill(64u << 10);
    if (!p.flood && src.pending_size() == 0) src.fill(1);
    // A flood writes one 64 KiB chunk per call; a paced rank its whole record.
    while (src.pending_size() > 0) {
      const std::size_t want = p.flood ? std::min<std::size_t>(src.pending_size(), 64u << 10) : src.pending_size();
      const ssize_t n = ::write(out, src.pending(), want);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) die("write");
      src.consume(static_cast<std::size_t>(n));
      total += static_cast<std::uint64_t>(n);
      __atomic_store_n(written_slot, total, __ATOMIC_RELEASE);
      if (out == 1 && p.close_after >= 0 && total >= static_cast<std::uint64_t>(p.close_after)) {
        ::close(1);
        out = 2;
      }
      if (p.flood) break;
    }
    if (!p.flood && p.pace_ms > 0) sleep_ms(p.pace_ms);
  }

  if (p.after_rank >= 0 && p.after_rank < ranks) {
    // End only once that rank has really died, so that it is the first failure.
    pid_t other = 0;
    while ((other = static_cast<pid_t>(__atomic_load_n(&ledger[ranks + p.after_rank], __ATOMIC_ACQUIRE))) == 0) {
      sleep_ms(1);
    }
    while (!is_dead(other)) sleep_ms(1);
  }

  if (std::strcmp(p.action, "exit") == 0) {
    __atomic_store_n(state_slot, 2, __ATOMIC_RELEASE);
    std::_Exit(p.code);
  }
  if (std::strcmp(p.action, "crash") == 0) {
    rlimit none{0, 0};
    ::setrlimit(RLIMIT_CORE, &none);
    __atomic_store_n(state_slot, 2, __ATOMIC_RELEASE);
    ::raise(p.sig);
    std::_Exit(96);
  }
  for (;;) ::pause();  // hang
}

}  // namespace

int main(int argc, char** argv) {
  if ((argc == 4 || argc == 5) && std::strcmp(argv[1], "verify") == 0) {
    return verify(argv[2], std::atoi(argv[3]), argc == 5 ? std::atoi(argv[4]) : 0);
  }
  if (argc == 4 && std::strcmp(argv[1], "emit") == 0) {
    return emit(static_cast<std::uint32_t>(std::atoi(argv[2])), std::strtoull(argv[3], nullptr, 10));
  }
  if (argc == 3) return run(argv[1], argv[2]);
  std::fprintf(stderr, "usage: chaos_rank PLAN LEDGER | verify RUN_DIR N [FIRST] | emit RANK BYTES\n");
  return 2;
}
