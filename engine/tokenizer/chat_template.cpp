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

std::string default_system_prompt(const Tokenizer& tokenizer) {
    const std::string& chat = tokenizer.chat_template();
    const std::string opening = "<|im_start|>system\n";
    const std::size_t at = chat.find(opening);
    if (at == std::string::npos) {
        return {};
    }
    const std::size_t from = at + opening.size();
    const std::size_t end = chat.find("<|im_end|>", from);
    // A quote or a Jinja expression there is the conversation's own system
    // message, not a default.
    if (end == std::string::npos || end == from || chat[from] == '\'' || chat[from] == '"' ||
        chat[from] == '{') {
        return {};
    }
    return chat.substr(from, end - from);
}

bool speaks_chatml(const Tokenizer& tokenizer) {
    return tokenizer.find("<|im_start|>") >= 0 && tokenizer.find("<|im_end|>") >= 0;
}

std::string render_conversation(const Tokenizer& tokenizer,
                                const std::vector<ChatMessage>& messages) {
    if (speaks_chatml(tokenizer)) {
        return render_chatml(messages, true, default_system_prompt(tokenizer));
    }
    std::string text;
    for (const ChatMessage& message : messages) {
        text += (text.empty() ? "" : "\n\n") + message.content;
    }
    return text;
}

} // namespace kvscope::tokenizer
