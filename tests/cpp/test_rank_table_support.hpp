// Helpers shared by the rank table tests (test_rank_table*.cpp).
#pragma once

#include <catch2/catch.hpp>

#include <fstream>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>

#include <nlohmann/json.hpp>

#include "davincirun/errors.hpp"
#include "davincirun/rank_table.hpp"

namespace rank_table_test {

using Json = nlohmann::ordered_json;

inline const std::string corpus_dir = DAVINCIRUN_TEST_DATA "/rank_tables/";
/// Format 2.0 tables, apart from the shared corpus above (a byte-identical copy).
inline const std::string corpus_v2_dir = DAVINCIRUN_TEST_DATA "/rank_tables_2_0/";

inline std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

inline Json corpus_doc(const std::string& name) { return Json::parse(read_text(corpus_dir + name)); }

/// The RankTableError that `load` throws; fails the test when it throws none.
template <typename Load>
davincirun::RankTableError error_of(Load&& load) {
  try {
    load();
  } catch (const davincirun::RankTableError& e) {
    return e;
  }
  FAIL("expected a RankTableError");
  throw std::logic_error("unreachable");
}

inline davincirun::RankTableError parse_error(const std::string& text) {
  return error_of([&] { davincirun::parse_rank_table(text, "test.json"); });
}

inline davincirun::RankTableError doc_error(const Json& doc) { return parse_error(doc.dump()); }

inline davincirun::RankTable parse_doc(const Json& doc) { return davincirun::parse_rank_table(doc.dump(), "t.json"); }

inline Json::json_pointer at(const std::string& pointer) { return Json::json_pointer(pointer); }

/// An engaged optional, to compare with optional fields and pointers.
inline std::optional<std::string> some(const std::string& text) { return text; }

// Every prefix of `text`, and `text` with each byte replaced by each of
// `swaps`: parsing them may only ever throw RankTableError.
inline void check_hostile_variants(const std::string& text, const std::string& swaps = "\"[{0-}") {
  for (std::size_t n = 0; n < text.size(); ++n) {
    CAPTURE(n);
    REQUIRE_NOTHROW([&] {
      try {
        davincirun::parse_rank_table(text.substr(0, n), "t.json");
      } catch (const davincirun::RankTableError&) {}
      for (const char c : swaps) {
        std::string mutated = text;
        mutated[n] = c;
        try {
          davincirun::parse_rank_table(mutated, "t.json");
        } catch (const davincirun::RankTableError&) {}
      }
    }());
  }
}

}  // namespace rank_table_test
