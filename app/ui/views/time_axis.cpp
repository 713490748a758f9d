#include "app/ui/views/time_axis.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace kvscope::ui {

void TimeAxis::set_width(double px) {
    // Zero-width widgets exist before their first layout; keep the maths finite.
    width_px_ = std::max(px, 1.0);
}

void TimeAxis::set_data_range(std::int64_t begin_ns, std::int64_t end_ns) {
    data_begin_ns_ = begin_ns;
    data_end_ns_ = std::max(begin_ns, end_ns);
    clamp();
}

void TimeAxis::fit(std::int64_t begin_ns, std::int64_t end_ns) {
    if (end_ns < begin_ns) {
        std::swap(begin_ns, end_ns);
    }
    const std::int64_t length = std::max(end_ns - begin_ns, kMinVisibleNs);
    // Too short a range grows around its middle, so what was asked for stays in view.
    begin_ns_ = begin_ns + (end_ns - begin_ns) / 2 - length / 2;
    visible_ns_ = length;
    clamp();
}

void TimeAxis::scroll_to_end(std::int64_t end_ns) {
    begin_ns_ = end_ns - visible_ns_;
    clamp();
}

double TimeAxis::ns_per_px() const {
    return static_cast<double>(visible_ns_) / width_px_;
}

double TimeAxis::x_of(std::int64_t ns) const {
    // The difference first, in integers: host-clock times are ~1e15 and would
    // lose nanoseconds as doubles.
    return static_cast<double>(ns - begin_ns_) * width_px_ / static_cast<double>(visible_ns_);
}

std::int64_t TimeAxis::ns_of(double x) const {
    return begin_ns_ + std::llround(x * static_cast<double>(visible_ns_) / width_px_);
}

void TimeAxis::zoom_at(double x, double factor) {
    if (!(factor > 0)) {
        return;
    }
    const double anchor_share = x / width_px_;
    const double anchor_ns =
        static_cast<double>(begin_ns_) + anchor_share * static_cast<double>(visible_ns_);
    const Bounds bounds = allowed();
    visible_ns_ = std::clamp(std::llround(static_cast<double>(visible_ns_) / factor),
                             static_cast<long long>(kMinVisibleNs),
                             static_cast<long long>(bounds.end_ns - bounds.begin_ns));
    begin_ns_ = std::llround(anchor_ns - anchor_share * static_cast<double>(visible_ns_));
    clamp();
}

void TimeAxis::pan_by(double dx_px) {
    begin_ns_ -= std::llround(dx_px * ns_per_px());
    clamp();
}

TimeAxis::Bounds TimeAxis::allowed() const {
    const std::int64_t margin =
        std::llround(static_cast<double>(data_end_ns_ - data_begin_ns_) * kDataMargin);
    Bounds bounds{data_begin_ns_ - margin, data_end_ns_ + margin};
    if (bounds.end_ns - bounds.begin_ns < kMinVisibleNs) {
        // Little or no data yet: a minimal view centred on it.
        const std::int64_t middle = data_begin_ns_ + (data_end_ns_ - data_begin_ns_) / 2;
        bounds.begin_ns = middle - kMinVisibleNs / 2;
        bounds.end_ns = bounds.begin_ns + kMinVisibleNs;
    }
    return bounds;
}

void TimeAxis::clamp() {
    const Bounds bounds = allowed();
    visible_ns_ = std::clamp(visible_ns_, kMinVisibleNs, bounds.end_ns - bounds.begin_ns);
    begin_ns_ = std::clamp(begin_ns_, bounds.begin_ns, bounds.end_ns - visible_ns_);
}

namespace {

struct Unit {
    int exponent; // of ten, in nanoseconds
    const char* name;
};

Unit unit_for(double ns) {
    if (ns < 1e3) {
        return {0, "ns"};
    }
    if (ns < 1e6) {
        return {3, "us"};
    }
    if (ns < 1e9) {
        return {6, "ms"};
    }
    return {9, "s"};
}

std::string format_value(double value, int decimals, const char* unit) {
    char text[64];
    std::snprintf(text, sizeof text, "%.*f %s", decimals, value, unit);
    return text;
}

} // namespace

std::string format_tick(std::int64_t ns, std::int64_t step_ns, std::int64_t largest_ns) {
    step_ns = std::max<std::int64_t>(step_ns, 1);
    const Unit unit =
        unit_for(std::max(std::abs(static_cast<double>(largest_ns)), static_cast<double>(step_ns)));
    const int step_exponent =
        static_cast<int>(std::floor(std::log10(static_cast<double>(step_ns))));
    const int decimals = std::max(0, unit.exponent - step_exponent);
    return format_value(static_cast<double>(ns) / std::pow(10.0, unit.exponent), decimals,
                        unit.name);
}

std::string format_duration(std::int64_t ns) {
    const double magnitude = std::abs(static_cast<double>(ns));
    if (magnitude < 1e3) {
        return format_value(static_cast<double>(ns), 0, "ns");
    }
    Unit unit = unit_for(magnitude);
    double value = static_cast<double>(ns) / std::pow(10.0, unit.exponent);
    // 999.96 us would print as "1000 us": say "1.00 ms" instead.
    if (std::abs(value) >= 999.5 && unit.exponent < 9) {
        unit = unit_for(magnitude * 10);
        value = static_cast<double>(ns) / std::pow(10.0, unit.exponent);
    }
    const double shown = std::abs(value);
    const int decimals = shown < 10 ? 2 : shown < 100 ? 1 : 0;
    return format_value(value, decimals, unit.name);
}

std::vector<TimeTick> time_ticks(const TimeAxis& axis, std::int64_t origin_ns,
                                 double min_spacing_px) {
    const double min_step_ns = std::max(min_spacing_px, 1.0) * axis.ns_per_px();
    std::int64_t step = 1;
    for (std::int64_t decade = 1;; decade *= 10) {
        const std::int64_t candidates[] = {decade, 2 * decade, 5 * decade};
        const auto fits = std::find_if(std::begin(candidates), std::end(candidates),
                                       [&](std::int64_t c) { return c >= min_step_ns; });
        if (fits != std::end(candidates)) {
            step = *fits;
            break;
        }
    }
    // The first multiple of `step` (relative to the origin) at or after the left edge.
    const std::int64_t relative_begin = axis.begin_ns() - origin_ns;
    std::int64_t first = relative_begin / step * step;
    if (first < relative_begin) {
        first += step;
    }
    const std::int64_t largest =
        std::max(std::abs(relative_begin), std::abs(axis.end_ns() - origin_ns));
    std::vector<TimeTick> ticks;
    for (std::int64_t t = first; origin_ns + t < axis.end_ns(); t += step) {
        ticks.push_back({origin_ns + t, axis.x_of(origin_ns + t), format_tick(t, step, largest)});
    }
    return ticks;
}

} // namespace kvscope::ui
