// Native pretokenizer: one hand-written scanner per built-in pattern, and
// the compiled programs of `_pattern_compiler_impl.hpp` for any other.
//
// Each scanner cuts a text into exactly the pieces that
// `regex.findall(pattern, text)` returns for the GPT-2 (r50k), cl100k_base and
// o200k_base patterns of `streambpe/patterns.py`, without a regex engine.
// Every function below implements one alternative of one pattern and says why
// it gives the same match as the backtracking engine: the leftmost alternative
// that matches wins, and inside it greedy quantifiers give back characters
// one at a time from the longest run, while possessive ones (`++`, `?+`)
// never give back.
//
// The text is a buffer of code units of CPython's three str storage kinds
// (1, 2 or 4 bytes, one code point per unit; a 2- or 4-byte str may hold lone
// surrogates, which are in none of the letter, number or space classes).
// Character classes are looked up in a ClassTable built at run time from the
// installed `regex` module (streambpe/core/unicode_classes.py), so both
// implementations agree on every code point. No Python object is touched:
// callers may scan without holding the GIL.
//
// Plain C++17, header only.

#ifndef STREAMBPE_PRETOKENIZE_IMPL_HPP
#define STREAMBPE_PRETOKENIZE_IMPL_HPP

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <type_traits>
#include <vector>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "_pattern_compiler_impl.hpp"

namespace streambpe {
namespace pretokenize {

enum class Builtin { GPT2, CL100K, O200K, COMPILED };

// Which pattern a scan runs: a built-in one, with its own scanner, or a
// compiled program (`_pattern_compiler_impl.hpp`). `window` is a chain's: see
// PatternProgram::scan.
struct Pattern {
    Builtin kind;
    const PatternProgram* program;
    size_t window;
};

inline Pattern builtin_pattern(Builtin kind) { return Pattern{kind, nullptr, SIZE_MAX}; }
inline Pattern compiled_pattern(const PatternProgram* program, size_t window) {
    return Pattern{Builtin::COMPILED, program, window};
}

// One bit per character class that appears in the patterns. The order must
// match `CLASS_BITS` in unicode_classes.py (the tests check every code point).
enum ClassBit : uint16_t {
    LETTER = 1u << 0,      // \p{L}
    NUMBER = 1u << 1,      // \p{N}
    SPACE = 1u << 2,       // \s
    UPPER_LIKE = 1u << 3,  // [\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]  (o200k)
    LOWER_LIKE = 1u << 4,  // [\p{Ll}\p{Lm}\p{Lo}\p{M}]        (o200k)
    // (?i:x) for each letter of the contractions. Case-insensitive matching in
    // `regex` uses simple case folding, so (?i:s) also matches U+017F LONG S.
    FOLD_S = 1u << 5,
    FOLD_D = 1u << 6,
    FOLD_M = 1u << 7,
    FOLD_T = 1u << 8,
    FOLD_L = 1u << 9,
    FOLD_V = 1u << 10,
    FOLD_E = 1u << 11,
    FOLD_R = 1u << 12,
};

// What the o200k scanner's ASCII path needs to know of a position: the kind
// of its ASCII character, or that it is past the text (ASCII_END) or holds a
// character of 0x80 or more (ASCII_BEYOND), which only the class table can
// classify. The kinds follow the standard ASCII classes (ClassTable::
// standard_ascii): ASCII_OTHER is [^\s\p{L}\p{N}], ASCII_SPACE the \s other
// than \r and \n.
enum AsciiKind : uint8_t {
    ASCII_END,
    ASCII_BEYOND,
    ASCII_LOWER,
    ASCII_UPPER,
    ASCII_DIGIT,
    ASCII_SPACE,
    ASCII_NEWLINE,
    ASCII_OTHER,
};

// Indexed by any byte: those of 0x80 and up are ASCII_BEYOND, so a one-byte
// text needs no test of its own before the lookup.
struct AsciiKinds {
    uint8_t of[0x100];
    constexpr AsciiKinds() : of() {
        for (unsigned c = 0; c < 0x100; ++c) {
            of[c] = c >= 0x80              ? ASCII_BEYOND
                    : c >= 'a' && c <= 'z' ? ASCII_LOWER
                    : c >= 'A' && c <= 'Z' ? ASCII_UPPER
                    : c >= '0' && c <= '9' ? ASCII_DIGIT
                    : c == '\r' || c == '\n' ? ASCII_NEWLINE
                    : (c >= '\t' && c <= '\r') || c == ' ' ? ASCII_SPACE
                                                           : ASCII_OTHER;
        }
    }
};
constexpr AsciiKinds ASCII_KINDS{};

// Class bits of every code point, as a two-stage table: `block_of[cp >> 8]`
// names a 256-entry block of `blocks`; identical blocks (most of the code
// space) are stored once. Latin-1 gets a direct table, the hot path for
// ASCII-heavy text.
class ClassTable {
   public:
    static constexpr uint32_t CODE_POINTS = 0x110000;
    static constexpr uint32_t BLOCK_SIZE = 256;
    static constexpr uint32_t BLOCK_COUNT = CODE_POINTS / BLOCK_SIZE;

    ClassTable(const uint16_t* block_of, size_t block_of_length, const uint16_t* blocks,
               size_t blocks_length)
        : block_of_(block_of, block_of + block_of_length), blocks_(blocks, blocks + blocks_length) {
        if (block_of_length != BLOCK_COUNT || blocks_length % BLOCK_SIZE != 0) {
            throw std::invalid_argument("class table: wrong stage sizes");
        }
        for (uint16_t block : block_of_) {
            if (static_cast<size_t>(block) * BLOCK_SIZE >= blocks_length) {
                throw std::invalid_argument("class table: block index out of range");
            }
        }
        for (uint32_t cp = 0; cp < BLOCK_SIZE; ++cp) latin1_[cp] = lookup(cp);
        standard_ascii_ = true;
        for (uint32_t cp = 0; cp < 0x80; ++cp) {
            standard_ascii_ = standard_ascii_ && (latin1_[cp] & WORD_CLASSES) == standard_ascii_bits(cp);
        }
    }

    // Whether this table's ASCII characters have exactly the letter, number,
    // space and case classes that ASCII_KINDS assumes (every table built from
    // the `regex` module's data does; a test table need not).
    bool standard_ascii() const { return standard_ascii_; }

    uint16_t operator()(uint32_t cp) const {
        if (cp < BLOCK_SIZE) return latin1_[cp];
        return cp < CODE_POINTS ? lookup(cp) : 0;
    }

   private:
    uint16_t lookup(uint32_t cp) const {
        return blocks_[static_cast<size_t>(block_of_[cp / BLOCK_SIZE]) * BLOCK_SIZE + cp % BLOCK_SIZE];
    }

    static constexpr uint16_t WORD_CLASSES = LETTER | NUMBER | SPACE | UPPER_LIKE | LOWER_LIKE;
    // The classes ASCII_KINDS implies for an ASCII character.
    static uint16_t standard_ascii_bits(uint32_t cp) {
        switch (ASCII_KINDS.of[cp]) {
            case ASCII_LOWER:
                return LETTER | LOWER_LIKE;
            case ASCII_UPPER:
                return LETTER | UPPER_LIKE;
            case ASCII_DIGIT:
                return NUMBER;
            case ASCII_SPACE:
            case ASCII_NEWLINE:
                return SPACE;
            default:
                return 0;
        }
    }

    std::vector<uint16_t> block_of_;
    std::vector<uint16_t> blocks_;
    uint16_t latin1_[BLOCK_SIZE];
    bool standard_ascii_ = false;
};

// The piece scanners over one text. Each `*_piece(i)` returns the end of the
// piece that starts at `i` (i < length); pieces are contiguous because every
// character starts a match of some alternative (each pattern ends with a
// catch-all for whitespace, and every other character is a letter, a number
// or in `[^\s\p{L}\p{N}]`). Functions named after one alternative return
// NO_MATCH when it does not match at `i`.
template <class Unit>
class Scanner {
   public:
    Scanner(const ClassTable& table, const Unit* text, size_t length)
        : table_(table), text_(text), n_(length), ascii_path_(table.standard_ascii()) {}

    size_t gpt2_piece(size_t i) const {
        if (size_t end = gpt2_contraction(i)) return end;
        // ` ?\p{L}++| ?\p{N}++| ?[^\s\p{L}\p{N}]++`: the optional space is a
        // space (which is in none of the three classes), so the alternatives
        // reduce to "classify the character after the optional space and take
        // its whole run". The three classes are disjoint, so at most one applies.
        size_t p = at(i) == ' ' ? i + 1 : i;
        uint16_t c = bits(p);
        if (c & LETTER) return run(p, LETTER);
        if (c & NUMBER) return run(p, NUMBER);
        if (p < n_ && is_other(c)) return run_other(p);
        // Only whitespace is left at `i`.
        return trailing_space(i);
    }

    size_t cl100k_piece(size_t i) const {
        if (size_t end = ci_contraction(i)) return end;
        if (size_t end = cl100k_word(i)) return end;
        uint16_t c = bits(i);
        // `\p{N}{1,3}+`: the greedy count takes up to three numbers.
        if (c & NUMBER) return run_at_most(i, NUMBER, 3);
        if (size_t end = cl100k_punctuation(i)) return end;
        // Only whitespace is left at `i`.
        size_t end = run(i, SPACE);
        if (end == n_) return end;  // `\s++$`, see trailing_space
        if (size_t line_end = through_last_newline(i, end)) return line_end;  // `\s*[\r\n]`
        return end - i >= 2 ? end - 1 : i + 1;  // `\s+(?!\S)|\s`, see trailing_space
    }

    // Inlined into the scan loop, and the general rules kept out of line:
    // the test for the ASCII path, which answers most pieces, then costs no
    // call of its own (5 of ~225 instructions a piece of a cold encode of
    // source code, callgrind).
    __attribute__((always_inline)) size_t o200k_piece(size_t i) const {
        if (ascii_path_ && text_[i] < 0x80) {
            if (size_t end = o200k_ascii_piece(i)) return end;
        }
        return o200k_general_piece(i);
    }

    // o200k_piece by the general rules, for any character.
    __attribute__((noinline)) size_t o200k_general_piece(size_t i) const {
        if (starts_o200k_word(i)) return o200k_word(i);
        // `\p{N}{1,3}`: greedy, and nothing follows it, so as `{1,3}+`.
        if (bits(i) & NUMBER) return run_at_most(i, NUMBER, 3);
        if (size_t end = o200k_punctuation(i)) return end;
        // Only whitespace is left at `i`: `\s*[\r\n]+|\s+(?!\S)|\s+`.
        size_t end = run(i, SPACE);
        if (size_t line_end = through_last_newline(i, end)) return line_end;
        // `\s+(?!\S)` gives back the last space when a non-space follows and
        // the run has two or more; else `\s+` takes the single space.
        if (end == n_ || end - i < 2) return end;
        return end - 1;
    }

    // ---- o200k on ASCII, a window at a time
    //
    // From a piece start p, the piece starts among the next BULK_SPAN
    // one-byte characters, found for all of them at once, as fastokens'
    // o200k scanner does: each class of character is a bit mask (SSE2
    // compares over BULK_READ characters), and each rule of the ASCII path
    // above is a few operations on the masks. Sets ``starts`` (bit i: a
    // piece starts at p + i; bit 0 always) and returns the limit up to which
    // they are exact: every piece whose end is a set bit at or below it is
    // one the scalar path gives. Returns 0, with ``retry_at`` set to where a
    // window may next be tried, when it cannot be done this way (a character
    // of 0x80 or more, or fewer than BULK_READ characters left).
    //
    // Rules for positions up to BULK_SPAN look at most three characters
    // ahead (a contraction suffix), so BULK_READ covers them; a character
    // past BULK_READ reads as no class at all, which can only matter for the
    // two constructs that run on: a run of spaces after a newline that has
    // not ended by then lowers the limit to before it, and so does a
    // punctuation piece's `[\r\n/]*` tail that takes the '/' of a later run
    // of punctuation (that run then starts after the '/').
    //
    // callgrind, a cold o200k encode of 4 MiB of this Python's standard
    // library: 217.6 million instructions against 248.3 million for the
    // scalar path alone (o200k_ascii_piece and its loop: 131 million, now
    // 99 with this function).
    using Mask = uint64_t;
    static constexpr size_t BULK_SPAN = 60;
    static constexpr size_t BULK_READ = 64;

    size_t o200k_bulk(size_t p, Mask& starts, size_t& retry_at) const {
#if defined(__SSE2__)
        if constexpr (sizeof(Unit) != 1) {
            retry_at = SIZE_MAX;
            return 0;
        } else {
            if (!ascii_path_ || n_ - p < BULK_READ) {
                retry_at = SIZE_MAX;
                return 0;
            }
            Mask lower = 0, upper = 0, digit = 0, newline = 0, space_like = 0, space = 0,
                 apostrophe = 0, slash = 0;
            for (size_t chunk = 0; chunk < BULK_READ / 16; ++chunk) {
                const __m128i bytes =
                    _mm_loadu_si128(reinterpret_cast<const __m128i*>(text_ + p + 16 * chunk));
                if (_mm_movemask_epi8(bytes) != 0) {  // beyond ASCII: not before this chunk's end
                    retry_at = p + 16 * chunk + 16;
                    return 0;
                }
                const size_t shift = 16 * chunk;
                lower |= Mask(in_range(bytes, 'a', 'z')) << shift;
                upper |= Mask(in_range(bytes, 'A', 'Z')) << shift;
                digit |= Mask(in_range(bytes, '0', '9')) << shift;
                newline |= Mask(equal(bytes, '\n') | equal(bytes, '\r')) << shift;
                const unsigned blank = equal(bytes, ' ');
                space |= Mask(blank) << shift;
                // \t, \v, \f: the \s other than \r, \n and the space.
                space_like |= Mask(blank | equal(bytes, '\t') | equal(bytes, '\v') |
                                   equal(bytes, '\f')) << shift;
                apostrophe |= Mask(equal(bytes, '\'')) << shift;
                slash |= Mask(equal(bytes, '/')) << shift;
            }
            const Mask letter = lower | upper;
            const Mask white = space_like | newline;
            Mask other = ~(letter | digit | white);  // [^\s\p{L}\p{N}]
            size_t limit = BULK_SPAN;

            // Contraction suffixes, `'s` and the like right after a letter:
            // rare, so looked at one by one. They leave the other rules.
            // One right after another suffix is not one: a word takes one.
            Mask suffix_inside = 0, suffix_end = 0;
            for (Mask at = apostrophe & (letter << 1) & ((Mask(2) << BULK_SPAN) - 1); at;
                 at &= at - 1) {
                const size_t q = lowest(at);
                if ((suffix_end >> q) & 1) continue;
                const size_t end = o200k_suffix(p + q) - p;
                if (end == q) continue;
                suffix_inside |= ((Mask(1) << end) - 1) & ~((Mask(1) << q) - 1);
                suffix_end |= Mask(1) << end;
            }
            other &= ~suffix_inside;

            // Punctuation runs. A run's first character leads a word when a
            // letter follows it and no space leads it (the run is then that
            // one character); otherwise the run, with a space before it if
            // there is one, is a piece with its `[\r\n/]*` tail.
            const Mask run_first = other & ~(other << 1);
            const Mask space_led = run_first & (space << 1);
            const Mask word_lead = run_first & ~space_led & (letter >> 1);
            const Mask piece_first = run_first & ~word_lead;
            const Mask run_after = (other + piece_first) & ~other;
            const Mask tail_chars = newline | slash;
            const Mask tail_sum = tail_chars + run_after;
            const Mask tail_end = tail_sum & ~tail_chars;
            const Mask eaten = (tail_sum ^ tail_chars) & tail_chars;
            // A tail that takes a '/' of a later run of punctuation changes
            // where that run starts: left to the scalar path.
            if (const Mask split = eaten & other) limit = std::min(limit, lowest(split) - 1);

            Mask found = 1 | tail_end | (run_first & ~space_led);
            // Letters: a run starts a piece unless a space or a leading
            // punctuation character takes it; a capital after a small
            // letter starts one.
            const Mask letter_first = letter & ~(letter << 1);
            found |= letter_first & ~(space_like << 1) & ~(word_lead << 1);
            found |= upper & (lower << 1);
            // Digits: from a run's start, one piece every three.
            Mask group = digit & ~(digit << 1);
            const Mask continued = digit & (digit << 1) & (digit << 2);
            for (Mask next = group; next; ) {
                next = (next << 3) & continued;
                group |= next;
            }
            found |= group;
            // White space: a run's first character (unless a tail took it)
            // and its last one before anything else (a space gives itself
            // back: `\s+(?!\S)`); and after the run's last newline, the
            // first space, if no newline follows in the run.
            found |= white & ~(white << 1) & ~eaten;
            found |= space_like & ~(white >> 1);
            for (Mask at = space_like & (newline << 1) & ((Mask(2) << BULK_SPAN) - 1); at;
                 at &= at - 1) {
                const size_t a = lowest(at);
                const size_t end = a + lowest(~(space_like >> a));
                if (end >= BULK_READ) {
                    limit = std::min(limit, a - 1);
                    break;
                }
                if (!((newline >> end) & 1)) found |= Mask(1) << a;
            }
            starts = (found & ~suffix_inside) | suffix_end;
            return limit;
        }
#else
        (void)p;
        (void)starts;
        retry_at = SIZE_MAX;
        return 0;
#endif
    }

    static size_t lowest(Mask m) { return size_t(__builtin_ctzll(m)); }

#if defined(__SSE2__)
    static unsigned in_range(__m128i bytes, uint8_t lo, uint8_t hi) {
        const __m128i offset = _mm_sub_epi8(bytes, _mm_set1_epi8(static_cast<char>(lo)));
        const __m128i width = _mm_set1_epi8(static_cast<char>(hi - lo));
        return unsigned(_mm_movemask_epi8(_mm_cmpeq_epi8(_mm_min_epu8(offset, width), offset)));
    }
    static unsigned equal(__m128i bytes, char c) {
        return unsigned(_mm_movemask_epi8(_mm_cmpeq_epi8(bytes, _mm_set1_epi8(c))));
    }
#endif

   private:
    static constexpr size_t NO_MATCH = 0;  // a match always ends after its start >= 0

    Unit at(size_t i) const { return text_[i]; }
    uint16_t bits(size_t i) const { return i < n_ ? table_(static_cast<uint32_t>(text_[i])) : 0; }
    static bool is_other(uint16_t c) { return !(c & (LETTER | NUMBER | SPACE)); }  // [^\s\p{L}\p{N}]
    bool is_newline(size_t i) const { return i < n_ && (text_[i] == '\r' || text_[i] == '\n'); }

    // End of the run of characters in `mask` that starts at `i`.
    size_t run(size_t i, uint16_t mask) const {
        while (i < n_ && (table_(static_cast<uint32_t>(text_[i])) & mask)) ++i;
        return i;
    }
    size_t run_at_most(size_t i, uint16_t mask, size_t limit) const {
        size_t stop = n_ - i < limit ? n_ : i + limit;
        while (i < stop && (table_(static_cast<uint32_t>(text_[i])) & mask)) ++i;
        return i;
    }
    // End of the run of `[^\s\p{L}\p{N}]` that starts at `i`.
    size_t run_other(size_t i) const {
        while (i < n_ && is_other(table_(static_cast<uint32_t>(text_[i])))) ++i;
        return i;
    }
    size_t run_newlines(size_t i, bool slash_too) const {
        while (i < n_ && (text_[i] == '\r' || text_[i] == '\n' || (slash_too && text_[i] == '/'))) ++i;
        return i;
    }

    // GPT-2 `'(?:[sdmt]|ll|ve|re)`: case-sensitive ASCII.
    size_t gpt2_contraction(size_t i) const {
        if (at(i) != '\'' || i + 1 >= n_) return NO_MATCH;
        Unit a = at(i + 1);
        if (a == 's' || a == 'd' || a == 'm' || a == 't') return i + 2;
        if (i + 2 >= n_) return NO_MATCH;
        Unit b = at(i + 2);
        if ((a == 'l' && b == 'l') || (a == 'v' && b == 'e') || (a == 'r' && b == 'e')) return i + 3;
        return NO_MATCH;
    }

    // cl100k `'(?i:[sdmt]|ll|ve|re)`. The alternatives start with different
    // letters, so their order does not matter.
    size_t ci_contraction(size_t i) const {
        if (at(i) != '\'') return NO_MATCH;
        return contraction_letters(i + 1, FOLD_S | FOLD_D | FOLD_M | FOLD_T);
    }

    // The letters after the apostrophe of a case-insensitive contraction at
    // `i`: one of `single` (one letter), or `ll`, `ve`, `re`.
    size_t contraction_letters(size_t i, uint16_t single) const {
        uint16_t a = bits(i);
        if (a & single) return i + 1;
        uint16_t b = bits(i + 1);
        if (((a & FOLD_L) && (b & FOLD_L)) || ((a & (FOLD_V | FOLD_R)) && (b & FOLD_E))) return i + 2;
        return NO_MATCH;
    }

    // cl100k `[^\r\n\p{L}\p{N}]?+\p{L}++`. The possessive `?+` never gives
    // back its character, but giving it back could not help anyway: that
    // character is not a letter, and `\p{L}++` needs one.
    size_t cl100k_word(size_t i) const {
        uint16_t c = bits(i);
        if (c & LETTER) return run(i, LETTER);
        if (!(c & NUMBER) && !is_newline(i) && (bits(i + 1) & LETTER)) return run(i + 1, LETTER);
        return NO_MATCH;
    }

    // cl100k ` ?[^\s\p{L}\p{N}]++[\r\n]*+`: when `i` holds a space, the
    // alternative without it fails (a space is not in the class).
    size_t cl100k_punctuation(size_t i) const {
        size_t p = at(i) == ' ' ? i + 1 : i;
        if (p >= n_ || !is_other(bits(p))) return NO_MATCH;
        return run_newlines(run_other(p), false);
    }

    // o200k ` ?[^\s\p{L}\p{N}]+[\r\n/]*`: greedy, not possessive, but
    // `[\r\n/]*` always matches, so the class run never gives anything back.
    size_t o200k_punctuation(size_t i) const {
        size_t p = at(i) == ' ' ? i + 1 : i;
        if (p >= n_ || !is_other(bits(p))) return NO_MATCH;
        return run_newlines(run_other(p), true);
    }

    // The whitespace alternatives of GPT-2 at a space `i`: `\s++$|\s+(?!\S)|\s`.
    // `\s++$` takes the whole run if it reaches the end (`$` also matches
    // before a final "\n", but the run would have taken that "\n"). Else
    // `\s+(?!\S)` backs off one space, which is followed by a space, if the
    // run has two or more; a single space is `\s`.
    size_t trailing_space(size_t i) const {
        size_t end = run(i, SPACE);
        if (end == n_) return end;
        return end - i >= 2 ? end - 1 : i + 1;
    }

    // `\s*[\r\n]` (cl100k) and `\s*[\r\n]+` (o200k) on the space run [i, end):
    // `\s*` takes the whole run, then backs off until a "\r" or "\n" follows,
    // that is to the last one in the run; `[\r\n]+` then cannot take more,
    // since the next character is not one (it is after the last in the run).
    size_t through_last_newline(size_t i, size_t end) const {
        for (size_t k = end; k > i; --k) {
            if (text_[k - 1] == '\r' || text_[k - 1] == '\n') return k;
        }
        return NO_MATCH;
    }

    // The two o200k word alternatives, with U = [\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}],
    // W = [\p{Ll}\p{Lm}\p{Lo}\p{M}], X = [^\r\n\p{L}\p{N}] and S the suffix
    // `(?i:'s|'t|'re|'ve|'m|'ll|'d)?`:
    //     X?U*W+S?  |  X?U+W*S?
    // Neither is possessive. Both `X?` are greedy: they try with the character
    // at `i` first, then without it, which can only help when it is a mark
    // (\p{M} is in X, U and W alike). The first alternative, over both
    // choices, is tried before the second.
    size_t o200k_word(size_t i) const {
        bool lead = is_lead(i);
        if (lead) {
            if (size_t end = upper_then_lower(i + 1)) return o200k_suffix(end);
        }
        if (size_t end = upper_then_lower(i)) return o200k_suffix(end);
        if (lead) {
            if (size_t end = upper_run(i + 1)) return o200k_suffix(end);
        }
        if (size_t end = upper_run(i)) return o200k_suffix(end);
        return NO_MATCH;
    }

    // Whether o200k_word matches at i: exactly when a character of U or W
    // stands at i, or at i + 1 after an X. Either word alternative needs
    // one there (`U*W+` a W, `U+W*` a U, each after at most one X), and one
    // there always lets one match: `U+` takes a U, `U*W+` takes a W that is
    // not in U. Two lookups, where trying the four ways to match took eight
    // before a piece of spaces, numbers or punctuation moved on (44 % of
    // the pieces of source code, 21 % of prose).
    bool starts_o200k_word(size_t i) const {
        constexpr uint16_t WORDLIKE = UPPER_LIKE | LOWER_LIKE;
        return (bits(i) & WORDLIKE) || (is_lead(i) && (bits(i + 1) & WORDLIKE));
    }

    // X = [^\r\n\p{L}\p{N}] at i.
    bool is_lead(size_t i) const { return i < n_ && !(bits(i) & (LETTER | NUMBER)) && !is_newline(i); }

    // `U*W+` at p. `U*` takes the whole run [p, u). If a W follows, `W+`
    // takes its whole run (the optional suffix after it always matches, so
    // `W+` never gives back). Else `U*` gives back one character at a time
    // until `W+` can start: at the last character of [p, u) that is also in
    // W (Lm, Lo, M). `W+` stops right after it, because every later character
    // of the run is only in U and the character at u is not in W.
    size_t upper_then_lower(size_t p) const {
        size_t u = run(p, UPPER_LIKE);
        if (bits(u) & LOWER_LIKE) return run(u, LOWER_LIKE);
        for (size_t k = u; k > p; --k) {
            if (bits(k - 1) & LOWER_LIKE) return k;
        }
        return NO_MATCH;
    }

    // `U+W*` at p, tried only after `U*W+` failed at p: then the character
    // after the U run is not in W, so `W*` matches nothing.
    size_t upper_run(size_t p) const {
        size_t u = run(p, UPPER_LIKE);
        return u > p ? u : NO_MATCH;
    }

    // `(?i:'s|'t|'re|'ve|'m|'ll|'d)?` at `i`; the alternatives start with
    // different letters, so at most one matches.
    size_t o200k_suffix(size_t i) const {
        if (i >= n_ || at(i) != '\'') return i;
        size_t end = contraction_letters(i + 1, FOLD_S | FOLD_T | FOLD_M | FOLD_D);
        return end != NO_MATCH ? end : i;
    }

    // ---- o200k on ASCII
    //
    // Most pieces of prose and source code are ASCII from their first
    // character to the one after them, and there the rules of o200k_piece
    // reduce to a few runs over a 128-entry table, without a class lookup
    // (and its range checks) per character or the four tries of the word
    // alternatives. (The same path for cl100k, whose rules are simpler
    // already, made its scan 11 % slower.) Each function below returns
    // NO_MATCH when a character of 0x80 or more could change the piece (one
    // that may continue a run, or be the character a rule looks at next);
    // the general rules then run from the same start. So the ASCII path only
    // ever answers what the general rules answer: the tests compare both with
    // `regex` on every code point and on generated text.

    uint8_t ascii_kind(size_t k) const {
        if (k >= n_) return ASCII_END;
        if constexpr (sizeof(Unit) == 1) return ASCII_KINDS.of[text_[k]];
        return text_[k] < 0x80 ? ASCII_KINDS.of[text_[k]] : ASCII_BEYOND;
    }

    static bool is_ascii_letter(uint8_t kind) { return kind == ASCII_LOWER || kind == ASCII_UPPER; }

    // `\p{N}{1,3}` at the ASCII digit i: a character beyond ASCII may be a number.
    size_t ascii_digits(size_t i) const {
        size_t k = i + 1;
        while (k < i + 3 && ascii_kind(k) == ASCII_DIGIT) ++k;
        return k < i + 3 && ascii_kind(k) == ASCII_BEYOND ? NO_MATCH : k;
    }

    // The end of the run of [^\s\p{L}\p{N}] from p + 1 on, or NO_MATCH if a
    // character beyond ASCII (which may be in the class) ends it.
    size_t ascii_other_end(size_t p) const {
        size_t k = p + 1;
        while (ascii_kind(k) == ASCII_OTHER) ++k;
        return ascii_kind(k) == ASCII_BEYOND ? NO_MATCH : k;
    }

    // The end of the run of characters in [lo, hi] (ASCII) from k on. Runs of
    // small letters and of indentation are the longest of source code; in
    // one-byte text they are read 16 bytes at a time while 16 are left:
    // ~10 instructions for a run a per-character loop spends 5-7 on each of
    // its characters (callgrind, o200k, 4 MiB of source code).
    size_t ascii_range_end(size_t k, uint8_t lo, uint8_t hi) const {
#if defined(__SSE2__)
        if constexpr (sizeof(Unit) == 1) {
            const __m128i low = _mm_set1_epi8(static_cast<char>(lo));
            const __m128i width = _mm_set1_epi8(static_cast<char>(hi - lo));
            while (k + 16 <= n_) {
                const __m128i bytes =
                    _mm_loadu_si128(reinterpret_cast<const __m128i*>(text_ + k));
                // Unsigned: below lo wraps around to above the width.
                const __m128i offset = _mm_sub_epi8(bytes, low);
                const __m128i inside = _mm_cmpeq_epi8(_mm_min_epu8(offset, width), offset);
                const unsigned outside = ~unsigned(_mm_movemask_epi8(inside)) & 0xFFFFu;
                if (outside != 0) return k + size_t(__builtin_ctz(outside));
                k += 16;
            }
        }
#endif
        while (k < n_ && text_[k] >= lo && text_[k] <= hi) ++k;
        return k;
    }

    // o200k_piece at i (ASCII, so within the text), or NO_MATCH to leave it
    // to the general rules.
    size_t o200k_ascii_piece(size_t i) const {
        const uint8_t here = ASCII_KINDS.of[text_[i]];
        if (is_ascii_letter(here)) return o200k_ascii_word(i);
        if (here == ASCII_DIGIT) return ascii_digits(i);
        if (here == ASCII_NEWLINE) return o200k_ascii_space(i);
        // Here is an X of the word alternatives (not a letter, number, \r, \n).
        const uint8_t after = ascii_kind(i + 1);
        if (after == ASCII_BEYOND) return NO_MATCH;  // maybe a letter after X
        // X then a letter: the word alternatives with their optional X; as
        // in o200k_ascii_word, with the X in front.
        if (is_ascii_letter(after)) return o200k_ascii_word(i + 1);
        if (here == ASCII_OTHER) return o200k_ascii_punctuation(i);
        if (text_[i] == ' ' && after == ASCII_OTHER) return o200k_ascii_punctuation(i + 1);
        return o200k_ascii_space(i);
    }

    // `X?U*W+S?|X?U+W*S?` where p holds an ASCII letter: the run of capitals,
    // then the run of small letters. If the small run is empty, `U*W+`
    // fails (no ASCII capital is also in W, so giving back does not help)
    // and `U+W*` takes the capitals, so either way the word ends where both
    // runs end; the suffix then is o200k_suffix's.
    size_t o200k_ascii_word(size_t p) const {
        size_t k = p;
        while (ascii_kind(k) == ASCII_UPPER) ++k;
        k = ascii_range_end(k, 'a', 'z');
        return ascii_kind(k) == ASCII_BEYOND ? NO_MATCH : o200k_suffix(k);
    }

    // ` ?[^\s\p{L}\p{N}]+[\r\n/]*` from the first character of the class
    // run at p: a character beyond ASCII may continue the class run, but not
    // `[\r\n/]*`.
    size_t o200k_ascii_punctuation(size_t p) const {
        const size_t end = ascii_other_end(p);
        return end == NO_MATCH ? NO_MATCH : run_newlines(end, true);
    }

    // `\s*[\r\n]+|\s+(?!\S)|\s+` at i (an ASCII space or newline), as in
    // o200k_piece, or NO_MATCH if a character beyond ASCII (which may be a
    // space) ends the run. One pass finds the run's end and where its last
    // newline ends: walking back over the run for that (through_last_newline)
    // took 11 of the 118 million instructions the scanner spent on 4 MiB of
    // indented source code (callgrind).
    size_t o200k_ascii_space(size_t i) const {
        size_t line_end = text_[i] == '\r' || text_[i] == '\n' ? i + 1 : NO_MATCH;
        size_t end = i + 1;
        uint8_t kind;
        while (true) {
            end = ascii_range_end(end, ' ', ' ');
            kind = ascii_kind(end);
            if (kind == ASCII_SPACE) {
                ++end;
            } else if (kind == ASCII_NEWLINE) {
                line_end = ++end;
            } else {
                break;
            }
        }
        if (kind == ASCII_BEYOND) return NO_MATCH;
        if (line_end != NO_MATCH) return line_end;
        if (end == n_ || end - i < 2) return end;
        return end - 1;
    }


    const ClassTable& table_;
    const Unit* text_;
    size_t n_;
    bool ascii_path_;  // the table's ASCII classes are the standard ones
};

// Calls `emit(start, end)` (code-unit offsets) for each piece of
// `text[from:length]` under `pattern`, in order, until `emit` returns false;
// returns where the scan stopped (`length`, or the end of that piece).
// `from` must be where a piece starts (0, or a value this returned before):
// none of the patterns looks behind a match, so a scan resumed there finds
// the same pieces as one from the start.
template <class Unit, class Emit>
size_t scan_pieces(Pattern pattern, const ClassTable& table, const Unit* text, size_t length,
                   Emit&& emit, size_t from = 0) {
    if (pattern.kind == Builtin::COMPILED) {
        return pattern.program->scan(text, length, emit, from, pattern.window);
    }
    Scanner<Unit> scanner(table, text, length);
    size_t start = from;
    // One loop per pattern so the branch on the pattern is outside the loop.
    switch (pattern.kind) {
        case Builtin::COMPILED:
            break;
        case Builtin::GPT2:
            while (start < length) {
                size_t end = scanner.gpt2_piece(start);
                if (!emit_piece(emit, start, end)) return end;
                start = end;
            }
            break;
        case Builtin::CL100K:
            while (start < length) {
                size_t end = scanner.cl100k_piece(start);
                if (!emit_piece(emit, start, end)) return end;
                start = end;
            }
            break;
        case Builtin::O200K: {
            using Mask = typename Scanner<Unit>::Mask;
            size_t bulk_from = start;  // no window is tried before this
            while (start < length) {
                Mask starts;
                size_t limit;
                if (start >= bulk_from && (limit = scanner.o200k_bulk(start, starts, bulk_from))) {
                    // Every piece that ends at a start up to the limit.
                    Mask ends = starts & ((Mask(2) << limit) - 2);
                    size_t piece_start = start;
                    for (; ends; ends &= ends - 1) {
                        const size_t end = start + Scanner<Unit>::lowest(ends);
                        if (!emit_piece(emit, piece_start, end)) return end;
                        piece_start = end;
                    }
                    if (piece_start != start) {
                        start = piece_start;
                        continue;
                    }
                }
                size_t end = scanner.o200k_piece(start);
                if (!emit_piece(emit, start, end)) return end;
                start = end;
            }
            break;
        }
    }
    return length;
}

// ``work(units)`` with ``data`` as a pointer to the code units of a str
// buffer of ``unit_size`` bytes a unit (1, 2 or 4): the one place a unit
// size becomes the type the templates are instantiated for.
template <class Work>
auto with_unit_type(int unit_size, const void* data, Work&& work)
    -> decltype(work(static_cast<const uint8_t*>(data))) {
    switch (unit_size) {
        case 1:
            return work(static_cast<const uint8_t*>(data));
        case 2:
            return work(static_cast<const uint16_t*>(data));
        case 4:
            return work(static_cast<const uint32_t*>(data));
        default:
            throw std::invalid_argument("unit size must be 1, 2 or 4");
    }
}

// Entry points for callers that cannot pass a C++ callable (Cython): the text
// is `length` code units of `unit_size` bytes (1, 2 or 4) at `data`.
template <class Emit>
size_t scan_pieces_of_kind(Pattern pattern, const ClassTable& table, int unit_size,
                           const void* data, size_t length, Emit&& emit, size_t from = 0) {
    return with_unit_type(unit_size, data, [&](auto units) {
        return scan_pieces(pattern, table, units, length, emit, from);
    });
}

// scan_pieces_of_kind for a caller that reads the pieces' characters: `emit`
// is called as `emit(units, start, end)` with the text as typed code units
// (`const uint8_t*`, `const uint16_t*` or `const uint32_t*`). A generic
// lambda is then compiled once per unit size, so writing a piece's UTF-8
// (append_units_utf8) is a direct, inlinable call rather than a switch on
// the unit size and an out-of-line call for every piece.
template <class Emit>
size_t scan_typed_pieces_of_kind(Pattern pattern, const ClassTable& table, int unit_size,
                                 const void* data, size_t length, Emit&& emit, size_t from = 0) {
    return with_unit_type(unit_size, data, [&](auto units) {
        return scan_pieces(
            pattern, table, units, length,
            // Inlined, with the caller's emit, into each scan loop: a call
            // a piece cost about 18 instructions of saving registers (callgrind).
            [&](size_t start, size_t end)
                __attribute__((always_inline)) { return emit(units, start, end); },
            from);
    });
}

// A growing byte buffer that is written through a pointer: appending a
// piece's UTF-8 checks the room once, where a push_back per byte checked it
// for every byte (a tenth of the encoder's instructions on non-ASCII text).
class ByteBuffer {
   public:
    const uint8_t* data() const { return bytes_.get(); }
    size_t size() const { return size_; }
    void clear() { size_ = 0; }

    // Room for `n` more bytes, to be written and then kept with commit().
    uint8_t* room(size_t n) {
        if (n > capacity_ - size_) grow(size_ + n);
        return bytes_.get() + size_;
    }
    void commit(size_t n) { size_ += n; }

   private:
    void grow(size_t needed) {
        size_t capacity = capacity_ > 0 ? capacity_ * 2 : 256;
        while (capacity < needed) capacity *= 2;
        std::unique_ptr<uint8_t[]> bigger(new uint8_t[capacity]);
        if (size_ > 0) std::memcpy(bigger.get(), bytes_.get(), size_);
        bytes_ = std::move(bigger);
        capacity_ = capacity;
    }

    std::unique_ptr<uint8_t[]> bytes_;
    size_t size_ = 0;
    size_t capacity_ = 0;
};

// Writes the UTF-8 of units [start, end) at `at`; returns the end of what it
// wrote and sets `stopped` to `end`, or to the offset of a lone surrogate
// that stopped it (see append_units_utf8).
template <class Unit>
uint8_t* write_utf8(const Unit* units, size_t start, size_t end, uint8_t* at,
                    bool pass_surrogates, size_t& stopped) {
    for (size_t i = start; i < end; ++i) {
        const uint32_t cp = units[i];
        if (cp < 0x80) {
            *at++ = uint8_t(cp);
        } else if (cp < 0x800) {
            *at++ = uint8_t(0xC0 | cp >> 6);
            *at++ = uint8_t(0x80 | (cp & 0x3F));
        } else if (cp < 0x10000) {
            if (!pass_surrogates && cp >= 0xD800 && cp <= 0xDFFF) {
                stopped = i;
                return at;
            }
            *at++ = uint8_t(0xE0 | cp >> 12);
            *at++ = uint8_t(0x80 | (cp >> 6 & 0x3F));
            *at++ = uint8_t(0x80 | (cp & 0x3F));
        } else {
            *at++ = uint8_t(0xF0 | cp >> 18);
            *at++ = uint8_t(0x80 | (cp >> 12 & 0x3F));
            *at++ = uint8_t(0x80 | (cp >> 6 & 0x3F));
            *at++ = uint8_t(0x80 | (cp & 0x3F));
        }
    }
    stopped = end;
    return at;
}

// Appends the UTF-8 of code units [start, end) of a str buffer to `out`,
// and returns `end`. A lone surrogate has no UTF-8: with `pass_surrogates`
// it is written in its three-byte form (Python's "surrogatepass", which
// decodes back to it), otherwise writing stops before it and its offset is
// returned.
template <class Unit>
size_t append_units_utf8(const Unit* units, size_t start, size_t end, ByteBuffer& out,
                         bool pass_surrogates) {
    uint8_t* const first = out.room(4 * (end - start));  // at most four bytes a code point
    size_t stopped;
    uint8_t* const last = write_utf8(units, start, end, first, pass_surrogates, stopped);
    out.commit(size_t(last - first));
    return stopped;
}

// Appends the end offset of every piece to `ends`. A built-in pattern's
// pieces cover the text (each starts where the one before ended, the first at
// 0); a compiled pattern's may leave gaps, so their starts go to `starts`.
inline void piece_ends(Pattern pattern, const ClassTable& table, int unit_size, const void* data,
                       size_t length, std::vector<size_t>& starts, std::vector<size_t>& ends) {
    if (pattern.kind != Builtin::COMPILED) {
        scan_pieces_of_kind(pattern, table, unit_size, data, length,
                            [&ends](size_t, size_t end) { ends.push_back(end); });
        return;
    }
    scan_pieces_of_kind(pattern, table, unit_size, data, length,
                        [&starts, &ends](size_t start, size_t end) {
                            starts.push_back(start);
                            ends.push_back(end);
                        });
}

inline size_t count_pieces(Pattern pattern, const ClassTable& table, int unit_size,
                           const void* data, size_t length) {
    size_t count = 0;
    scan_pieces_of_kind(pattern, table, unit_size, data, length,
                        [&count](size_t, size_t) { ++count; });
    return count;
}

// ------------------------------------------------------------ ASCII stretches
//
// One character beyond ASCII makes CPython store a whole str in 2 or 4 bytes
// a character, and every piece of it then has its UTF-8 written out before it
// is hashed. Source code with one "©", English with one curly quote: the
// ASCII between such characters can be encoded as one-byte text instead,
// each piece read in place (TextEncoder::encode_text). The helpers below
// plan those stretches.

// The first index in [from, limit) whose unit is 0x80 or more, else `limit`.
template <class Unit>
size_t find_beyond_ascii(const Unit* units, size_t from, size_t limit) {
    // Sixteen bytes of units a step: every unit's bits from 0x80 up.
    constexpr uint64_t HIGH = sizeof(Unit) == 1   ? 0x8080808080808080ull
                              : sizeof(Unit) == 2 ? 0xFF80FF80FF80FF80ull
                                                  : 0xFFFFFF80FFFFFF80ull;
    constexpr size_t STEP = 16 / sizeof(Unit);
    size_t i = from;
    for (; i + STEP <= limit; i += STEP) {
        uint64_t low, high;
        std::memcpy(&low, units + i, 8);
        std::memcpy(&high, units + i + STEP / 2, 8);
        if ((low | high) & HIGH) break;
    }
    for (; i < limit; ++i) {
        if (units[i] >= 0x80) return i;
    }
    return limit;
}

// Whether the 16 units at `units` are all below 0x80.
template <class Unit>
bool sixteen_ascii(const Unit* units) {
    constexpr uint64_t HIGH = sizeof(Unit) == 1   ? 0x8080808080808080ull
                              : sizeof(Unit) == 2 ? 0xFF80FF80FF80FF80ull
                                                  : 0xFFFFFF80FFFFFF80ull;
    uint64_t any = 0;
    for (size_t word = 0; word < 2 * sizeof(Unit); ++word) {
        uint64_t bits;
        std::memcpy(&bits, reinterpret_cast<const char*>(units) + 8 * word, 8);
        any |= bits;
    }
    return (any & HIGH) == 0;
}

// True when the text may be cut before `i` (0 < i, both characters ASCII)
// without changing any piece of a built-in pattern: the first rule of
// cutting/rule.py, a space right after a character that is not \s. That
// module states the rule and its reasons; the tests check both against
// uncut text.
template <class Unit>
bool ascii_safe_cut(const ClassTable& table, const Unit* units, size_t i) {
    return units[i] == 0x20 && units[i - 1] < 0x80 && (table(units[i - 1]) & SPACE) == 0;
}

// A stretch of a text to encode in one go: up to `end`, as one-byte text if
// `ascii`.
struct Stretch {
    size_t end;
    bool ascii;
};

// The stretch that starts at `position` (where a piece starts) in a text of
// `length` units, under a built-in pattern and a table with the standard
// ASCII classes:
// * ASCII, if at least MIN_RUN ASCII characters follow: up to the last safe
//   cut within them (at most MAX_RUN on), or to the end of the text;
// * else mixed: up to the first safe cut in the next run of MIN_RUN ASCII
//   characters (whole blocks of 16, counted from the first character beyond
//   ASCII), looked for within LOOK_AHEAD units, or to the end of the text. The bound keeps planning linear when a long text is encoded in
//   blocks, each call planning afresh.
// Every stretch is at least one unit long. An ASCII stretch ends at a safe
// cut, so scanned alone it has the pieces it has in the whole text.
template <class Unit>
Stretch next_stretch(const ClassTable& table, const Unit* units, size_t position, size_t length) {
    constexpr size_t MIN_RUN = 128;
    constexpr size_t MAX_RUN = size_t(1) << 16;
    constexpr size_t LOOK_AHEAD = size_t(1) << 16;
    const size_t limit = length - position > MAX_RUN + 1 ? position + MAX_RUN + 1 : length;
    const size_t beyond = find_beyond_ascii(units, position, limit);
    if (beyond - position >= MIN_RUN) {
        if (beyond == length) return {length, true};
        for (size_t cut = beyond - 1; cut > position; --cut) {
            if (ascii_safe_cut(table, units, cut)) return {cut, true};
        }
    }
    // A run of MIN_RUN is found as MIN_RUN / 16 ASCII blocks of 16 units in
    // a row, counted from `beyond`: a test per block, not per character, on
    // text where short ASCII runs (spaces, punctuation) come between words.
    const size_t bound = length - position > LOOK_AHEAD ? position + LOOK_AHEAD : length;
    size_t in_a_row = 0;
    for (size_t block = beyond; block + 16 <= bound; block += 16) {
        if (!sixteen_ascii(units + block)) {
            in_a_row = 0;
            continue;
        }
        if (++in_a_row < MIN_RUN / 16) continue;
        // The run's cuts not yet tried: all of them at first, then the newest block's.
        const size_t first = in_a_row == MIN_RUN / 16 ? block + 16 - MIN_RUN : block - 1;
        for (size_t cut = first + 1; cut < block + 16; ++cut) {
            if (ascii_safe_cut(table, units, cut)) return {cut, false};
        }
    }
    return {length, false};
}

// True when the text may be cut before `i` (2 <= i) without changing any
// piece of a built-in pattern: both rules of cutting/rule.py, for any
// characters. A space after a character that is not \s, or a letter after
// a newline that follows a character that is not \s. The classes are the
// pattern's own (the table's), where the Python rule uses str.isspace and
// str.isalpha, which can only miss a cut.
template <class Unit>
bool is_safe_cut(const ClassTable& table, const Unit* units, size_t i) {
    if (units[i] == 0x20) return (table(units[i - 1]) & SPACE) == 0;
    return units[i - 1] == 0x0A && (table(units[i - 2]) & SPACE) == 0 &&
           (table(units[i]) & LETTER) != 0;
}

// Where a segment that starts at `position` (where a piece starts) ends,
// under the same conditions as next_stretch: at the first safe cut at least
// `min_units` (2 or more) on, looked for up to `max_units` on; at `length`
// if the text ends before that bound; else NO_CUT (a run without a safe
// cut, which no segment covers).
constexpr size_t NO_CUT = SIZE_MAX;

template <class Unit>
size_t next_segment_end(const ClassTable& table, const Unit* units, size_t position,
                        size_t length, size_t min_units, size_t max_units) {
    if (length - position <= min_units) return length;
    const size_t bound = length - position > max_units ? position + max_units : length;
    for (size_t cut = position + min_units; cut < bound; ++cut) {
        if (is_safe_cut(table, units, cut)) return cut;
    }
    return bound == length ? length : NO_CUT;
}

}  // namespace pretokenize
}  // namespace streambpe

#endif  // STREAMBPE_PRETOKENIZE_IMPL_HPP
