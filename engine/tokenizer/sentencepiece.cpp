#include "engine/tokenizer/sentencepiece.h"

#include "engine/tokenizer/tokenizer.h"
#include "engine/util/hex_digit.h"

#include <queue>

namespace kvscope::tokenizer {
namespace {

constexpr std::string_view kSpace = "\xE2\x96\x81"; // U+2581, SentencePiece's space

// Bytes of the UTF-8 character a lead byte starts (1 for a stray byte).
std::size_t utf8_length(unsigned char lead) {
    if (lead < 0x80) {
        return 1;
    }
    if ((lead & 0xE0) == 0xC0) {
        return 2;
    }
    if ((lead & 0xF0) == 0xE0) {
        return 3;
    }
    if ((lead & 0xF8) == 0xF0) {
        return 4;
    }
    return 1;
}

// The byte a "<0xXX>" piece stands for, or -1.
int byte_of_piece(std::string_view piece) {
    if (piece.size() != 6 || piece.substr(0, 3) != "<0x" || piece[5] != '>') {
        return -1;
    }
    const int high = hex_digit(piece[3]);
    const int low = hex_digit(piece[4]);
    return high < 0 || low < 0 ? -1 : high * 16 + low;
}

} // namespace

SentencePieceEncoder::SentencePieceEncoder(const std::vector<std::string>& pieces,
                                           std::vector<float> scores,
                                           const std::vector<TokenType>& types, TokenId unknown_id)
    : scores_(std::move(scores))
    , types_(types)
    , byte_pieces_(256, -1)
    , unknown_id_(unknown_id) {
    for (std::size_t i = 0; i < pieces.size(); ++i) {
        const auto id = static_cast<TokenId>(i);
        switch (types[i]) {
        case TokenType::Normal:
        case TokenType::UserDefined:
        case TokenType::Unused:
        case TokenType::Undefined:
            mergeable_.emplace(pieces[i], id); // the first of duplicates wins
            break;
        case TokenType::Byte:
            if (const int byte = byte_of_piece(pieces[i]); byte >= 0) {
                byte_pieces_[static_cast<std::size_t>(byte)] = id;
            }
            break;
        default: // control and unknown pieces never come from text
            break;
        }
    }
}

TokenId SentencePieceEncoder::mergeable(std::string_view text) const {
    const auto it = mergeable_.find(text);
    return it == mergeable_.end() ? -1 : it->second;
}

void SentencePieceEncoder::encode(std::string_view text, bool space_prefix,
                                  std::vector<TokenId>& out) const {
    std::string normalized;
    normalized.reserve(text.size() + 8);
    if (space_prefix) {
        normalized += kSpace;
    }
    for (const char c : text) {
        if (c == ' ') {
            normalized += kSpace;
        } else {
            normalized += c;
        }
    }
    if (normalized.empty()) {
        return;
    }
    // One symbol per character, linked in order; a merge grows the left one.
    struct Symbol {
        std::size_t begin;
        std::size_t size;
        int prev;
        int next;
    };
    std::vector<Symbol> symbols;
    for (std::size_t i = 0; i < normalized.size();) {
        const std::size_t size =
            std::min(utf8_length(static_cast<unsigned char>(normalized[i])), normalized.size() - i);
        const int index = static_cast<int>(symbols.size());
        symbols.push_back({i, size, index - 1, index + 1});
        i += size;
    }
    symbols.back().next = -1;
    const auto text_of = [&](const Symbol& s) {
        return std::string_view(normalized).substr(s.begin, s.size);
    };

    // The best merge first: the highest score, then the leftmost.
    struct Pair {
        int left;
        int right;
        float score;
        std::size_t size;
    };
    const auto worse = [](const Pair& a, const Pair& b) {
        return a.score < b.score || (a.score == b.score && a.left > b.left);
    };
    std::priority_queue<Pair, std::vector<Pair>, decltype(worse)> agenda(worse);
    Parts unused_parts;
    const auto consider = [&](int left, int right) {
        if (left < 0 || right < 0) {
            return;
        }
        const std::string_view merged =
            std::string_view(normalized)
                .substr(symbols[static_cast<std::size_t>(left)].begin,
                        symbols[static_cast<std::size_t>(left)].size +
                            symbols[static_cast<std::size_t>(right)].size);
        const TokenId id = mergeable(merged);
        if (id < 0) {
            return;
        }
        agenda.push({left, right, scores_[static_cast<std::size_t>(id)], merged.size()});
        if (types_[static_cast<std::size_t>(id)] == TokenType::Unused) {
            // Never emitted: split back into what it was made of.
            unused_parts.emplace(
                std::string(merged),
                std::pair(std::string(text_of(symbols[static_cast<std::size_t>(left)])),
                          std::string(text_of(symbols[static_cast<std::size_t>(right)]))));
        }
    };
    for (int i = 1; i < static_cast<int>(symbols.size()); ++i) {
        consider(i - 1, i);
    }
    while (!agenda.empty()) {
        const Pair pair = agenda.top();
        agenda.pop();
        Symbol& left = symbols[static_cast<std::size_t>(pair.left)];
        Symbol& right = symbols[static_cast<std::size_t>(pair.right)];
        // Stale: one side has merged with another symbol since.
        if (left.size == 0 || right.size == 0 || left.size + right.size != pair.size) {
            continue;
        }
        left.size += right.size;
        right.size = 0;
        left.next = right.next;
        if (right.next >= 0) {
            symbols[static_cast<std::size_t>(right.next)].prev = pair.left;
        }
        consider(left.prev, pair.left);
        consider(pair.left, left.next);
    }
    for (int i = 0; i >= 0; i = symbols[static_cast<std::size_t>(i)].next) {
        output_symbol(text_of(symbols[static_cast<std::size_t>(i)]), unused_parts, out);
    }
}

void SentencePieceEncoder::output_symbol(std::string_view symbol, const Parts& unused_parts,
                                         std::vector<TokenId>& out) const {
    const TokenId id = mergeable(symbol);
    if (id >= 0 && types_[static_cast<std::size_t>(id)] != TokenType::Unused) {
        out.push_back(id);
        return;
    }
    if (const auto parts = unused_parts.find(symbol); parts != unused_parts.end()) {
        output_symbol(parts->second.first, unused_parts, out);
        output_symbol(parts->second.second, unused_parts, out);
        return;
    }
    // No piece: the character's bytes, or the unknown piece.
    for (const char c : symbol) {
        const TokenId byte = byte_pieces_[static_cast<unsigned char>(c)];
        if (byte >= 0) {
            out.push_back(byte);
        } else if (unknown_id_ >= 0 && (out.empty() || out.back() != unknown_id_)) {
            out.push_back(unknown_id_);
        }
    }
}

std::string SentencePieceEncoder::piece_bytes(std::string_view piece, TokenType type) {
    if (type == TokenType::Byte) {
        if (const int byte = byte_of_piece(piece); byte >= 0) {
            return std::string(1, static_cast<char>(byte));
        }
    }
    std::string bytes;
    bytes.reserve(piece.size());
    for (std::size_t i = 0; i < piece.size();) {
        if (piece.substr(i, kSpace.size()) == kSpace) {
            bytes += ' ';
            i += kSpace.size();
        } else {
            bytes += piece[i++];
        }
    }
    return bytes;
}

} // namespace kvscope::tokenizer
