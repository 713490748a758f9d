#include "app/ui/views/span_folding.h"

#include <algorithm>
#include <cmath>
#include <functional>

namespace kvscope::ui {

namespace {

// How far past the view's edges a plan's rectangles may reach: enough that a
// clipped span's border stays out of sight, small enough for exact doubles.
constexpr double kClipSlackPx = 4;

template <typename SpanType>
class Folder {
public:
    Folder(std::span<const SpanType> spans, const TimeAxis& axis, const FoldOptions& options)
        : spans_(spans)
        , axis_(axis)
        , open_end_ns_(options.open_end_ns)
        // In whole nanoseconds, so "narrower than min_px" and "closer than
        // min_px" are integer comparisons the binary search can share.
        , min_ns_(std::max<std::int64_t>(
              1, static_cast<std::int64_t>(std::ceil(options.min_px * axis.ns_per_px())))) {}

    std::int64_t end_of(const SpanType& span) const {
        return span.end_ns < 0 ? std::max(span.begin_ns, open_end_ns_) : span.end_ns;
    }

    IndexRange visible() const {
        const auto end_of_span = [this](const SpanType& span) {
            return end_of(span);
        };
        const auto first =
            std::ranges::upper_bound(spans_, axis_.begin_ns(), std::less{}, end_of_span);
        const auto last = std::ranges::lower_bound(first, spans_.end(), axis_.end_ns(), std::less{},
                                                   &SpanType::begin_ns);
        return {static_cast<std::size_t>(first - spans_.begin()),
                static_cast<std::size_t>(last - spans_.begin())};
    }

    std::vector<FoldedRect> fold() const {
        const IndexRange range = visible();
        std::vector<FoldedRect> plan;
        std::size_t i = range.first;
        while (i < range.last) {
            const SpanType& span = spans_[i];
            const std::size_t first = i++;
            std::int64_t run_end = end_of(span);
            if (run_end - span.begin_ns < min_ns_) {
                run_end = fold_run(i, range.last, run_end);
            }
            plan.push_back(rect(span.begin_ns, run_end, first, i - first));
        }
        return plan;
    }

private:
    // Extends a run of narrow spans that ends at `run_end` over the spans from
    // `i` on that are narrow and close to it; returns where the run ends and
    // leaves `i` at the first span not in it.
    std::int64_t fold_run(std::size_t& i, std::size_t last, std::int64_t run_end) const {
        const auto end_of_span = [this](const SpanType& span) {
            return end_of(span);
        };
        while (i < last) {
            // A span ending less than min_ns after the run also starts less
            // than that after it, so it is narrow and close: take all such
            // spans in one search. This keeps the work per pixel, not per span.
            const auto begin = spans_.begin() + static_cast<std::ptrdiff_t>(i);
            const auto end = spans_.begin() + static_cast<std::ptrdiff_t>(last);
            const auto next =
                std::ranges::lower_bound(begin, end, run_end + min_ns_, std::less{}, end_of_span);
            if (next != begin) {
                run_end = end_of(*(next - 1));
                i = static_cast<std::size_t>(next - spans_.begin());
                continue;
            }
            // The next span ends further away; it joins when it is itself
            // narrow and starts close enough.
            const SpanType& span = spans_[i];
            if (end_of(span) - span.begin_ns >= min_ns_ || span.begin_ns - run_end >= min_ns_) {
                break;
            }
            run_end = end_of(span);
            ++i;
        }
        return run_end;
    }

    FoldedRect rect(std::int64_t begin_ns, std::int64_t end_ns, std::size_t first,
                    std::size_t count) const {
        const double low = -kClipSlackPx;
        const double high = axis_.width() + kClipSlackPx;
        return {std::clamp(axis_.x_of(begin_ns), low, high),
                std::clamp(axis_.x_of(end_ns), low, high), first, count};
    }

    std::span<const SpanType> spans_;
    const TimeAxis& axis_;
    std::int64_t open_end_ns_;
    std::int64_t min_ns_;
};

} // namespace

IndexRange visible_spans(std::span<const profiler::Span> spans, const TimeAxis& axis,
                         const FoldOptions& options) {
    return Folder(spans, axis, options).visible();
}

IndexRange visible_spans(std::span<const profiler::StepSpan> spans, const TimeAxis& axis,
                         const FoldOptions& options) {
    return Folder(spans, axis, options).visible();
}

IndexRange visible_spans(std::span<const profiler::LaneSpan> spans, const TimeAxis& axis,
                         const FoldOptions& options) {
    return Folder(spans, axis, options).visible();
}

std::vector<FoldedRect> fold_spans(std::span<const profiler::Span> spans, const TimeAxis& axis,
                                   const FoldOptions& options) {
    return Folder(spans, axis, options).fold();
}

std::vector<FoldedRect> fold_spans(std::span<const profiler::StepSpan> spans, const TimeAxis& axis,
                                   const FoldOptions& options) {
    return Folder(spans, axis, options).fold();
}

std::vector<FoldedRect> fold_spans(std::span<const profiler::LaneSpan> spans, const TimeAxis& axis,
                                   const FoldOptions& options) {
    return Folder(spans, axis, options).fold();
}

const FoldedRect* rect_at(const std::vector<FoldedRect>& plan, double x) {
    // The last rectangle starting at or before x, if x falls inside it.
    const auto after =
        std::ranges::upper_bound(plan, x, std::less{}, [](const FoldedRect& r) { return r.x0; });
    if (after == plan.begin()) {
        return nullptr;
    }
    const FoldedRect& candidate = *(after - 1);
    return x < std::max(candidate.x1, candidate.x0 + 1) ? &candidate : nullptr;
}

} // namespace kvscope::ui
