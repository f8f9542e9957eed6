// Minimal line charts as standalone SVG files, for benchmark reports a reader would rather
// look at than read. No dependencies; the output opens in any browser.
#pragma once

#include <string>
#include <vector>

#include "common/result.h"

namespace tangram {

struct PlotSeries {
  std::string name;
  std::vector<double> x;  // [n]
  std::vector<double> y;  // [n]
};

// One point of a scatter that becomes lines: the series it belongs to and where it lies.
struct NamedPoint {
  std::string series;
  double x = 0, y = 0;
};
// One series per name, in order of first appearance, each sorted by x, so a line joins a
// series' points from left to right (e.g. a policy's ratios from the least kept to the most).
std::vector<PlotSeries> series_by_name(const std::vector<NamedPoint>& points);

struct LinePlot {
  std::string title;
  std::string x_label;
  std::string y_label;
  bool log2_x = false;       // x axis in powers of two (e.g. concurrency 1, 2, 4, ...)
  bool x_from_zero = false;  // x axis from 0 (e.g. a fraction kept), not from the smallest x
  // Under the chart, one line per '\n': what was run (model, workload, memory), so a plot read on
  // its own says what it measured.
  std::string caption;
  std::vector<PlotSeries> series;
};

// The chart as SVG text. Empty series are skipped; axes start at 0 on y. x ticks sit at the
// first series' x values when every series shares them (a sweep), else evenly.
std::string render_svg(const LinePlot& plot);
// Writes render_svg(plot) to path.
Status write_svg(const LinePlot& plot, const std::string& path);
// Several charts stacked top to bottom in one SVG file: quantities of different units over the
// same x (e.g. memory and KV pages over time) each get their own y axis.
std::string render_svg_panels(const std::vector<LinePlot>& plots);
Status write_svg_panels(const std::vector<LinePlot>& plots, const std::string& path);

}  // namespace tangram
