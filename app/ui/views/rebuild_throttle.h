// How often a view whose rebuild costs in proportion to a live run may
// rebuild while following it. An attached engine holds a hundred thousand
// blocks and more; laying them out on every frame would take the window's
// whole time. A live refresh rebuilds only once the time since the last
// rebuild is at least `min_interval` and `cost_factor` times what that
// rebuild took, so such a view takes at most about 1/cost_factor of the
// window's time (or of a core, when it rebuilds on a worker: background_build.h),
// and a small run still updates every frame. Moving the time (scrubbing)
// rebuilds at once.
#pragma once

#include <algorithm>
#include <chrono>

#include <QElapsedTimer>

namespace kvscope::ui {

class RebuildThrottle {
public:
    explicit RebuildThrottle(std::chrono::milliseconds min_interval, int cost_factor = 10)
        : min_interval_(min_interval)
        , cost_factor_(cost_factor) {}

    bool due() const {
        if (!since_.isValid()) {
            return true;
        }
        const qint64 wait = std::max<qint64>(min_interval_.count(), cost_factor_ * last_cost_ms_);
        return since_.elapsed() >= wait;
    }
    // A rebuild that took `cost_ms` just ended (on whatever thread it ran).
    void ran(qint64 cost_ms) {
        last_cost_ms_ = cost_ms;
        since_.start();
    }
    qint64 last_cost_ms() const { return last_cost_ms_; }

private:
    std::chrono::milliseconds min_interval_;
    int cost_factor_;
    qint64 last_cost_ms_ = 0;
    QElapsedTimer since_;
};

} // namespace kvscope::ui
