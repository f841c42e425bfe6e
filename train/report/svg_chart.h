// A small SVG writer for the compare report's charts: line charts (one <polyline> per series) and
// bar-chart panels side by side. No dependencies; the output is a self-contained <svg> document
// that browsers and GitHub render.
#pragma once

#include <string>
#include <vector>

namespace ft {

struct SvgSeries {
  std::string name;          // the legend entry
  std::string color;         // any SVG colour, e.g. "#1f77b4"
  std::vector<double> x, y;  // equal lengths; non-finite points are skipped
  bool markers = false;      // a dot at each point (for curves of a few points)
};

struct SvgLineChart {
  std::string title, x_label, y_label;
  std::vector<SvgSeries> series;
  bool log_x = false, log_y = false;  // base 2 for x (sequence lengths), base 10 for y
  std::vector<std::string> notes;     // lines of text under the plot
  int width = 720, height = 420;
};

struct SvgBarPanel {
  std::string title, y_label;
  std::vector<std::string> labels;  // one bar each
  std::vector<double> values;       // non-finite: the bar is drawn as "n/a"
  std::vector<std::string> colors;
  std::vector<std::string> value_text;  // printed above each bar; empty: the value itself
};

std::string svg_line_chart(const SvgLineChart& chart);
// The panels in one row, each with its own y axis from 0.
std::string svg_bar_panels(const std::vector<SvgBarPanel>& panels, const std::string& title, int panel_width = 360,
                           int height = 380);

// "&", "<", ">", quotes as entities.
std::string svg_escape(const std::string& text);
// Up to ~6 round tick values covering [lo, hi] (1, 2, 5 x 10^k steps).
std::vector<double> nice_ticks(double lo, double hi);

}  // namespace ft
