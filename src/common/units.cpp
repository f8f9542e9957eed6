#include "common/units.h"

#include <cctype>
#include <charconv>
#include <cmath>

namespace tangram {

Result<uint64_t> parse_bytes(std::string_view text) {
  std::string_view t = text;
  while (!t.empty() && std::isspace(static_cast<unsigned char>(t.back()))) t.remove_suffix(1);
  double value = 0;
  const auto [end, ec] = std::from_chars(t.data(), t.data() + t.size(), value);
  if (ec != std::errc() || value < 0 || !std::isfinite(value))
    return make_error("'{}' is not a size: use a number with an optional unit, e.g. 2GiB or 512MB",
                      text);
  std::string unit(end, t.data() + t.size());
  for (char& c : unit) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  if (!unit.empty() && unit.back() == 'B') unit.pop_back();
  const bool binary = !unit.empty() && unit.back() == 'I';
  if (binary) unit.pop_back();
  const double base = binary ? 1024.0 : 1000.0;
  double mult = 1;
  if (unit.empty())
    mult = 1;
  else if (unit == "K")
    mult = base;
  else if (unit == "M")
    mult = base * base;
  else if (unit == "G")
    mult = base * base * base;
  else if (unit == "T")
    mult = base * base * base * base;
  else
    return make_error("'{}': unknown unit (use B, KB, KiB, MB, MiB, GB, GiB, TB, TiB)", text);
  const double bytes = value * mult;
  if (bytes > 1.8e19) return make_error("'{}' is too large", text);
  return static_cast<uint64_t>(bytes);
}

Result<double> parse_duration(std::string_view text) {
  std::string_view t = text;
  while (!t.empty() && std::isspace(static_cast<unsigned char>(t.back()))) t.remove_suffix(1);
  double value = 0;
  const auto [end, ec] = std::from_chars(t.data(), t.data() + t.size(), value);
  if (ec != std::errc() || value < 0 || !std::isfinite(value))
    return make_error(
        "'{}' is not a duration: use a number with an optional unit, e.g. 90s, 10m or 1h", text);
  const std::string_view unit(end, static_cast<size_t>(t.data() + t.size() - end));
  if (unit.empty() || unit == "s") return value;
  if (unit == "ms") return value / 1000.0;
  if (unit == "m" || unit == "min") return value * 60.0;
  if (unit == "h") return value * 3600.0;
  return make_error("'{}': unknown unit of time (use ms, s, m or h)", text);
}

std::string format_bytes(double bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (std::fabs(bytes) >= 1024.0 && u < 4) {
    bytes /= 1024.0;
    ++u;
  }
  return u == 0 ? fmt::format("{:.0f} B", bytes) : fmt::format("{:.2f} {}", bytes, units[u]);
}

}  // namespace tangram
