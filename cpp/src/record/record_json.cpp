#include "record_json.hpp"

#include <fmt/format.h>

#include "davincirun/report.hpp"

namespace davincirun::detail {

namespace {

[[noreturn]] void fail(const std::string& source, const std::string& pointer, const std::string& problem) {
  throw JobRecordError(fmt::format("{}: {}: {}", source, pointer.empty() ? "/" : pointer, problem));
}

void require_array_of_objects(const nlohmann::json& record, const char* key, const std::string& source) {
  const std::string pointer = std::string("/") + key;
  const auto it = record.find(key);
  if (it == record.end()) fail(source, pointer, "missing");
  if (!it->is_array()) fail(source, pointer, fmt::format("expected an array, got {}", it->type_name()));
  for (std::size_t i = 0; i < it->size(); ++i) {
    const auto& item = (*it)[i];
    if (!item.is_object())
      fail(source, fmt::format("{}/{}", pointer, i), "expected an object, got " + std::string(item.type_name()));
  }
}

}  // namespace

nlohmann::json parse_job_record(std::string_view text, const std::string& source) {
  if (text.empty()) fail(source, "", "empty: no job record was written");
  nlohmann::json record;
  try {
    record = nlohmann::json::parse(text.begin(), text.end());
  } catch (const nlohmann::json::parse_error& e) {  // its message names the byte
    fail(source, "", fmt::format("not JSON ({})", e.what()));
  }
  if (!record.is_object()) fail(source, "", fmt::format("expected an object, got {}", record.type_name()));
  const auto format = record.find("format");
  if (format == record.end() || !format->is_string())
    fail(source, "/format", "missing: this is no davincirun job record");
  if (format->get<std::string>() != job_record_format) {
    fail(source, "/format",
         fmt::format("'{}' is not a format this davincirun reads ({})", format->get<std::string>(), job_record_format));
  }
  const auto job_id = record.find("job_id");
  if (job_id == record.end() || !job_id->is_string()) fail(source, "/job_id", "expected a string");
  const auto command = record.find("command");
  if (command == record.end() || !command->is_array()) fail(source, "/command", "expected an array");
  for (const char* key : {"servers", "attempts", "ranks", "events"}) require_array_of_objects(record, key, source);
  return record;
}

double number_or(const nlohmann::json& object, const char* key, double fallback) {
  const auto it = object.find(key);
  return it != object.end() && it->is_number() ? it->get<double>() : fallback;
}

std::string text_or(const nlohmann::json& object, const char* key, const std::string& fallback) {
  const auto it = object.find(key);
  return it != object.end() && it->is_string() ? it->get<std::string>() : fallback;
}

}  // namespace davincirun::detail
