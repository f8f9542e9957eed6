// The output convention of every benchmark command (`bench`, `bench-model`, `bench-serve`):
// `-o DIR` gets report.json (every raw figure), report.md (the tables) and the SVG plots;
// `--json` puts the JSON on stdout as well, and the console tables move to stderr so that
// stdout parses.
#pragma once

#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/result.h"
#include "common/svg_plot.h"

namespace tangram::bench {

// Seconds for a table cell: "850 ms" under a second, "2.31 s" above; "-" when not finite (not
// measured).
std::string fmt_s(double seconds);

struct ReportOutput {
  std::string out_dir;       // -o: report.json, report.md and the plots go here ("" = nowhere)
  bool json_stdout = false;  // --json
  // Where the human-readable tables go: stderr under --json, so stdout carries only the JSON.
  std::FILE* console() const { return json_stdout ? stderr : stdout; }
};

struct BenchReport {
  nlohmann::json json;
  std::string markdown;
  std::vector<std::pair<std::string, LinePlot>> plots;  // (file name in out_dir, plot)
};

// Creates the output folder (so a run can fail before it spends minutes measuring).
Status prepare_report_dir(const ReportOutput& out);
// Writes report.json, report.md and every plot into out_dir (when set) and the JSON to stdout with
// --json; says where the files went on the console.
Status write_report(const BenchReport& report, const ReportOutput& out);

}  // namespace tangram::bench
