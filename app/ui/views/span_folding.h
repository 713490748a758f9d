// The drawing plan of one timeline track: which of its time-sorted spans are
// visible, and the rectangles to paint for them. Spans at least a few pixels
// wide get a rectangle each; runs of narrower spans that lie closer together
// than that fold into one rectangle that counts them (Tracy does the same).
// A plan holds O(width / min_px) rectangles however many spans are in view,
// and is built with binary searches, so painting a million spans stays fast.
#pragma once

#include "app/ui/views/time_axis.h"
#include "profiler/store/run_store.h"

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace kvscope::ui {

// Spans [first, last) of a track.
struct IndexRange {
    std::size_t first = 0;
    std::size_t last = 0;
    std::size_t size() const { return last - first; }
};

struct FoldedRect {
    // In the axis' pixels, clipped to a few pixels beyond either edge; a span
    // crossing an edge starts or ends outside [0, width].
    double x0 = 0;
    double x1 = 0;
    std::size_t first = 0; // the first span it covers
    std::size_t count = 0; // spans it covers: 1 is a span of its own, more are folded
    bool folded() const { return count > 1; }
};

struct FoldOptions {
    // Spans narrower than this fold with neighbours closer than this.
    double min_px = 3.0;
    // Where a span still running (end_ns == -1, live steps and lanes) ends:
    // the store's latest time.
    std::int64_t open_end_ns = 0;
};

// The spans overlapping the axis' visible range: from the first that ends
// after its left edge to the last that begins before its right edge. Spans
// must be sorted by time and not overlap.
IndexRange visible_spans(std::span<const profiler::Span> spans, const TimeAxis& axis,
                         const FoldOptions& options = {});
IndexRange visible_spans(std::span<const profiler::StepSpan> spans, const TimeAxis& axis,
                         const FoldOptions& options = {});
IndexRange visible_spans(std::span<const profiler::LaneSpan> spans, const TimeAxis& axis,
                         const FoldOptions& options = {});

// The rectangles to paint, left to right; their counts add up to the visible spans.
std::vector<FoldedRect> fold_spans(std::span<const profiler::Span> spans, const TimeAxis& axis,
                                   const FoldOptions& options = {});
std::vector<FoldedRect> fold_spans(std::span<const profiler::StepSpan> spans, const TimeAxis& axis,
                                   const FoldOptions& options = {});
std::vector<FoldedRect> fold_spans(std::span<const profiler::LaneSpan> spans, const TimeAxis& axis,
                                   const FoldOptions& options = {});

// The rectangle of `plan` under `x` (a rectangle under a pixel wide counts
// as one pixel wide, as painted); null when none.
const FoldedRect* rect_at(const std::vector<FoldedRect>& plan, double x);

} // namespace kvscope::ui
