// The hashing and integer-keyed hash table that the native tables share, in
// plain C++ (no Python API).
//
// hash_bytes keys every byte-string table (the vocabulary, the piece cache,
// the word counts); U64Map is the table of token pairs of the merge loop (its
// memory, like every big table's, from _table_memory.hpp). Nothing here
// touches a Python object, so all of it may run with the GIL released.
#pragma once

#include <cstdint>
#include <cstring>
#include <vector>

#include "_table_image.hpp"
#include "_table_memory.hpp"

namespace streambpe {

// Marks a function that only prefetches. GCC deems such a function free of
// side effects, and where it is not inlined early it deletes the call as
// dead code, prefetch and all; inlining it always keeps the prefetch.
#define PREFETCHER __attribute__((always_inline)) inline

// "No id": an absent token, unit or slot (ids are below 2**32 - 1).
constexpr uint32_t NONE32 = UINT32_MAX;

// ---------------------------------------------------------------- hashing

// The first ``n`` (at most 8) bytes at ``p`` as one integer, zero-padded.
// A memcpy of a variable length compiles to byte stores followed by an
// 8-byte load, which the CPU cannot forward from the stores: a stall on
// every short key. Whole loads that overlap, or three single bytes, give the
// same value without one. (Byte order changes hash values only, never a result.)
inline uint64_t load_le(const uint8_t* p, size_t n) {
    uint64_t v;
    if (n == 8) {
        std::memcpy(&v, p, 8);
    } else if (n >= 4) {
        uint32_t low, high;
        std::memcpy(&low, p, 4);
        std::memcpy(&high, p + n - 4, 4);
        v = uint64_t(low) | uint64_t(high) << (8 * (n - 4));
    } else if (n > 0) {
        v = uint64_t(p[0]) | uint64_t(p[n / 2]) << (8 * (n / 2)) | uint64_t(p[n - 1]) << (8 * (n - 1));
    } else {
        v = 0;
    }
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

// hash_bytes for long strings (the segments of the segment store, thousands
// of bytes each): four chains of the same step over 32 bytes at a time, so
// their multiplies overlap instead of each waiting for the one before, then
// folded into one and finished by hash_bytes on the last bytes. One chain
// hashed at about 6 GB/s, 1.3 ms of a cold encode of 8 MiB of source code
// (perf). A different value from hash_bytes for the same bytes.
inline uint64_t hash_long_bytes(const uint8_t* data, size_t n) {
    constexpr uint64_t STEP = 0xc4ceb9fe1a85ec53ULL;
    uint64_t lanes[4] = {0x9e3779b97f4a7c15ULL ^ (n * 0xff51afd7ed558ccdULL), 0x243f6a8885a308d3ULL,
                         0x13198a2e03707344ULL, 0xa4093822299f31d0ULL};
    while (n >= 32) {
        for (int lane = 0; lane < 4; ++lane) {
            uint64_t h = (lanes[lane] ^ load_le(data + 8 * lane, 8)) * STEP;
            lanes[lane] = h ^ h >> 29;
        }
        data += 32;
        n -= 32;
    }
    const uint64_t folded =
        lanes[0] ^ mix64(lanes[1]) ^ mix64(lanes[2] + 1) ^ mix64(lanes[3] + 2);
    return hash_bytes(data, n) ^ folded;
}

// ------------------------------------------------------- uint64 -> V table

// Whether ``capacity`` (read from an image) can size an open-addressing table
// that wraps its probes with a mask: a power of two, at least ``minimum``.
inline bool is_table_capacity(size_t capacity, size_t minimum) {
    return capacity >= minimum && (capacity & (capacity - 1)) == 0;
}

// The key of the pair of token ids (left, right) in a U64Map.
inline uint64_t pair_key(uint32_t left, uint32_t right) {
    return (uint64_t(left) << 32) | right;
}

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

    void save(ImageWriter& image) const {
        image.value(size_);
        image.sequence(slots_);
    }
    bool load(ImageReader& image) {
        if (!image.value(size_) || !image.sequence(slots_)) return false;
        if (!is_table_capacity(slots_.size(), 2) || size_ * 2 > slots_.size()) return image.fail();
        use_capacity(slots_.size());
        return true;
    }

    // Calls ``visit(key, value)`` for every entry, in no particular order.
    template <class Visit>
    void for_each(Visit visit) const {
        for (const Slot& slot : slots_) {
            if (slot.key != EMPTY) visit(slot.key, slot.value);
        }
    }

private:
    static constexpr uint64_t EMPTY = UINT64_MAX;
    struct Slot {
        uint64_t key;
        V value;
    };

    size_t home(uint64_t key) const { return (key * 0x9e3779b97f4a7c15ULL) >> shift_; }

    // Probing wraps with mask_; home() keeps the top log2(capacity) bits of a product.
    void use_capacity(size_t capacity) {
        mask_ = capacity - 1;
        shift_ = 64 - __builtin_ctzll(capacity);
    }

    void rehash(size_t capacity) {  // capacity: a power of two, at least 2
        TableVector<Slot> old(capacity, Slot{EMPTY, V()});
        old.swap(slots_);
        use_capacity(capacity);
        for (const Slot& slot : old) {
            if (slot.key == EMPTY) continue;
            size_t i = home(slot.key);
            while (slots_[i].key != EMPTY) i = (i + 1) & mask_;
            slots_[i] = slot;
        }
    }

    TableVector<Slot> slots_;
    size_t mask_ = 0;
    int shift_ = 0;
    size_t size_ = 0;
};

}  // namespace streambpe
