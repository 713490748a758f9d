// A recording file as bytes: truncated, bit-flipped, not SQLite at all, or
// SQLite pages that lie about themselves. Every reader of recordings gets it
// (read_recording.h); the contract is RecordingError, nothing else.
#include "tests/fuzz/fuzz_file.h"
#include "tests/fuzz/read_recording.h"

using namespace kvscope;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    static fuzz::FuzzFile input("recording.sqlite");
    fuzz::read_recording(input.write(data, size));
    return 0;
}
