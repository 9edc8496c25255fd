// ShortPieces: the first store a piece of up to 15 bytes is looked up in,
// one probe of one table for most of them. Nothing here touches a Python
// object, so all of it may run with the GIL released.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "_hash_table.hpp"

namespace streambpe {

// Masks that keep the first n bytes of a piece's head (HEAD_MASKS) and the
// n - 8 bytes after them (TAIL_MASKS), for n up to ShortPieces::MAX_BYTES.
struct ByteMasks {
    uint64_t of[16];
};
constexpr ByteMasks byte_masks(int skip) {
    ByteMasks masks{};
    for (int n = 0; n < 16; ++n) {
        const int kept = n - skip < 0 ? 0 : n - skip > 8 ? 8 : n - skip;
        masks.of[n] = kept == 8 ? ~uint64_t(0) : (uint64_t(1) << (8 * kept)) - 1;
    }
    return masks;
}
constexpr ByteMasks HEAD_MASKS = byte_masks(0);
constexpr ByteMasks TAIL_MASKS = byte_masks(8);

// Pieces of up to MAX_BYTES bytes -> their outputs (one to MAX_OUTPUTS of
// them), whether the piece is a token or needed BPE.
//
// A piece is keyed by its bytes packed with its length into 16 bytes, so a
// lookup compares two integers and reads no byte store beside the table;
// with its outputs inline an entry is 32 bytes, half a cache line. Open
// addressing, at most half full, probing the two entries of a cache line
// before the next line (see probed): a lookup usually reads one line, and a
// piece it lacks usually stops at an empty entry of that line. With plain
// linear probing, a piece one entry past its first sat in the next line
// half of the time; the encoder, which checks a piece's first entries
// before anything else (TextEncoder::emit_chunk), sent those on to the
// vocabulary filter and a second probe, each a cache miss. On cold 8 MiB of
// o200k source code that was 27 % of the pieces it could not answer at
// once (callgrind: 382,000 against 277,000 instructions on entering
// encode_span for 2 MB); fresh tokenizers in turns, medians of nine
// rounds, five processes each: 33.5-34.8 ms against 34.4-35.1.
// There is no eviction: once ``limit`` pieces are in, the table starts over
// empty, and a piece it dropped is encoded again when it next comes.
//
// Most pieces of real text are short (97 % of those of multilingual prose,
// 99 % of source code, o200k) and repeat, so this one read answers most of
// them. It replaced a smaller direct-mapped store, sized to the L2 cache,
// that answered 74 % of the pieces of warm chat-sized strings and sent the
// rest on to the vocabulary filter and then the vocabulary or the cache
// sets. Measured with a build with each, in fresh processes in turns:
// 100,000 warm chat-sized o200k strings ran 1.18x as fast (median of eight
// ratios); cold encodes of 8 MiB of prose and of code, o200k and cl100k,
// and of a second 8 MiB of prose after a first, 1.04-1.11x (medians of
// five to eight), within this machine's noise.
//
// A piece with more outputs than an entry holds is kept as a mark, its key
// with the SPILLED bit set: find() returns it, and the caller reads the
// outputs from its store of longer entries, which is then the only store
// asked. (Before, every short piece the table missed was also looked up and
// kept in those stores: two to six cache misses more for each new piece.)
//
// A probe gives up after MAX_PROBE entries, as if the piece were absent, and
// a piece with no free entry within that reach is not kept: text made to
// pile pieces onto one slot costs a bounded number of reads a piece, never a
// walk along a growing run.
class ShortPieces {
public:
    static constexpr size_t MAX_BYTES = 15;
    static constexpr size_t MAX_OUTPUTS = 4;
    static constexpr size_t MAX_PROBE = 16;
    // A key's top byte holds the piece's length, at most MAX_BYTES, in its
    // low four bits; an entry's keeps its count of outputs in the next three
    // (COUNT_SHIFT), and a mark's sets the last (SPILLED). So an entry is a
    // key and four outputs, and a mark is never mistaken for an entry.
    static constexpr unsigned COUNT_SHIFT = 60;
    static constexpr uint64_t COUNT_BITS = uint64_t(7) << COUNT_SHIFT;
    static constexpr uint64_t SPILLED = uint64_t(1) << 63;
    static_assert(MAX_OUTPUTS < 8 && MAX_BYTES < 16, "the count and length share a byte");

    // A piece as two integers: its first eight bytes and the seven after
    // them, each zero-padded, with its length in the top byte, so no key of
    // a piece is 0 (the mark of a free entry).
    struct Key {
        uint64_t head;
        uint64_t tail;
    };
    static Key key_of(const uint8_t* piece, size_t n) {
        return Key{load_le(piece, n < 8 ? n : 8),
                   (n > 8 ? load_le(piece + 8, n - 8) : 0) | uint64_t(n) << 56};
    }
    // key_of for a piece followed by enough bytes that 16 may be read from
    // its start: two whole loads, masked, without key_of's branches on the
    // length. Only for bytes written long before (a str's own buffer): a
    // load over bytes just stored would wait for them (see load_le).
    static Key key_of_padded(const uint8_t* piece, size_t n) {
        uint64_t head, tail;
        std::memcpy(&head, piece, 8);
        std::memcpy(&tail, piece + 8, 8);
        return Key{head & HEAD_MASKS.of[n], (tail & TAIL_MASKS.of[n]) | uint64_t(n) << 56};
    }
    // One multiply: the key is the piece itself, so this need not be strong,
    // only spread keys over the slots (its high half folds into the low bits
    // that pick a slot).
    static uint64_t hash_of(Key key) {
        const uint64_t h = (key.head ^ (key.tail << 32 | key.tail >> 32)) * 0x9e3779b97f4a7c15ULL;
        return h ^ h >> 32;
    }

    struct alignas(32) Entry {
        uint64_t head;
        uint64_t tail;  // the key's, with COUNT_BITS or SPILLED; 0: a free entry
        uint32_t outputs[MAX_OUTPUTS];
    };
    static_assert(sizeof(Entry) == 32, "two entries to a cache line");

    // A table for up to ``limit`` pieces (0: none, every lookup misses).
    explicit ShortPieces(size_t limit) : limit_(limit) {
        size_t capacity = 0;
        if (limit > 0) {
            capacity = 16;
            while (capacity < 2 * limit) capacity *= 2;
        }
        capacity_ = capacity;
    }
    ShortPieces(const ShortPieces&) = delete;
    ShortPieces& operator=(const ShortPieces&) = delete;
    ~ShortPieces() { release(); }

    bool enabled() const { return limit_ > 0; }
    // The pieces whose outputs are here (marks not counted).
    size_t size() const { return size_ - marks_; }

    // Starts loading the entry a lookup of ``hash`` reads first.
    PREFETCHER void prefetch(uint64_t hash) const { __builtin_prefetch(&slots_[hash & mask_]); }

    // Whether ``entry`` has the outputs of ``key``: never true of a mark.
    static bool holds(const Entry& entry, Key key) {
        return entry.head == key.head && (entry.tail & ~COUNT_BITS) == key.tail;
    }
    // How many outputs ``entry`` has (0 for a mark).
    static size_t count(const Entry& entry) { return (entry.tail & COUNT_BITS) >> COUNT_SHIFT; }
    // Whether ``entry`` is a mark: its piece has more than MAX_OUTPUTS outputs.
    static bool spilled(const Entry& entry) { return (entry.tail & SPILLED) != 0; }

    // The table's entries as they are until the next put, held by a caller
    // that reads the first entry of many lookups in a loop: the table's own
    // fields would be read again after every store the loop makes.
    struct Slots {
        const Entry* entries;
        size_t mask;
        // The entry a lookup of ``hash`` reads first.
        const Entry& first(uint64_t hash) const { return entries[hash & mask]; }
        // Whether that entry is the one of ``key`` (``hash == hash_of(key)``).
        bool first_holds(uint64_t hash, Key key) const { return holds(first(hash), key); }
        // The entry a lookup reads second: the other half of the first
        // one's cache line, so reading it costs no memory access of its own.
        // first(hash ^ 1) is that entry.
        const Entry& second(uint64_t hash) const { return entries[(hash ^ 1) & mask]; }
    };
    Slots slots() const { return Slots{slots_, mask_}; }

    // The entry of ``key`` (``hash == hash_of(key)``), possibly a mark
    // (spilled()), or nullptr.
    const Entry* find(Key key, uint64_t hash) const {
        for (size_t probe = 0; probe < MAX_PROBE; ++probe) {
            const Entry& entry = slots_[probed(hash, probe)];
            if ((entry.tail & ~(COUNT_BITS | SPILLED)) == key.tail && entry.head == key.head) {
                return &entry;
            }
            if (entry.tail == 0) return nullptr;
        }
        return nullptr;
    }

    // Keeps the ``count`` outputs of a piece that is not here yet, or a mark
    // if there are more than MAX_OUTPUTS of them.
    void put(Key key, uint64_t hash, const uint32_t* outputs, size_t count) {
        if (limit_ == 0 || count == 0) return;
        const bool spill = count > MAX_OUTPUTS;
        if (size_ >= limit_) release();  // full: start over
        if (slots_ == &NO_SLOTS) {
            use_table(capacity_ > FIRST_CAPACITY ? FIRST_CAPACITY : capacity_);
        } else if (mask_ + 1 < capacity_ && size_ >= (mask_ + 1) / 2) {
            grow();
        }
        Entry* entry = free_entry(key, hash);
        if (entry == nullptr) return;  // here already, or no free entry within reach
        entry->head = key.head;
        if (spill) {
            entry->tail = key.tail | SPILLED;
            ++marks_;
        } else {
            entry->tail = key.tail | uint64_t(count) << COUNT_SHIFT;
            std::memcpy(entry->outputs, outputs, 4 * count);
        }
        ++size_;
    }

    // Empties the table and gives its memory back.
    void clear() { release(); }

    // The entries the table has room for now: FIRST_CAPACITY until it
    // holds half that many pieces, then GROWTH times more at each move, up
    // to its full capacity (for tests).
    size_t slots_in_use() const { return slots_ == &NO_SLOTS ? 0 : mask_ + 1; }

private:
    // A table starts with this many entries (128 KiB) and, each time half
    // of them are taken, moves to one GROWTH times larger, up to its full
    // capacity: 4 MiB, then 32 MiB at the default size. A piece lands in a
    // random entry, so a table's memory is all touched soon after it is
    // taken, and fresh memory is what costs:
    // - At the full size from the start, the first calls of a new
    //   tokenizer, of a new thread's kernel or after clear_cache each
    //   zeroed a 2 MiB huge page for most of their new pieces (1.1 ms for
    //   the first chat message of a new o200k tokenizer, 0.5 ms for the
    //   next).
    // - Moving from 128 KiB straight to the full size, a text with a few
    //   tens of thousands of distinct pieces took all 32 MiB: 8 MiB of
    //   source code has 39,600 distinct short pieces (o200k), which the
    //   4 MiB table holds. Memory a process takes anew costs far more on
    //   some virtual machines than zeroing it: on ours, whose host takes
    //   back the pages the guest frees, touching 64 MiB mapped anew took
    //   74-161 ms when the process's memory had been free for a few
    //   seconds, against 2.5 ms when it had just been freed. Cold 8 MiB of
    //   o200k code, fresh processes three seconds apart, in turns, 14 of
    //   each: median 45 ms (42-84) with the 4 MiB step, 83 (42-147)
    //   without it. With memory just freed, the 4 MiB table costs 2 ms
    //   (42 against 40): fewer pieces are at the first entry their lookup
    //   reads.
    // - Doubling at each step, tried twice, was slower on cold prose: every
    //   step faulted in fresh memory and rehashed everything. Two moves
    //   rehash 2,048 and then 65,536 pieces; cold 8 MiB of o200k prose read
    //   the same (medians of seven tokenizers: 184, 183, 191 ms against
    //   182, 179, 203).
    static constexpr size_t FIRST_CAPACITY = 4096;
    static constexpr size_t GROWTH = 32;

    // The entry a lookup of ``hash`` reads at its ``probe``-th step: first
    // the two entries of one cache line, the one ``hash`` picks and then its
    // neighbour, then on through the next lines, two entries at a time.
    size_t probed(uint64_t hash, size_t probe) const {
        const size_t home = hash & mask_;
        return ((home & ~size_t(1)) + (probe ^ (home & 1))) & mask_;
    }

    void use_table(size_t capacity) {
        // Zeroed memory, touched only where entries land.
        slots_ = static_cast<Entry*>(allocate_table(capacity * sizeof(Entry)));
        mask_ = capacity - 1;
    }

    // Where ``key`` goes: the first free entry of its probe, or nullptr if
    // it is here already or no entry within MAX_PROBE is free.
    Entry* free_entry(Key key, uint64_t hash) {
        for (size_t probe = 0; probe < MAX_PROBE; ++probe) {
            Entry& entry = slots_[probed(hash, probe)];
            if ((entry.tail & ~(COUNT_BITS | SPILLED)) == key.tail && entry.head == key.head) {
                return nullptr;
            }
            if (entry.tail == 0) return &entry;
        }
        return nullptr;
    }

    // Moves every entry to a table GROWTH times larger, or of full capacity.
    void grow() {
        Entry* const first = slots_;
        const size_t first_capacity = mask_ + 1;
        use_table(std::min(first_capacity * GROWTH, capacity_));
        size_ = marks_ = 0;
        for (size_t i = 0; i < first_capacity; ++i) {
            const Entry& moving = first[i];
            if (moving.tail == 0) continue;
            const Key key{moving.head, moving.tail & ~(COUNT_BITS | SPILLED)};
            Entry* entry = free_entry(key, hash_of(key));
            if (entry == nullptr) continue;  // no free entry within reach: dropped
            *entry = moving;
            ++size_;
            marks_ += spilled(moving);
        }
        free_table(first, first_capacity * sizeof(Entry));
    }

    void release() {
        if (slots_ != &NO_SLOTS) free_table(slots_, (mask_ + 1) * sizeof(Entry));
        slots_ = &NO_SLOTS;
        mask_ = 0;
        size_ = 0;
        marks_ = 0;
    }

    // What ``slots_`` points at before the table is allocated: one free
    // entry (never written), with ``mask_`` 0, so a lookup finds nothing and
    // a prefetch reads it, and neither tests for a table first (those tests
    // were 1.4 % of the instructions of a cold encode of source code).
    static inline Entry NO_SLOTS{};

    size_t limit_;
    size_t capacity_;
    size_t mask_ = 0;           // capacity_ - 1 once the table is allocated
    Entry* slots_ = &NO_SLOTS;  // allocated on the first put
    size_t size_ = 0;
    size_t marks_ = 0;  // the entries among size_ that are marks
};

}  // namespace streambpe
