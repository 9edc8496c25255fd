// Characters that BPE may take as one unit from the start, in plain C++ (no
// Python API).
//
// Byte-level BPE starts every piece from single bytes, so a piece of Chinese
// spends two of every three merges rebuilding its characters before any
// merge between characters happens; Cyrillic and Greek spend one in two.
// When a multibyte character is a token, CharAtoms says where starting from
// that token instead gives exactly the same parts. PieceMerger
// (_piece_encoder_impl.hpp) then merges a third or half as many units.
//
// Why it is exact. Take a character c (bytes c[0..k)) whose own BPE ends in
// its token U, in a vocabulary where every merge's result ranks after both
// of its operands ("proper": trained BPE vocabularies are). Suppose no
// ranked token crosses an edge of c in this piece with part of c: no token
// X + c[0..m) with X the bytes just before c, and none c[m..k) + Y with Y
// the bytes just after (0 < m < k). Then:
//   1. While c is not yet whole, no merge involves part of it and anything
//      outside: that merge would make one of those tokens. So c's own merges
//      run as in c's BPE alone, and c becomes U.
//   2. Each merge inside c makes a part of U, which ranks before U. While c
//      is not whole, one of them is waiting, so every merge BPE picks in
//      that time ranks at most U. A merge of U with a neighbour ranks after U.
//      So starting from U adds candidates that lose to every merge BPE makes
//      before c is whole, and from then on the two runs are the same.
// Applied to one character after another, this covers any set of them. The
// check of the edges reads the piece's actual bytes, so it holds whatever
// the neighbours become.
//
// Only characters below U+10000 (two or three bytes) are atoms: the table is
// indexed by code point. Most characters have some "fragment" token that
// could cross an edge (o200k has about 800, like " \xe4\xb8"), so each one
// carries a rule: the bytes that may stand just before and just after it
// for one of its fragments to apply (one bit test each, which clears almost
// every occurrence), then the fragments themselves for the rest.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <map>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "_hash_table.hpp"
#include "_table_image.hpp"

namespace streambpe {

class CharAtoms {
public:
    // The length of the UTF-8 sequence ``lead`` starts (0: not a lead byte).
    static size_t sequence_length(uint8_t lead) {
        return lead < 0x80 ? 1 : lead < 0xC0 ? 0 : lead < 0xE0 ? 2 : lead < 0xF0 ? 3 : 4;
    }

    // Builds the table from every ranked unit (256 up to ``units``): its
    // bytes, from ``bytes_of(unit, length)``, and whether BPE on its own
    // bytes ends in that one unit, from ``forms_alone(unit)``.
    template <class BytesOf, class FormsAlone>
    void build(size_t units, BytesOf bytes_of, FormsAlone forms_alone) {
        clear();
        // Fragments by the part of a character they hold: heads end with a
        // character's first bytes, tails start with its last bytes. The
        // values are the bytes outside the character.
        std::unordered_map<std::string, std::vector<std::string>> heads, tails;
        std::vector<std::pair<uint32_t, uint32_t>> characters;  // (code point, unit)
        for (size_t unit = 256; unit < units; ++unit) {
            size_t length = 0;
            const uint8_t* token = bytes_of(uint32_t(unit), length);
            const std::string bytes(reinterpret_cast<const char*>(token), length);
            uint32_t code_point = 0;
            if (decode(token, length, 0, code_point) == length) {
                if (code_point < BMP && forms_alone(uint32_t(unit))) {
                    characters.emplace_back(code_point, uint32_t(unit));
                }
                continue;
            }
            // A head: bytes, then a character's first bytes (incomplete).
            size_t last = length;
            while (last > 0 && is_continuation(token[last - 1])) --last;
            if (last > 1 && length - (last - 1) < sequence_length(token[last - 1]) &&
                sequence_length(token[last - 1]) > 1) {
                heads[bytes.substr(last - 1)].push_back(bytes.substr(0, last - 1));
            }
            // A tail: a character's last bytes, then more bytes.
            size_t first = 0;
            while (first < length && is_continuation(token[first])) ++first;
            if (first > 0 && first < length) {
                tails[bytes.substr(0, first)].push_back(bytes.substr(first));
            }
        }
        if (characters.empty()) return;
        entries_.assign(BMP, Entry{NONE32, 0});
        rules_.assign(1, Rule{});  // rule 0: no fragment applies anywhere
        std::map<std::pair<std::vector<std::string>, std::vector<std::string>>, uint32_t> known;
        for (const auto& character : characters) {
            uint8_t encoded[4];
            const size_t k = encode(character.first, encoded);
            const std::string bytes(reinterpret_cast<const char*>(encoded), k);
            std::vector<std::string> before, after;
            for (size_t m = 1; m < k; ++m) {
                const auto head = heads.find(bytes.substr(0, m));
                if (head != heads.end()) before.insert(before.end(), head->second.begin(), head->second.end());
                const auto tail = tails.find(bytes.substr(k - m));
                if (tail != tails.end()) after.insert(after.end(), tail->second.begin(), tail->second.end());
            }
            uint32_t rule = 0;
            if (!before.empty() || !after.empty()) {
                std::sort(before.begin(), before.end());
                std::sort(after.begin(), after.end());
                auto found = known.find({before, after});
                if (found == known.end()) {
                    found = known.emplace(std::make_pair(before, after), add_rule(before, after)).first;
                }
                rule = found->second;
            }
            entries_[character.first] = Entry{character.second, rule};
        }
    }

    void clear() {
        entries_.clear();
        rules_.clear();
        fragments_.clear();
        fragment_bytes_.clear();
    }

    bool empty() const { return entries_.empty(); }

    // The number of atoms.
    size_t size() const {
        size_t count = 0;
        for (const Entry& entry : entries_) count += entry.unit != NONE32;
        return count;
    }

    // Reads the character that starts at piece[at] (``n`` bytes in all):
    // its length, with its code point in ``code_point``, or 0 if the bytes
    // there are not a whole, well-formed UTF-8 sequence of two or more bytes.
    static size_t decode(const uint8_t* piece, size_t n, size_t at, uint32_t& code_point) {
        const uint8_t lead = piece[at];
        const size_t k = sequence_length(lead);
        if (k < 2 || at + k > n) return 0;
        uint32_t value = lead & (0x7F >> k);
        for (size_t i = 1; i < k; ++i) {
            if (!is_continuation(piece[at + i])) return 0;
            value = value << 6 | (piece[at + i] & 0x3F);
        }
        // The shortest form only (an overlong form of a character is other
        // bytes), and no surrogates.
        static const uint32_t least[5] = {0, 0, 0x80, 0x800, 0x10000};
        if (value < least[k] || value > 0x10FFFF || (value >= 0xD800 && value < 0xE000)) return 0;
        code_point = value;
        return k;
    }

    // The unit to start from for the character of ``k`` bytes at piece[at]
    // (code point ``code_point``), or NONE32 where it must start as bytes.
    uint32_t unit_at(const uint8_t* piece, size_t n, size_t at, size_t k, uint32_t code_point) const {
        if (code_point >= BMP) return NONE32;
        const Entry entry = entries_[code_point];
        if (entry.rule == 0 || entry.unit == NONE32) return entry.unit;
        const Rule& rule = rules_[entry.rule];
        const size_t end = at + k;
        if (at > 0 && has(rule.before, piece[at - 1])) {
            for (uint32_t f = rule.heads_begin; f < rule.heads_end; ++f) {
                const Fragment x = fragments_[f];
                if (x.length <= at &&
                    std::memcmp(piece + at - x.length, fragment_bytes_.data() + x.offset, x.length) == 0) {
                    return NONE32;
                }
            }
        }
        if (end < n && has(rule.after, piece[end])) {
            for (uint32_t f = rule.tails_begin; f < rule.tails_end; ++f) {
                const Fragment y = fragments_[f];
                if (y.length <= n - end &&
                    std::memcmp(piece + end, fragment_bytes_.data() + y.offset, y.length) == 0) {
                    return NONE32;
                }
            }
        }
        return entry.unit;
    }

    void save(ImageWriter& image) const {
        image.sequence(entries_);
        image.sequence(rules_);
        image.sequence(fragments_);
        image.sequence(fragment_bytes_);
    }
    bool load(ImageReader& image) {
        if (!image.sequence(entries_) || !image.sequence(rules_) || !image.sequence(fragments_) ||
            !image.sequence(fragment_bytes_)) {
            return false;
        }
        // Every index must lie inside its table.
        bool whole = entries_.empty() || (entries_.size() == BMP && !rules_.empty());
        for (const Entry& entry : entries_) whole = whole && entry.rule < rules_.size();
        for (const Rule& rule : rules_) {
            whole = whole && rule.heads_begin <= rule.heads_end && rule.heads_end <= fragments_.size() &&
                    rule.tails_begin <= rule.tails_end && rule.tails_end <= fragments_.size();
        }
        for (const Fragment& fragment : fragments_) {
            whole = whole && size_t(fragment.offset) + fragment.length <= fragment_bytes_.size();
        }
        return whole || image.fail();
    }

private:
    static constexpr size_t BMP = 0x10000;

    struct Entry {
        uint32_t unit;  // the character's token as a unit, or NONE32
        uint32_t rule;  // index into rules_ (0: nothing to check)
    };
    // Which bytes may stand just before (after) the character for a head
    // (tail) fragment to apply, and the fragments' outside bytes.
    struct Rule {
        uint64_t before[4] = {0, 0, 0, 0};
        uint64_t after[4] = {0, 0, 0, 0};
        uint32_t heads_begin = 0, heads_end = 0;  // in fragments_
        uint32_t tails_begin = 0, tails_end = 0;
    };
    struct Fragment {
        uint32_t offset;  // in fragment_bytes_
        uint32_t length;
    };

    static bool is_continuation(uint8_t byte) { return (byte & 0xC0) == 0x80; }
    static bool has(const uint64_t (&set)[4], uint8_t byte) { return (set[byte >> 6] >> (byte & 63)) & 1; }
    static void add(uint64_t (&set)[4], uint8_t byte) { set[byte >> 6] |= uint64_t(1) << (byte & 63); }

    static size_t encode(uint32_t code_point, uint8_t* out) {
        if (code_point < 0x800) {
            out[0] = uint8_t(0xC0 | code_point >> 6);
            out[1] = uint8_t(0x80 | (code_point & 0x3F));
            return 2;
        }
        out[0] = uint8_t(0xE0 | code_point >> 12);
        out[1] = uint8_t(0x80 | ((code_point >> 6) & 0x3F));
        out[2] = uint8_t(0x80 | (code_point & 0x3F));
        return 3;
    }

    void add_fragment(const std::string& outside) {
        fragments_.push_back(Fragment{uint32_t(fragment_bytes_.size()), uint32_t(outside.size())});
        fragment_bytes_ += outside;
    }

    uint32_t add_rule(const std::vector<std::string>& before, const std::vector<std::string>& after) {
        Rule rule;
        rule.heads_begin = uint32_t(fragments_.size());
        for (const std::string& x : before) {
            add(rule.before, uint8_t(x.back()));
            add_fragment(x);
        }
        rule.heads_end = uint32_t(fragments_.size());
        rule.tails_begin = rule.heads_end;
        for (const std::string& y : after) {
            add(rule.after, uint8_t(y.front()));
            add_fragment(y);
        }
        rule.tails_end = uint32_t(fragments_.size());
        rules_.push_back(rule);
        return uint32_t(rules_.size() - 1);
    }

    std::vector<Entry> entries_;  // by code point, below BMP; empty: no atoms
    std::vector<Rule> rules_;
    std::vector<Fragment> fragments_;
    std::string fragment_bytes_;
};

}  // namespace streambpe
