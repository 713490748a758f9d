// One colour per request, the same in every view, so a request is recognised
// by its colour in the block map, the prefix tree and the timeline alike.
#pragma once

#include <QColor>

namespace kvscope::ui {

// A saturated colour for `request`. Hues step by the golden ratio, so
// requests with neighbouring ids (which run together) get far-apart hues;
// negative ids (no request) are grey. Exact 8-bit RGB, as painted.
QColor request_color(qint64 request);

// A light tint of request_color(): for blocks that only remember the request
// (cached prefix blocks), so they read as "not in use" next to used ones.
QColor request_tint(qint64 request);

} // namespace kvscope::ui
