// The typed encoding of the lifeline's and the peer channel's values
// (common/wire.hpp): each value carries its type, so that a read out of
// order fails loudly, naming what it expected and what it found, instead of
// decoding garbage; field lists (fields.hpp) drive whole structs.
#include <catch2/catch.hpp>

#include <cerrno>
#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "common/wire.hpp"
#include "davincirun/errors.hpp"
#include "davincirun/job_types.hpp"
#include "job/job_protocol.hpp"

using namespace davincirun;
using namespace davincirun::detail;

namespace {

// The message of the SystemError(EPROTO) that `read` throws; "" when it throws none.
template <typename F>
std::string refusal(F&& read) {
  try {
    read();
  } catch (const SystemError& e) {
    CHECK(e.os_errno() == EPROTO);
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("typed values round-trip, each with its type", "[wire]") {
  Writer w;
  w.u64(UINT64_MAX);
  w.i64(-5);
  w.flag(true);
  w.str(std::string("a\0b", 3));
  w.strs({"x", ""});
  w.opt_str(std::nullopt);
  w.millis(std::chrono::milliseconds(-7));
  const auto now = std::chrono::system_clock::now();
  w.time(now);
  put(w, std::optional<ExitStatus>(ExitStatus{ExitStatus::Kind::signaled, 9}));
  put(w, std::vector<int>{1, -2});
  const std::string payload = w.take();
  CHECK(static_cast<WireType>(payload[0]) == WireType::u64);

  Reader r(payload);
  CHECK(r.u64() == UINT64_MAX);
  CHECK(r.i64() == -5);
  CHECK(r.flag());
  CHECK(r.str() == std::string("a\0b", 3));
  CHECK((r.strs() == std::vector<std::string>{"x", ""}));
  CHECK_FALSE(r.opt_str());
  CHECK(r.millis() == std::chrono::milliseconds(-7));
  CHECK(r.time() == std::chrono::time_point_cast<std::chrono::system_clock::duration>(now));
  std::optional<ExitStatus> status;
  get(r, status);
  REQUIRE(status);
  CHECK((status->kind == ExitStatus::Kind::signaled && status->value == 9));
  std::vector<int> ints;
  get(r, ints);
  CHECK((ints == std::vector<int>{1, -2}));
  r.finish();
}

TEST_CASE("a value read out of order fails, naming the type expected and the type found", "[wire]") {
  Writer w;
  w.u64(3);
  w.str("three");
  const std::string payload = w.take();
  Reader r(payload);
  CHECK(refusal([&] { r.str(); }) ==
        "malformed message between the launcher and its job supervisor process: expected str, found u64: "
        "Protocol error");

  // Whole structs: a RankResult read as a PeerStop stops at its first field.
  RankResult rank;
  rank.log_path = "rank_0.log";
  CHECK_THAT(refusal([&] { decode<PeerStop>(encode(rank)); }), Catch::Contains("expected str, found enum"));
  // A lifeline message read as another.
  CHECK_THAT(refusal([&] { decode_result(encode_spec(JobSpec{})); }), Catch::Contains("expected count, found str"));
  // Garbage where a type byte should be.
  CHECK_THAT(refusal([&] { Reader("\x63").u64(); }), Catch::Contains("expected u64, found type byte 99"));
}

TEST_CASE("integers and enums out of their type's range are refused", "[wire]") {
  Writer w;
  w.i64(std::int64_t{1} << 40);
  w.enumeration(enum_count<StopReason>());
  const std::string payload = w.take();
  Reader r(payload);
  int narrow = 0;
  CHECK_FALSE(refusal([&] { get(r, narrow); }).empty());
  Reader again(std::string_view(payload).substr(9));
  StopReason reason{};
  CHECK_FALSE(refusal([&] { get(again, reason); }).empty());
}
