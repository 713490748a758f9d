// The plot of a capacity sweep (kvscope simulate --sweep --plot FILE.svg):
// prefix-cache hit ratio against KV capacity, one line per series (a cache
// policy, a hit definition), capacity on a log2 axis. Plain SVG text, so the
// headless command needs no graphics library.
#pragma once

#include <string>
#include <vector>

namespace kvscope::cli {

struct SweepPoint {
    double capacity_tokens = 0;
    double hit_ratio = 0; // 0..1
    // Some requests were rejected (too long for the cache): the ratio is the
    // rest's, drawn as a hollow point.
    bool partial = false;
};

struct SweepSeries {
    std::string name; // "LRU, by tokens"
    std::vector<SweepPoint> points;
    bool dashed = false;
};

std::string hit_ratio_svg(const std::string& title, const std::vector<SweepSeries>& series);

} // namespace kvscope::cli
