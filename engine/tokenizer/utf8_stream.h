// Turns a stream of token bytes into complete UTF-8 text. A token can end in
// the middle of a character (emoji and CJK often span tokens); the decoder
// holds such bytes back until the character is complete, and replaces bytes
// that can never form a valid character with U+FFFD.
#pragma once

#include <string>
#include <string_view>

namespace kvscope::tokenizer {

class Utf8StreamDecoder {
public:
    // Appends `bytes` and returns the text that is now complete.
    std::string push(std::string_view bytes);
    // Returns what is left at the end of the stream (U+FFFD for a cut-off character).
    std::string finish();
    bool has_pending() const { return !pending_.empty(); }

private:
    std::string pending_;
};

} // namespace kvscope::tokenizer
