// Native matcher for compiled pretokenization patterns (core/pattern_compiler.py).
//
// A pattern in the subset real pre-tokenizers use arrives as a Program:
// character classes and a few instructions (see `Op`). Matching follows the
// `regex` module: at each start position, the top-level branches are tried in
// order; inside a branch, alternatives are tried in order and greedy and lazy
// repeats backtrack one character at a time, through an explicit stack of
// choice points; possessive repeats, atomic groups and look-aheads leave no
// choice point behind. A program either finds pieces like `regex.findall`
// (a single pattern) or splits like a chain of Hugging Face `Split` steps
// (core/split_steps.py), each step cutting the pieces of the one before.
//
// Character classes are one table per program: for every code point, a bit
// per class. It is built from the base table (each code point's general
// category and whitespace flag, read from `regex` by
// core/unicode_classes.py) and each class's ranges, so it agrees with
// `regex` on every code point. Matching touches no Python object: callers may
// scan without the GIL. The text is a buffer of code units of 1, 2 or 4
// bytes, one code point each, as CPython stores a str.
//
// Plain C++17, header only.

#ifndef STREAMBPE_PATTERN_COMPILER_IMPL_HPP
#define STREAMBPE_PATTERN_COMPILER_IMPL_HPP

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace streambpe {
namespace pretokenize {

// Calls `emit` for one piece; an `emit` that returns bool may stop the scan.
// Forced inline, as the scan loops call it for every piece (see
// scan_typed_pieces_of_kind).
template <class Emit>
__attribute__((always_inline)) inline bool emit_piece(Emit& emit, size_t start, size_t end) {
    if constexpr (std::is_void_v<decltype(emit(start, end))>) {
        emit(start, end);
        return true;
    } else {
        return emit(start, end);
    }
}

// The instructions; the numbers match OP_* in pattern_compiler.py.
enum Op : uint32_t {
    CLASS = 0,    // k: one character of class k
    RUN = 1,      // k min max mode: min to max characters of class k
    SPLIT = 2,    // a b: go on at a; on failure, at b
    JMP = 3,      // a
    ATOMIC = 4,   // end, body, SUCCEED: the body's first match, then go on at end
    LOOK = 5,     // negative end, body, SUCCEED: whether the body matches here
    DOLLAR = 6,   // multiline: the end, or before "\n" (any one, or only a final one)
    SUCCEED = 7,  // the end of a branch or of a body
};
enum RepeatMode : uint32_t { GREEDY = 0, LAZY = 1, POSSESSIVE = 2 };
// What a `Split` step does with the matches (Hugging Face's names).
enum class Behavior : int { ISOLATED, REMOVED, MERGED_WITH_PREVIOUS, MERGED_WITH_NEXT, CONTIGUOUS };

constexpr uint32_t UNBOUNDED = 0xFFFFFFFFu;
constexpr size_t NO_MATCH = SIZE_MAX;

// Each code point's base entry: general-category index, plus 32 for \s.
class BaseTable {
   public:
    static constexpr uint32_t CODE_POINTS = 0x110000;
    static constexpr uint32_t BLOCK_SIZE = 256;

    BaseTable(const uint16_t* block_of, size_t block_of_length, const uint8_t* blocks,
              size_t blocks_length)
        : block_of_(block_of, block_of + block_of_length), blocks_(blocks, blocks + blocks_length) {
        if (block_of_length != CODE_POINTS / BLOCK_SIZE || blocks_length % BLOCK_SIZE != 0) {
            throw std::invalid_argument("base table: wrong stage sizes");
        }
        for (uint16_t block : block_of_) {
            if (static_cast<size_t>(block) * BLOCK_SIZE >= blocks_length) {
                throw std::invalid_argument("base table: block index out of range");
            }
        }
        for (uint8_t entry : blocks_) {
            if (entry >= 64) throw std::invalid_argument("base table: entry out of range");
        }
    }
    const uint8_t* block(uint32_t index) const {
        return blocks_.data() + static_cast<size_t>(block_of_[index]) * BLOCK_SIZE;
    }

   private:
    std::vector<uint16_t> block_of_;
    std::vector<uint8_t> blocks_;
};

// One compiled pattern: its class table and code.
class Regex {
   public:
    struct Branch {
        uint32_t first;  // the classes a match can start with
        uint32_t start;  // where its code starts
    };

    void add_class(uint64_t base_mask, bool negated) {
        if (classes_.size() == 32) throw std::invalid_argument("pattern: more than 32 classes");
        classes_.push_back(ClassSpec{base_mask, negated, {}});
    }
    void add_range(uint32_t low, uint32_t high) {
        if (classes_.empty() || low > high || high >= BaseTable::CODE_POINTS) {
            throw std::invalid_argument("pattern: bad class range");
        }
        classes_.back().ranges.emplace_back(low, high);
    }
    void set_code(const uint32_t* code, size_t length) { code_.assign(code, code + length); }
    void add_branch(uint32_t first, uint32_t start) { branches_.push_back(Branch{first, start}); }

    // Checks the code and builds the class table; the Regex is read-only after.
    void finish(const BaseTable& base) {
        check_code();
        build_table(base);
        any_first_ = 0;
        for (const Branch& branch : branches_) any_first_ |= branch.first;
    }

    uint32_t bits(uint32_t cp) const {
        if (cp < 256) return latin1_[cp];
        if (cp >= BaseTable::CODE_POINTS) return 0;
        return blocks_[static_cast<size_t>(block_of_[cp >> 8]) * 256 + (cp & 255)];
    }

    const std::vector<uint32_t>& code() const { return code_; }
    const std::vector<Branch>& branches() const { return branches_; }
    uint32_t any_first() const { return any_first_; }

   private:
    struct ClassSpec {
        uint64_t base_mask;
        bool negated;
        std::vector<std::pair<uint32_t, uint32_t>> ranges;
    };

    void check_code() const {
        const size_t n = code_.size();
        const size_t classes = classes_.size();
        auto target = [n](uint32_t pc) {
            if (pc > n) throw std::invalid_argument("pattern: jump out of range");
        };
        size_t pc = 0;
        while (pc < n) {
            size_t width;
            switch (code_[pc]) {
                case CLASS: width = 2; break;
                case RUN: width = 5; break;
                case SPLIT: width = 3; break;
                case JMP: width = 2; break;
                case ATOMIC: width = 2; break;
                case LOOK: width = 3; break;
                case DOLLAR: width = 2; break;
                case SUCCEED: width = 1; break;
                default: throw std::invalid_argument("pattern: unknown instruction");
            }
            if (pc + width > n) throw std::invalid_argument("pattern: truncated instruction");
            switch (code_[pc]) {
                case CLASS:
                case RUN:
                    if (code_[pc + 1] >= classes) throw std::invalid_argument("pattern: bad class");
                    if (code_[pc] == RUN && (code_[pc + 2] > code_[pc + 3] || code_[pc + 4] > 2)) {
                        throw std::invalid_argument("pattern: bad repeat");
                    }
                    break;
                case SPLIT: target(code_[pc + 1]); target(code_[pc + 2]); break;
                case JMP: target(code_[pc + 1]); break;
                case ATOMIC: target(code_[pc + 1]); break;
                case LOOK: target(code_[pc + 2]); break;
                default: break;
            }
            pc += width;
        }
        if (n == 0 || code_[n - 1] != SUCCEED) throw std::invalid_argument("pattern: no SUCCEED");
        for (const Branch& branch : branches_) {
            if (branch.start >= n) throw std::invalid_argument("pattern: bad branch start");
        }
        if (branches_.empty()) throw std::invalid_argument("pattern: no branch");
    }

    // The class bits of one code point, straight from the specs.
    uint32_t compute_bits(uint32_t cp, uint8_t base) const {
        uint32_t bits = 0;
        for (size_t k = 0; k < classes_.size(); ++k) {
            const ClassSpec& spec = classes_[k];
            bool member = (spec.base_mask >> base) & 1;
            if (!member) {
                for (const auto& range : spec.ranges) {
                    if (cp >= range.first && cp <= range.second) {
                        member = true;
                        break;
                    }
                }
            }
            if (member != spec.negated) bits |= 1u << k;
        }
        return bits;
    }

    // Two stages, like the base table: a block of 256 entries per 256 code
    // points, identical blocks stored once. A block without any range in it
    // is a function of its base block alone, so those are computed once per
    // distinct base block.
    void build_table(const BaseTable& base) {
        std::vector<std::pair<uint32_t, uint32_t>> all_ranges;
        for (const ClassSpec& spec : classes_) {
            all_ranges.insert(all_ranges.end(), spec.ranges.begin(), spec.ranges.end());
        }
        std::map<std::string, uint16_t> seen;
        std::map<const uint8_t*, uint16_t> by_base;
        uint32_t from_base[64];
        for (uint32_t entry = 0; entry < 64; ++entry) from_base[entry] = compute_bits(UINT32_MAX, entry);
        block_of_.assign(BaseTable::CODE_POINTS / 256, 0);
        std::vector<uint32_t> block(256);
        for (uint32_t index = 0; index < BaseTable::CODE_POINTS / 256; ++index) {
            const uint32_t low = index * 256, high = low + 255;
            bool ranged = false;
            for (const auto& range : all_ranges) {
                if (range.first <= high && range.second >= low) {
                    ranged = true;
                    break;
                }
            }
            const uint8_t* base_block = base.block(index);
            if (!ranged) {
                auto known = by_base.find(base_block);
                if (known != by_base.end()) {
                    block_of_[index] = known->second;
                    continue;
                }
            }
            for (uint32_t offset = 0; offset < 256; ++offset) {
                block[offset] = ranged ? compute_bits(low + offset, base_block[offset])
                                       : from_base[base_block[offset]];
            }
            std::string key(reinterpret_cast<const char*>(block.data()), 256 * sizeof(uint32_t));
            auto found = seen.find(key);
            uint16_t id;
            if (found != seen.end()) {
                id = found->second;
            } else {
                id = static_cast<uint16_t>(seen.size());
                seen.emplace(std::move(key), id);
                blocks_.insert(blocks_.end(), block.begin(), block.end());
            }
            block_of_[index] = id;
            if (!ranged) by_base.emplace(base_block, id);
        }
        for (uint32_t cp = 0; cp < 256; ++cp) latin1_[cp] = bits_slow(cp);
    }
    uint32_t bits_slow(uint32_t cp) const {
        return blocks_[static_cast<size_t>(block_of_[cp >> 8]) * 256 + (cp & 255)];
    }

    std::vector<ClassSpec> classes_;
    std::vector<uint32_t> code_;
    std::vector<Branch> branches_;
    uint32_t any_first_ = 0;
    std::vector<uint16_t> block_of_;
    std::vector<uint32_t> blocks_;
    uint32_t latin1_[256] = {};
};

// A choice point: where to go on if what follows fails.
struct Choice {
    size_t pos;
    size_t limit;  // GIVE_BACK: the shortest run; TAKE_MORE: the longest
    uint32_t pc;
    uint32_t kind;  // ALTERNATIVE, GIVE_BACK, TAKE_MORE
    uint32_t klass;
};
enum ChoiceKind : uint32_t { ALTERNATIVE, GIVE_BACK, TAKE_MORE };

// The choice points of one scan. A push is a store and an increment, inline:
// a vector's push_back was a call, a tenth of the scan.
class ChoiceStack {
   public:
    ChoiceStack() : choices_(64) {}
    size_t size() const { return size_; }
#if defined(__GNUC__)
    __attribute__((always_inline))
#endif
    void push(const Choice& choice) {
        if (size_ == choices_.size()) grow();
        choices_[size_++] = choice;
    }
    Choice& back() { return choices_[size_ - 1]; }
    void pop() { --size_; }
    void truncate(size_t size) { size_ = size; }

   private:
    void grow() { choices_.resize(2 * size_); }

    std::vector<Choice> choices_;
    size_t size_ = 0;
};

// Runs one Regex over `text[0:n]` (n is the end for `$` and look-aheads).
template <class Unit>
class Matcher {
   public:
    Matcher(const Regex& regex, const Unit* text, size_t n, ChoiceStack& stack)
        : regex_(regex), code_(regex.code().data()), text_(text), n_(n), stack_(stack) {}

    uint32_t bits(size_t i) const { return regex_.bits(static_cast<uint32_t>(text_[i])); }

    // The leftmost match at or after `from` (before `n`): true and its span.
    bool search(size_t from, size_t& start, size_t& end) {
        const uint32_t any_first = regex_.any_first();
        for (size_t pos = from; pos < n_; ++pos) {
            const uint32_t here = bits(pos);
            if (!(here & any_first)) continue;
            for (const Regex::Branch& branch : regex_.branches()) {
                if (!(here & branch.first)) continue;
                const size_t found = run(branch.start, pos);
                if (found != NO_MATCH) {
                    start = pos;
                    end = found;
                    return true;
                }
            }
        }
        return false;
    }

   private:
    bool in_class(uint32_t klass, size_t i) const { return i < n_ && (bits(i) >> klass & 1); }

    // The end of the first match of the code at `pc` from `pos`, or NO_MATCH.
    // Choice points above the stack's size at entry belong to this call.
    size_t run(uint32_t pc, size_t pos) {
        const size_t base = stack_.size();
        for (;;) {
            bool ok = true;
            switch (code_[pc]) {
                case CLASS:
                    ok = in_class(code_[pc + 1], pos);
                    pos += 1;
                    pc += 2;
                    break;
                case RUN: {
                    const uint32_t klass = code_[pc + 1], low = code_[pc + 2], high = code_[pc + 3];
                    const uint32_t mode = code_[pc + 4];
                    const size_t start = pos;
                    const size_t most = high == UNBOUNDED || n_ - pos < high ? n_ : pos + high;
                    pc += 5;
                    if (mode == LAZY) {
                        const size_t least = n_ - pos < low ? n_ + 1 : pos + low;
                        while (pos < least && pos < n_ && (bits(pos) >> klass & 1)) ++pos;
                        ok = pos - start == low;
                        if (ok && pos < most) stack_.push(Choice{pos, most, pc, TAKE_MORE, klass});
                        break;
                    }
                    while (pos < most && (bits(pos) >> klass & 1)) ++pos;
                    ok = pos - start >= low;
                    // Giving back can only matter if something follows.
                    if (ok && mode == GREEDY && pos > start + low && code_[pc] != SUCCEED) {
                        stack_.push(Choice{pos, start + low, pc, GIVE_BACK, 0});
                    }
                    break;
                }
                case SPLIT:
                    stack_.push(Choice{pos, 0, code_[pc + 2], ALTERNATIVE, 0});
                    pc = code_[pc + 1];
                    break;
                case JMP:
                    pc = code_[pc + 1];
                    break;
                case ATOMIC: {
                    const size_t end = run(pc + 2, pos);
                    ok = end != NO_MATCH;
                    pos = end;
                    pc = code_[pc + 1];
                    break;
                }
                case LOOK: {
                    const bool negative = code_[pc + 1] != 0;
                    bool matched;
                    // The usual look-ahead is one class: `(?!\S)`.
                    if (code_[pc + 3] == CLASS && code_[pc + 5] == SUCCEED) {
                        matched = in_class(code_[pc + 4], pos);
                    } else {
                        matched = run(pc + 3, pos) != NO_MATCH;
                    }
                    ok = matched != negative;
                    pc = code_[pc + 2];
                    break;
                }
                case DOLLAR:
                    ok = pos == n_ || (text_[pos] == '\n' && (code_[pc + 1] != 0 || pos + 1 == n_));
                    pc += 2;
                    break;
                default:  // SUCCEED
                    stack_.truncate(base);
                    return pos;
            }
            if (ok) continue;
            // Back to the latest choice point of this call.
            for (;;) {
                if (stack_.size() == base) return NO_MATCH;
                Choice& choice = stack_.back();
                if (choice.kind == ALTERNATIVE) {
                    pc = choice.pc;
                    pos = choice.pos;
                    stack_.pop();
                    break;
                }
                if (choice.kind == GIVE_BACK) {
                    pos = --choice.pos;
                    pc = choice.pc;
                    if (choice.pos == choice.limit) stack_.pop();
                    break;
                }
                if (choice.pos < choice.limit && (bits(choice.pos) >> choice.klass & 1)) {
                    pos = ++choice.pos;
                    pc = choice.pc;
                    break;
                }
                stack_.pop();
            }
        }
    }

    const Regex& regex_;
    const uint32_t* code_;
    const Unit* text_;
    size_t n_;
    ChoiceStack& stack_;
};

// A compiled pretokenizer: one Regex found like `regex.findall`, or a chain
// of split steps.
class PatternProgram {
   public:
    // Adds a Regex (filled in by the caller, then finish()) and returns it.
    Regex& add_regex() {
        regexes_.push_back(std::make_unique<Regex>());
        return *regexes_.back();
    }
    // Makes this a chain: regex `index` cuts the pieces of the steps before.
    void add_step(size_t index, int behavior, bool invert) {
        if (index >= regexes_.size() || behavior < 0 || behavior > 4) {
            throw std::invalid_argument("pattern: bad step");
        }
        steps_.push_back(Step{index, static_cast<Behavior>(behavior), invert});
    }
    void finish(const BaseTable& base) {
        if (regexes_.empty()) throw std::invalid_argument("pattern: no regex");
        for (auto& regex : regexes_) regex->finish(base);
    }
    bool is_chain() const { return !steps_.empty(); }

    // Calls `emit(start, end)` for each piece of `text[from:length]`, in
    // order, until it returns false; returns where to resume (a piece start),
    // or `length`. A chain can only resume at the end of a piece of its first
    // step, so it ignores the piece where `emit` asks to stop (that must be
    // an error, never a pause) and stops instead at the first such end at
    // least `window` units past `from`.
    template <class Unit, class Emit>
    size_t scan(const Unit* text, size_t length, Emit& emit, size_t from, size_t window) const {
        const size_t stop_after = window > SIZE_MAX - from ? SIZE_MAX : from + window;
        ChoiceStack stack;
        if (!is_chain()) {
            Matcher<Unit> matcher(*regexes_[0], text, length, stack);
            size_t start, end, pos = from;
            while (matcher.search(pos, start, end)) {
                if (!emit_piece(emit, start, end)) return end;
                pos = end;
            }
            return length;
        }
        ChainScan<Unit, Emit> chain{*this, text, emit, stack, stop_after, false};
        const size_t stopped = chain.split(0, from, length);
        return stopped;
    }

   private:
    struct Step {
        size_t regex;
        Behavior behavior;
        bool invert;
    };

    template <class Unit, class Emit>
    struct ChainScan {
        const PatternProgram& program;
        const Unit* text;
        Emit& emit;
        ChoiceStack& stack;
        size_t stop_after;
        bool failed;  // `emit` asked to stop

        // Splits [start, end) by steps[level] and the steps after it;
        // returns where the top level stopped (`end` when it did not).
        size_t split(size_t level, size_t start, size_t end) {
            if (level == program.steps_.size()) {
                if (!emit_piece(emit, start, end)) failed = true;
                return end;
            }
            const Step& step = program.steps_[level];
            Matcher<Unit> matcher(*program.regexes_[step.regex], text, end, stack);
            // The piece being built (merging behaviors), whether the span
            // before was a match, and a match waiting for what follows it.
            size_t piece_start = 0, piece_end = 0, held_start = 0, held_end = 0;
            bool have_piece = false, previous_match = false, held = false;
            size_t resume = end;
            // Sends a finished piece on. At the top level, once past
            // stop_after, stops the scan (false) and resumes after the piece:
            // every later piece starts there afresh.
            auto finish_piece = [&](size_t from, size_t to) {
                split(level + 1, from, to);
                if (failed) return false;
                if (level == 0 && to >= stop_after && to < end) {
                    resume = to;
                    return false;
                }
                return true;
            };
            // Applies the behavior to the next span; false stops the scan.
            auto take_span = [&](size_t from, size_t to, bool is_match) {
                const bool flag = is_match != step.invert;
                const bool was_match = previous_match;
                previous_match = flag;
                switch (step.behavior) {
                    case Behavior::ISOLATED:
                        return finish_piece(from, to);
                    case Behavior::REMOVED:
                        return flag || finish_piece(from, to);
                    case Behavior::MERGED_WITH_NEXT:
                        if (flag) {
                            const bool go_on = !held || finish_piece(held_start, held_end);
                            held = true, held_start = from, held_end = to;
                            return go_on;
                        }
                        if (held) {
                            held = false;
                            return finish_piece(held_start, to);
                        }
                        return finish_piece(from, to);
                    default: {  // MERGED_WITH_PREVIOUS, CONTIGUOUS
                        const bool joins = step.behavior == Behavior::CONTIGUOUS
                                               ? flag == was_match
                                               : flag && !was_match;
                        if (joins && have_piece) {
                            piece_end = to;
                            return true;
                        }
                        const bool go_on = !have_piece || finish_piece(piece_start, piece_end);
                        have_piece = true, piece_start = from, piece_end = to;
                        return go_on;
                    }
                }
            };
            // The spans: matches (never empty) and the text between them.
            size_t pos = start, match_start, match_end;
            while (pos < end) {
                if (!matcher.search(pos, match_start, match_end)) {
                    if (!take_span(pos, end, false)) return failed ? end : resume;
                    break;
                }
                if (match_start > pos && !take_span(pos, match_start, false)) {
                    return failed ? end : resume;
                }
                if (!take_span(match_start, match_end, true)) return failed ? end : resume;
                pos = match_end;
            }
            if (have_piece && !finish_piece(piece_start, piece_end)) return failed ? end : resume;
            if (held && !finish_piece(held_start, held_end)) return failed ? end : resume;
            return end;
        }
    };

    std::vector<std::unique_ptr<Regex>> regexes_;
    std::vector<Step> steps_;
};

}  // namespace pretokenize
}  // namespace streambpe

#endif  // STREAMBPE_PATTERN_COMPILER_IMPL_HPP
