#include "app/cli/sweep_plot.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

namespace kvscope::cli {
namespace {

constexpr double kWidth = 720;
constexpr double kHeight = 440;
constexpr double kLeft = 70;
constexpr double kRight = 200; // the legend
constexpr double kTop = 40;
constexpr double kBottom = 60;
const char* const kColors[] = {"#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b"};

std::string escape(const std::string& text) {
    std::string out;
    for (const char c : text) {
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
        default:
            if (static_cast<unsigned char>(c) >= 0x20 || c == '\t') {
                out += c; // control bytes are not XML
            }
        }
    }
    return out;
}

// The axis's ticks are powers of two: "512", "1Ki", "128Ki", "16Mi".
std::string tokens_label(double tokens) {
    char text[32];
    if (tokens >= 1024.0 * 1024 * 1024) {
        std::snprintf(text, sizeof text, "%gGi", tokens / (1024.0 * 1024 * 1024));
    } else if (tokens >= 1024.0 * 1024) {
        std::snprintf(text, sizeof text, "%gMi", tokens / (1024.0 * 1024));
    } else if (tokens >= 1024) {
        std::snprintf(text, sizeof text, "%gKi", tokens / 1024);
    } else {
        std::snprintf(text, sizeof text, "%g", tokens);
    }
    return text;
}

} // namespace

std::string hit_ratio_svg(const std::string& title, const std::vector<SweepSeries>& series) {
    double lo = INFINITY;
    double hi = 0;
    for (const SweepSeries& s : series) {
        for (const SweepPoint& p : s.points) {
            lo = std::min(lo, p.capacity_tokens);
            hi = std::max(hi, p.capacity_tokens);
        }
    }
    if (!(lo > 0) || !(hi > 0)) {
        lo = 1;
        hi = 2;
    }
    const double lx = std::floor(std::log2(lo));
    const double hx = std::max(std::ceil(std::log2(hi)), lx + 1);
    const double plot_w = kWidth - kLeft - kRight;
    const double plot_h = kHeight - kTop - kBottom;
    const auto x_of = [&](double tokens) {
        return kLeft + (std::log2(tokens) - lx) / (hx - lx) * plot_w;
    };
    const auto y_of = [&](double ratio) {
        return kTop + (1 - ratio) * plot_h;
    };

    std::ostringstream svg;
    svg << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << kWidth << "\" height=\""
        << kHeight << "\" font-family=\"sans-serif\" font-size=\"12\">\n"
        << "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
        << "<text x=\"" << kLeft << "\" y=\"22\" font-size=\"14\">" << escape(title) << "</text>\n";
    // Axes and grid: every 10% up, every power of two across.
    for (int percent = 0; percent <= 100; percent += 10) {
        const double y = y_of(percent / 100.0);
        svg << "<line x1=\"" << kLeft << "\" y1=\"" << y << "\" x2=\"" << kLeft + plot_w
            << "\" y2=\"" << y << "\" stroke=\"#e0e0e0\"/>\n"
            << "<text x=\"" << kLeft - 8 << "\" y=\"" << y + 4 << "\" text-anchor=\"end\">"
            << percent << "%</text>\n";
    }
    const int step = std::max(1, static_cast<int>((hx - lx) / 8));
    for (double e = lx; e <= hx; e += step) {
        const double x = kLeft + (e - lx) / (hx - lx) * plot_w;
        svg << "<line x1=\"" << x << "\" y1=\"" << kTop << "\" x2=\"" << x << "\" y2=\""
            << kTop + plot_h << "\" stroke=\"#e0e0e0\"/>\n"
            << "<text x=\"" << x << "\" y=\"" << kTop + plot_h + 18 << "\" text-anchor=\"middle\">"
            << tokens_label(std::exp2(e)) << "</text>\n";
    }
    svg << "<rect x=\"" << kLeft << "\" y=\"" << kTop << "\" width=\"" << plot_w << "\" height=\""
        << plot_h << "\" fill=\"none\" stroke=\"#444\"/>\n"
        << "<text x=\"" << kLeft + plot_w / 2 << "\" y=\"" << kHeight - 18
        << "\" text-anchor=\"middle\">KV capacity (tokens, log scale)</text>\n"
        << "<text transform=\"translate(18," << kTop + plot_h / 2
        << ") rotate(-90)\" text-anchor=\"middle\">prefix-cache hit ratio</text>\n";
    for (std::size_t i = 0; i < series.size(); ++i) {
        const SweepSeries& s = series[i];
        const char* color = kColors[i % (sizeof kColors / sizeof kColors[0])];
        std::vector<SweepPoint> points = s.points;
        std::sort(points.begin(), points.end(), [](const SweepPoint& a, const SweepPoint& b) {
            return a.capacity_tokens < b.capacity_tokens;
        });
        svg << "<polyline fill=\"none\" stroke=\"" << color << "\" stroke-width=\"2\""
            << (s.dashed ? " stroke-dasharray=\"6,4\"" : "") << " points=\"";
        for (const SweepPoint& p : points) {
            svg << x_of(p.capacity_tokens) << "," << y_of(p.hit_ratio) << " ";
        }
        svg << "\"/>\n";
        for (const SweepPoint& p : points) {
            svg << "<circle cx=\"" << x_of(p.capacity_tokens) << "\" cy=\"" << y_of(p.hit_ratio)
                << "\" r=\"3\" " << (p.partial ? "fill=\"white\" stroke=\"" : "fill=\"") << color
                << "\"/>\n";
        }
        const double ly = kTop + 10 + 20 * static_cast<double>(i);
        svg << "<line x1=\"" << kWidth - kRight + 15 << "\" y1=\"" << ly << "\" x2=\""
            << kWidth - kRight + 40 << "\" y2=\"" << ly << "\" stroke=\"" << color
            << "\" stroke-width=\"2\"" << (s.dashed ? " stroke-dasharray=\"6,4\"" : "")
            << "/>\n<text x=\"" << kWidth - kRight + 46 << "\" y=\"" << ly + 4 << "\">"
            << escape(s.name) << "</text>\n";
    }
    bool partial = false;
    for (const SweepSeries& s : series) {
        for (const SweepPoint& p : s.points) {
            partial = partial || p.partial;
        }
    }
    if (partial) {
        svg << "<text x=\"" << kLeft << "\" y=\"" << kHeight - 4
            << "\" font-size=\"10\">Hollow points: some requests were too long for the cache "
               "and rejected; the ratio is the rest's.</text>\n";
    }
    svg << "</svg>\n";
    return svg.str();
}

} // namespace kvscope::cli
