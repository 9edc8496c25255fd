// Recently encoded stretches of text ("segments") -> their outputs.
//
// Text is often encoded again whole or in part: a chat turn re-encodes the
// conversation so far, a serving system the same system prompt, a pipeline
// the same document. The piece cache then spares BPE, but every piece is
// still scanned, hashed and looked up (40-60 ns each). The segment store
// answers a run of a few thousand characters seen before with one hash of
// its code units, one comparison and one copy of its outputs.
//
// A segment starts where a piece starts and ends at a safe cut (or where the
// scan ends), so its outputs depend on its code units alone: see
// TextEncoder::encode_segments. The key is the segment's code units in the
// narrowest width that holds them all (TextEncoder::segment_key), with that
// width, compared in full on every hit; the hash only finds the candidate.
//
// A segment is kept the second time it is seen, not the first: most text is
// encoded once (a file, a corpus), and copying all of its outputs into the
// store would cost a cold encode time and memory for nothing. The segments
// seen once are remembered by hash alone, in a small direct-mapped table
// (SEEN_SLOTS hashes; a hash that lost its slot is merely seen once more).
//
// Memory is bounded by two generations. New segments go to the current one;
// when it holds ``generation_bytes`` (code units, outputs and bookkeeping),
// the older one is dropped and the current one takes its place. Lookups read
// both, so text encoded again within about two generations of new text is
// answered whole. Nothing here touches a Python object.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <unordered_map>
#include <utility>
#include <vector>

#include "_hash_table.hpp"

namespace streambpe {

class SegmentStore {
public:
    // What a hit gives: ``count`` outputs at ``outputs``, which came from
    // ``pieces`` pieces. Valid until the next put() or clear().
    struct Found {
        const uint32_t* outputs;
        size_t count;
        size_t pieces;
    };

    // ``generation_bytes == 0``: a store that keeps nothing.
    explicit SegmentStore(size_t generation_bytes)
        : generation_bytes_(generation_bytes),
          first_(generation_bytes),
          second_(generation_bytes) {}

    bool enabled() const { return generation_bytes_ > 0; }

    // The segment of ``n`` bytes at ``key`` (code units of ``unit_size``
    // bytes) with hash ``hash``, if stored.
    bool find(const uint8_t* key, size_t n, int unit_size, uint64_t hash, Found& found) {
        const bool hit = current_->find(key, n, unit_size, hash, found) ||
                         older_->find(key, n, unit_size, hash, found);
        found_ += hit;
        return hit;
    }

    // Keeps the outputs of a segment find() just missed, if it was seen
    // before; else notes that it has been seen.
    void put(const uint8_t* key, size_t n, int unit_size, uint64_t hash, const uint32_t* outputs,
             size_t count, size_t pieces) {
        if (!enabled() || cost(n, count) > generation_bytes_ || !seen_before(hash)) return;
        if (current_->bytes() + cost(n, count) > generation_bytes_) {
            std::swap(older_, current_);
            current_->clear();
        }
        stored_ += current_->put(key, n, unit_size, hash, outputs, count, pieces);
    }

    void clear() {
        current_->clear();
        older_->clear();
        std::fill(seen_.begin(), seen_.end(), 0);
        found_ = stored_ = 0;
    }

    // For tests and diagnostics: segments found and stored since the last
    // clear(), the bytes both generations hold, and a generation's bound.
    size_t found() const { return found_; }
    size_t stored() const { return stored_; }
    size_t bytes() const { return current_->bytes() + older_->bytes(); }
    size_t generation_bytes() const { return generation_bytes_; }

private:
    static constexpr size_t SEEN_SLOTS = size_t(1) << 16;

    // True if ``hash`` was noted before (and forgets it: the segment is
    // stored now); else notes it. A hash of 0 is taken for 1, so that 0
    // marks a free slot.
    bool seen_before(uint64_t hash) {
        if (seen_.empty()) seen_.assign(SEEN_SLOTS, 0);
        const uint64_t mark = hash | (hash == 0);
        uint64_t& slot = seen_[(hash >> 48) & (SEEN_SLOTS - 1)];
        if (slot == mark) {
            slot = 0;
            return true;
        }
        slot = mark;
        return false;
    }

    // The memory one segment takes: its units, its outputs, an entry.
    static size_t cost(size_t n, size_t count) { return n + 4 * count + ENTRY_COST; }
    // An entry and its share of the hash table's buckets.
    static constexpr size_t ENTRY_COST = 96;

    // One generation: its segments' units and outputs back to back in two
    // arenas of ``capacity`` bytes each (a generation's bytes never exceed
    // it), mapped on the first put and kept when emptied, so a long-lived
    // encoder reuses the same pages. Growing vectors instead copied and
    // faulted in fresh pages again and again: a tenth of a cold encode.
    class Generation {
    public:
        explicit Generation(size_t capacity) : capacity_(capacity) {}
        ~Generation() {
            free_table(units_, capacity_);
            free_table(outputs_, capacity_);
        }
        Generation(const Generation&) = delete;
        Generation& operator=(const Generation&) = delete;

        bool find(const uint8_t* key, size_t n, int unit_size, uint64_t hash, Found& found) const {
            const auto entry = entries_.find(hash);
            if (entry == entries_.end()) return false;
            const Entry& stored = entry->second;
            if (stored.length != n || stored.unit_size != unit_size ||
                std::memcmp(units_ + stored.units_at, key, n) != 0) {
                return false;
            }
            found = Found{outputs_ + stored.outputs_at, stored.count, stored.pieces};
            return true;
        }

        // Stores a segment that fits (bytes() + cost(n, count) <= capacity).
        // False if another segment with the same hash keeps its place: both
        // are right, and a hash shared by two segments is rare.
        bool put(const uint8_t* key, size_t n, int unit_size, uint64_t hash,
                 const uint32_t* outputs, size_t count, size_t pieces) {
            if (entries_.count(hash) != 0) return false;
            if (units_ == nullptr) {
                units_ = static_cast<uint8_t*>(allocate_table(capacity_));
                outputs_ = static_cast<uint32_t*>(allocate_table(capacity_));
            }
            entries_.emplace(hash, Entry{units_used_, n, outputs_used_, count, pieces, unit_size});
            std::memcpy(units_ + units_used_, key, n);
            std::memcpy(outputs_ + outputs_used_, outputs, 4 * count);
            units_used_ += n;
            outputs_used_ += count;
            bytes_ += cost(n, count);
            return true;
        }

        size_t bytes() const { return bytes_; }

        void clear() {
            entries_.clear();
            units_used_ = outputs_used_ = bytes_ = 0;
        }

    private:
        struct Entry {
            size_t units_at;
            size_t length;
            size_t outputs_at;
            size_t count;
            size_t pieces;
            int unit_size;
        };
        size_t capacity_;
        std::unordered_map<uint64_t, Entry> entries_;
        uint8_t* units_ = nullptr;
        uint32_t* outputs_ = nullptr;
        size_t units_used_ = 0;
        size_t outputs_used_ = 0;
        size_t bytes_ = 0;
    };

    size_t generation_bytes_;
    Generation first_;
    Generation second_;
    // The generations' roles swap; their arenas stay where they are.
    Generation* current_ = &first_;
    Generation* older_ = &second_;
    std::vector<uint64_t> seen_;  // hashes of segments seen once, SEEN_SLOTS of them once used
    size_t found_ = 0;
    size_t stored_ = 0;
};

}  // namespace streambpe
