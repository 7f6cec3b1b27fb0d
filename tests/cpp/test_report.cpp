// The report page and summary (report.hpp): the record is embedded so that
// no text in it can end its script element or reach the markup, the page is
// written privately and atomically, and a record that is not one is a typed
// error naming its source.
#include <catch2/catch.hpp>

#include <sys/stat.h>

#include <map>
#include <string>

#include <nlohmann/json.hpp>

#include "davincirun/report.hpp"
#include "test_support.hpp"

using namespace davincirun;
using namespace davincirun_test;
using Catch::Matchers::Contains;

namespace {

std::string example(const std::string& name) {
  return read_file(std::string(DAVINCIRUN_TEST_DATA) + "/job_records/" + name);
}

// The text between the record's script element's tags.
std::string embedded_record(const std::string& page) {
  const std::string open = "<script type=\"application/json\" id=\"job-record\">";
  const auto start = page.find(open);
  REQUIRE(start != std::string::npos);
  const auto end = page.find("</script>", start);
  REQUIRE(end != std::string::npos);
  return page.substr(start + open.size(), end - start - open.size());
}

}  // namespace

TEST_CASE("the report page embeds the record whole, with nothing that ends its element", "[report]") {
  const std::string record = example("failed_4_ranks.json");
  const std::string page = render_report(record);
  const std::string embedded = embedded_record(page);
  // The same record when parsed back, so escaping lost nothing.
  CHECK(nlohmann::json::parse(embedded) == nlohmann::json::parse(record));
  // No markup can start inside it: no '<' at all, no raw U+2028/U+2029.
  CHECK(embedded.find('<') == std::string::npos);
  CHECK(embedded.find("\xE2\x80\xA8") == std::string::npos);
  CHECK(embedded.find("\xE2\x80\xA9") == std::string::npos);
  CHECK_THAT(page, !Contains("{{record}}") && !Contains("{{title}}"));
  // One document: the page loads nothing from anywhere (the SVG namespace is a name, not a load).
  std::string code = page;
  code.erase(code.find("\"http://www.w3.org/2000/svg\""), 28);
  CHECK_THAT(code, !Contains("http://") && !Contains("https://") && !Contains(" src=") && !Contains("url(http"));
}

TEST_CASE("text that could end the record's element is escaped, the rest of the record kept byte for byte",
          "[report]") {
  nlohmann::json record = nlohmann::json::parse(example("failed_4_ranks.json"));
  // '<' '>' '&' and U+2028/U+2029 escaped; other characters that start with the same byte (U+20AC) kept.
  record["stop_detail"] = "a</script><!-- & > \u2028\u2029 \u20ac end";
  const std::string embedded = embedded_record(render_report(record.dump()));
  CHECK(nlohmann::json::parse(embedded) == record);
  CHECK_THAT(embedded, Contains(R"(a\u003c/script\u003e\u003c!-- \u0026 \u003e \u2028\u2029 )"
                                "\xE2\x82\xAC end\""));
}

TEST_CASE("the page's title carries the job id as text", "[report]") {
  nlohmann::json record = nlohmann::json::parse(example("failed_4_ranks.json"));
  record["job_id"] = "job-<b>&\"x\"";
  const std::string page = render_report(record.dump());
  CHECK_THAT(page, Contains("<title>job-&lt;b&gt;&amp;&quot;x&quot; ·"));
}

TEST_CASE("a record with bytes that are not UTF-8 is refused as not JSON, typed", "[report]") {
  // JSON is UTF-8: the record's writer replaces what a rank wrote that is not.
  std::string text = nlohmann::json::parse(example("failed_4_ranks.json")).dump();
  const std::string lines = "\"lines\":[";
  text.insert(text.find(lines) + lines.size(), "\"bad \xFF byte\",");
  CHECK_THROWS_AS(render_report(text), JobRecordError);
}

TEST_CASE("a record that is not one is a JobRecordError naming its source and where", "[report]") {
  CHECK_THROWS_WITH(render_report("", "/r/job.json"), Contains("/r/job.json") && Contains("empty"));
  CHECK_THROWS_AS(render_report("{\"format\": ", "/r/job.json"), JobRecordError);
  CHECK_THROWS_WITH(render_report("{\"format\": ", "/r/job.json"), Contains("/r/job.json: /: not JSON"));
  CHECK_THROWS_WITH(render_report("[]"), Contains("expected an object"));
  CHECK_THROWS_WITH(render_report("{\"format\": \"davincirun-job/9\"}"),
                    Contains("/format") && Contains("davincirun-job/9"));
  nlohmann::json record = nlohmann::json::parse(example("failed_4_ranks.json"));
  nlohmann::json broken = record;
  broken["ranks"][1] = 7;
  CHECK_THROWS_WITH(render_report(broken.dump()), Contains("/ranks/1: expected an object"));
  record.erase("events");
  CHECK_THROWS_WITH(report_summary(record.dump()), Contains("/events: missing"));
  CHECK_THROWS_WITH(read_job_record("/nonexistent/job.json"), Contains("/nonexistent/job.json: no job record there"));
}

TEST_CASE("the report is written atomically, mode 0600, over what was there", "[report]") {
  TempDir dir;
  const std::string path = dir.path() + "/report.html";
  write_file(path, "old");
  ::chmod(path.c_str(), 0644);
  const std::string record = example("failed_4_ranks.json");
  write_report(path, record);
  CHECK(read_file(path) == render_report(record));
  struct stat st{};
  REQUIRE(::stat(path.c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0600);
  CHECK_THROWS_AS(write_report(dir.path() + "/missing/report.html", record), SystemError);
}

TEST_CASE("the summary names the result, the counts of ends and the first failure", "[report]") {
  const std::string text = example("failed_4_ranks.json");
  const nlohmann::json record = nlohmann::json::parse(text);
  const std::string summary = report_summary(text);
  CHECK_THAT(summary, Contains("job " + record["job_id"].get<std::string>() + ": failed ("));
  // The counts, each end once, the telling ends first.
  std::map<std::string, int> ends;
  for (const auto& rank : record["ranks"]) ++ends[rank["ended_how"].get<std::string>()];
  for (const auto& [how, count] : ends) CHECK_THAT(summary, Contains(std::to_string(count) + " " + how));
  CHECK(summary.find(" failed,") < summary.find(" stopped"));
  const auto& cause = record["root_cause"];
  for (const auto& index : cause["highlight"]) {
    CHECK_THAT(summary, Contains("  > " + cause["lines"][index.get<std::size_t>()].get<std::string>()));
  }
  CHECK_THAT(summary, Contains("events: " + std::to_string(record["events"].size())));
  CHECK_THAT(summary, Contains("slow: "));
  const std::string restarted = report_summary(example("two_servers_restart.json"));
  CHECK_THAT(restarted, Contains(": succeeded,") && Contains("restart(s)"));
}

TEST_CASE("the summary names missing servers, and on a member where the job's record is", "[report]") {
  nlohmann::json record = nlohmann::json::parse(example("failed_4_ranks.json"));
  const std::string here = record["servers"][0]["server_id"];
  record["job_record_server"] = "10.9.9.9";
  record["missing_servers"] = {{{"server_id", "10.9.9.8"}, {"why", "was lost: its host went down"}}};
  const std::string summary = report_summary(record.dump());
  CHECK_THAT(summary, Contains("missing: server 10.9.9.8: was lost: its host went down"));
  CHECK_THAT(summary, Contains("this is server " + here +
                               "'s part of the job; the job's record, with every server, "
                               "is on rank 0's server 10.9.9.9"));
  record["job_record_server"] = here;  // the job's own record: nothing to point at
  CHECK_THAT(report_summary(record.dump()), !Contains("this is server"));
}
