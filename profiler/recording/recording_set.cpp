#include "profiler/recording/recording_set.h"

#include "profiler/recording/recording.h"

#include <algorithm>
#include <array>
#include <string_view>

namespace kvscope::profiler {
namespace {

bool is_companion(const std::filesystem::path& file) {
    const std::string name = file.filename().string();
    constexpr std::array<std::string_view, 5> skipped = {"-wal", "-shm", "-journal", ".log",
                                                         ".txt"};
    return std::any_of(skipped.begin(), skipped.end(), [&](std::string_view suffix) {
        return name.size() > suffix.size() && name.ends_with(suffix);
    });
}

} // namespace

std::vector<std::filesystem::path> recordings_in(const std::filesystem::path& path) {
    std::error_code error;
    if (!std::filesystem::is_directory(path, error)) {
        return {path}; // compute_stats says what is wrong with it, if anything
    }
    std::vector<std::filesystem::path> files;
    for (const auto& entry : std::filesystem::directory_iterator(path, error)) {
        if (entry.is_regular_file() && !is_companion(entry.path()) &&
            entry.path().filename().string().front() != '.') {
            files.push_back(entry.path());
        }
    }
    if (error) {
        throw RecordingError(path.string() + ": cannot list the folder: " + error.message());
    }
    if (files.empty()) {
        throw RecordingError(path.string() + ": the folder holds no recordings");
    }
    std::sort(files.begin(), files.end());
    return files;
}

std::vector<RecordingStats> compute_run_set_stats(const std::filesystem::path& path) {
    std::vector<RecordingStats> out;
    for (const std::filesystem::path& file : recordings_in(path)) {
        out.push_back(compute_stats(file));
    }
    return out;
}

} // namespace kvscope::profiler
