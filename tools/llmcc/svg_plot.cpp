#include "svg_plot.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>

namespace llmcc::cli {

namespace {

// Tableau's ten colours: distinct, readable on white, and familiar from matplotlib.
constexpr const char* kPalette[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
                                    "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"};
constexpr int kPaletteSize = sizeof(kPalette) / sizeof(kPalette[0]);

constexpr double kFont = 11;        // tick labels, legend
constexpr double kCharWidth = 0.6;  // an average glyph's width in ems, to lay text out

std::string fixed(double v, int decimals) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  std::string s = buf;
  // "-0.0" (a tiny negative rounded) reads as zero.
  if (s[0] == '-' && s.find_first_not_of("-0.") == std::string::npos) s.erase(0, 1);
  return s;
}

// A pixel coordinate.
std::string px(double v) { return fixed(v, 1); }

int decimals_for(double step) { return std::clamp(static_cast<int>(-std::floor(std::log10(step) + 1e-9)), 0, 6); }

// The largest power of ten that v is a whole multiple of (4.5 -> 0.1, 200 -> 100): a log
// axis's tick is labelled on its own, with the digits it needs.
double exact_step(double v) {
  double p = std::pow(10.0, std::floor(std::log10(v) + 1e-9));
  for (int i = 0; i < 12 && std::fabs(v / p - std::round(v / p)) > 1e-6; ++i) p /= 10;
  return p;
}

double text_width(std::string_view text, double font) { return static_cast<double>(text.size()) * font * kCharWidth; }

// Maps data values to pixels along one axis.
struct Scale {
  double lo = 0, hi = 1;  // data range
  double a = 0, b = 1;    // pixel range (b < a for y)
  bool log = false;
  double operator()(double v) const {
    const double t = log ? (std::log10(v) - std::log10(lo)) / (std::log10(hi) - std::log10(lo)) : (v - lo) / (hi - lo);
    return a + t * (b - a);
  }
};

struct Point {
  double x, y;
};

bool drawable(double x, double y, bool log_y) { return std::isfinite(x) && std::isfinite(y) && (!log_y || y > 0); }

// Points within the same half-pixel column become the first, lowest, highest and last of them,
// in their order: the drawn shape is unchanged, the path stays proportional to the width.
std::vector<Point> decimate(const std::vector<Point>& pts) {
  std::vector<Point> out;
  std::size_t i = 0;
  while (i < pts.size()) {
    const double column = std::floor(pts[i].x * 2);
    std::size_t j = i, lo = i, hi = i;
    while (j + 1 < pts.size() && std::floor(pts[j + 1].x * 2) == column) {
      ++j;
      if (pts[j].y < pts[lo].y) lo = j;
      if (pts[j].y > pts[hi].y) hi = j;
    }
    std::size_t keep[4] = {i, std::min(lo, hi), std::max(lo, hi), j};
    for (int k = 0; k < 4; ++k)
      if (k == 0 || keep[k] != keep[k - 1]) out.push_back(pts[keep[k]]);
    i = j + 1;
  }
  return out;
}

void draw_line(std::string& out, const SvgLine& line, const Scale& sx, const Scale& sy) {
  std::vector<std::vector<Point>> segments(1);
  const std::size_t n = std::min(line.x.size(), line.y.size());
  for (std::size_t i = 0; i < n; ++i) {
    if (drawable(line.x[i], line.y[i], sy.log)) {
      segments.back().push_back({sx(line.x[i]), sy(line.y[i])});
    } else if (!segments.back().empty()) {
      segments.emplace_back();
    }
  }
  if (segments.back().empty()) segments.pop_back();
  if (segments.empty()) return;
  const char* color = svg_color(line.color);
  std::string d;
  std::vector<Point> dots;
  for (const auto& segment : segments) {
    const std::vector<Point> pts = decimate(segment);
    for (std::size_t i = 0; i < pts.size(); ++i) {
      if (!d.empty()) d += ' ';
      d += (i == 0 ? "M" : "L") + px(pts[i].x) + " " + px(pts[i].y);
    }
    if (line.dashed || pts.size() == 1) dots.insert(dots.end(), pts.begin(), pts.end());
  }
  out += std::string("<path class=\"") + (line.dashed ? "line dashed" : "line") + "\" d=\"" + d +
         "\" fill=\"none\" stroke=\"" + color + "\" stroke-width=\"1.5\" stroke-linejoin=\"round\"" +
         (line.dashed ? " stroke-dasharray=\"5 3\"" : "") + "/>\n";
  for (const Point& p : dots)
    out += "<circle class=\"dot\" cx=\"" + px(p.x) + "\" cy=\"" + px(p.y) + "\" r=\"" + (line.dashed ? "2.5" : "2") +
           "\" fill=\"" + color + "\"/>\n";
}

std::string text(double x, double y, std::string_view content, const std::string& attrs) {
  return "<text x=\"" + px(x) + "\" y=\"" + px(y) + "\"" + (attrs.empty() ? "" : " " + attrs) + ">" +
         svg_escape(content) + "</text>\n";
}

std::string hline(double x0, double x1, double y, const char* stroke) {
  return "<line x1=\"" + px(x0) + "\" y1=\"" + px(y) + "\" x2=\"" + px(x1) + "\" y2=\"" + px(y) + "\" stroke=\"" +
         stroke + "\"/>\n";
}

std::string vline(double x, double y0, double y1, const char* stroke) {
  return "<line x1=\"" + px(x) + "\" y1=\"" + px(y0) + "\" x2=\"" + px(x) + "\" y2=\"" + px(y1) + "\" stroke=\"" +
         stroke + "\"/>\n";
}

// The y range of a panel's drawable values; false when it has none.
bool y_extent(const SvgPanel& panel, double* lo, double* hi) {
  *lo = std::numeric_limits<double>::infinity();
  *hi = -*lo;
  for (const SvgLine& l : panel.lines)
    for (std::size_t i = 0; i < std::min(l.x.size(), l.y.size()); ++i)
      if (drawable(l.x[i], l.y[i], panel.log_y)) {
        *lo = std::min(*lo, l.y[i]);
        *hi = std::max(*hi, l.y[i]);
      }
  return *lo <= *hi;
}

void draw_panel(std::string& out, const SvgPanel& panel, double cx, double cy, double cw, double ch,
                const AxisTicks& xt) {
  // Plot area inside the cell: room for the title above, tick labels and the x label below,
  // tick labels and the y label on the left.
  const double x0 = cx + 62, x1 = cx + cw - 12, y0 = cy + 22, y1 = cy + ch - 34;
  out += "<g class=\"panel\">\n";
  out += text(x0, cy + 14, panel.title, "font-size=\"12\" font-weight=\"bold\"");

  double lo = 0, hi = 1;
  const bool has_data = y_extent(panel, &lo, &hi);
  Scale sy{0, 1, y1, y0, panel.log_y && has_data};
  std::vector<double> y_values;
  double y_step = 1;
  if (sy.log) {
    if (!(hi > lo)) {
      lo /= 1.5;
      hi *= 1.5;
    }
    const double pad = 0.04 * std::log10(hi / lo);
    sy.lo = lo / std::pow(10.0, pad);
    sy.hi = hi * std::pow(10.0, pad);
    y_values = log_ticks(sy.lo, sy.hi);
  } else {
    const AxisTicks yt = nice_ticks(lo, hi, 5, 0);
    sy.lo = yt.lo;
    sy.hi = yt.hi;
    y_values = yt.values;
    y_step = yt.step;
  }
  const Scale sx{xt.lo, xt.hi, x0, x1, false};

  // Grid and tick labels.
  const double y_magnitude = std::max(std::fabs(sy.lo), std::fabs(sy.hi));
  for (double v : y_values) {
    const double y = sy(v);
    out += hline(x0, x1, y, "#e6e6e6");
    const double step = sy.log ? exact_step(v) : y_step;
    out += text(x0 - 5, y + 3.5, format_tick(v, step, sy.log ? v : y_magnitude), "text-anchor=\"end\"");
  }
  const double x_magnitude = std::max(std::fabs(xt.lo), std::fabs(xt.hi));
  for (double v : xt.values) {
    const double x = sx(v);
    out += vline(x, y0, y1, "#e6e6e6");
    out += text(x, y1 + 14, format_tick(v, xt.step, x_magnitude), "text-anchor=\"middle\"");
  }
  out += "<rect x=\"" + px(x0) + "\" y=\"" + px(y0) + "\" width=\"" + px(x1 - x0) + "\" height=\"" + px(y1 - y0) +
         "\" fill=\"none\" stroke=\"#999\"/>\n";
  if (!panel.x_label.empty()) out += text((x0 + x1) / 2, y1 + 28, panel.x_label, "text-anchor=\"middle\"");
  if (!panel.y_label.empty()) {
    const double lx = cx + 12, ly = (y0 + y1) / 2;
    out +=
        text(lx, ly, panel.y_label, "text-anchor=\"middle\" transform=\"rotate(-90 " + px(lx) + " " + px(ly) + ")\"");
  }

  if (!has_data) {
    out += text((x0 + x1) / 2, (y0 + y1) / 2, "no data", "text-anchor=\"middle\" fill=\"#999\"");
  } else {
    for (const SvgLine& l : panel.lines) draw_line(out, l, sx, sy);
  }
  out += "</g>\n";
}

// The legend rows (entries wrap at the figure's width); returns the height used.
double draw_legend(std::string& out, const SvgFigure& fig, double top) {
  if (fig.legend.empty() && fig.legend_note.empty()) return 0;
  const double row_height = 18, left = 16, right = fig.width - 16.0;
  double x = left, y = top + 12;
  auto place = [&](double w) {
    if (x > left && x + w > right) {
      x = left;
      y += row_height;
    }
  };
  out += "<g class=\"legend\">\n";
  for (const SvgLegendEntry& e : fig.legend) {
    const double w = 24 + text_width(e.label, kFont);
    place(w);
    out += "<line x1=\"" + px(x) + "\" y1=\"" + px(y - 3.5) + "\" x2=\"" + px(x + 18) + "\" y2=\"" + px(y - 3.5) +
           "\" stroke=\"" + svg_color(e.color) + "\" stroke-width=\"3\"/>\n";
    out += text(x + 24, y, e.label, "");
    x += w + 18;
  }
  if (!fig.legend_note.empty()) {
    place(text_width(fig.legend_note, kFont));
    out += text(x, y, fig.legend_note, "fill=\"#666\"");
  }
  out += "</g>\n";
  return y - top + 8;
}

}  // namespace

const char* svg_color(int index) { return kPalette[((index % kPaletteSize) + kPaletteSize) % kPaletteSize]; }

std::string svg_escape(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

AxisTicks nice_ticks(double lo, double hi, int target, double min_step) {
  AxisTicks t;
  if (!std::isfinite(lo) || !std::isfinite(hi) || lo > hi) lo = 0, hi = 1;
  if (!(hi > lo)) {
    const double pad = lo == 0 ? 1 : std::max(std::fabs(lo) * 0.1, min_step);
    lo -= pad;
    hi += pad;
  }
  const double raw = (hi - lo) / std::max(target, 1);
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  const double f = raw / mag;
  t.step = std::max((f < 1.5 ? 1 : f < 3 ? 2 : f < 7 ? 5 : 10) * mag, min_step);
  const double first = std::floor(lo / t.step + 1e-9), last = std::ceil(hi / t.step - 1e-9);
  t.lo = first * t.step;
  t.hi = last * t.step;
  for (double k = first; k <= last; k += 1) {
    const double v = k * t.step;
    t.values.push_back(std::fabs(v) < t.step * 1e-9 ? 0.0 : v);
  }
  return t;
}

std::vector<double> log_ticks(double lo, double hi) {
  static const std::vector<std::vector<int>> kMultiples = {{1}, {1, 2, 5}, {1, 2, 3, 5}, {1, 2, 3, 4, 5, 6, 7, 8, 9}};
  std::vector<double> out;
  for (const auto& multiples : kMultiples) {
    out.clear();
    for (int d = static_cast<int>(std::floor(std::log10(lo))); d <= static_cast<int>(std::ceil(std::log10(hi))); ++d)
      for (int m : multiples) {
        const double v = m * std::pow(10.0, d);
        if (v >= lo * (1 - 1e-9) && v <= hi * (1 + 1e-9)) out.push_back(v);
      }
    if (out.size() >= 3) return out;
  }
  // A narrow range (less than from one integer multiple to the third): round linear ticks in it.
  std::vector<double> linear;
  for (double v : nice_ticks(lo, hi, 4, 0).values)
    if (v >= lo && v <= hi) linear.push_back(v);
  return linear.size() >= out.size() ? linear : out;
}

std::string format_tick(double v, double step, double magnitude) {
  if (v == 0 || std::fabs(v) < step * 1e-9) return "0";
  const double amax = std::max(std::fabs(magnitude), std::fabs(v));
  if (amax >= 1e4) {
    const double scale = amax >= 1e9 ? 1e9 : amax >= 1e6 ? 1e6 : 1e3;
    const char* suffix = amax >= 1e9 ? "G" : amax >= 1e6 ? "M" : "k";
    return fixed(v / scale, decimals_for(step / scale)) + suffix;
  }
  if (amax < 1e-2) {
    // Each tick in its own exponent, with the digits the step needs: "2e-4", "1.5e-4", "1e-3".
    const int e = static_cast<int>(std::floor(std::log10(std::fabs(v)) + 1e-9));
    const int step_e = static_cast<int>(std::floor(std::log10(step) + 1e-9));
    std::string mantissa = fixed(v / std::pow(10.0, e), std::max(0, e - step_e));
    if (mantissa.find('.') != std::string::npos) {
      mantissa.erase(mantissa.find_last_not_of('0') + 1);
      if (mantissa.back() == '.') mantissa.pop_back();
    }
    return mantissa + "e" + std::to_string(e);
  }
  return fixed(v, decimals_for(step));
}

std::string render_svg(const SvgFigure& fig) {
  const double W = fig.width, H = fig.height;
  std::string out;
  out += "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + std::to_string(fig.width) + "\" height=\"" +
         std::to_string(fig.height) + "\" viewBox=\"0 0 " + std::to_string(fig.width) + " " +
         std::to_string(fig.height) + "\" font-family=\"DejaVu Sans, Helvetica, Arial, sans-serif\" font-size=\"" +
         fixed(kFont, 0) + "\">\n";
  out += "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  double top = 6;
  if (!fig.title.empty()) {
    out += text(W / 2, 22, fig.title, "text-anchor=\"middle\" font-size=\"15\" font-weight=\"bold\"");
    top = 30;
  }
  top += draw_legend(out, fig, top);

  // One x axis for every panel, over the x range of every line.
  double xlo = std::numeric_limits<double>::infinity(), xhi = -xlo;
  for (const SvgPanel& p : fig.panels)
    for (const SvgLine& l : p.lines)
      for (double x : l.x)
        if (std::isfinite(x)) {
          xlo = std::min(xlo, x);
          xhi = std::max(xhi, x);
        }
  const AxisTicks xt = nice_ticks(xlo, xhi, 5, fig.x_integer ? 1 : 0);

  const int columns = std::max(fig.columns, 1);
  const int rows = (static_cast<int>(fig.panels.size()) + columns - 1) / columns;
  const double pad = 6;
  const double cw = (W - 2 * pad) / columns, ch = rows > 0 ? (H - top - pad) / rows : 0;
  for (std::size_t i = 0; i < fig.panels.size(); ++i) {
    const double cx = pad + static_cast<double>(i % columns) * cw;
    const double cy = top + static_cast<double>(i / columns) * ch;
    draw_panel(out, fig.panels[i], cx, cy, cw, ch, xt);
  }
  out += "</svg>\n";
  return out;
}

}  // namespace llmcc::cli
