// SVG line plots: x ticks at the data points when there are few, evenly spaced when there are
// many (a time series), so labels never pile up.
#include "common/svg_plot.h"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "support/test_support.h"

namespace tangram {
namespace {

size_t count(const std::string& s, const std::string& needle) {
  size_t n = 0;
  for (size_t at = s.find(needle); at != std::string::npos; at = s.find(needle, at + 1)) ++n;
  return n;
}

std::string render(const LinePlot& p) {
  const auto path = (testing::temp_dir() / "p.svg").string();
  EXPECT_TRUE(write_svg(p, path).ok());
  return testing::read_file(path);
}

// x tick labels sit on one baseline below the axis.
constexpr const char* kXTick = "y=\"368\" text-anchor=\"middle\">";

TEST(SvgPlot, FewPointsAreTickedWhereTheyAre) {
  LinePlot p;
  p.series.push_back({"a", {0.1, 0.25, 0.5, 2}, {1, 2, 3, 4}});
  const std::string svg = render(p);
  EXPECT_EQ(count(svg, kXTick), 4u);
  EXPECT_NE(svg.find(std::string(kXTick) + "0.25<"), std::string::npos);
}

TEST(SvgPlot, ATimeSeriesGetsEvenTicks) {
  LinePlot p;
  PlotSeries s{"kv", {}, {}};
  for (int i = 0; i < 200; ++i) {
    s.x.push_back(0.37 * i);
    s.y.push_back(i % 17);
  }
  p.series.push_back(s);
  const std::string svg = render(p);
  const size_t ticks = count(svg, kXTick);
  EXPECT_GE(ticks, 4u);
  EXPECT_LE(ticks, 12u);
  EXPECT_NE(svg.find(std::string(kXTick) + "0<"), std::string::npos);
  EXPECT_EQ(svg.find(std::string(kXTick) + "0.37<"), std::string::npos) << "not every point";
}

// Series measured at different x (a Pareto view: each policy's own retention) get even ticks,
// from 0 when asked, not the first series' points.
TEST(SvgPlot, SeriesAtDifferentXGetEvenTicksFromZero) {
  LinePlot p;
  p.x_from_zero = true;
  p.series.push_back({"uniform", {0.27, 0.51}, {0.014, 0.002}});
  p.series.push_back({"tangram", {0.44, 0.81}, {0.0015, 0.0003}});
  const std::string svg = render(p);
  EXPECT_NE(svg.find(std::string(kXTick) + "0<"), std::string::npos);
  EXPECT_EQ(svg.find(std::string(kXTick) + "0.27<"), std::string::npos);
  EXPECT_GE(count(svg, kXTick), 4u);
  // Without x_from_zero the axis starts at the smallest x.
  p.x_from_zero = false;
  EXPECT_EQ(render(p).find(std::string(kXTick) + "0<"), std::string::npos);
}

TEST(SvgPlot, CaptionLinesGoUnderTheChartAndGrowIt) {
  LinePlot p;
  p.series.push_back({"a", {1, 2}, {1, 2}});
  EXPECT_NE(render(p).find("height=\"400\""), std::string::npos);
  p.caption = "model m.gguf, 5 layers\nKV memory 1 MiB & <2> threads";
  const std::string svg = render(p);
  EXPECT_NE(svg.find("height=\"432\""), std::string::npos);
  EXPECT_NE(svg.find(">model m.gguf, 5 layers</text>"), std::string::npos);
  EXPECT_NE(svg.find(">KV memory 1 MiB &amp; &lt;2&gt; threads</text>"), std::string::npos);
  // Stacked panels leave room for each one's caption.
  EXPECT_NE(render_svg_panels({p, p}).find("height=\"864\""), std::string::npos);
}

TEST(SvgPlot, LongCaptionLinesWrapAtSpacesInsideTheChartWidth) {
  LinePlot p;
  p.series.push_back({"a", {1, 2}, {1, 2}});
  std::string ratios = "ratios run:";
  for (int i = 0; i < 30; ++i) ratios += " policy" + std::to_string(i) + " 0.25,";
  p.caption = "model m.gguf\n" + ratios;
  const std::string svg = render(p);
  // Every caption line is short enough, and together they hold every word in order.
  std::string joined;
  size_t lines = 0;
  for (size_t at = svg.find("fill=\"#444\">"); at != std::string::npos;
       at = svg.find("fill=\"#444\">", at + 1)) {
    const size_t begin = at + std::string("fill=\"#444\">").size();
    const std::string text = svg.substr(begin, svg.find("</text>", begin) - begin);
    EXPECT_LE(text.size(), 97u) << text;
    if (lines++ > 0)
      joined += (text.rfind("  ", 0) == 0 ? " " + text.substr(2) : "\n" + text);
    else
      joined = text;
  }
  EXPECT_GE(lines, 4u);
  EXPECT_EQ(joined, p.caption);
  EXPECT_NE(svg.find("height=\"" + std::to_string(400 + 16 * lines) + "\""), std::string::npos);
}

}  // namespace
}  // namespace tangram
