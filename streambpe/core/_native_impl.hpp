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
    std::memcpy(&v, p, n);  // byte order changes hash values only, never a result
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

// Open addressing with linear probing; keys are never removed. Each slot
// holds its key and value side by side, so a lookup touches one cache line.
// The key UINT64_MAX marks an empty slot: callers never use it (it would need
// two token ids of 2^32 - 1). Keys are pairs of small ids, so one multiply
// (Fibonacci hashing, top bits) spreads them well enough.
template <class V>
class U64Map {
public:
    U64Map() { rehash(16); }

    V* find(uint64_t key) {
        for (size_t i = home(key);; i = (i + 1) & mask_) {
            if (slots_[i].key == key) return &slots_[i].value;
            if (slots_[i].key == EMPTY) return nullptr;
        }
    }
    const V* find(uint64_t key) const { return const_cast<U64Map*>(this)->find(key); }

    // Returns the value slot for ``key``, inserting ``fresh`` first if absent;
    // ``inserted`` says which happened.
    V& find_or_insert(uint64_t key, const V& fresh, bool& inserted) {
        if ((size_ + 1) * 2 > slots_.size()) rehash(slots_.size() * 2);
        size_t i = home(key);
        while (slots_[i].key != EMPTY && slots_[i].key != key) i = (i + 1) & mask_;
        inserted = slots_[i].key == EMPTY;
        if (inserted) {
            slots_[i] = Slot{key, fresh};
            ++size_;
        }
        return slots_[i].value;
    }

    size_t size() const { return size_; }

private:
    static constexpr uint64_t EMPTY = UINT64_MAX;
    struct Slot {
        uint64_t key;
        V value;
    };

    size_t home(uint64_t key) const { return (key * 0x9e3779b97f4a7c15ULL) >> shift_; }

    void rehash(size_t capacity) {  // capacity: a power of two, at least 2
        std::vector<Slot> old(capacity, Slot{EMPTY, V()});
        old.swap(slots_);
        mask_ = capacity - 1;
        shift_ = 64 - __builtin_ctzll(capacity);
        for (const Slot& slot : old) {
            if (slot.key == EMPTY) continue;
            size_t i = home(slot.key);
            while (slots_[i].key != EMPTY) i = (i + 1) & mask_;
            slots_[i] = slot;
        }
    }

    std::vector<Slot> slots_;
    size_t mask_ = 0;
    int shift_ = 0;
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
    // rescanning all pairs after each merge (n^2): measured on base64 text,
    // the rescan is faster up to about a hundred bytes.
    static constexpr size_t HEAP_THRESHOLD = 96;

    PieceMerger() : unit_entry_(256), unit_rank_(256), byte_merges_(1 << 16, Merge{0, NONE32}) {}

    void add_output(const uint8_t* token, size_t n, uint32_t output) {
        info_for(token, n).output = output;
    }

    void add_rank(const uint8_t* token, size_t n, uint32_t rank) {
        if (n < 2) return;  // single bytes are units already; their rank never matters
        info_for(token, n).unit = uint32_t(unit_entry_.size());
        unit_entry_.push_back(size_t(tokens_.find(token, n)));
        unit_rank_.push_back(rank);
    }

    // Call once, after every add_output and add_rank.
    void finish() {
        for (uint32_t byte = 0; byte < 256; ++byte) {
            uint8_t b = uint8_t(byte);
            info_for(&b, 1).unit = byte;
            unit_entry_[byte] = size_t(tokens_.find(&b, 1));
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
                Merge merge{unit_rank_[unit], uint32_t(unit)};
                if ((left | right) < 256) {
                    byte_merges_[left << 8 | right] = merge;
                } else {
                    merges_.find_or_insert(pair_key(left, right), merge, inserted);
                }
            }
        }
    }

    // The token info of a whole byte string (``hash == hash_bytes(token)``),
    // if the encoder or the ranks know it.
    const TokenInfo* lookup(const uint8_t* token, size_t n, uint64_t hash) const {
        int64_t e = tokens_.find(token, n, hash);
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
    // The merge a pair of units makes, as stored (8 bytes, so a map slot is 16).
    struct Merge {
        uint32_t rank;
        uint32_t unit;
    };
    // The same, widened so that "no merge" (NO_RANK) sorts after every rank.
    struct Candidate {
        uint64_t rank;
        uint32_t unit;
    };
    static constexpr uint64_t NO_RANK = UINT64_MAX;
    static constexpr Candidate NO_MERGE{NO_RANK, NONE32};

    Candidate merge_of(uint32_t left, uint32_t right) const {
        if ((left | right) < 256) {
            const Merge& merge = byte_merges_[left << 8 | right];
            return merge.unit == NONE32 ? NO_MERGE : Candidate{merge.rank, merge.unit};
        }
        const Merge* merge = merges_.find(pair_key(left, right));
        return merge ? Candidate{merge->rank, merge->unit} : NO_MERGE;
    }

    TokenInfo& info_for(const uint8_t* token, size_t n) {
        uint64_t hash = hash_bytes(token, n);
        int64_t e = tokens_.find(token, n, hash);
        if (e < 0) e = int64_t(tokens_.insert(token, n, hash, TokenInfo{NONE32, NONE32}));
        return tokens_.entry(size_t(e)).value;
    }

    uint32_t unit_of(const uint8_t* token, size_t n) const {
        if (n == 1) return token[0];
        const TokenInfo* info = lookup(token, n, hash_bytes(token, n));
        return info ? info->unit : NONE32;
    }

    // Like bpe.merge_piece: after each merge only the two pairs beside it change.
    void merge_short(const uint8_t* piece, size_t n, std::vector<uint32_t>& out) const {
        uint32_t parts[HEAP_THRESHOLD];
        Candidate pair[HEAP_THRESHOLD];  // pair[i]: what parts[i], parts[i + 1] merge into
        for (size_t i = 0; i < n; ++i) parts[i] = piece[i];
        size_t count = n;
        for (size_t i = 0; i + 1 < count; ++i) pair[i] = merge_of(parts[i], parts[i + 1]);
        while (count > 1) {
            size_t best = 0;
            // Strictly lower wins, so ties go to the leftmost pair.
            for (size_t i = 1; i + 1 < count; ++i) {
                if (pair[i].rank < pair[best].rank) best = i;
            }
            if (pair[best].rank == NO_RANK) break;
            parts[best] = pair[best].unit;
            --count;
            std::memmove(parts + best + 1, parts + best + 2, (count - best - 1) * sizeof(uint32_t));
            std::memmove(pair + best, pair + best + 1, (count - best - 1) * sizeof(Candidate));
            if (best > 0) pair[best - 1] = merge_of(parts[best - 1], parts[best]);
            if (best + 1 < count) pair[best] = merge_of(parts[best], parts[best + 1]);
        }
        out.insert(out.end(), parts, parts + count);
    }

    // The same merges in O(n log n): parts form a linked list over their start
    // positions, and a min-heap holds (rank, start) for each pair. An entry is
    // stale once its pair's rank changed; it is then skipped. An entry that
    // still matches the pair's current rank is as good as a fresh one, so
    // popping the least (rank, start) finds the lowest-ranked, leftmost pair.
    void merge_long(const uint8_t* piece, size_t n, std::vector<uint32_t>& out) const {
        const uint32_t end = uint32_t(n);  // the caller keeps n below 2^32
        std::vector<uint32_t> part(n), next(n), prev(n);
        std::vector<Candidate> pair(n, NO_MERGE);  // of the pair starting here
        std::vector<uint64_t> heap;  // rank << 32 | start, smallest on top
        const auto later = std::greater<uint64_t>();
        for (size_t i = 0; i < n; ++i) {
            part[i] = piece[i];
            next[i] = uint32_t(i + 1);
            prev[i] = i == 0 ? end : uint32_t(i - 1);
        }
        for (size_t i = 0; i + 1 < n; ++i) {
            pair[i] = merge_of(part[i], part[i + 1]);
            if (pair[i].rank != NO_RANK) heap.push_back(pair[i].rank << 32 | i);
        }
        std::make_heap(heap.begin(), heap.end(), later);
        // Recomputes the pair starting at ``at`` and queues it if it can merge.
        auto refresh = [&](uint32_t at) {
            pair[at] = next[at] == end ? NO_MERGE : merge_of(part[at], part[next[at]]);
            if (pair[at].rank == NO_RANK) return;
            heap.push_back(pair[at].rank << 32 | at);
            std::push_heap(heap.begin(), heap.end(), later);
        };
        while (!heap.empty()) {
            std::pop_heap(heap.begin(), heap.end(), later);
            const uint64_t top = heap.back();
            heap.pop_back();
            const uint32_t at = uint32_t(top);
            if (pair[at].rank != top >> 32) continue;  // stale (a dead part has NO_RANK)
            const uint32_t gone = next[at];
            part[at] = pair[at].unit;
            pair[gone].rank = NO_RANK;
            next[at] = next[gone];
            if (next[at] != end) prev[next[at]] = at;
            refresh(at);
            if (prev[at] != end) refresh(prev[at]);
        }
        for (uint32_t i = 0; i != end; i = next[i]) out.push_back(part[i]);
    }

    BytesMap<TokenInfo> tokens_;        // every encoder key, ranked token and single byte
    std::vector<size_t> unit_entry_;    // unit -> entry in tokens_
    std::vector<uint32_t> unit_rank_;   // unit -> rank (unused below 256)
    std::vector<uint32_t> unit_output_; // unit -> output index, or NONE32
    // (left unit, right unit) -> the merge they make. Pairs of single bytes,
    // the first lookups of every piece, sit in a dense table that stays in
    // cache; unit NONE32 marks "no merge" there.
    std::vector<Merge> byte_merges_;
    U64Map<Merge> merges_;
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

    // Counts a lookup answered without the cache and without BPE (a piece that
    // is itself a token), so hits still mean "lookups that ran no BPE".
    void count_hit() { ++hits_; }

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
