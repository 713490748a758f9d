// PNG plots for the headless command: the same SVG the command writes,
// rendered by librsvg onto a cairo image (both kept Debian libraries), so
// a plot is drawn by one code path whatever file it goes to.
#pragma once

#include <string>

namespace kvscope::cli {

// Renders `svg` at `scale` times its size to a PNG at `path` on a white
// background. Throws std::runtime_error saying why it could not.
void write_svg_as_png(const std::string& svg, const std::string& path, double scale = 2.0);

// Whether `path` names a PNG (by its extension, any case).
bool is_png_path(const std::string& path);

} // namespace kvscope::cli
