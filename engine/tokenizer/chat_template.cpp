#include "engine/tokenizer/chat_template.h"

#include "engine/tokenizer/tokenizer.h"

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

bool speaks_chatml(const Tokenizer& tokenizer) {
    return tokenizer.find("<|im_start|>") >= 0 && tokenizer.find("<|im_end|>") >= 0;
}

std::string render_conversation(const Tokenizer& tokenizer,
                                const std::vector<ChatMessage>& messages) {
    if (speaks_chatml(tokenizer)) {
        return render_chatml(messages, true);
    }
    std::string text;
    for (const ChatMessage& message : messages) {
        text += (text.empty() ? "" : "\n\n") + message.content;
    }
    return text;
}

} // namespace kvscope::tokenizer
