// The training merge loop behind streambpe.core._native, in plain C++ (no
// Python API).
//
// _native.pyx owns every Python object and the GIL; this header only works on
// bytes and integers, so everything here may run with the GIL released. The
// pure-Python module merge_loop.py is the specification.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "_hash_table.hpp"

namespace streambpe {

// The training merge loop of merge_loop.MergeState, its twin, on native
// arrays: all words' symbols in one vector (each word merged in place,
// shrinking within its own span), per-pair counts and word lists, and a lazy
// max-heap. Words are appended with add_word; build() counts the initial
// pairs; each step() makes one merge.
class MergeState {
public:
    MergeState() {
        for (int byte = 0; byte < 256; ++byte) tokens_.emplace_back(1, char(byte));
    }

    // ``n >= 2``; the caller checks that counts are positive and that the
    // total weighted number of pairs fits in int64.
    void add_word(const uint8_t* word, size_t n, int64_t count) {
        words_.push_back(Word{symbols_.size(), count, uint32_t(n)});
        symbols_.insert(symbols_.end(), word, word + n);
    }

    void build() {
        for (size_t w = 0; w < words_.size(); ++w) {
            const uint32_t* word = symbols_.data() + words_[w].start;
            for (size_t i = 0; i + 1 < words_[w].length; ++i) {
                count(slot_of(word[i], word[i + 1]), words_[w].count, uint32_t(w));
            }
        }
        heap_.reserve(pairs_.size());
        for (uint32_t slot = 0; slot < pairs_.size(); ++slot) {
            heap_.push_back(HeapEntry{pairs_[slot].count, pairs_[slot].left, pairs_[slot].right, slot});
        }
        std::make_heap(heap_.begin(), heap_.end(), Lower{tokens_});
    }

    // Makes the next merge; false when no pair is left.
    bool step() {
        uint32_t slot;
        if (!best_pair(slot)) return false;
        merge(slot);
        return true;
    }

    // Up to ``limit`` steps; returns how many merges were made.
    size_t run(size_t limit) {
        size_t made = 0;
        while (made < limit && step()) ++made;
        return made;
    }

    std::vector<std::pair<uint32_t, uint32_t>>& merges() { return merges_; }
    const std::string& token(uint32_t id) const { return tokens_[id]; }

private:
    struct Pair {
        uint32_t left, right;
        int64_t count;
        std::vector<uint32_t> words;  // indexes of words that hold (or held) the pair
    };
    struct Word {
        size_t start;  // in symbols_
        int64_t count;
        uint32_t length;  // shrinks as merges join symbols
    };
    struct HeapEntry {
        int64_t count;  // the pair's count when pushed; stale once the count dropped
        uint32_t left, right, slot;
    };

    static int compare_bytes(const std::string& x, const std::string& y) {
        int c = std::memcmp(x.data(), y.data(), std::min(x.size(), y.size()));
        if (c != 0) return c;
        return x.size() < y.size() ? -1 : (x.size() > y.size() ? 1 : 0);
    }

    // "x pops after y": higher count first, then the greater (left, right)
    // bytes (docs/design.md, "The tie-break"). Token bytes can repeat (two merges may spell the same
    // bytes); the pure heap then compares ids, smaller first, and so do we.
    struct Lower {
        const std::vector<std::string>& tokens;
        bool operator()(const HeapEntry& x, const HeapEntry& y) const {
            if (x.count != y.count) return x.count < y.count;
            int c = compare_bytes(tokens[x.left], tokens[y.left]);
            if (c != 0) return c < 0;
            c = compare_bytes(tokens[x.right], tokens[y.right]);
            if (c != 0) return c < 0;
            if (x.left != y.left) return x.left > y.left;
            return x.right > y.right;
        }
    };

    // The slot of pair (left, right), created (count 0, no holders) if new.
    uint32_t slot_of(uint32_t left, uint32_t right) {
        bool inserted;
        uint32_t& slot = index_.find_or_insert(pair_key(left, right), 0, inserted);
        if (inserted) {
            slot = uint32_t(pairs_.size());
            pairs_.push_back(Pair{left, right, 0, {}});
        }
        return slot;
    }

    // The slot of a pair that contains the token being made: looked up by its
    // other token in a plain array (such pairs are counted once per
    // occurrence, the hot path of a merge), and in index_ on first sight.
    uint32_t new_slot_of(uint32_t left, uint32_t right, uint32_t new_id) {
        const bool ends_new = right == new_id;  // (x, new) or (new, new): by x
        uint32_t& slot = ends_new ? slot_ending_new_[left] : slot_starting_new_[right];
        if (slot == NONE32) slot = slot_of(left, right);
        return slot;
    }

    // Adds ``delta`` to the pair's count; ``word`` (if not NONE32) becomes a holder.
    void count(uint32_t slot, int64_t delta, uint32_t word) {
        Pair& pair = pairs_[slot];
        pair.count += delta;
        if (word != NONE32 && (pair.words.empty() || pair.words.back() != word)) {
            pair.words.push_back(word);
        }
    }

    bool best_pair(uint32_t& slot) {
        Lower lower{tokens_};
        while (!heap_.empty()) {
            HeapEntry& top = heap_.front();
            int64_t current = pairs_[top.slot].count;
            if (current == top.count) {
                slot = top.slot;
                std::pop_heap(heap_.begin(), heap_.end(), lower);
                heap_.pop_back();
                return true;
            }
            // Stale: the pair lost occurrences since this entry was pushed.
            std::pop_heap(heap_.begin(), heap_.end(), lower);
            if (current > 0) {
                heap_.back().count = current;
                std::push_heap(heap_.begin(), heap_.end(), lower);
            } else {
                heap_.pop_back();
            }
        }
        return false;
    }

    void merge(uint32_t merged_slot) {
        const uint32_t a = pairs_[merged_slot].left, b = pairs_[merged_slot].right;
        const uint32_t new_id = uint32_t(tokens_.size());
        tokens_.push_back(tokens_[a] + tokens_[b]);
        slot_ending_new_.push_back(NONE32);
        slot_starting_new_.push_back(NONE32);
        merges_.emplace_back(a, b);
        // Every pair created from here on contains new_id, so is new this step.
        const size_t first_new_slot = pairs_.size();
        std::vector<uint32_t> holders;
        holders.swap(pairs_[merged_slot].words);
        for (size_t k = 0; k < holders.size(); ++k) {
            // Holders are scattered over memory, and waiting for them is most
            // of a merge's time: ask for the next ones early.
            if (k + 16 < holders.size()) __builtin_prefetch(&words_[holders[k + 16]]);
            if (k + 8 < holders.size()) {
                __builtin_prefetch(symbols_.data() + words_[holders[k + 8]].start);
            }
            const uint32_t w = holders[k];
            uint32_t* word = symbols_.data() + words_[w].start;
            const size_t length = words_[w].length;
            const int64_t weight = words_[w].count;
            // Left to right, non-overlapping, compacting in place: ``read``
            // walks the old symbols, ``write`` the merged ones, so the symbol
            // before a match is word[write - 1] (possibly new_id) and the one
            // after it is still word[read + 2].
            size_t write = 0;
            for (size_t read = 0; read < length;) {
                if (read + 1 < length && word[read] == a && word[read + 1] == b) {
                    if (write > 0) {
                        uint32_t before = word[write - 1];
                        // (before, a) is new itself when before == new_id ("a b a b").
                        uint32_t lost = before == new_id ? new_slot_of(before, a, new_id)
                                                         : slot_of(before, a);
                        count(lost, -weight, NONE32);
                        count(new_slot_of(before, new_id, new_id), weight, w);
                    }
                    if (read + 2 < length) {
                        uint32_t after = word[read + 2];
                        count(slot_of(b, after), -weight, NONE32);
                        count(new_slot_of(new_id, after, new_id), weight, w);
                    }
                    word[write++] = new_id;
                    read += 2;
                } else {
                    word[write++] = word[read++];
                }
            }
            words_[w].length = uint32_t(write);
        }
        // Updates above may have touched the merged pair itself ("a a a");
        // it is gone now, whatever they left.
        pairs_[merged_slot].count = 0;
        Lower lower{tokens_};
        for (size_t slot = first_new_slot; slot < pairs_.size(); ++slot) {
            Pair& pair = pairs_[slot];
            if (pair.right == new_id) {
                slot_ending_new_[pair.left] = NONE32;
            } else {
                slot_starting_new_[pair.right] = NONE32;
            }
            if (pair.count > 0) {
                heap_.push_back(HeapEntry{pair.count, pair.left, pair.right, uint32_t(slot)});
                std::push_heap(heap_.begin(), heap_.end(), lower);
            } else {
                std::vector<uint32_t>().swap(pair.words);  // never merged: free its list
            }
        }
    }

    std::vector<std::string> tokens_;  // token id -> bytes
    std::vector<uint32_t> symbols_;
    std::vector<Word> words_;
    U64Map<uint32_t> index_;  // (left, right) -> slot in pairs_
    // For new_slot_of, indexed by token id; all NONE32 between steps.
    std::vector<uint32_t> slot_ending_new_ = std::vector<uint32_t>(256, NONE32);
    std::vector<uint32_t> slot_starting_new_ = std::vector<uint32_t>(256, NONE32);
    std::vector<Pair> pairs_;
    std::vector<HeapEntry> heap_;
    std::vector<std::pair<uint32_t, uint32_t>> merges_;
};

}  // namespace streambpe
