#include "engine/tokenizer/chat_template.h"

namespace kvscope::tokenizer {

std::string render_chatml(const std::vector<ChatMessage>& messages, bool add_generation_prompt,
                          const std::string& default_system_prompt) {
    std::string out;
    if (!default_system_prompt.empty() && (messages.empty() || messages.front().role != "system")) {
        out += "<|im_start|>system\n" + default_system_prompt + "<|im_end|>\n";
    }
    for (const ChatMessage& message : messages) {
        out += "<|im_start|>" + message.role + "\n" + message.content + "<|im_end|>\n";
    }
    if (add_generation_prompt) {
        out += "<|im_start|>assistant\n";
    }
    return out;
}

} // namespace kvscope::tokenizer
