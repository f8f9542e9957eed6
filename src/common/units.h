// Parsing and printing of human-friendly quantities ("2GiB", "512MB", 1.5e9 bytes).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "common/result.h"

namespace tangram {

// Accepts plain integers and the suffixes K/M/G/T with optional "i"/"B" (KiB = 1024, KB = 1000).
Result<uint64_t> parse_bytes(std::string_view text);
// A duration in seconds: a number with an optional unit ms, s, m or h ("90s", "10m", "1.5h");
// a bare number is seconds. Errors: no number, a negative or non-finite one, another unit.
Result<double> parse_duration(std::string_view text);
// "1.50 GiB", "312.0 MiB", "17 B".
std::string format_bytes(double bytes);

}  // namespace tangram
