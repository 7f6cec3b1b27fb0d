// The job record read as JSON, checked to be one before anything reads it.
#pragma once

#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace davincirun::detail {

/// The record format this build writes and reads (job.json's "format").
inline constexpr std::string_view job_record_format = "davincirun-job/1";

/// Parses `text` and checks what the report relies on: an object of format
/// job_record_format whose "job_id" is a string and whose "command",
/// "servers", "attempts", "ranks" and "events" are arrays (of objects, but
/// "command"). Other values may be null or missing; readers use value_or().
/// Throws JobRecordError("<source>: <JSON pointer>: <problem>").
nlohmann::json parse_job_record(std::string_view text, const std::string& source);

/// `object[key]` when it is a number, else `fallback` (null or absent).
double number_or(const nlohmann::json& object, const char* key, double fallback);

/// `object[key]` when it is a string, else `fallback`.
std::string text_or(const nlohmann::json& object, const char* key, const std::string& fallback = {});

}  // namespace davincirun::detail
