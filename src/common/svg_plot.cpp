#include "common/svg_plot.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <limits>

#include <fmt/format.h>

namespace tangram {

std::vector<PlotSeries> series_by_name(const std::vector<NamedPoint>& points) {
  std::vector<PlotSeries> out;
  for (const NamedPoint& p : points) {
    auto it = std::find_if(out.begin(), out.end(),
                           [&](const PlotSeries& s) { return s.name == p.series; });
    if (it == out.end()) it = out.insert(out.end(), PlotSeries{p.series, {}, {}});
    it->x.push_back(p.x);
    it->y.push_back(p.y);
  }
  for (PlotSeries& s : out) {
    std::vector<size_t> order(s.x.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::stable_sort(order.begin(), order.end(),
                     [&](size_t a, size_t b) { return s.x[a] < s.x[b]; });
    PlotSeries sorted{s.name, {}, {}};
    for (size_t i : order) {
      sorted.x.push_back(s.x[i]);
      sorted.y.push_back(s.y[i]);
    }
    s = std::move(sorted);
  }
  return out;
}

namespace {

std::string escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '&':
        out += "&amp;";
        break;
      case '"':
        out += "&quot;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

// A "nice" tick step (1, 2 or 5 x 10^k) giving about `target` ticks over [0, span].
double nice_step(double span, int target) {
  if (span <= 0) return 1;
  const double raw = span / target;
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 5.0, 10.0})
    if (raw <= m * mag) return m * mag;
  return 10 * mag;
}

constexpr double W = 640, H = 400, L = 70, R = 150, T = 40, B = 50, kCaptionLine = 16;
// Characters of 11 px sans-serif that fit the chart's width with room to spare (browsers draw
// them 5-6.5 px wide); a longer caption line wraps at a space instead of running off the edge.
constexpr size_t kCaptionChars = 95;

// Appends `line` to `lines`, wrapped at spaces into pieces of at most kCaptionChars (a word
// longer than that stays whole); continuation pieces are indented.
void wrap_caption_line(const std::string& line, std::vector<std::string>& lines) {
  size_t begin = 0;
  while (line.size() - begin > kCaptionChars) {
    const size_t cut = line.rfind(' ', begin + kCaptionChars);
    const size_t end =
        cut != std::string::npos && cut > begin ? cut : line.find(' ', begin + kCaptionChars);
    if (end == std::string::npos) break;
    lines.push_back((begin > 0 ? "  " : "") + line.substr(begin, end - begin));
    begin = end + 1;
  }
  lines.push_back((begin > 0 ? "  " : "") + line.substr(begin));
}

std::vector<std::string> caption_lines(const LinePlot& plot) {
  std::vector<std::string> lines;
  size_t begin = 0;
  while (begin < plot.caption.size()) {
    const size_t end = std::min(plot.caption.find('\n', begin), plot.caption.size());
    wrap_caption_line(plot.caption.substr(begin, end - begin), lines);
    begin = end + 1;
  }
  return lines;
}

double plot_height(const LinePlot& plot) {
  return H + kCaptionLine * static_cast<double>(caption_lines(plot).size());
}

// Ticks at the first series' x values when every series' x is among them (a sweep over the same
// values); otherwise, or when they are many (a time series), evenly spaced nice values.
std::vector<double> x_ticks(const LinePlot& plot, double x0, double x1) {
  std::vector<double> xt;
  if (plot.series.empty()) return xt;
  xt = plot.series.front().x;
  bool shared = true;
  for (const auto& s : plot.series)
    for (double x : s.x) shared = shared && std::find(xt.begin(), xt.end(), x) != xt.end();
  if (plot.log2_x || (shared && xt.size() <= 10)) return xt;
  xt.clear();
  const double xstep = nice_step(x1 - x0, 6);
  for (double x = std::ceil(x0 / xstep) * xstep; x <= x1 + xstep * 1e-9; x += xstep)
    xt.push_back(x);
  return xt;
}

Status write_text(const std::string& text, const std::string& path) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) return make_error("cannot write the plot to {}", path);
  out << text;
  out.close();
  if (!out) return make_error("writing the plot to {} failed", path);
  return Status::Ok();
}

}  // namespace

std::string render_svg(const LinePlot& plot) {
  const char* colors[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b"};
  auto fx = [&](double x) { return plot.log2_x ? std::log2(std::max(x, 1e-9)) : x; };
  double x0 = std::numeric_limits<double>::infinity(), x1 = -x0, y1 = 0;
  for (const auto& s : plot.series)
    for (size_t i = 0; i < std::min(s.x.size(), s.y.size()); ++i) {
      x0 = std::min(x0, fx(s.x[i]));
      x1 = std::max(x1, fx(s.x[i]));
      y1 = std::max(y1, s.y[i]);
    }
  if (!(x0 <= x1)) x0 = 0, x1 = 1;
  if (plot.x_from_zero) x0 = std::min(x0, 0.0);
  if (x1 == x0) x1 = x0 + 1;
  const double ystep = nice_step(y1 > 0 ? y1 : 1, 5);
  y1 = std::ceil((y1 > 0 ? y1 : 1) / ystep) * ystep;
  auto px = [&](double x) { return L + (fx(x) - x0) / (x1 - x0) * (W - L - R); };
  auto py = [&](double y) { return H - B - y / y1 * (H - T - B); };

  std::string o = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{}\" "
      "font-family=\"sans-serif\" "
      "font-size=\"12\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n",
      W, plot_height(plot));
  o += fmt::format("<text x=\"{}\" y=\"22\" font-size=\"15\" text-anchor=\"middle\">{}</text>\n",
                   (L + W - R) / 2, escape(plot.title));
  // Grid and y ticks.
  for (double y = 0; y <= y1 + ystep / 2; y += ystep) {
    o += fmt::format("<line x1=\"{}\" y1=\"{:.1f}\" x2=\"{}\" y2=\"{:.1f}\" stroke=\"#ddd\"/>\n", L,
                     py(y), W - R, py(y));
    o += fmt::format("<text x=\"{}\" y=\"{:.1f}\" text-anchor=\"end\">{:g}</text>\n", L - 6,
                     py(y) + 4, y);
  }
  for (double x : x_ticks(plot, x0, x1))
    o += fmt::format("<text x=\"{:.1f}\" y=\"{}\" text-anchor=\"middle\">{:g}</text>\n", px(x),
                     H - B + 18, x);
  o += fmt::format("<line x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"black\"/>\n", L, H - B,
                   W - R, H - B);
  o += fmt::format("<line x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"black\"/>\n", L, T, L,
                   H - B);
  o += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">{}</text>\n", (L + W - R) / 2,
                   H - 12, escape(plot.x_label));
  o += fmt::format(
      "<text x=\"16\" y=\"{}\" text-anchor=\"middle\" transform=\"rotate(-90 16 {})\">{}</text>\n",
      (T + H - B) / 2, (T + H - B) / 2, escape(plot.y_label));
  size_t k = 0;
  for (const auto& s : plot.series) {
    const size_t n = std::min(s.x.size(), s.y.size());
    if (n == 0) continue;
    const char* color = colors[k % std::size(colors)];
    std::string pts;
    for (size_t i = 0; i < n; ++i) pts += fmt::format("{:.1f},{:.1f} ", px(s.x[i]), py(s.y[i]));
    o += fmt::format("<polyline fill=\"none\" stroke=\"{}\" stroke-width=\"2\" points=\"{}\"/>\n",
                     color, pts);
    for (size_t i = 0; i < n; ++i)
      o += fmt::format("<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"3\" fill=\"{}\"/>\n", px(s.x[i]),
                       py(s.y[i]), color);
    const double ly = T + 10 + 20.0 * static_cast<double>(k);
    o += fmt::format(
        "<line x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"{}\" stroke-width=\"2\"/>\n",
        W - R + 10, ly, W - R + 30, ly, color);
    o += fmt::format("<text x=\"{}\" y=\"{}\">{}</text>\n", W - R + 35, ly + 4, escape(s.name));
    ++k;
  }
  const std::vector<std::string> caption = caption_lines(plot);
  for (size_t i = 0; i < caption.size(); ++i)
    o += fmt::format("<text x=\"12\" y=\"{}\" font-size=\"11\" fill=\"#444\">{}</text>\n",
                     H + kCaptionLine * static_cast<double>(i) + 2, escape(caption[i]));
  o += "</svg>\n";
  return o;
}

Status write_svg(const LinePlot& plot, const std::string& path) {
  return write_text(render_svg(plot), path);
}

std::string render_svg_panels(const std::vector<LinePlot>& plots) {
  double height = 0;
  for (const LinePlot& p : plots) height += plot_height(p);
  std::string o = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{}\">\n", W, height);
  double y = 0;
  for (const LinePlot& p : plots) {
    std::string panel = render_svg(p);
    // Each chart is a nested <svg>, moved down to its place.
    panel.insert(std::string_view("<svg ").size(), fmt::format("y=\"{}\" ", y));
    o += panel;
    y += plot_height(p);
  }
  return o + "</svg>\n";
}

Status write_svg_panels(const std::vector<LinePlot>& plots, const std::string& path) {
  return write_text(render_svg_panels(plots), path);
}

}  // namespace tangram
