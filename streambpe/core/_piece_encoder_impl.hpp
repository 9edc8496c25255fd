// Encoding ordinary text to token ids, in plain C++ (no Python API).
//
// The pieces of this file, in the order text flows through them:
//   TokenTable    every byte string the encoder knows -> what it is (a token
//                 id, a BPE unit, or both), one cache line per lookup;
//   PieceMerger   rank-based BPE on one piece (the results of bpe.merge_piece);
//   PieceCache    a bounded, set-associative cache from piece bytes to ids,
//                 behind a ShortPieces table (_short_pieces.hpp) that answers
//                 most short pieces with one read, and with a SegmentStore
//                 (_segment_store.hpp) of whole stretches of text seen twice;
//   TextEncoder   scans a str buffer with the built-in pattern scanner and
//                 sends each piece through the three above, or answers a
//                 stretch from the segment store.
//
// A PieceMerger is immutable once built, so one copy serves every thread.
// A TextEncoder owns its cache and scratch space: one per thread. Nothing
// here touches a Python object, so callers run it without the GIL.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "_char_atoms.hpp"
#include "_hash_table.hpp"
#include "_pretokenize_impl.hpp"
#include "_segment_store.hpp"
#include "_short_pieces.hpp"

namespace streambpe {

// What one byte string is to the encoder; either field may be NONE32.
struct TokenInfo {
    uint32_t unit;    // its BPE unit (a single byte or a ranked token)
    uint32_t output;  // index into the caller's list of token ids
};

// ------------------------------------------------------------ token table

// Byte string -> TokenInfo, built once and then only read. Open addressing
// over 32-byte slots that hold the hash, the first eight key bytes and the
// info, so a lookup of a token of up to eight bytes (most of them) touches
// one cache line, and a miss usually stops at the first empty slot.
class TokenTable {
public:
    // Builds the table from (bytes, info) entries with distinct keys.
    void build(const std::vector<std::pair<std::string, TokenInfo>>& entries) {
        size_t capacity = 16;
        while (capacity < entries.size() * 2) capacity *= 2;
        slots_.assign(capacity, Slot{0, 0, EMPTY, 0, TokenInfo{NONE32, NONE32}});
        mask_ = capacity - 1;
        tails_.clear();
        for (const auto& entry : entries) {
            const std::string& key = entry.first;
            const auto* bytes = reinterpret_cast<const uint8_t*>(key.data());
            const uint64_t hash = hash_bytes(bytes, key.size());
            size_t i = hash & mask_;
            while (slots_[i].length != EMPTY) i = (i + 1) & mask_;
            Slot& slot = slots_[i];
            slot.hash = hash;
            slot.head = head_of(bytes, key.size());
            slot.length = uint32_t(key.size());
            slot.tail = uint32_t(tails_.size());
            slot.info = entry.second;
            if (key.size() > HEAD) tails_.append(key, HEAD, std::string::npos);
        }
    }

    void save(ImageWriter& image) const {
        image.sequence(slots_);
        image.sequence(tails_);
    }
    bool load(ImageReader& image) {
        if (!image.sequence(slots_) || !image.sequence(tails_)) return false;
        const size_t capacity = slots_.size();
        if (!is_table_capacity(capacity, 16)) return image.fail();
        mask_ = capacity - 1;
        return true;
    }

    // Starts loading the slot where a lookup of ``hash`` begins.
    PREFETCHER void prefetch(uint64_t hash) const { __builtin_prefetch(&slots_[hash & mask_]); }

    // The info of ``key`` (``hash == hash_bytes(key, n)``), or nullptr.
    const TokenInfo* find(const uint8_t* key, size_t n, uint64_t hash) const {
        const uint64_t head = head_of(key, n);
        for (size_t i = hash & mask_;; i = (i + 1) & mask_) {
            const Slot& slot = slots_[i];
            if (slot.length == EMPTY) return nullptr;
            if (slot.hash == hash && slot.length == n && slot.head == head &&
                (n <= HEAD || std::memcmp(tails_.data() + slot.tail, key + HEAD, n - HEAD) == 0)) {
                return &slot.info;
            }
        }
    }

private:
    static constexpr size_t HEAD = 8;
    static constexpr uint32_t EMPTY = UINT32_MAX;
    struct Slot {
        uint64_t hash;
        uint64_t head;    // the first HEAD bytes, zero-padded
        uint32_t length;  // EMPTY marks a free slot
        uint32_t tail;    // offset of bytes HEAD.. in tails_
        TokenInfo info;
    };

    static uint64_t head_of(const uint8_t* key, size_t n) {
        return load_le(key, n < HEAD ? n : HEAD);
    }

    TableVector<Slot> slots_;
    std::string tails_;
    size_t mask_ = 0;
};

// ------------------------------------------------------------ bit filter

// A one-hash Bloom filter over 64-bit keys: "certainly not" for most keys
// not added, from a bit array small enough to stay in the core's L2 cache.
// Two uses. Most pair lookups in BPE find nothing (about two in three on
// prose: the pairs left when a piece is done, and most along the way), and
// the pair table is megabytes of random reads. And over half the pieces of
// prose are not tokens, so looking them up in the vocabulary table (also
// megabytes) only to miss is a read the filter saves.
class BitFilter {
public:
    // Sized for ``keys`` keys: about 8 bits each (a tenth are false
    // positives), at most 2 Mi bits (256 KiB).
    void reset(size_t keys) {
        size_t bits = 1 << 12;
        while (bits < keys * 8 && bits < MAX_BITS) bits *= 2;
        shift_ = 64 - __builtin_ctzll(bits);  // position() keeps the top log2(bits) bits
        words_.assign(bits / 64, 0);
    }
    void add(uint64_t key) {
        const uint64_t bit = position(key);
        words_[bit / 64] |= uint64_t(1) << (bit % 64);
    }
    bool may_contain(uint64_t key) const {
        const uint64_t bit = position(key);
        return (words_[bit / 64] >> (bit % 64)) & 1;
    }
    // Starts loading the word that may_contain(key) reads.
    PREFETCHER void prefetch(uint64_t key) const { __builtin_prefetch(&words_[position(key) / 64]); }

    void save(ImageWriter& image) const { image.sequence(words_); }
    bool load(ImageReader& image) {
        if (!image.sequence(words_)) return false;
        const size_t bits = words_.size() * 64;
        if (bits < (1 << 12) || bits > MAX_BITS || (bits & (bits - 1)) != 0) return image.fail();
        shift_ = 64 - __builtin_ctzll(bits);
        return true;
    }

private:
    static constexpr size_t MAX_BITS = size_t(1) << 21;
    // Another multiplier than U64Map's, so the filter's collisions and the
    // tables' are independent.
    uint64_t position(uint64_t key) const { return (key * 0xd1b54a32d192ed03ULL) >> shift_; }

    std::vector<uint64_t> words_;
    unsigned shift_ = 64;
};

// --------------------------------------------------------- piece merging

// Rank-based BPE on one piece, with the results of bpe.merge_piece.
//
// Every part BPE can produce is a single byte or a ranked token, so each is a
// "unit": units 0..255 are the single bytes, units from 256 are the ranked
// tokens of two bytes or more, numbered in rank order. Adjacent parts L, R
// are a candidate merge when L + R is ranked, and merging looks up integer
// pairs (unit L, unit R) instead of hashing bytes; because units follow rank
// order, comparing two merges' units compares their ranks (when two tokens
// share a rank, a per-unit rank order breaks the tie the way the reference
// does: leftmost first).
//
// The pair table holds one pair per token, not every split of it: a token T
// can only ever be made by the last merge of BPE on T's own bytes. Why: when
// T forms over some span of a piece, no merge before it crossed the span's
// edges (a part across an edge would outlast it), so every merge inside the
// span was the least candidate inside the span when it happened, which is
// exactly BPE on the span's bytes alone. Another split of T, adjacent in
// some piece, is therefore never the least candidate, and leaving it out
// changes no result. ``finish`` finds each token's pair by running BPE on
// it, shortest tokens first; a token whose own BPE ends in more than two
// parts can never be formed and gets no pair. For cl100k this keeps 100K
// pairs instead of 230K, and a smaller table and filter are read faster.
class PieceMerger {
public:
    // Pieces longer than this merge with a heap (n log n) instead of
    // rescanning all pairs after each merge (n^2): measured on base64 text,
    // the rescan is faster up to about a hundred bytes.
    static constexpr size_t HEAP_THRESHOLD = 96;
    static_assert(HEAP_THRESHOLD <= 128, "least_packed keeps a pair's index in 7 bits");

    void add_output(const uint8_t* token, size_t n, uint32_t output) {
        building_[key_of(token, n)].output = output;
    }

    void add_rank(const uint8_t* token, size_t n, uint32_t rank) {
        if (n < 2) return;  // single bytes are units already; their rank never matters
        Building& entry = building_[key_of(token, n)];
        entry.rank = rank;
        entry.ranked = true;
    }

    // Call once, after every add_output and add_rank.
    void finish() {
        std::vector<std::pair<uint32_t, const std::string*>> ranked;  // (rank, bytes)
        for (const auto& entry : building_) {
            if (entry.second.ranked) ranked.emplace_back(entry.second.rank, &entry.first);
        }
        std::sort(ranked.begin(), ranked.end(), [](const auto& x, const auto& y) {
            return x.first != y.first ? x.first < y.first : *x.second < *y.second;
        });
        const size_t units = 256 + ranked.size();
        unit_offset_.assign(units + 1, 0);
        unit_bytes_.clear();
        for (uint32_t byte = 0; byte < 256; ++byte) {
            unit_offset_[byte] = uint32_t(unit_bytes_.size());
            unit_bytes_.push_back(char(byte));
        }
        ties_ = false;
        unit_order_.assign(units, 0);
        for (size_t index = 0; index < ranked.size(); ++index) {
            const size_t unit = 256 + index;
            unit_offset_[unit] = uint32_t(unit_bytes_.size());
            unit_bytes_.append(*ranked[index].second);
            const bool same_rank = index > 0 && ranked[index - 1].first == ranked[index].first;
            ties_ = ties_ || same_rank;
            unit_order_[unit] = same_rank ? unit_order_[unit - 1] : uint32_t(unit);
            building_[*ranked[index].second].unit = uint32_t(unit);
        }
        unit_offset_[units] = uint32_t(unit_bytes_.size());
        packed_keys_ = !ties_ && units < (size_t(1) << 24);

        std::vector<std::pair<std::string, TokenInfo>> entries;
        entries.reserve(building_.size() + 256);
        for (uint32_t byte = 0; byte < 256; ++byte) {
            const std::string key(1, char(byte));
            auto found = building_.find(key);
            const uint32_t output = found == building_.end() ? NONE32 : found->second.output;
            entries.emplace_back(key, TokenInfo{byte, output});
        }
        for (const auto& entry : building_) {
            if (entry.first.size() == 1) continue;  // added above
            entries.emplace_back(entry.first, TokenInfo{entry.second.unit, entry.second.output});
        }
        tokens_.build(entries);
        size_t with_output = 0;
        for (const auto& entry : entries) with_output += entry.second.output != NONE32;
        token_filter_.reset(with_output);
        for (const auto& entry : entries) {
            if (entry.second.output == NONE32) continue;
            const auto* bytes = reinterpret_cast<const uint8_t*>(entry.first.data());
            token_filter_.add(hash_bytes(bytes, entry.first.size()));
        }
        unit_output_.resize(units);
        for (size_t unit = 0; unit < units; ++unit) {
            const TokenInfo* info = lookup(unit_bytes(uint32_t(unit)), unit_length(uint32_t(unit)));
            unit_output_[unit] = info->output;
        }
        note_output_order();
        building_.clear();

        add_merges(units);
        build_atoms();
        build_grid();
    }

    // The finished tables as bytes (see ImageWriter); ``load`` restores
    // them in place of add_output, add_rank and finish, and returns false
    // (leaving this merger unusable) if the image is not one ``save`` wrote.
    std::string save() const {
        ImageWriter image;
        image.value(ties_);
        image.value(packed_keys_);
        image.sequence(unit_bytes_);
        image.sequence(unit_offset_);
        image.sequence(unit_output_);
        image.sequence(unit_order_);
        image.sequence(byte_merges_);
        tokens_.save(image);
        merges_.save(image);
        merge_filter_.save(image);
        token_filter_.save(image);
        atoms_.save(image);
        return std::move(image.bytes());
    }
    bool load(const uint8_t* data, size_t size) {
        ImageReader image(data, size);
        const bool read = image.value(ties_) && image.value(packed_keys_) &&
                          image.sequence(unit_bytes_) && image.sequence(unit_offset_) &&
                          image.sequence(unit_output_) && image.sequence(unit_order_) &&
                          image.sequence(byte_merges_) && tokens_.load(image) &&
                          merges_.load(image) && merge_filter_.load(image) &&
                          token_filter_.load(image) && atoms_.load(image) && image.done();
        const size_t units = unit_output_.size();
        const bool whole = read && units >= 256 && unit_offset_.size() == units + 1 &&
                           unit_order_.size() == units && byte_merges_.size() == (size_t(1) << 16) &&
                           unit_offset_[units] == unit_bytes_.size();
        if (whole) {
            note_output_order();
            build_grid();
        }
        return whole;
    }

    const TokenInfo* lookup(const uint8_t* token, size_t n, uint64_t hash) const {
        return tokens_.find(token, n, hash);
    }
    PREFETCHER void prefetch(uint64_t hash) const { tokens_.prefetch(hash); }
    // False for most pieces (``hash`` their hash_bytes) that have no output
    // of their own; never for one that has.
    bool may_be_token(uint64_t hash) const { return token_filter_.may_contain(hash); }
    PREFETCHER void prefetch_may_be_token(uint64_t hash) const { token_filter_.prefetch(hash); }
    const TokenInfo* lookup(const uint8_t* token, size_t n) const {
        return tokens_.find(token, n, hash_bytes(token, n));
    }

    // Appends the units ``piece`` splits into.
    void merge(const uint8_t* piece, size_t n, std::vector<uint32_t>& units) const {
        if (n > HEAP_THRESHOLD) {
            merge_long(piece, n, units);
        } else {
            merge_short(piece, n, units);
        }
    }

    // How many characters a piece may start from as their tokens (see
    // _char_atoms.hpp); 0 where this vocabulary does not allow it.
    size_t atom_characters() const { return atoms_.size(); }

    uint32_t unit_output(uint32_t unit) const {
        return unit >= 256 && outputs_are_units_ ? unit : unit_output_[unit];
    }
    const uint8_t* unit_bytes(uint32_t unit) const {
        return reinterpret_cast<const uint8_t*>(unit_bytes_.data()) + unit_offset_[unit];
    }
    size_t unit_length(uint32_t unit) const { return unit_offset_[unit + 1] - unit_offset_[unit]; }

private:
    struct Building {
        uint32_t output = NONE32;
        uint32_t rank = 0;
        bool ranked = false;
        uint32_t unit = NONE32;
    };

    // Whether every ranked token's output number is its unit, as when the
    // encoder lists the tokens in rank order (tiktoken's files, and most
    // tokenizer.json vocabularies, number merged tokens by rank). Then
    // unit_output reads no table for them: the table is a random read per
    // part of every piece BPE runs on, 800 KiB for o200k (a third of
    // encode_hashed's time on a cold encode of prose, perf annotate).
    void note_output_order() {
        outputs_are_units_ = true;
        for (size_t unit = 256; unit < unit_output_.size(); ++unit) {
            outputs_are_units_ = outputs_are_units_ && unit_output_[unit] == unit;
        }
    }

    static std::string key_of(const uint8_t* token, size_t n) {
        return std::string(reinterpret_cast<const char*>(token), n);
    }

    // The unit (L + R) that adjacent units L, R merge into, or NONE32.
    uint32_t merged(uint32_t left, uint32_t right) const {
        if ((left | right) < 256) return byte_merges_[left << 8 | right];
        return merged_units(left, right);
    }

    // The same for a pair with at least one ranked token: from the grid if
    // both are among the first units, else through the filter and merges_.
    uint32_t merged_units(uint32_t left, uint32_t right) const {
        if ((left | right) < grid_side_) return grid_[left * grid_side_ + right];
        const uint64_t key = pair_key(left, right);
        if (!merge_filter_.may_contain(key)) return NONE32;
        const uint32_t* unit = merges_.find(key);
        return unit ? *unit : NONE32;
    }

    // What merges first among candidate merges: the lower key. NONE32 (no
    // merge) sorts after every unit.
    uint32_t order(uint32_t unit) const {
        return ties_ && unit != NONE32 ? unit_order_[unit] : unit;
    }

    // Fills the pair tables with the one pair that makes each ranked token
    // (see the class comment). A token of two bytes is made of them; a longer
    // one of the two parts BPE leaves of its bytes before its own pair is
    // known. Shorter tokens go first, so every merge inside a token is known
    // by then; a token of the same length can only be the token itself.
    void add_merges(size_t units) {
        byte_merges_.assign(1 << 16, NONE32);
        std::vector<uint32_t> longer;  // ranked units of three bytes or more
        for (size_t unit = 256; unit < units; ++unit) {
            const uint8_t* token = unit_bytes(uint32_t(unit));
            if (unit_length(uint32_t(unit)) == 2) {
                byte_merges_[token[0] << 8 | token[1]] = uint32_t(unit);
            } else {
                longer.push_back(uint32_t(unit));
            }
        }
        std::stable_sort(longer.begin(), longer.end(), [this](uint32_t x, uint32_t y) {
            return unit_length(x) < unit_length(y);
        });
        // Sized for every token to have a pair; the ones that cannot be
        // formed only leave the filter a little emptier.
        merge_filter_.reset(longer.size());
        std::vector<uint32_t> parts;
        bool inserted;
        for (uint32_t unit : longer) {
            parts.clear();
            merge(unit_bytes(unit), unit_length(unit), parts);
            if (parts.size() != 2) continue;
            const uint64_t key = pair_key(parts[0], parts[1]);
            merges_.find_or_insert(key, unit, inserted);
            merge_filter_.add(key);
        }
    }

    // Fills grid_ with every pair of units below GRID_SIDE (or below the
    // vocabulary's size, rounded up to a power of two): what they merge
    // into, as merges_ says, or NONE32. (merged_units is never asked about
    // two single bytes: those are byte_merges_'s.) Units follow rank
    // order, so these are the vocabulary's most frequent tokens, and a
    // lookup among them is one read of a table that stays in L2 or L3
    // instead of the filter and a probe of the multi-megabyte merges_.
    void build_grid() {
        uint32_t side = 256;
        while (side < GRID_SIDE && side < unit_output_.size()) side *= 2;
        grid_side_ = 0;  // merged_units reads merges_ until the grid is whole
        grid_.assign(size_t(side) * side, NONE32);
        merges_.for_each([&](uint64_t key, uint32_t unit) {
            const uint32_t left = uint32_t(key >> 32), right = uint32_t(key);
            if ((left | right) < side) grid_[size_t(left) * side + right] = unit;
        });
        grid_side_ = side;
    }

    // Fills atoms_, if this vocabulary allows them (see _char_atoms.hpp):
    // no two tokens share a rank (packed_keys_ says so, for any vocabulary
    // below 2^24 units), and every merge's result ranks after both of its
    // operands, which with units in rank order means a higher unit.
    void build_atoms() {
        atoms_.clear();
        bool proper = packed_keys_;
        merges_.for_each([&](uint64_t key, uint32_t unit) {
            proper = proper && uint32_t(key >> 32) < unit && uint32_t(key) < unit;
        });
        if (!proper) return;
        std::vector<uint32_t> parts;
        atoms_.build(
            unit_output_.size(),
            [this](uint32_t unit, size_t& length) {
                length = unit_length(unit);
                return unit_bytes(unit);
            },
            // Called while atoms_ is still empty, so this is BPE from bytes.
            [this, &parts](uint32_t unit) {
                parts.clear();
                merge(unit_bytes(unit), unit_length(unit), parts);
                return parts.size() == 1 && parts[0] == unit;
            });
    }

    // Like bpe.merge_piece: after each merge only the two pairs beside it
    // change. The first pairs are all single bytes (one read of the dense
    // table each); then one of two loops merges, by the number of parts.
    //
    // A piece with characters beyond ASCII starts from their tokens where
    // atoms_ allows it, instead of from their bytes.
    void merge_short(const uint8_t* piece, size_t n, std::vector<uint32_t>& out) const {
        if (n < 2) {  // nothing to merge (and no pair to pad)
            out.insert(out.end(), piece, piece + n);
            return;
        }
        uint32_t parts[HEAP_THRESHOLD + SLACK];
        uint32_t pair[HEAP_THRESHOLD + SLACK];  // pair[i]: what parts[i], parts[i + 1] merge into
        size_t count = atoms_.empty() ? 0 : start_from_atoms(piece, n, parts);
        if (count == 0) {
            for (size_t i = 0; i < n; ++i) parts[i] = piece[i];
            for (size_t i = 0; i + 1 < n; ++i) pair[i] = byte_merges_[piece[i] << 8 | piece[i + 1]];
            count = n;
        } else {
            for (size_t i = 0; i + 1 < count; ++i) pair[i] = merged(parts[i], parts[i + 1]);
        }
        std::fill(pair + count - 1, pair + count - 1 + 2 * CHUNK, NONE32);
        if (count <= LINKED_PARTS) {
            merge_linked(parts, pair, count, out);
        } else {
            merge_closing(parts, pair, count, out);
        }
    }

    static constexpr size_t CHUNK = 8;
    static constexpr size_t SLACK = 3 * CHUNK;
    // The most parts merge_linked takes. Measured on words of random
    // letters (r50k, cold, in turns with the closing loop alone): words of
    // 4-12 letters 12.2 against 13.4 ms, 12-20 letters 19.9 against 20.8,
    // 20-28 letters the same, 26-34 letters 31.4 against 27.0: each merge
    // scans every position, dead ones too, where the closing loop's arrays
    // shrink.
    static constexpr size_t LINKED_PARTS = 24;
    static_assert(LINKED_PARTS < 0xFF, "merge_linked links its parts with one-byte indices");

    // The merges of a short piece, its parts in a linked list over their
    // first positions (one-byte links): a merge unlinks one part and
    // rewrites the two pairs beside it; a dead position keeps NONE32 ("no
    // merge") as its pair, and the first-merging pair is the leftmost least
    // of a plain scan of the array. The reads of the two new pairs start
    // before the list changes. Measured against merge_closing alone, in one
    // build with a switch, seven fresh tokenizers a process, o200k, cold:
    // 8 MiB of prose 229 -> 201 and 229 -> 205 ms (medians of two processes
    // each), 8 MiB of source code 52 -> 50 and 55 -> 52 ms, and the 242,490
    // distinct pieces of that prose that are not tokens, one a line, 168 ->
    // 141 and 155 -> 151 ms.
    void merge_linked(uint32_t* parts, uint32_t* pair, size_t count,
                      std::vector<uint32_t>& out) const {
        uint8_t next[LINKED_PARTS];  // the live part after part i (count: none)
        uint8_t prev[LINKED_PARTS];  // the live part before it (0xFF: none)
        for (size_t i = 0; i < count; ++i) {
            next[i] = uint8_t(i + 1);
            prev[i] = uint8_t(i - 1);
        }
        for (;;) {
            // Without ties a unit is its own order, so the scan needs no lookup.
            const size_t at =
                ties_ ? leftmost_least(pair, count - 1, [this](uint32_t unit) { return order(unit); })
                      : leftmost_least(pair, count - 1, [](uint32_t unit) { return unit; });
            if (at == NO_PAIR) break;
            const uint32_t unit = pair[at];
            const size_t gone = next[at], right = next[gone], left = prev[at];
            if (right < count) prefetch_merged(unit, parts[right]);
            if (left < count) prefetch_merged(parts[left], unit);
            parts[at] = unit;
            next[at] = uint8_t(right);
            pair[gone] = NONE32;
            // The merged part is a ranked token, never a single byte, so
            // both new pairs skip the byte table.
            pair[at] = NONE32;
            if (right < count) {
                prev[right] = uint8_t(at);
                pair[at] = merged_units(unit, parts[right]);
            }
            if (left < count) pair[left] = merged_units(parts[left], unit);
        }
        for (size_t i = 0; i < count; i = next[i]) out.push_back(parts[i]);
    }

    // The merges of a longer piece, written for few branches: the
    // first-merging pair is a branch-free minimum over whole chunks, and the
    // arrays close up with fixed-width copies instead of memmove calls.
    // After its live entries pair[] holds two chunks of NONE32, so the
    // minimum may read whole chunks; close_up keeps this, shifting the
    // padding down with the entries.
    void merge_closing(uint32_t* parts, uint32_t* pair, size_t count,
                       std::vector<uint32_t>& out) const {
        while (count > 1) {
            const uint64_t least =
                packed_keys_ ? least_packed(pair, count - 1) : least_pair(pair, count - 1);
            if (least >> 32 == NONE32) break;
            const size_t best = uint32_t(least);
            parts[best] = pair[best];
            --count;
            close_up(parts + best + 1, count - best - 1);
            close_up(pair + best, count - best - 1);
            if (best > 0) pair[best - 1] = merged_units(parts[best - 1], parts[best]);
            if (best + 1 < count) pair[best] = merged_units(parts[best], parts[best + 1]);
        }
        out.insert(out.end(), parts, parts + count);
    }

    static constexpr size_t NO_PAIR = ~size_t(0);

    // Where the leftmost of the least of the first ``pairs`` pairs is, by
    // ``key(unit)``, or NO_PAIR if none merges (NONE32 is every key's most).
    template <class Key>
    static size_t leftmost_least(const uint32_t* pair, size_t pairs, Key key) {
        uint32_t least = NONE32;
        size_t at = NO_PAIR;
        for (size_t i = 0; i < pairs; ++i) {
            const uint32_t rank = key(pair[i]);
            if (rank < least) {
                least = rank;
                at = i;
            }
        }
        return at;
    }

    // Starts loading what merged_units(left, right) reads first.
    PREFETCHER void prefetch_merged(uint32_t left, uint32_t right) const {
        if ((left | right) < grid_side_) {
            __builtin_prefetch(&grid_[left * grid_side_ + right]);
        } else {
            merge_filter_.prefetch(pair_key(left, right));
        }
    }

    // Writes the units ``piece`` starts from to ``parts``, each character
    // that atoms_ allows as its token, and returns how many there are; or
    // returns 0 if no character became one unit (the piece then starts from
    // its bytes, with the cheaper table of byte pairs).
    size_t start_from_atoms(const uint8_t* piece, size_t n, uint32_t* parts) const {
        uint8_t all_bits = 0;  // a loop the compiler vectorizes: most pieces are ASCII
        for (size_t i = 0; i < n; ++i) all_bits |= piece[i];
        if (all_bits < 0xC0) return 0;
        size_t count = 0;
        bool formed = false;
        for (size_t i = 0; i < n;) {
            uint32_t code_point;
            const size_t k = piece[i] < 0xC2 ? 0 : CharAtoms::decode(piece, n, i, code_point);
            const uint32_t unit = k == 0 ? NONE32 : atoms_.unit_at(piece, n, i, k, code_point);
            if (unit == NONE32) {
                parts[count++] = piece[i++];
            } else {
                parts[count++] = unit;
                i += k;
                formed = true;
            }
        }
        return formed ? count : 0;
    }

    // (order << 32 | index) of the first-merging pair among the first
    // ``pairs`` entries; its order is NONE32 if none merges. The index in
    // the low bits makes the minimum the leftmost of equal orders. Reads
    // whole chunks: the padding after the live entries never merges.
    uint64_t least_pair(const uint32_t* pair, size_t pairs) const {
        uint64_t least = UINT64_MAX;
        size_t base = 0;
        do {
            for (size_t i = base; i < base + CHUNK; ++i) {
                const uint64_t candidate = uint64_t(order(pair[i])) << 32 | i;
                least = candidate < least ? candidate : least;
            }
            base += CHUNK;
        } while (base < pairs);
        return least;
    }

    // least_pair for the common case, no ties (a unit is then its own
    // order), four lanes at a time. A unit below 2^24 shifted left by 7
    // leaves room for an index below 128 (HEAP_THRESHOLD keeps it so) and
    // stays below 2^31, while NONE32 shifted the same way lands above every
    // such key; so one 32-bit minimum finds the least unit and, among equal
    // ones, the leftmost.
    typedef uint32_t Lanes __attribute__((vector_size(16)));
    static Lanes lane_min(Lanes x, Lanes y) {
        const Lanes lower = x < y;  // all ones where x is lower
        return (x & lower) | (y & ~lower);
    }
    uint64_t least_packed(const uint32_t* pair, size_t pairs) const {
        const Lanes step = {4, 4, 4, 4};
        Lanes index = {0, 1, 2, 3};
        Lanes least = {NONE32, NONE32, NONE32, NONE32};
        size_t base = 0;
        do {
            for (size_t half = 0; half < CHUNK; half += 4) {
                Lanes units;
                std::memcpy(&units, pair + base + half, sizeof units);
                least = lane_min(units << 7 | index, least);
                index += step;
            }
            base += CHUNK;
        } while (base < pairs);
        uint32_t key = least[0];
        for (int lane = 1; lane < 4; ++lane) key = least[lane] < key ? least[lane] : key;
        if (key >= NONE32 << 7) return uint64_t(NONE32) << 32;
        return uint64_t(key >> 7) << 32 | (key & 127);
    }

    // Moves ``length`` entries from at + 1 down to at, a chunk at a time;
    // each chunk is read whole before it is written, which is safe for a
    // move one entry down. The chunks always reach at[length], so the first
    // padding entry moves down too and the vacated last entry reads NONE32.
    static void close_up(uint32_t* at, size_t length) {
        for (size_t i = 0; i <= length; i += CHUNK) {
            uint32_t chunk[CHUNK];
            std::memcpy(chunk, at + i + 1, sizeof chunk);
            std::memcpy(at + i, chunk, sizeof chunk);
        }
    }

    // The same merges in O(n log n): parts form a linked list over their start
    // positions, and a min-heap holds (order, start) for each pair. An entry
    // is stale once its pair changed; it is then skipped. An entry that still
    // matches its pair is as good as a fresh one, so popping the least
    // (order, start) finds the first-merging, leftmost pair.
    void merge_long(const uint8_t* piece, size_t n, std::vector<uint32_t>& out) const {
        const uint32_t end = uint32_t(n);  // the caller keeps n below 2^32
        std::vector<uint32_t> part(n), next(n), prev(n);
        std::vector<uint32_t> pair(n, NONE32);  // the merge of the pair starting here
        std::vector<uint64_t> heap;             // order << 32 | start, smallest on top
        const auto later = std::greater<uint64_t>();
        for (size_t i = 0; i < n; ++i) {
            part[i] = piece[i];
            next[i] = uint32_t(i + 1);
            prev[i] = i == 0 ? end : uint32_t(i - 1);
        }
        for (size_t i = 0; i + 1 < n; ++i) {
            pair[i] = merged(part[i], part[i + 1]);
            if (pair[i] != NONE32) heap.push_back(uint64_t(order(pair[i])) << 32 | i);
        }
        std::make_heap(heap.begin(), heap.end(), later);
        // Recomputes the pair starting at ``at`` and queues it if it can merge.
        auto refresh = [&](uint32_t at) {
            pair[at] = next[at] == end ? NONE32 : merged(part[at], part[next[at]]);
            if (pair[at] == NONE32) return;
            heap.push_back(uint64_t(order(pair[at])) << 32 | at);
            std::push_heap(heap.begin(), heap.end(), later);
        };
        while (!heap.empty()) {
            std::pop_heap(heap.begin(), heap.end(), later);
            const uint64_t top = heap.back();
            heap.pop_back();
            const uint32_t at = uint32_t(top);
            // Stale: the pair changed since (a dead part's pair is NONE32).
            if (pair[at] == NONE32 || order(pair[at]) != top >> 32) continue;
            const uint32_t gone = next[at];
            part[at] = pair[at];
            pair[gone] = NONE32;
            next[at] = next[gone];
            if (next[at] != end) prev[next[at]] = at;
            refresh(at);
            if (prev[at] != end) refresh(prev[at]);
        }
        for (uint32_t i = 0; i != end; i = next[i]) out.push_back(part[i]);
    }

    std::unordered_map<std::string, Building> building_;  // emptied by finish()
    TokenTable tokens_;                // every encoder key, ranked token and single byte
    std::string unit_bytes_;           // the bytes of every unit, back to back
    std::vector<uint32_t> unit_offset_;  // unit -> its offset in unit_bytes_ (one past the end too)
    std::vector<uint32_t> unit_output_;  // unit -> output index, or NONE32
    bool outputs_are_units_ = false;     // unit_output_[unit] == unit from unit 256 on
    std::vector<uint32_t> unit_order_;   // unit -> rank order (consulted only when ties_)
    bool ties_ = false;                // whether two ranked tokens share a rank
    bool packed_keys_ = false;         // whether merge_closing may use least_packed
    // (left unit, right unit) -> the unit they merge into. Pairs of single
    // bytes, the first lookups of every piece, sit in a dense 256 KiB table
    // that stays in cache; NONE32 marks "no merge" there.
    std::vector<uint32_t> byte_merges_;
    U64Map<uint32_t> merges_;
    BitFilter merge_filter_;   // the keys of merges_, to skip most lookups that would fail
    BitFilter token_filter_;   // the hashes of the keys with an output: most other pieces skip tokens_
    CharAtoms atoms_;          // characters a piece may start from as tokens (empty: none)
    // (left, right) -> the unit they merge into, or NONE32, for both units
    // below grid_side_ (a power of two; 0 while building): 4 MiB at most.
    // Measured on the 242,609 distinct pieces of 8 MiB of prose that are
    // not tokens, merged with no cache, in turns with a build without it:
    // o200k 1.06x, cl100k 1.11x (a 512-wide grid gave 1.05x and 1.06x).
    static constexpr uint32_t GRID_SIDE = 1024;
    TableVector<uint32_t> grid_;
    uint32_t grid_side_ = 0;
};

// ------------------------------------------------------------ piece cache

// One set-associative store of pieces and their outputs, in lines of
// ``LINE`` bytes. A piece's hash picks a set of up to four lines; each line
// holds one piece and its outputs inline (the outputs first, then the
// piece's bytes), so a hit reads one small, contiguous block of memory.
// Within a set the lines are kept most recently used first: a hit moves its
// line to the front and a new piece evicts the last one, an LRU per set.
// A line names its piece by the low half of the hash (the high half picks
// the set), then its length and bytes: an 8-byte header, so a 32-byte line
// still holds a 12-byte piece with three ids.
template <size_t LINE>
class LineStore {
public:
    // Bytes a line has for outputs (4 each) and piece bytes together.
    static constexpr size_t AREA = LINE - 8;

    static bool fits(size_t n, size_t count) { return n + 4 * count <= AREA; }

    explicit LineStore(size_t entries) {
        ways_ = entries < WAYS ? entries : WAYS;
        sets_ = ways_ > 0 ? entries / ways_ : 0;
        // Zeroed memory, aligned to a cache line, is an empty store,
        // touched only as it is used.
        static_assert(alignof(Line) <= CACHE_LINE, "allocate_table aligns to a cache line");
        bytes_ = sets_ * ways_ * sizeof(Line);
        lines_ = static_cast<Line*>(allocate_table(bytes_));
    }
    ~LineStore() { free_table(lines_, bytes_); }
    LineStore(const LineStore&) = delete;
    LineStore& operator=(const LineStore&) = delete;

    // Appends the stored outputs of ``piece`` to ``out``; false if absent.
    bool get(const uint8_t* piece, size_t n, uint64_t hash, std::vector<uint32_t>& out) {
        if (sets_ == 0) return false;
        Line* set = set_of(hash);
        // The lines whose hash matches, as bits, found with no branch per
        // line: a loop that left at the first match mispredicted its exit on
        // most hits, since which line holds a piece is random.
        const uint32_t tag = uint32_t(hash);
        unsigned candidates = 0;
        for (size_t way = 0; way < ways_; ++way) {
            candidates |= unsigned(set[way].tag == tag) << way;
        }
        while (candidates != 0) {
            const size_t way = size_t(__builtin_ctz(candidates));
            candidates &= candidates - 1;
            Line& line = set[way];
            const size_t count = line.count;
            if (line.length == n && count > 0 && std::memcmp(line.area + 4 * count, piece, n) == 0) {
                const size_t at = out.size();
                out.resize(at + count);
                std::memcpy(out.data() + at, line.area, 4 * count);
                if (way > 0) {
                    const Line found = line;
                    std::memmove(set + 1, set, way * sizeof(Line));
                    set[0] = found;
                }
                return true;
            }
        }
        return false;
    }

    // Starts loading the first cache line of every line in the set that a
    // lookup of ``hash`` reads. A miss, the lookup that is followed by BPE,
    // compares the head of each line; loading only the front two lines had
    // it wait for the others (measured: 7 % of a prose encode).
    PREFETCHER void prefetch(uint64_t hash) const {
        if (sets_ == 0) return;
        const char* front = reinterpret_cast<const char*>(set_of(hash));
        for (size_t way = 0; way < ways_; ++way) __builtin_prefetch(front + way * LINE);
    }

    // Stores a piece that ``get`` just missed (``fits(n, count)`` holds).
    void put(const uint8_t* piece, size_t n, uint64_t hash, const uint32_t* outputs, size_t count) {
        if (sets_ == 0) return;
        Line* set = set_of(hash);
        Line* slot = set + (ways_ - 1);
        if (slot->count == 0) {
            ++size_;  // the set has a free line: the new piece goes first
            std::memmove(set + 1, set, (ways_ - 1) * sizeof(Line));
            slot = set;
        } else if ((++full_puts_ & (FRONT_EVERY - 1)) == 0) {
            std::memmove(set + 1, set, (ways_ - 1) * sizeof(Line));
            slot = set;
        }
        Line& line = *slot;
        line.tag = uint32_t(hash);
        line.length = uint8_t(n);
        line.count = uint8_t(count);
        std::memcpy(line.area, outputs, 4 * count);
        std::memcpy(line.area + 4 * count, piece, n);
    }

    void clear() {
        if (sets_ > 0) std::memset(lines_, 0, sets_ * ways_ * sizeof(Line));
        size_ = 0;
        full_puts_ = 0;
    }

    size_t size() const { return size_; }

private:
    static constexpr size_t WAYS = 4;
    // A piece stored into a full set replaces the least recently used line
    // and stays last, except one in FRONT_EVERY, which goes first.
    static constexpr size_t FRONT_EVERY = 32;
    static_assert((LINE == 32 || LINE % 64 == 0) && AREA <= 255,
                  "a line is half a cache line or whole ones; lengths fit a byte");
    struct alignas(LINE < 64 ? LINE : 64) Line {
        uint32_t tag;  // the low half of the piece's hash
        uint8_t length;
        uint8_t count;  // 0 marks a free line
        uint8_t unused[2];
        uint8_t area[AREA];  // 4-byte aligned: the outputs, then the piece
    };
    static_assert(sizeof(Line) == LINE, "no padding");

    // Sets need not be a power of two: the hash's high half scales to them.
    Line* set_of(uint64_t hash) const { return lines_ + ((hash >> 32) * sets_ >> 32) * ways_; }

    size_t ways_;
    size_t sets_;
    size_t bytes_;
    Line* lines_;
    size_t size_ = 0;
    size_t full_puts_ = 0;  // pieces stored into a full set
};

// Piece bytes -> output indexes, bounded by ``maxsize`` entries in all.
//
// Three LineStores, by the room a piece and its outputs take. Alone (in a
// cache of fewer than 4,096 entries) they have 32-byte lines (24 bytes: a
// 12-byte piece with three ids) for half the entries, 64-byte lines (56
// bytes) for seven sixteenths, and 128-byte lines (120 bytes) for the last
// sixteenth, the long pieces with many ids that are the costliest
// to merge again (CJK text, runs of symbols). Of the 242,650 distinct
// pieces that are not tokens in 8 MiB of the generated multilingual prose
// (o200k), 60 % fit the small lines and 3 % need the large ones, so the
// same memory holds half as many pieces again as 64-byte lines alone did.
// Which store holds a piece depends on its length and id count; a piece
// has at least one byte per id, so one of up to four bytes always fits the
// 32-byte lines and one of up to eleven the 64-byte lines: only longer
// pieces look in more than one store. Pieces that fit none are not cached
// (they are rare, and long enough that BPE dwarfs a lookup). maxsize == 0
// stores nothing.
//
// In front of them, from 4,096 entries up, a ShortPieces table takes three
// quarters of maxsize (32-byte slots, at most half full: 32 MiB at the
// default size) and answers pieces of up to 15 bytes, tokens and merged
// pieces alike. It is their only store unless a piece has more outputs than
// its entries hold: it then keeps a mark, and the LineStores, which share
// the last quarter, the outputs. So a short piece seen for the first time
// costs one lookup, not one more in each LineStore it might be in, and a
// store of lines after it (two to six cache misses: on 1.5 MB of the ASCII
// lines of the generated prose, o200k, callgrind with a 2 MiB last level
// counted 757 K misses of it, 368 K after). The LineStores get long pieces
// and marked ones only, so a quarter of maxsize is room enough for them.
//
// Beside them, from 4,096 entries up, a SegmentStore keeps the outputs of
// whole stretches of text, 32 bytes of it per entry of maxsize in each of its
// two generations (16 MiB each by default). It too holds copies and is not
// counted in size(); a segment found there counts a hit for each of its
// pieces, so hits + misses is still the number of pieces encoded.
class PieceCache {
public:
    explicit PieceCache(size_t maxsize)
        : maxsize_(maxsize),
          segments_(maxsize < SHORT_MIN_ENTRIES ? 0 : SEGMENT_BYTES_PER_ENTRY * maxsize),
          short_(short_entries(maxsize)),
          narrow_(narrow_entries(maxsize)),
          middle_(line_entries(maxsize) - narrow_entries(maxsize) - wide_entries(maxsize)),
          wide_(wide_entries(maxsize)) {}

    // Whether pieces of up to ShortPieces::MAX_BYTES bytes go to find_short.
    bool short_pieces() const { return short_.enabled(); }

    // The entry of a short piece (``hash == ShortPieces::hash_of(key)``),
    // counting a hit if it has the outputs; a mark (ShortPieces::spilled: ask
    // ``get``) or nullptr (never seen, or dropped) count nothing.
    const ShortPieces::Entry* find_short(ShortPieces::Key key, uint64_t hash) {
        const ShortPieces::Entry* entry = short_.find(key, hash);
        hits_ += entry != nullptr && !ShortPieces::spilled(*entry);
        return entry;
    }

    PREFETCHER void prefetch_short(uint64_t hash) const { short_.prefetch(hash); }
    // The short-piece table as it is now, for a loop that reads the first
    // entry of many lookups (until the next put_short).
    ShortPieces::Slots short_slots() const { return short_.slots(); }

    // Keeps the outputs of a short piece find_short missed, encoded otherwise,
    // or a mark if there are more than ShortPieces::MAX_OUTPUTS (the caller
    // gives those outputs to ``put``).
    void put_short(ShortPieces::Key key, uint64_t hash, const uint32_t* outputs, size_t count) {
        short_.put(key, hash, outputs, count);
    }

    // Counts a lookup that ran BPE without asking ``get`` (a short piece
    // find_short did not find: no other store has it).
    void count_miss() { ++misses_; }

    // Appends the cached outputs of ``piece`` to ``out`` and returns true on
    // a hit; counts the lookup either way.
    bool get(const uint8_t* piece, size_t n, uint64_t hash, std::vector<uint32_t>& out) {
        if ((may_be_narrow(n) && narrow_.get(piece, n, hash, out)) ||
            (may_be_middle(n) && middle_.get(piece, n, hash, out)) ||
            (may_be_wide(n) && wide_.get(piece, n, hash, out))) {
            ++hits_;
            return true;
        }
        ++misses_;
        return false;
    }

    // Starts loading the sets a lookup of a piece of ``n`` bytes reads.
    PREFETCHER void prefetch(size_t n, uint64_t hash) const {
        if (may_be_narrow(n)) narrow_.prefetch(hash);
        if (may_be_middle(n)) middle_.prefetch(hash);
        if (may_be_wide(n)) wide_.prefetch(hash);
    }

    // Stores the outputs of a piece that ``get`` just missed.
    void put(const uint8_t* piece, size_t n, uint64_t hash, const uint32_t* outputs, size_t count) {
        if (count == 0) return;
        if (Narrow::fits(n, count)) {
            narrow_.put(piece, n, hash, outputs, count);
        } else if (Middle::fits(n, count)) {
            middle_.put(piece, n, hash, outputs, count);
        } else if (Wide::fits(n, count)) {
            wide_.put(piece, n, hash, outputs, count);
        }
    }

    void clear() {
        segments_.clear();
        short_.clear();
        narrow_.clear();
        middle_.clear();
        wide_.clear();
        hits_ = misses_ = 0;
    }

    // Counts a lookup answered without the cache and without BPE (a piece that
    // is itself a token), so hits still mean "lookups that ran no BPE".
    void count_hit() { ++hits_; }
    // Counts the pieces of a segment the segment store answered.
    void count_hits(size_t pieces) { hits_ += pieces; }

    SegmentStore& segments() { return segments_; }

    size_t hits() const { return hits_; }
    size_t misses() const { return misses_; }
    size_t maxsize() const { return maxsize_; }
    size_t size() const { return short_.size() + narrow_.size() + middle_.size() + wide_.size(); }
    // Entries the short-piece table has room for now (see ShortPieces::slots_in_use).
    size_t short_slots_in_use() const { return short_.slots_in_use(); }

private:
    using Narrow = LineStore<32>;
    using Middle = LineStore<64>;
    using Wide = LineStore<128>;
    // A piece of n bytes has from one to n ids.
    static bool may_be_narrow(size_t n) { return Narrow::fits(n, 1); }
    static bool may_be_middle(size_t n) { return n > 4 && Middle::fits(n, 1); }
    static bool may_be_wide(size_t n) { return n > 11 && Wide::fits(n, 1); }
    static_assert(Narrow::AREA >= 4 * 5, "a piece of four bytes and four ids fits a narrow line");
    static_assert(Middle::AREA >= 11 * 5, "a piece of eleven bytes and eleven ids fits a middle line");

    static constexpr size_t SHORT_MIN_ENTRIES = 4096;
    static constexpr size_t SEGMENT_BYTES_PER_ENTRY = 32;
    static size_t short_entries(size_t maxsize) {
        return maxsize < SHORT_MIN_ENTRIES ? 0 : maxsize - maxsize / 4;
    }
    // What the ShortPieces table leaves to the LineStores.
    static size_t line_entries(size_t maxsize) { return maxsize - short_entries(maxsize); }
    // Without the ShortPieces table, half of the entries, rounded up so that
    // a cache of one entry still keeps a short piece; with it, the narrow
    // lines get only the few pieces of 16 bytes with two ids, or of up to
    // 8 bytes with four.
    static size_t narrow_entries(size_t maxsize) {
        return short_entries(maxsize) == 0 ? (maxsize + 1) / 2 : line_entries(maxsize) / 8;
    }
    static size_t wide_entries(size_t maxsize) {
        return short_entries(maxsize) == 0 ? maxsize / 16 : line_entries(maxsize) / 8;
    }

    size_t maxsize_;
    SegmentStore segments_;
    ShortPieces short_;
    Narrow narrow_;
    Middle middle_;
    Wide wide_;
    size_t hits_ = 0, misses_ = 0;
};

// ------------------------------------------------------------ text encoder

// How a call to TextEncoder::encode_text ended. ``outcome`` says why it
// stopped early, if it did: ``position`` locates the problem in the text (a
// code-unit offset), ``unit`` names the missing part for MISSING_PART.
// ``stopped`` is where the scan stopped (the text's length once done);
// ``counted`` is the number of ids a count-only call found.
enum class EncodeOutcome : int { OK = 0, LONE_SURROGATE = 1, MISSING_PART = 2, PIECE_TOO_LONG = 3 };

struct EncodeProblem {
    EncodeOutcome outcome = EncodeOutcome::OK;
    size_t position = 0;
    uint32_t unit = NONE32;
    size_t stopped = 0;
    size_t counted = 0;
};

// Encodes pieces for one thread: a shared PieceMerger, its own cache.
class TextEncoder {
public:
    TextEncoder(std::shared_ptr<const PieceMerger> merger, size_t cache_size)
        : merger_(std::move(merger)), cache_(cache_size) {}

    const std::shared_ptr<const PieceMerger>& merger() const { return merger_; }
    PieceCache& cache() { return cache_; }

    // Appends the outputs of one piece (its UTF-8 bytes) to ``out``; on a
    // problem, returns false with ``problem`` set (``out`` is then partial).
    bool encode_piece(const uint8_t* piece, size_t n, std::vector<uint32_t>& out,
                      EncodeProblem& problem) {
        const uint64_t hash = hash_bytes(piece, n);
        return encode_hashed(piece, n, hash, merger_->may_be_token(hash), out, problem);
    }

    // The same, with ``hash == hash_bytes(piece, n)`` and the vocabulary
    // filter's answer for it already known.
    //
    // ``short_table`` says the caller keeps the piece in the short-piece
    // table (and found it there neither as outputs nor as a mark, unless
    // ``spilled``): the line stores then have it only if it has more outputs
    // than that table's entries hold, so they are asked only after a mark
    // and written only for such a piece.
    bool encode_hashed(const uint8_t* piece, size_t n, uint64_t hash, bool may_be_token,
                       std::vector<uint32_t>& out, EncodeProblem& problem,
                       bool short_table = false, bool spilled = false) {
        // Most pieces of real text are tokens themselves: answer those from
        // the vocabulary, and keep the cache for the pieces that need BPE.
        if (may_be_token) {
            const TokenInfo* whole = merger_->lookup(piece, n, hash);
            if (whole != nullptr && whole->output != NONE32) {
                cache_.count_hit();
                out.push_back(whole->output);
                return true;
            }
        }
        if (!short_table || spilled) {
            if (cache_.get(piece, n, hash, out)) return true;
        } else {
            cache_.count_miss();
        }
        if (n >= NONE32) {
            problem.outcome = EncodeOutcome::PIECE_TOO_LONG;
            return false;
        }
        const size_t first = out.size();
        units_.clear();
        merger_->merge(piece, n, units_);
        for (uint32_t unit : units_) {
            const uint32_t output = merger_->unit_output(unit);
            if (output == NONE32) {
                problem.outcome = EncodeOutcome::MISSING_PART;
                problem.unit = unit;
                return false;
            }
            out.push_back(output);
        }
        const size_t count = out.size() - first;
        if (!short_table || count > ShortPieces::MAX_OUTPUTS) {
            cache_.put(piece, n, hash, out.data() + first, count);
        }
        return true;
    }

    // Encodes ``length`` code units of ``unit_size`` bytes at ``data`` (a str
    // buffer) with a built-in pattern, from offset ``from`` (where a piece
    // starts), appending the outputs to ``out``. Stops after the piece that
    // brings ``out`` to ``budget`` outputs, so callers can hand over the ids
    // in blocks and resume at ``stopped``; ``count_only`` keeps no outputs and
    // only counts them. ``ascii`` says every unit is below 0x80, so the buffer
    // is its own UTF-8. Stops at the first problem.
    //
    // A text with characters beyond ASCII under a built-in pattern goes
    // stretch by stretch (pretokenize::next_stretch): its long ASCII runs as
    // one-byte text, read in place, the rest as it is. Measured on the
    // benchmarks' source code (72 characters beyond ASCII in 6.8 million), o200k:
    // the whole text as two-byte units counted its ids in 115 ms, the same
    // text without those characters in 95 ms.
    EncodeProblem encode_text(pretokenize::Pattern pattern, const pretokenize::ClassTable& table,
                              int unit_size, const void* data, size_t length, bool ascii,
                              std::vector<uint32_t>& out, size_t from, size_t budget,
                              bool count_only) {
        if (pattern.kind == pretokenize::Builtin::COMPILED || !table.standard_ascii()) {
            return encode_units(pattern, table, unit_size, data, length, ascii, out, from, budget,
                                count_only);
        }
        if (count_only || !cache_.segments().enabled() || length - from < SEGMENT_MIN_UNITS) {
            return encode_builtin(pattern, table, unit_size, data, length, ascii, out, from, budget,
                                  count_only);
        }
        return pretokenize::with_unit_type(unit_size, data, [&](auto units) {
            return encode_segments(pattern, table, units, length, ascii, out, from, budget);
        });
    }

private:
    // encode_text of a text with characters beyond ASCII, one stretch at a
    // time; positions in the result are offsets in the whole text.
    template <class Unit>
    EncodeProblem encode_stretches(pretokenize::Pattern pattern,
                                   const pretokenize::ClassTable& table, const Unit* units,
                                   size_t length, std::vector<uint32_t>& out, size_t from,
                                   size_t budget, bool count_only) {
        size_t counted = 0;
        size_t position = from;
        while (position < length) {
            const pretokenize::Stretch stretch =
                pretokenize::next_stretch(table, units, position, length);
            EncodeProblem part;
            if (stretch.ascii) {
                // Scanned alone, from its own offset 0: it ends at a safe cut.
                part = encode_units(pattern, table, 1, one_byte_copy(units, position, stretch.end),
                                    stretch.end - position, true, out, 0, budget, count_only);
                part.position += position;
                part.stopped += position;
            } else {
                part = encode_units(pattern, table, int(sizeof(Unit)), units, stretch.end, false,
                                    out, position, budget, count_only);
            }
            counted += part.counted;
            if (part.outcome != EncodeOutcome::OK) {
                part.counted = counted;
                return part;
            }
            position = part.stopped;
            if (position < stretch.end || (!count_only && out.size() >= budget)) break;
        }
        EncodeProblem done;
        done.stopped = position;
        done.counted = counted;
        return done;
    }

    // Segments: at least this many code units, cut at the first safe cut
    // after that, and at most this many bytes. Long enough that a lookup
    // costs little beside the pieces it spares, short enough that text
    // encoded again after a change, or a conversation encoded again with a
    // new turn, is found up to near the change.
    static constexpr size_t SEGMENT_MIN_UNITS = 2048;
    static constexpr size_t SEGMENT_MAX_BYTES = size_t(64) << 10;

    // encode_text under a built-in pattern, without the segment store: a
    // text with characters beyond ASCII goes stretch by stretch.
    EncodeProblem encode_builtin(pretokenize::Pattern pattern, const pretokenize::ClassTable& table,
                                 int unit_size, const void* data, size_t length, bool ascii,
                                 std::vector<uint32_t>& out, size_t from, size_t budget,
                                 bool count_only) {
        if (ascii) {
            return encode_units(pattern, table, 1, data, length, true, out, from, budget,
                                count_only);
        }
        return pretokenize::with_unit_type(unit_size, data, [&](auto units) {
            return encode_stretches(pattern, table, units, length, out, from, budget, count_only);
        });
    }

    // encode_text under a built-in pattern, a segment at a time (see
    // SegmentStore): each segment from the store, or else encoded and kept.
    template <class Unit>
    EncodeProblem encode_segments(pretokenize::Pattern pattern,
                                  const pretokenize::ClassTable& table, const Unit* units,
                                  size_t length, bool ascii, std::vector<uint32_t>& out,
                                  size_t from, size_t budget) {
        constexpr size_t max_units = SEGMENT_MAX_BYTES / sizeof(Unit);
        size_t position = from;
        while (position < length) {
            const size_t end = pretokenize::next_segment_end(table, units, position, length,
                                                             SEGMENT_MIN_UNITS, max_units);
            // A run with no safe cut is encoded as usual, within the budget.
            const EncodeProblem part =
                end == pretokenize::NO_CUT
                    ? encode_builtin(pattern, table, int(sizeof(Unit)), units, length, ascii, out,
                                     position, budget, false)
                    : encode_segment(pattern, table, units, position, end, ascii, out);
            if (part.outcome != EncodeOutcome::OK) return part;
            position = part.stopped;
            if (out.size() >= budget) break;
        }
        EncodeProblem done;
        done.stopped = position;
        return done;
    }

    // Appends the outputs of units [start, end), a segment, from the store or
    // else by encoding it and storing the result. Its outputs depend on its
    // units alone: a piece starts at ``start``, and ``end`` is a safe cut or
    // the end of the scan, so scanning the segment alone gives the pieces it
    // has in any text.
    template <class Unit>
    EncodeProblem encode_segment(pretokenize::Pattern pattern, const pretokenize::ClassTable& table,
                                 const Unit* units, size_t start, size_t end, bool ascii,
                                 std::vector<uint32_t>& out) {
        int key_unit_size = 0;
        bool key_ascii = false;
        const uint8_t* key = ascii ? reinterpret_cast<const uint8_t*>(units + start)
                                   : segment_key(units, start, end, key_unit_size, key_ascii);
        if (ascii) key_unit_size = 1;  // an ASCII str is its own narrowest key
        const size_t n = (end - start) * size_t(key_unit_size);
        const uint64_t hash = hash_long_bytes(key, n);
        SegmentStore& segments = cache_.segments();
        SegmentStore::Found found;
        if (segments.find(key, n, key_unit_size, hash, found)) {
            // Not out.insert: a second call site of that template made GCC
            // stop inlining it into flush(), where it copies every short-piece
            // hit (measured: a fifth more time for a cold encode of code).
            const size_t at = out.size();
            out.resize(at + found.count);
            std::memcpy(out.data() + at, found.outputs, 4 * found.count);
            cache_.count_hits(found.pieces);
            EncodeProblem done;
            done.stopped = end;
            return done;
        }
        const size_t first = out.size();
        const size_t lookups = cache_.hits() + cache_.misses();
        EncodeProblem part;
        if (key_ascii && !ascii) {
            // An ASCII segment of a wider str: its key is its own UTF-8, so
            // it is scanned there, as one stretch (see encode_stretches).
            part = encode_units(pattern, table, 1, key, end - start, true, out, 0, SIZE_MAX, false);
            part.position += start;
            part.stopped += start;
        } else {
            part = encode_builtin(pattern, table, int(sizeof(Unit)), units, end, ascii, out, start,
                                  SIZE_MAX, false);
        }
        if (part.outcome == EncodeOutcome::OK) {
            segments.put(key, n, key_unit_size, hash, out.data() + first, out.size() - first,
                         cache_.hits() + cache_.misses() - lookups);
        }
        return part;
    }

    // Units [start, end) in the narrowest units that hold them all (1, 2 or
    // 4 bytes, set in ``unit_size``; ``ascii`` says all are below 0x80): in
    // place when that is their own width, else copied to segment_key_.
    // Python stores a whole str in the width of its widest character, so one
    // emoji added to a conversation widens all of it; narrowed, its segments
    // keep their keys, and take half or a quarter of the memory in the store.
    template <class Unit>
    const uint8_t* segment_key(const Unit* units, size_t start, size_t end, int& unit_size,
                               bool& ascii) {
        Unit widest = 0;  // all the units' bits: below 2**k exactly when every unit is
        for (size_t i = start; i < end; ++i) widest |= units[i];
        const int width = widest < 0x100 ? 1 : widest < 0x10000 ? 2 : 4;
        unit_size = width;
        ascii = widest < 0x80;
        if (size_t(width) == sizeof(Unit)) return reinterpret_cast<const uint8_t*>(units + start);
        const size_t count = end - start;
        segment_key_.resize(count);
        // Through restrict pointers: a byte store may alias anything, and
        // the copy reloaded the vector's pointer for every unit, unvectorized.
        const Unit* __restrict from = units + start;
        if (width == 1) {
            uint8_t* __restrict to = reinterpret_cast<uint8_t*>(segment_key_.data());
            for (size_t i = 0; i < count; ++i) to[i] = uint8_t(from[i]);
        } else {
            uint16_t* __restrict to = segment_key_.data();
            for (size_t i = 0; i < count; ++i) to[i] = uint16_t(from[i]);
        }
        return reinterpret_cast<const uint8_t*>(segment_key_.data());
    }

    // Units [start, end), all below 0x80, as bytes: in place for a one-byte
    // str, else copied to narrow_.
    template <class Unit>
    const uint8_t* one_byte_copy(const Unit* units, size_t start, size_t end) {
        if constexpr (sizeof(Unit) == 1) {
            return units + start;
        } else {
            narrow_.clear();
            uint8_t* bytes = narrow_.room(end - start);
            for (size_t i = start; i < end; ++i) bytes[i - start] = uint8_t(units[i]);
            return bytes;
        }
    }

    // encode_text, on the units as they are.
    //
    // The scanner's callback only records each piece as a Span: its
    // ShortPieces key and hash, and a prefetch of the entry a lookup will
    // read. Every CHUNK pieces, emit_chunk answers them in order, a found
    // short piece with one entry read and a store of its outputs, anything
    // else out of line (encode_span). The pieces of one chunk overlap their
    // memory latency, and the loop that answers nearly all of them is a few
    // instructions long. Before, each piece was built into a batch entry of
    // 64 bytes and read twice by a batch flush, about 140 instructions a
    // piece of cold source code outside the scanner (callgrind, o200k).
    EncodeProblem encode_units(pretokenize::Pattern pattern, const pretokenize::ClassTable& table,
                               int unit_size, const void* data, size_t length, bool ascii,
                               std::vector<uint32_t>& out, size_t from, size_t budget,
                               bool count_only) {
        EncodeProblem problem;
        if (spans_.empty()) spans_.resize(CHUNK);
        Span* const spans = spans_.data();
        size_t count = 0;
        utf8_.clear();
        // Where a piece's UTF-8 is: in the text itself if it is ASCII.
        const uint8_t* const text_bytes = static_cast<const uint8_t*>(data);
        // A piece of 1 to short_limit bytes is looked up by its key; an empty
        // one (only a compiled pattern makes them) goes the long way, where
        // it needs no key that could be taken for a free entry.
        const size_t short_limit = cache_.short_pieces() ? ShortPieces::MAX_BYTES : 0;
        auto emit = [&]() {
            const uint8_t* const bytes = ascii ? text_bytes : utf8_.data();
            const bool ok = emit_chunk(spans, count, bytes, out, problem);
            count = 0;
            utf8_.clear();
            if (count_only) {
                problem.counted += out.size();
                out.clear();
            }
            return ok;
        };
        problem.stopped = pretokenize::scan_typed_pieces_of_kind(
            pattern, table, unit_size, data, length,
            // Inlined into the scan loop: called for every piece, a call of
            // its own cost 18 instructions a piece for saving and restoring
            // registers (callgrind).
            [&](auto units, size_t start, size_t end) __attribute__((always_inline)) {
                Span& span = spans[count];
                span.prepared = false;
                span.start = start;
                span.first = start;
                span.size = end - start;
                if (!ascii) {
                    span.first = utf8_.size();
                    const size_t written =
                        pretokenize::append_units_utf8(units, start, end, utf8_, false);
                    if (written != end) {
                        problem.outcome = EncodeOutcome::LONE_SURROGATE;
                        problem.position = written;
                        return false;
                    }
                    span.size = utf8_.size() - span.first;
                }
                const uint8_t* piece = (ascii ? text_bytes : utf8_.data()) + span.first;
                if (span.size - 1 < short_limit) {
                    span.key = ascii && span.first + 16 <= length
                                   ? ShortPieces::key_of_padded(piece, span.size)
                                   : ShortPieces::key_of(piece, span.size);
                    span.hash = ShortPieces::hash_of(span.key);
                    cache_.prefetch_short(span.hash);
                } else {
                    // Its lookup in emit_chunk reads entry 0, which never
                    // holds LONG_KEY and stays in cache, instead of a random
                    // entry that is read only to fail.
                    span.key = LONG_KEY;
                    span.hash = 0;
                    span.piece_hash = hash_bytes(piece, span.size);
                    merger_->prefetch_may_be_token(span.piece_hash);
                }
                if (++count < CHUNK) return true;
                return emit() && out.size() < budget;
            },
            from);
        if (problem.outcome == EncodeOutcome::OK) emit();
        return problem;
    }

    // A piece of the text waiting in the chunk: its code units start at
    // ``start``; its UTF-8 is ``size`` bytes at ``first`` in the text (ASCII)
    // or in utf8_. A short piece has its ShortPieces ``key`` and ``hash``,
    // and its hash_bytes as ``piece_hash`` once ``prepared`` (read_ahead);
    // a longer one has LONG_KEY, ``hash`` 0 and its ``piece_hash`` at once.
    // ``may_be_token``, once prepared, is what the vocabulary filter says
    // of the piece.
    struct Span {
        ShortPieces::Key key;
        uint64_t hash;
        uint64_t at;  // emit_chunk's: ``hash``, or ``hash ^ 1`` if the piece is in its second entry
        uint64_t piece_hash;
        size_t start;
        size_t first;
        size_t size;
        bool prepared;
        bool may_be_token;
    };
    static constexpr size_t CHUNK = 32;
    // No entry has this key: a real key's top byte is a length of at most
    // 15, and a free entry's tail is 0.
    static constexpr ShortPieces::Key LONG_KEY{0, ~uint64_t(0)};

    static bool is_short(const Span& span) { return span.key.tail != LONG_KEY.tail; }

    // Appends the outputs of the ``count`` pieces of ``spans`` (their UTF-8
    // in ``bytes``) to ``out``.
    //
    // A first pass finds the pieces that the first cache line of their
    // lookup (two entries: see ShortPieces::probed) does not answer, and
    // reads ahead what their encoding will read
    // (read_ahead), so their memory latency overlaps: left to the second
    // pass, one after another, it made a cold encode of prose 8 % slower
    // (median of ten rounds in fresh processes).
    //
    // The second pass emits. A short piece found in that line takes no
    // branch but the loop's: the entry's outputs are
    // stored past the end of ``out`` whether they are its or not, and the
    // end moves only if they are. Every other piece goes to encode_span.
    __attribute__((noinline)) bool emit_chunk(Span* spans, size_t count, const uint8_t* bytes,
                                              std::vector<uint32_t>& out,
                                              EncodeProblem& problem) {
        constexpr size_t WIDTH = ShortPieces::MAX_OUTPUTS;
        ShortPieces::Slots slots = cache_.short_slots();
        for (size_t i = 0; i < count; ++i) {
            Span& span = spans[i];
            span.at = span.hash;
            if (slots.first_holds(span.hash, span.key)) continue;
            if (ShortPieces::holds(slots.second(span.hash), span.key)) {
                span.at = span.hash ^ 1;
                continue;
            }
            read_ahead(span, bytes + span.first);
        }
        size_t written = out.size();
        size_t found = 0;
        out.resize(written + WIDTH * count);
        // Through a local pointer: stores through out.data() would make the
        // compiler read the vector (and the table) again after each one.
        uint32_t* outputs = out.data();
        for (size_t i = 0; i < count; ++i) {
            Span& span = spans[i];
            const ShortPieces::Entry& entry = slots.first(span.at);
            std::memcpy(outputs + written, entry.outputs, sizeof entry.outputs);
            if (ShortPieces::holds(entry, span.key)) {
                written += ShortPieces::count(entry);
                ++found;
                continue;
            }
            out.resize(written);
            if (!encode_span(span, bytes + span.first, out, problem)) return false;
            written = out.size();
            out.resize(written + WIDTH * (count - i - 1));
            outputs = out.data();
            slots = cache_.short_slots();  // a put may have started the table over
        }
        out.resize(written);
        cache_.count_hits(found);
        return true;
    }

    // Hashes a piece that needs more than the first entry of its lookup and
    // prefetches what encode_hashed will read for it: its vocabulary slot if
    // the filter says it may be a token, else, for a long piece, its cache
    // sets.
    __attribute__((noinline)) void read_ahead(Span& span, const uint8_t* piece) {
        if (is_short(span)) span.piece_hash = hash_bytes(piece, span.size);
        span.may_be_token = merger_->may_be_token(span.piece_hash);
        if (span.may_be_token) {
            merger_->prefetch(span.piece_hash);
        } else if (!is_short(span)) {
            cache_.prefetch(span.size, span.piece_hash);
        }
        span.prepared = true;
    }

    // The outputs of a piece emit_chunk did not find at once: a short piece
    // may be further along its probe, or need the vocabulary or BPE; a long
    // one always does.
    __attribute__((noinline)) bool encode_span(Span& span, const uint8_t* piece,
                                               std::vector<uint32_t>& out,
                                               EncodeProblem& problem) {
        const bool short_key = is_short(span);
        bool spilled = false;
        if (short_key) {
            if (const ShortPieces::Entry* entry = cache_.find_short(span.key, span.hash)) {
                spilled = ShortPieces::spilled(*entry);
                if (!spilled) {
                    out.insert(out.end(), entry->outputs, entry->outputs + ShortPieces::count(*entry));
                    return true;
                }
            }
        }
        // Found at once by the first pass but dropped since, when a put
        // started the table over: not read ahead yet.
        if (!span.prepared) read_ahead(span, piece);
        const size_t first = out.size();
        // A mark's piece has several outputs: it is not a token.
        if (!encode_hashed(piece, span.size, span.piece_hash, span.may_be_token && !spilled, out,
                           problem, short_key, spilled)) {
            problem.position = span.start;
            return false;
        }
        if (short_key) {
            cache_.put_short(span.key, span.hash, out.data() + first, out.size() - first);
        }
        return true;
    }

    std::shared_ptr<const PieceMerger> merger_;
    PieceCache cache_;
    std::vector<uint32_t> units_;   // scratch for BPE
    std::vector<Span> spans_;       // pieces scanned, not yet encoded (CHUNK)
    pretokenize::ByteBuffer utf8_;  // the UTF-8 of the batch's pieces (non-ASCII text)
    pretokenize::ByteBuffer narrow_;  // an ASCII stretch of a wider str, as bytes
    std::vector<uint16_t> segment_key_;  // a segment's units, narrowed (segment_key)
};

// ------------------------------------------------------------ decoding

// Token id -> its bytes, for every id a decoder knows (special tokens too).
// The bytes of all tokens lie back to back in one string with slack after
// the last, so a short token is copied with one fixed 16-byte move (its
// neighbours' bytes come along and are overwritten by the next token)
// instead of a memcpy call of variable length; only the last few tokens of
// an output, where 16 bytes would overrun it, are copied exactly.
class TokenBytes {
public:
    static constexpr size_t SLACK = 16;

    // Call for every id, then finish().
    void add(uint32_t id, const uint8_t* bytes, size_t n) {
        if (id >= spans_.size()) spans_.resize(size_t(id) + 1, Span{0, UNKNOWN});
        spans_[id] = Span{uint32_t(bytes_.size()), uint32_t(n)};
        bytes_.append(reinterpret_cast<const char*>(bytes), n);
    }
    void finish() { bytes_.append(SLACK, '\0'); }

    // The number of bytes ids[0..count) decode to; ``unknown`` is set to
    // the index of the first id without bytes, else to ``count``.
    size_t measure(const uint32_t* ids, size_t count, size_t& unknown) const {
        size_t total = 0;
        for (size_t i = 0; i < count; ++i) {
            const uint32_t id = ids[i];
            if (id >= spans_.size() || spans_[id].length == UNKNOWN) {
                unknown = i;
                return total;
            }
            total += spans_[id].length;
        }
        unknown = count;
        return total;
    }

    // Writes the bytes of ids[0..count) (all known) to ``out``, which ends
    // at ``end``, exactly measure()'s total after ``out``.
    void write(const uint32_t* ids, size_t count, uint8_t* out, const uint8_t* end) const {
        const char* source = bytes_.data();
        for (size_t i = 0; i < count; ++i) {
            const Span span = spans_[ids[i]];
            if (span.length <= SLACK && size_t(end - out) >= SLACK) {
                std::memcpy(out, source + span.offset, SLACK);
            } else {
                std::memcpy(out, source + span.offset, span.length);
            }
            out += span.length;
        }
    }

    bool known(uint32_t id) const { return id < spans_.size() && spans_[id].length != UNKNOWN; }

private:
    static constexpr uint32_t UNKNOWN = UINT32_MAX;
    struct Span {
        uint32_t offset;
        uint32_t length;  // UNKNOWN: no token has this id
    };
    std::vector<Span> spans_;
    std::string bytes_;
};

}  // namespace streambpe
