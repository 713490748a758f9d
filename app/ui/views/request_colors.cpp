#include "app/ui/views/request_colors.h"

#include <cmath>

namespace kvscope::ui {
namespace {

constexpr double kGoldenRatioConjugate = 0.6180339887498949;

double request_hue(qint64 request) {
    // fmod of a product keeps precision for ids up to 2^50, far beyond any run.
    return std::fmod(0.11 + static_cast<double>(request) * kGoldenRatioConjugate, 1.0);
}

} // namespace

QColor request_color(qint64 request) {
    if (request < 0) {
        return QColor(128, 128, 128);
    }
    return QColor(QColor::fromHsvF(static_cast<float>(request_hue(request)), 0.62f, 0.86f).rgb());
}

QColor request_tint(qint64 request) {
    if (request < 0) {
        return QColor(235, 235, 235);
    }
    return QColor(QColor::fromHsvF(static_cast<float>(request_hue(request)), 0.22f, 1.0f).rgb());
}

} // namespace kvscope::ui
