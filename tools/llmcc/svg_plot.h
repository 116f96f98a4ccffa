// A small SVG line-chart writer (for `llmcc plot`): a figure of panels in a grid, each with a
// frame, round-numbered ticks on both axes, axis labels and lines; one legend for the figure.
//
//   SvgFigure fig;
//   fig.title = "gpt2-tiny";
//   fig.legend = {{"run-a", 0}, {"run-b", 1}};
//   SvgPanel& p = fig.panels.emplace_back();
//   p.title = "loss";
//   p.lines.push_back({{1, 2, 3}, {5.1, 4.2, 3.9}, 0, false});
//   const std::string svg = render_svg(fig);
//
// The x axis is shared: every panel spans the x range of all lines of the figure. A NaN y (or
// one <= 0 on a log axis) breaks a line; a point with no drawn neighbour gets a dot. Points closer
// than half a pixel are merged to the extremes they span, so a long run stays a small file.
// Numbers are formatted with fixed precision: the same figure gives the same bytes.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace llmcc::cli {

struct SvgLine {
  std::vector<double> x, y;  // same length; y NaN = no value (a gap)
  int color = 0;             // index into the palette (wraps around)
  bool dashed = false;       // dashed, with a dot on every point (for sparse series)
};

struct SvgPanel {
  std::string title, x_label, y_label;
  bool log_y = false;
  std::vector<SvgLine> lines;
};

struct SvgLegendEntry {
  std::string label;
  int color = 0;
};

struct SvgFigure {
  std::string title;  // empty: no title row
  int width = 900, height = 600;
  int columns = 2;
  bool x_integer = false;  // x values are whole numbers (steps): no fractional x ticks
  std::vector<SvgPanel> panels;
  std::vector<SvgLegendEntry> legend;
  std::string legend_note;  // grey text after the entries ("solid: train, dashed: validation")
};

// The figure as a standalone SVG document (ends with "</svg>\n").
std::string render_svg(const SvgFigure& fig);

// The palette entry of a colour index ("#1f77b4", ...).
const char* svg_color(int index);

// Round tick values for a linear axis covering [lo, hi]: a step of 1, 2 or 5 times a power of
// ten giving about `target` intervals (and at least min_step); the axis is widened to the first
// and last tick. An empty range (lo == hi) is widened around its value first.
struct AxisTicks {
  double lo = 0, hi = 1, step = 1;
  std::vector<double> values;
};
AxisTicks nice_ticks(double lo, double hi, int target, double min_step);

// Tick values for a log axis over [lo, hi] (lo > 0): powers of ten, or 1, 2, 5 times them, or
// more integer multiples, whichever first gives three ticks; round linear ticks inside the range
// when none does (a range narrower than a factor of about three).
std::vector<double> log_ticks(double lo, double hi);

// A tick label: fixed decimals from the step ("0.5", "1500"), a k/M/G suffix for large axes
// ("12.5k"), an exponent per tick for small ones ("6e-4", "1.5e-4", "1e-3"). `magnitude` is the
// axis's largest absolute value.
std::string format_tick(double v, double step, double magnitude);

// Text for SVG content or attributes: & < > " ' escaped.
std::string svg_escape(std::string_view text);

}  // namespace llmcc::cli
