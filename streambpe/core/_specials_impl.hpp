// Finding special tokens in a str's code units, in plain C++ (no Python API),
// with the results of cutting/specials.py's SpecialTokenScanner.matches.
//
// The encoder looks for the special tokens in every text it encodes (tiktoken
// raises on a disallowed one). In Python that search is one str.find per token
// over the whole text, holding the GIL: on a 4-byte-per-character text, a
// tenth of a one-thread encode, and a step the threads of encode_batch took in
// turns. Here it runs without the GIL.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace streambpe {
namespace specials {

struct Match {
    size_t start;
    size_t end;
    uint32_t token;  // index into the tokens searched for
};

// Appends every match of ``tokens`` (non-empty, as code points) in
// ``text[0..length)``, leftmost first and, where several start at one place,
// the longest; the search goes on after each match, so none overlap.
template <class Unit>
void find_matches(const Unit* text, size_t length, const std::vector<std::vector<uint32_t>>& tokens,
                  std::vector<Match>& out) {
    // A place can start a match only if its code unit's low byte is that of
    // some token's first code point: a 256-bit test rejects nearly every
    // place, and the few left are compared in full.
    uint64_t first_bytes[4] = {0, 0, 0, 0};
    for (const std::vector<uint32_t>& token : tokens) {
        const uint32_t low = token[0] & 255;
        first_bytes[low >> 6] |= uint64_t(1) << (low & 63);
    }
    // Special tokens usually share one first character ("<"): then whole
    // blocks are skipped with a plain comparison the compiler vectorizes.
    const uint32_t first = tokens.empty() ? 0 : tokens[0][0];
    bool one_first = true;
    for (const std::vector<uint32_t>& token : tokens) one_first = one_first && token[0] == first;
    constexpr size_t BLOCK = 64;
    for (size_t at = 0; at < length;) {
        if (one_first && at + BLOCK <= length) {
            uint32_t seen = 0;  // a count, not a bool: GCC vectorizes a sum, not an "or" of bools
            for (size_t k = 0; k < BLOCK; ++k) seen += uint32_t(text[at + k]) == first;
            if (seen == 0) {
                at += BLOCK;
                continue;
            }
        }
        const uint32_t low = uint32_t(text[at]) & 255;
        if (((first_bytes[low >> 6] >> (low & 63)) & 1) == 0) {
            ++at;
            continue;
        }
        size_t longest = 0;
        uint32_t which = 0;
        for (size_t index = 0; index < tokens.size(); ++index) {
            const std::vector<uint32_t>& token = tokens[index];
            if (token.size() <= longest || token.size() > length - at) continue;
            size_t same = 0;
            while (same < token.size() && uint32_t(text[at + same]) == token[same]) ++same;
            if (same == token.size()) {
                longest = token.size();
                which = uint32_t(index);
            }
        }
        if (longest == 0) {
            ++at;
        } else {
            out.push_back(Match{at, at + longest, which});
            at += longest;
        }
    }
}

// find_matches on a str buffer of ``unit_size`` bytes per code unit (1, 2 or 4).
inline void find_matches_of_kind(int unit_size, const void* text, size_t length,
                                 const std::vector<std::vector<uint32_t>>& tokens,
                                 std::vector<Match>& out) {
    if (unit_size == 1) {
        find_matches(static_cast<const uint8_t*>(text), length, tokens, out);
    } else if (unit_size == 2) {
        find_matches(static_cast<const uint16_t*>(text), length, tokens, out);
    } else {
        find_matches(static_cast<const uint32_t*>(text), length, tokens, out);
    }
}

}  // namespace specials
}  // namespace streambpe
