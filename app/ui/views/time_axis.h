// The horizontal axis of a timeline: which host-clock nanoseconds are visible
// across a view of some width, pixels <-> nanoseconds, and the zoom and pan
// that keep the visible range sane (never under 1 us, never much beyond the
// data). Qt-free, so its arithmetic is tested on its own.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace kvscope::ui {

class TimeAxis {
public:
    // Narrower than this, one pixel would be a few picoseconds: nothing the
    // host clock resolves.
    static constexpr std::int64_t kMinVisibleNs = 1'000;
    // How far past either end of the data the view may go, as a share of the
    // data's length: room to see the first and last span whole.
    static constexpr double kDataMargin = 0.05;

    void set_width(double px);
    double width() const { return width_px_; }

    // The time range that holds data; the view stays inside it plus the margin.
    void set_data_range(std::int64_t begin_ns, std::int64_t end_ns);
    std::int64_t data_begin_ns() const { return data_begin_ns_; }
    std::int64_t data_end_ns() const { return data_end_ns_; }

    // Shows [begin_ns, end_ns), clamped to the limits above.
    void fit(std::int64_t begin_ns, std::int64_t end_ns);
    void fit_data() { fit(data_begin_ns_, data_end_ns_); }
    // Moves the view so it ends at `end_ns`, keeping its length (live follow).
    void scroll_to_end(std::int64_t end_ns);

    std::int64_t begin_ns() const { return begin_ns_; }
    std::int64_t end_ns() const { return begin_ns_ + visible_ns_; }
    std::int64_t visible_ns() const { return visible_ns_; }
    double ns_per_px() const;

    double x_of(std::int64_t ns) const;
    std::int64_t ns_of(double x) const;

    // factor > 1 zooms in; the time under `x` stays under `x` unless a limit
    // pushes the view back inside the data.
    void zoom_at(double x, double factor);
    // Drags the content by `dx_px`: positive shows earlier times.
    void pan_by(double dx_px);

private:
    struct Bounds {
        std::int64_t begin_ns;
        std::int64_t end_ns;
    };
    Bounds allowed() const;
    void clamp();

    double width_px_ = 1;
    std::int64_t data_begin_ns_ = 0;
    std::int64_t data_end_ns_ = 0;
    std::int64_t begin_ns_ = 0;
    std::int64_t visible_ns_ = kMinVisibleNs;
};

// A ruler mark: where it goes and what it reads.
struct TimeTick {
    std::int64_t ns = 0;
    double x = 0;
    std::string label;
};

// Marks at round multiples (1, 2 or 5 x 10^k ns) of the time since
// `origin_ns`, at least `min_spacing_px` apart, labelled relative to the
// origin ("250 us", "1.5 ms", "12 s").
std::vector<TimeTick> time_ticks(const TimeAxis& axis, std::int64_t origin_ns,
                                 double min_spacing_px);
// `ns` in the unit that suits `largest_ns` (the longest time on the ruler,
// so all its labels share a unit) with just enough decimals to tell ticks
// `step_ns` apart.
std::string format_tick(std::int64_t ns, std::int64_t step_ns, std::int64_t largest_ns);
// A duration with three significant digits: "850 ns", "12.3 us", "1.50 s".
std::string format_duration(std::int64_t ns);

} // namespace kvscope::ui
