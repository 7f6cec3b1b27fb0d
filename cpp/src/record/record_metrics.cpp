// read_metrics(): a rank's log_metric() file (docs/metrics.md) into the
// record. The file is the rank's own writing: any line may be malformed,
// cut short or huge, and none of that may cost more than a skipped line.
#include <algorithm>
#include <string>
#include <string_view>
#include <vector>

#include "output/log_tail.hpp"
#include "record/job_record.hpp"

namespace davincirun::detail {

namespace {

// Bytes read at most from the end of a metrics file, and of one line.
constexpr std::size_t max_file_bytes = std::size_t{32} << 20;
constexpr std::size_t max_line_bytes = 4096;

struct Series {
  std::string name;
  std::vector<RecordJson> points;
};

// At most `most` evenly spaced points (at least 2), the first and last kept.
template <typename Points>
RecordJson thinned(const Points& points, std::size_t most = max_metric_points) {
  RecordJson out = RecordJson::array();
  const std::size_t n = points.size();
  if (n <= most) {
    for (const auto& p : points) out.push_back(p);
    return out;
  }
  for (std::size_t k = 0; k < most; ++k) out.push_back(points[k * (n - 1) / (most - 1)]);
  return out;
}

std::size_t most_points(const RecordJson& part) {
  std::size_t most = 0;
  for (const auto& r : part["ranks"]) {
    if (!r.contains("metrics")) continue;
    for (const auto& [name, points] : r["metrics"].items()) most = std::max(most, points.size());
  }
  return most;
}

void take_line(std::string_view line, std::vector<Series>& series) {
  if (line.empty() || line.size() > max_line_bytes) return;
  const RecordJson j = RecordJson::parse(line, nullptr, false);
  if (!j.is_object()) return;
  const auto name = j.find("name");
  const auto value = j.find("value");
  const auto time = j.find("time");
  if (name == j.end() || !name->is_string() || value == j.end() || !value->is_number() || time == j.end() ||
      !time->is_number()) {
    return;
  }
  const auto step = j.find("step");
  const bool has_step = step != j.end() && step->is_number_integer();
  Series* s = nullptr;
  for (auto& each : series) {
    if (each.name == name->get_ref<const std::string&>()) s = &each;
  }
  if (s == nullptr) {
    if (series.size() >= max_metric_names) return;
    series.push_back({name->get<std::string>(), {}});
    s = &series.back();
  }
  s->points.push_back(RecordJson::array({has_step ? *step : RecordJson(), *value, *time}));
}

}  // namespace

RecordJson read_metrics(const std::string& path) {
  RecordJson out = RecordJson::object();
  const LogEnd tail = read_log_end(path, max_file_bytes);
  const std::string& text = tail.text;
  std::vector<Series> series;
  std::size_t begin = 0;
  // Read from past its start, it begins inside a line: drop that one.
  if (tail.cut) begin = text.find('\n') == std::string::npos ? text.size() : text.find('\n') + 1;
  while (begin < text.size()) {
    const auto end = text.find('\n', begin);
    if (end == std::string::npos) break;  // a line still being written
    take_line(std::string_view(text).substr(begin, end - begin), series);
    begin = end + 1;
  }
  for (const auto& s : series) out[s.name] = thinned(s.points);
  return out;
}

std::string part_text(RecordJson part, std::size_t budget) {
  std::string text = part.dump(-1, ' ', false, RecordJson::error_handler_t::replace);
  // Metrics are what grows without bound (64 names of 1,000 points a rank):
  // fewer points a name until it fits, then none.
  for (std::size_t most = most_points(part) / 2; text.size() > budget && most >= 2; most /= 2) {
    for (auto& r : part["ranks"]) {
      if (!r.contains("metrics")) continue;
      for (auto& [name, points] : r["metrics"].items()) points = thinned(points, most);
    }
    text = part.dump(-1, ' ', false, RecordJson::error_handler_t::replace);
  }
  if (text.size() > budget) {
    for (auto& r : part["ranks"]) r["metrics"] = RecordJson::object();
    text = part.dump(-1, ' ', false, RecordJson::error_handler_t::replace);
  }
  return text.size() > budget ? std::string() : text;
}

}  // namespace davincirun::detail
