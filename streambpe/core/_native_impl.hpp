// The algorithms behind streambpe.core._native, in plain C++ (no Python API).
//
// _native.pyx owns every Python object and the GIL; this header only works on
// bytes and integers, so everything here may run with the GIL released. The
// pure-Python modules merge_loop.py and bpe.py are the specification: each
// class below says which behaviour of theirs it reproduces.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

namespace streambpe {

constexpr uint32_t NONE32 = UINT32_MAX;

// ---------------------------------------------------------------- hashing

inline uint64_t load_le(const uint8_t* p, size_t n) {
    uint64_t v = 0;
    std::memcpy(&v, p, n);  // little-endian hosts only matter for speed, not results
    return v;
}

inline uint64_t mix64(uint64_t x) {
    x ^= x >> 32;
    x *= 0xd6e8feb86659fd93ULL;
    x ^= x >> 32;
    x *= 0xd6e8feb86659fd93ULL;
    x ^= x >> 32;
    return x;
}

// A fast non-cryptographic hash of a byte string (keys are tokens and pieces,
// mostly under 16 bytes, so the loop runs once or twice).
inline uint64_t hash_bytes(const uint8_t* data, size_t n) {
    uint64_t h = 0x9e3779b97f4a7c15ULL ^ (n * 0xff51afd7ed558ccdULL);
    while (n >= 8) {
        h = (h ^ load_le(data, 8)) * 0xc4ceb9fe1a85ec53ULL;
        h ^= h >> 29;
        data += 8;
        n -= 8;
    }
    if (n > 0) {
        h = (h ^ load_le(data, n)) * 0xc4ceb9fe1a85ec53ULL;
    }
    return mix64(h);
}

// ------------------------------------------------------- uint64 -> V table

// Open addressing with linear probing; keys are never removed. The key
// UINT64_MAX marks an empty slot: callers never use it (it would need two
// token ids of 2^32 - 1).
template <class V>
class U64Map {
public:
    U64Map() { rehash(16); }

    V* find(uint64_t key) {
        for (size_t i = mix64(key) & mask_;; i = (i + 1) & mask_) {
            if (keys_[i] == key) return &values_[i];
            if (keys_[i] == EMPTY) return nullptr;
        }
    }
    const V* find(uint64_t key) const { return const_cast<U64Map*>(this)->find(key); }

    // Returns the value slot for ``key``, inserting ``fresh`` first if absent;
    // ``inserted`` says which happened.
    V& find_or_insert(uint64_t key, const V& fresh, bool& inserted) {
        if ((size_ + 1) * 2 > keys_.size()) rehash(keys_.size() * 2);
        size_t i = mix64(key) & mask_;
        while (keys_[i] != EMPTY && keys_[i] != key) i = (i + 1) & mask_;
        inserted = keys_[i] == EMPTY;
        if (inserted) {
            keys_[i] = key;
            values_[i] = fresh;
            ++size_;
        }
        return values_[i];
    }

    size_t size() const { return size_; }

private:
    static constexpr uint64_t EMPTY = UINT64_MAX;

    void rehash(size_t capacity) {
        std::vector<uint64_t> old_keys(capacity, EMPTY);
        std::vector<V> old_values(capacity);
        old_keys.swap(keys_);
        old_values.swap(values_);
        mask_ = capacity - 1;
        for (size_t j = 0; j < old_keys.size(); ++j) {
            if (old_keys[j] == EMPTY) continue;
            size_t i = mix64(old_keys[j]) & mask_;
            while (keys_[i] != EMPTY) i = (i + 1) & mask_;
            keys_[i] = old_keys[j];
            values_[i] = old_values[j];
        }
    }

    std::vector<uint64_t> keys_;
    std::vector<V> values_;
    size_t mask_ = 0;
    size_t size_ = 0;
};

inline uint64_t pair_key(uint32_t left, uint32_t right) {
    return (uint64_t(left) << 32) | right;
}

// -------------------------------------------------------- bytes -> V table

// Keys are copied into one arena; entries are found through an index table
// of entry numbers. ``erase`` leaves a tombstone (the entry stays, marked
// dead), which is all the piece cache needs: it erases only from a table it
// never inserts into again.
template <class V>
class BytesMap {
public:
    struct Entry {
        uint64_t hash;
        size_t offset;
        size_t length;
        V value;
        bool alive;
    };

    BytesMap() { reindex(16); }

    // Entry number of ``key`` (with ``hash == hash_bytes(key)``), or -1.
    int64_t find(const uint8_t* key, size_t n, uint64_t hash) const {
        for (size_t i = hash & mask_;; i = (i + 1) & mask_) {
            uint32_t e = index_[i];
            if (e == NONE32) return -1;
            const Entry& entry = entries_[e];
            if (entry.hash == hash && entry.length == n && entry.alive &&
                std::memcmp(arena_.data() + entry.offset, key, n) == 0) {
                return e;
            }
        }
    }
    int64_t find(const uint8_t* key, size_t n) const { return find(key, n, hash_bytes(key, n)); }

    // Inserts a key known to be absent; returns its entry number.
    size_t insert(const uint8_t* key, size_t n, uint64_t hash, const V& value) {
        if ((entries_.size() + 1) * 2 > index_.size()) reindex(index_.size() * 2);
        size_t number = entries_.size();
        entries_.push_back(Entry{hash, arena_.size(), n, value, true});
        arena_.append(reinterpret_cast<const char*>(key), n);
        place(number);
        ++live_;
        return number;
    }

    void erase(size_t number) {
        entries_[number].alive = false;
        --live_;
    }

    void clear() {
        entries_.clear();
        arena_.clear();
        live_ = 0;
        reindex(16);
    }

    void swap(BytesMap& other) {
        entries_.swap(other.entries_);
        arena_.swap(other.arena_);
        index_.swap(other.index_);
        std::swap(mask_, other.mask_);
        std::swap(live_, other.live_);
    }

    size_t live() const { return live_; }
    size_t entry_count() const { return entries_.size(); }
    Entry& entry(size_t number) { return entries_[number]; }
    const Entry& entry(size_t number) const { return entries_[number]; }
    const uint8_t* key_data(size_t number) const {
        return reinterpret_cast<const uint8_t*>(arena_.data()) + entries_[number].offset;
    }

private:
    void place(size_t number) {
        size_t i = entries_[number].hash & mask_;
        while (index_[i] != NONE32) i = (i + 1) & mask_;
        index_[i] = uint32_t(number);
    }

    void reindex(size_t capacity) {
        index_.assign(capacity, NONE32);
        mask_ = capacity - 1;
        for (size_t number = 0; number < entries_.size(); ++number) place(number);
    }

    std::vector<Entry> entries_;
    std::string arena_;
    std::vector<uint32_t> index_;
    size_t mask_ = 0;
    size_t live_ = 0;
};

// --------------------------------------------------------- piece merging

// Rank-based BPE on one piece, with the results of bpe.merge_piece.
//
// Every part BPE can produce is a single byte or a ranked token, so each is a
// "unit": units 0..255 are the single bytes, units from 256 are the ranked
// tokens of two bytes or more. A merge of adjacent parts L, R is possible
// exactly when L + R is ranked; then (unit L, unit R) is a split of that
// ranked token into two units. ``finish`` enumerates those splits once, so
// merging looks up integer pairs instead of hashing concatenations.
class PieceMerger {
public:
    // What one byte string is to the encoder; either field may be NONE32.
    struct TokenInfo {
        uint32_t unit;
        uint32_t output;  // index into the caller's list of token ids
    };

    // Pieces longer than this merge with a heap (n log n) instead of
    // rescanning all pairs after each merge (n^2, but faster when short).
    static constexpr size_t HEAP_THRESHOLD = 128;

    void add_output(const uint8_t* token, size_t n, uint32_t output) {
        info_for(token, n).output = output;
    }

    void add_rank(const uint8_t* token, size_t n, uint32_t rank) {
        if (n < 2) return;  // single bytes are units already; their rank never matters
        TokenInfo& info = info_for(token, n);
        info.unit = uint32_t(unit_entry_.size());
        unit_entry_.push_back(find_entry(token, n));
        unit_rank_.push_back(rank);
    }

    // Call once, after every add_output and add_rank.
    void finish() {
        for (uint32_t byte = 0; byte < 256; ++byte) {
            uint8_t b = uint8_t(byte);
            info_for(&b, 1).unit = byte;
            unit_entry_[byte] = find_entry(&b, 1);
        }
        unit_output_.resize(unit_entry_.size());
        for (size_t unit = 0; unit < unit_entry_.size(); ++unit) {
            unit_output_[unit] = tokens_.entry(unit_entry_[unit]).value.output;
        }
        bool inserted;
        for (size_t unit = 256; unit < unit_entry_.size(); ++unit) {
            const uint8_t* token = unit_bytes(uint32_t(unit));
            size_t n = unit_length(uint32_t(unit));
            for (size_t split = 1; split < n; ++split) {
                uint32_t left = unit_of(token, split);
                uint32_t right = unit_of(token + split, n - split);
                if (left == NONE32 || right == NONE32) continue;
                uint64_t merged = (uint64_t(unit_rank_[unit]) << 32) | unit;
                merges_.find_or_insert(pair_key(left, right), merged, inserted);
            }
        }
    }

    // The token info of a whole byte string, if the encoder or ranks know it.
    const TokenInfo* lookup(const uint8_t* token, size_t n) const {
        int64_t e = tokens_.find(token, n);
        return e < 0 ? nullptr : &tokens_.entry(size_t(e)).value;
    }

    // Appends the units ``piece`` splits into.
    void merge(const uint8_t* piece, size_t n, std::vector<uint32_t>& units) const {
        if (n > HEAP_THRESHOLD) {
            merge_long(piece, n, units);
        } else {
            merge_short(piece, n, units);
        }
    }

    uint32_t unit_output(uint32_t unit) const { return unit_output_[unit]; }
    const uint8_t* unit_bytes(uint32_t unit) const { return tokens_.key_data(unit_entry_[unit]); }
    size_t unit_length(uint32_t unit) const { return tokens_.entry(unit_entry_[unit]).length; }

private:
    // (rank << 32 | merged unit) of a pair, or NO_MERGE: ordering by this
    // value orders by rank, and NO_MERGE is above every rank.
    static constexpr uint64_t NO_MERGE = UINT64_MAX;

    uint64_t merge_of(uint32_t left, uint32_t right) const {
        const uint64_t* merged = merges_.find(pair_key(left, right));
        return merged ? *merged : NO_MERGE;
    }

    size_t find_entry(const uint8_t* token, size_t n) const {
        return size_t(tokens_.find(token, n));
    }

    TokenInfo& info_for(const uint8_t* token, size_t n) {
        uint64_t hash = hash_bytes(token, n);
        int64_t e = tokens_.find(token, n, hash);
        if (e < 0) e = int64_t(tokens_.insert(token, n, hash, TokenInfo{NONE32, NONE32}));
        if (unit_entry_.empty()) unit_entry_.resize(256);  // single bytes, filled by finish
        return tokens_.entry(size_t(e)).value;
    }

    uint32_t unit_of(const uint8_t* token, size_t n) const {
        if (n == 1) return token[0];
        const TokenInfo* info = lookup(token, n);
        return info ? info->unit : NONE32;
    }

    // Like bpe.merge_piece: after each merge only the two pairs beside it change.
    void merge_short(const uint8_t* piece, size_t n, std::vector<uint32_t>& out) const {
        uint32_t parts[HEAP_THRESHOLD];
        uint64_t pair_merge[HEAP_THRESHOLD];
        for (size_t i = 0; i < n; ++i) parts[i] = piece[i];
        size_t count = n;
        for (size_t i = 0; i + 1 < count; ++i) pair_merge[i] = merge_of(parts[i], parts[i + 1]);
        while (count > 1) {
            size_t best = 0;
            // Strictly lower wins, so ties go to the leftmost pair.
            for (size_t i = 1; i + 1 < count; ++i) {
                if (pair_merge[i] < pair_merge[best]) best = i;
            }
            if (pair_merge[best] == NO_MERGE) break;
            parts[best] = uint32_t(pair_merge[best]);
            --count;
            std::memmove(parts + best + 1, parts + best + 2, (count - best - 1) * sizeof(uint32_t));
            std::memmove(pair_merge + best, pair_merge + best + 1,
                         (count - best - 1) * sizeof(uint64_t));
            if (best > 0) pair_merge[best - 1] = merge_of(parts[best - 1], parts[best]);
            if (best + 1 < count) pair_merge[best] = merge_of(parts[best], parts[best + 1]);
        }
        out.insert(out.end(), parts, parts + count);
    }

    // The same merges in O(n log n): parts form a linked list over their start
    // positions, and a min-heap holds (rank, start) for each pair. An entry is
    // stale once its pair's rank changed; it is then skipped. An entry that
    // still matches the pair's current rank is as good as a fresh one, so
    // popping the least (rank, start) finds the lowest-ranked, leftmost pair.
    void merge_long(const uint8_t* piece, size_t n, std::vector<uint32_t>& out) const {
        std::vector<uint32_t> part(n), next(n), prev(n);
        std::vector<uint64_t> pair_merge(n, NO_MERGE);  // of the pair starting here
        std::vector<uint64_t> heap;  // (rank << 32 | start), smallest first
        auto push = [&heap](uint64_t merge, size_t start) {
            heap.push_back((merge & 0xffffffff00000000ULL) | start);
            std::push_heap(heap.begin(), heap.end(), std::greater<uint64_t>());
        };
        const uint32_t end = uint32_t(n);
        for (size_t i = 0; i < n; ++i) {
            part[i] = piece[i];
            next[i] = uint32_t(i + 1);
            prev[i] = i == 0 ? end : uint32_t(i - 1);
        }
        for (size_t i = 0; i + 1 < n; ++i) {
            pair_merge[i] = merge_of(part[i], part[i + 1]);
            if (pair_merge[i] != NO_MERGE) heap.push_back((pair_merge[i] & 0xffffffff00000000ULL) | i);
        }
        std::make_heap(heap.begin(), heap.end(), std::greater<uint64_t>());
        while (!heap.empty()) {
            std::pop_heap(heap.begin(), heap.end(), std::greater<uint64_t>());
            uint64_t top = heap.back();
            heap.pop_back();
            uint32_t at = uint32_t(top);
            if (pair_merge[at] == NO_MERGE || (pair_merge[at] >> 32) != (top >> 32)) continue;
            uint32_t gone = next[at];
            part[at] = uint32_t(pair_merge[at]);
            pair_merge[gone] = NO_MERGE;
            next[at] = next[gone];
            if (next[at] != end) prev[next[at]] = at;
            pair_merge[at] = next[at] == end ? NO_MERGE : merge_of(part[at], part[next[at]]);
            if (pair_merge[at] != NO_MERGE) push(pair_merge[at], at);
            uint32_t before = prev[at];
            if (before != end) {
                pair_merge[before] = merge_of(part[before], part[at]);
                if (pair_merge[before] != NO_MERGE) push(pair_merge[before], before);
            }
        }
        for (uint32_t i = 0; i != end; i = next[i]) out.push_back(part[i]);
    }

    BytesMap<TokenInfo> tokens_;        // every encoder key, ranked token and single byte
    std::vector<size_t> unit_entry_;    // unit -> entry in tokens_
    std::vector<uint32_t> unit_rank_;   // unit -> rank (unused below 256)
    std::vector<uint32_t> unit_output_; // unit -> output index, or NONE32
    U64Map<uint64_t> merges_;           // (left unit, right unit) -> rank << 32 | merged unit
};

// ------------------------------------------------------------ piece cache

// Piece bytes -> output indexes, bounded like piece_cache.PieceCache: two
// generations of maxsize // 2 entries (one generation of maxsize when
// maxsize < 2). When the current generation is full it becomes the previous
// one; a lookup that finds its piece in the previous generation moves it to
// the current one. maxsize == 0 stores nothing.
class PieceCache {
public:
    explicit PieceCache(size_t maxsize)
        : maxsize_(maxsize), keeps_previous_(maxsize >= 2),
          generation_size_(maxsize >= 2 ? maxsize / 2 : maxsize) {}

    // Copies the cached outputs of ``piece`` into ``found`` and returns true
    // on a hit; counts the lookup either way.
    bool get(const uint8_t* piece, size_t n, uint64_t hash, std::vector<uint32_t>& found) {
        int64_t e = current_.map.find(piece, n, hash);
        if (e >= 0) {
            ++hits_;
            current_.read(size_t(e), found);
            return true;
        }
        e = previous_.map.find(piece, n, hash);
        if (e < 0) {
            ++misses_;
            return false;
        }
        ++hits_;
        previous_.read(size_t(e), found);
        previous_.map.erase(size_t(e));
        put(piece, n, hash, found);
        return true;
    }

    void put(const uint8_t* piece, size_t n, uint64_t hash, const std::vector<uint32_t>& outputs) {
        if (maxsize_ == 0) return;
        if (current_.map.live() >= generation_size_) {
            current_.swap(previous_);
            current_.clear();
            if (!keeps_previous_) previous_.clear();
        }
        current_.map.insert(piece, n, hash, Span{current_.outputs.size(), outputs.size()});
        current_.outputs.insert(current_.outputs.end(), outputs.begin(), outputs.end());
    }

    void clear() {
        current_.clear();
        previous_.clear();
        hits_ = misses_ = 0;
    }

    size_t hits() const { return hits_; }
    size_t misses() const { return misses_; }
    size_t maxsize() const { return maxsize_; }
    size_t size() const { return current_.map.live() + previous_.map.live(); }

private:
    struct Span {
        size_t offset;
        size_t length;
    };
    struct Generation {
        BytesMap<Span> map;
        std::vector<uint32_t> outputs;

        void read(size_t e, std::vector<uint32_t>& found) const {
            const Span& span = map.entry(e).value;
            found.assign(outputs.begin() + span.offset, outputs.begin() + span.offset + span.length);
        }
        void clear() {
            map.clear();
            outputs.clear();
        }
        void swap(Generation& other) {
            map.swap(other.map);
            outputs.swap(other.outputs);
        }
    };

    size_t maxsize_;
    bool keeps_previous_;
    size_t generation_size_;
    Generation current_, previous_;
    size_t hits_ = 0, misses_ = 0;
};

// ------------------------------------------------------------ merge loop

// The training merge loop of merge_loop.MergeState, on native arrays: all
// words' symbols in one vector (each word merged in place, shrinking within
// its own span), per-pair counts and word lists, and a lazy max-heap. Words
// are appended with add_word; build() counts the initial pairs; each step()
// makes one merge.
class MergeLoop {
public:
    MergeLoop() {
        for (int byte = 0; byte < 256; ++byte) tokens_.emplace_back(1, char(byte));
    }

    // ``n >= 2``; the caller checks that counts are positive and that the
    // total weighted number of pairs fits in int64.
    void add_word(const uint8_t* word, size_t n, int64_t count) {
        word_start_.push_back(symbols_.size());
        word_length_.push_back(uint32_t(n));
        word_count_.push_back(count);
        symbols_.insert(symbols_.end(), word, word + n);
    }

    void build() {
        for (size_t w = 0; w < word_count_.size(); ++w) {
            const uint32_t* word = symbols_.data() + word_start_[w];
            for (size_t i = 0; i + 1 < word_length_[w]; ++i) {
                count_pair(word[i], word[i + 1], word_count_[w], uint32_t(w));
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

    const std::vector<std::pair<uint32_t, uint32_t>>& merges() const { return merges_; }
    const std::string& token(uint32_t id) const { return tokens_[id]; }

private:
    struct Pair {
        uint32_t left, right;
        int64_t count;
        std::vector<uint32_t> words;  // indexes of words that hold (or held) the pair
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
    // bytes (rule 1). Token bytes can repeat (two merges may spell the same
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

    // Adds ``delta`` to the pair's count, creating the pair if new; ``word``
    // (if not NONE32) is recorded as a holder.
    void count_pair(uint32_t left, uint32_t right, int64_t delta, uint32_t word) {
        bool inserted;
        uint32_t& slot = index_.find_or_insert(pair_key(left, right), 0, inserted);
        if (inserted) {
            slot = uint32_t(pairs_.size());
            pairs_.push_back(Pair{left, right, 0, {}});
        }
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
        merges_.emplace_back(a, b);
        // Every pair created from here on contains new_id, so is new this step.
        const size_t first_new_slot = pairs_.size();
        std::vector<uint32_t> holders;
        holders.swap(pairs_[merged_slot].words);
        for (uint32_t w : holders) {
            uint32_t* word = symbols_.data() + word_start_[w];
            const size_t length = word_length_[w];
            const int64_t count = word_count_[w];
            // Left to right, non-overlapping, compacting in place: ``read``
            // walks the old symbols, ``write`` the merged ones, so the symbol
            // before a match is word[write - 1] (possibly new_id) and the one
            // after it is still word[read + 2].
            size_t write = 0;
            for (size_t read = 0; read < length;) {
                if (read + 1 < length && word[read] == a && word[read + 1] == b) {
                    if (write > 0) {
                        uint32_t before = word[write - 1];
                        count_pair(before, a, -count, NONE32);
                        count_pair(before, new_id, count, w);
                    }
                    if (read + 2 < length) {
                        uint32_t after = word[read + 2];
                        count_pair(b, after, -count, NONE32);
                        count_pair(new_id, after, count, w);
                    }
                    word[write++] = new_id;
                    read += 2;
                } else {
                    word[write++] = word[read++];
                }
            }
            word_length_[w] = uint32_t(write);
        }
        // Updates above may have touched the merged pair itself ("a a a");
        // it is gone now, whatever they left.
        pairs_[merged_slot].count = 0;
        Lower lower{tokens_};
        for (size_t slot = first_new_slot; slot < pairs_.size(); ++slot) {
            Pair& pair = pairs_[slot];
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
    std::vector<size_t> word_start_;
    std::vector<uint32_t> word_length_;
    std::vector<int64_t> word_count_;
    U64Map<uint32_t> index_;  // (left, right) -> slot in pairs_
    std::vector<Pair> pairs_;
    std::vector<HeapEntry> heap_;
    std::vector<std::pair<uint32_t, uint32_t>> merges_;
};

}  // namespace streambpe
