#include "train/report/svg_chart.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace ft {

namespace {

std::string num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", v);
  return buf;
}

// A tick label: short, with k/M suffixes for large numbers.
std::string tick_label(double v) {
  char buf[32];
  const double a = std::fabs(v);
  if (a >= 1e6 && std::fmod(a, 1e5) == 0)
    std::snprintf(buf, sizeof buf, "%gM", v / 1e6);
  else if (a >= 1e4 && std::fmod(a, 100) == 0)
    std::snprintf(buf, sizeof buf, "%gk", v / 1e3);
  else
    std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

// A bar's value: 3 significant digits, no exponent for the magnitudes a report shows.
std::string value_label(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, std::fabs(v) >= 100 ? "%.0f" : "%.3g", v);
  return buf;
}

std::string text(double x, double y, const std::string& s, const char* anchor = "middle", int size = 12,
                 const std::string& extra = "") {
  return "<text x=\"" + num(x) + "\" y=\"" + num(y) + "\" text-anchor=\"" + anchor + "\" font-size=\"" +
         std::to_string(size) + "\"" + extra + ">" + svg_escape(s) + "</text>\n";
}

std::string line(double x1, double y1, double x2, double y2, const char* stroke, double width = 1) {
  return "<line x1=\"" + num(x1) + "\" y1=\"" + num(y1) + "\" x2=\"" + num(x2) + "\" y2=\"" + num(y2) + "\" stroke=\"" +
         stroke + "\" stroke-width=\"" + num(width) + "\"/>\n";
}

std::string header(int w, int h) {
  return "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + std::to_string(w) + "\" height=\"" + std::to_string(h) +
         "\" viewBox=\"0 0 " + std::to_string(w) + " " + std::to_string(h) +
         "\" font-family=\"Helvetica, Arial, sans-serif\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
}

}  // namespace

std::string svg_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
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
        out += "&apos;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

std::vector<double> nice_ticks(double lo, double hi) {
  if (!(hi > lo)) return {lo};
  const double raw = (hi - lo) / 5;
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  double step = mag;
  for (double m : {1.0, 2.0, 5.0, 10.0}) {
    step = m * mag;
    if (step >= raw) break;
  }
  std::vector<double> t;
  for (double v = std::ceil(lo / step - 1e-9) * step; v <= hi + step * 1e-9; v += step)
    t.push_back(std::fabs(v) < step * 1e-9 ? 0 : v);
  return t;
}

std::string svg_line_chart(const SvgLineChart& c) {
  const double left = 78, right = 24, top = 44;
  const double bottom = 58 + 16.0 * static_cast<double>(c.notes.size());
  const double pw = c.width - left - right, ph = c.height - top - bottom;
  auto fx = [&](double v) { return c.log_x ? std::log2(v) : v; };
  auto fy = [&](double v) { return c.log_y ? std::log10(v) : v; };
  auto usable = [&](double x, double y) {
    return std::isfinite(x) && std::isfinite(y) && (!c.log_x || x > 0) && (!c.log_y || y > 0);
  };
  double x0 = INFINITY, x1 = -INFINITY, y0 = INFINITY, y1 = -INFINITY;
  for (const auto& s : c.series) {
    for (size_t i = 0; i < s.x.size() && i < s.y.size(); ++i) {
      if (!usable(s.x[i], s.y[i])) continue;
      x0 = std::min(x0, fx(s.x[i])), x1 = std::max(x1, fx(s.x[i]));
      y0 = std::min(y0, fy(s.y[i])), y1 = std::max(y1, fy(s.y[i]));
    }
  }
  if (!(x1 >= x0)) x0 = 0, x1 = 1, y0 = 0, y1 = 1;  // nothing to plot: empty axes
  if (x1 == x0) x0 -= 0.5, x1 += 0.5;
  if (y1 == y0) y0 -= std::max(0.5, std::fabs(y0) * 0.05), y1 += std::max(0.5, std::fabs(y1) * 0.05);
  const double pad = (y1 - y0) * 0.05;
  y0 -= pad, y1 += pad;
  auto px = [&](double v) { return left + (fx(v) - x0) / (x1 - x0) * pw; };
  auto py = [&](double v) { return top + ph - (fy(v) - y0) / (y1 - y0) * ph; };

  std::string o = header(c.width, c.height);
  o += text(c.width / 2.0, 24, c.title, "middle", 15, " font-weight=\"bold\"");
  // Grid and tick labels.
  std::vector<double> xt, yt;
  if (c.log_x) {
    for (double e = std::ceil(x0 - 1e-9); e <= x1 + 1e-9; ++e) xt.push_back(std::pow(2.0, e));
  } else {
    xt = nice_ticks(x0, x1);
  }
  if (c.log_y) {
    for (double e = std::ceil(y0 - 1e-9); e <= y1 + 1e-9; ++e) yt.push_back(std::pow(10.0, e));
    if (yt.size() < 2) yt = {std::pow(10.0, y0 + pad), std::pow(10.0, y1 - pad)};
  } else {
    yt = nice_ticks(y0, y1);
  }
  for (double v : xt) {
    o += line(px(v), top, px(v), top + ph, "#e5e5e5");
    o += text(px(v), top + ph + 16, tick_label(v), "middle", 11);
  }
  for (double v : yt) {
    o += line(left, py(v), left + pw, py(v), "#e5e5e5");
    char buf[32];
    std::snprintf(buf, sizeof buf, c.log_y ? "%.3g" : "%g", v);
    o += text(left - 6, py(v) + 4, c.log_y ? std::string(buf) : tick_label(v), "end", 11);
  }
  o += "<rect x=\"" + num(left) + "\" y=\"" + num(top) + "\" width=\"" + num(pw) + "\" height=\"" + num(ph) +
       "\" fill=\"none\" stroke=\"#333\"/>\n";
  o += text(left + pw / 2, top + ph + 36, c.x_label, "middle", 12);
  o += text(18, top + ph / 2, c.y_label, "middle", 12, " transform=\"rotate(-90 18 " + num(top + ph / 2) + ")\"");
  // Series: a polyline each (dashed for the second and later, so overlapping curves stay visible).
  for (size_t k = 0; k < c.series.size(); ++k) {
    const SvgSeries& s = c.series[k];
    std::string pts;
    for (size_t i = 0; i < s.x.size() && i < s.y.size(); ++i) {
      if (!usable(s.x[i], s.y[i])) continue;
      pts += num(px(s.x[i])) + "," + num(py(s.y[i])) + " ";
    }
    o += "<polyline class=\"series\" data-name=\"" + svg_escape(s.name) + "\" fill=\"none\" stroke=\"" + s.color +
         "\" stroke-width=\"" + (k == 0 ? "2.5" : "1.5") + "\"" + (k == 0 ? "" : " stroke-dasharray=\"6 4\"") +
         " points=\"" + pts + "\"/>\n";
    if (s.markers) {
      for (size_t i = 0; i < s.x.size() && i < s.y.size(); ++i) {
        if (!usable(s.x[i], s.y[i])) continue;
        o += "<circle cx=\"" + num(px(s.x[i])) + "\" cy=\"" + num(py(s.y[i])) + "\" r=\"" + (k == 0 ? "4.5" : "3") +
             "\" fill=\"" + s.color + "\"/>\n";
      }
    }
    // Legend, top right inside the plot.
    const double ly = top + 16 + 18.0 * static_cast<double>(k);
    o += "<line x1=\"" + num(left + pw - 150) + "\" y1=\"" + num(ly - 4) + "\" x2=\"" + num(left + pw - 120) +
         "\" y2=\"" + num(ly - 4) + "\" stroke=\"" + s.color + "\" stroke-width=\"2.5\"" +
         (k == 0 ? "" : " stroke-dasharray=\"6 4\"") + "/>\n";
    o += text(left + pw - 114, ly, s.name, "start", 12);
  }
  for (size_t i = 0; i < c.notes.size(); ++i)
    o += text(left, top + ph + 56 + 16.0 * static_cast<double>(i), c.notes[i], "start", 11);
  return o + "</svg>\n";
}

std::string svg_bar_panels(const std::vector<SvgBarPanel>& panels, const std::string& title, int panel_width,
                           int height) {
  const int width = panel_width * static_cast<int>(std::max<size_t>(1, panels.size()));
  std::string o = header(width, height);
  o += text(width / 2.0, 24, title, "middle", 15, " font-weight=\"bold\"");
  const double top = 70, bottom = 40, left = 70, right = 20;
  const double ph = height - top - bottom, pw = panel_width - left - right;
  for (size_t p = 0; p < panels.size(); ++p) {
    const SvgBarPanel& b = panels[p];
    const double ox = static_cast<double>(p) * panel_width;
    double vmax = 0;
    for (double v : b.values) {
      if (std::isfinite(v)) vmax = std::max(vmax, v);
    }
    std::vector<double> ticks = nice_ticks(0, vmax > 0 ? vmax * 1.1 : 1);
    const double ymax = std::max(ticks.back(), vmax > 0 ? vmax * 1.1 : 1);
    auto py = [&](double v) { return top + ph - v / ymax * ph; };
    o += text(ox + panel_width / 2.0, 50, b.title, "middle", 13, " font-weight=\"bold\"");
    for (double v : ticks) {
      o += line(ox + left, py(v), ox + left + pw, py(v), "#e5e5e5");
      o += text(ox + left - 6, py(v) + 4, tick_label(v), "end", 11);
    }
    o += line(ox + left, top, ox + left, top + ph, "#333");
    o += line(ox + left, top + ph, ox + left + pw, top + ph, "#333");
    o += text(ox + 16, top + ph / 2, b.y_label, "middle", 12,
              " transform=\"rotate(-90 " + num(ox + 16) + " " + num(top + ph / 2) + ")\"");
    const size_t n = b.values.size();
    const double slot = pw / static_cast<double>(std::max<size_t>(1, n));
    for (size_t i = 0; i < n; ++i) {
      const double cx = ox + left + slot * (static_cast<double>(i) + 0.5);
      const double bw = slot * 0.55;
      const double v = b.values[i];
      const std::string color = i < b.colors.size() ? b.colors[i] : "#888";
      const std::string label = i < b.value_text.size() && !b.value_text[i].empty() ? b.value_text[i]
                                : std::isfinite(v)                                  ? value_label(v)
                                                                                    : "n/a";
      if (std::isfinite(v)) {
        o += "<rect class=\"bar\" x=\"" + num(cx - bw / 2) + "\" y=\"" + num(py(v)) + "\" width=\"" + num(bw) +
             "\" height=\"" + num(top + ph - py(v)) + "\" fill=\"" + color + "\"/>\n";
        o += text(cx, py(v) - 5, label, "middle", 11);
      } else {
        o += text(cx, top + ph - 8, label, "middle", 11);
      }
      o += text(cx, top + ph + 16, i < b.labels.size() ? b.labels[i] : "", "middle", 12);
    }
  }
  return o + "</svg>\n";
}

}  // namespace ft
