#include "benchmark/report.h"

#include <cmath>
#include <filesystem>
#include <fstream>

#include <fmt/format.h>

namespace tangram::bench {

namespace fs = std::filesystem;

std::string fmt_s(double seconds) {
  if (!std::isfinite(seconds)) return "-";
  return seconds < 1.0 ? fmt::format("{:.0f} ms", 1000.0 * seconds)
                       : fmt::format("{:.2f} s", seconds);
}

Status prepare_report_dir(const ReportOutput& out) {
  if (out.out_dir.empty()) return Status::Ok();
  std::error_code ec;
  fs::create_directories(out.out_dir, ec);
  if (ec) return make_error("cannot create {}: {}", out.out_dir, ec.message());
  return Status::Ok();
}

namespace {

Status write_text(const fs::path& path, const std::string& text) {
  std::ofstream f(path);
  f << text;
  f.close();
  if (!f) return make_error("cannot write {}", path.string());
  return Status::Ok();
}

}  // namespace

Status write_report(const BenchReport& report, const ReportOutput& out) {
  if (out.json_stdout) fmt::print("{}\n", report.json.dump(2));
  if (out.out_dir.empty()) return Status::Ok();
  TG_TRY(prepare_report_dir(out));
  const fs::path dir(out.out_dir);
  TG_TRY(write_text(dir / "report.json", report.json.dump(2) + "\n"));
  TG_TRY(write_text(dir / "report.md", report.markdown));
  std::string names = "report.md, report.json";
  for (const auto& [name, plot] : report.plots) {
    TG_TRY(write_svg(plot, (dir / name).string()));
    names += ", " + name;
  }
  fmt::print(out.console(), "report: {} in {}\n", names, out.out_dir);
  return Status::Ok();
}

}  // namespace tangram::bench
