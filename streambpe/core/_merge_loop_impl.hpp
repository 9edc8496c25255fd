// The training merge loop behind streambpe.core._native, and the hashing and
// integer-keyed table it shares with _encode_impl.hpp, in plain C++ (no
// Python API).
//
// _native.pyx owns every Python object and the GIL; this header only works on
// bytes and integers, so everything here may run with the GIL released. The
// pure-Python module merge_loop.py is the specification.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <new>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#if defined(__linux__)
#include <sys/mman.h>
#endif

namespace streambpe {

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

// ------------------------------------------------------- table memory

// Memory for the big tables that are read at random (the vocabulary, the
// pair table, the piece cache), zeroed. With 4 KiB pages nearly every lookup
// in a table of many megabytes also misses the TLB, and the page walk, not
// the read, bounds how many lookups can overlap; so on Linux a table of 2 MiB
// or more is mapped on its own, aligned to 2 MiB and advised to use huge
// pages (measured: random reads of a 64 MiB table take 24 ns instead of 39).
// Anonymous mappings also come zeroed and untouched until used. Elsewhere, or
// when the kernel declines, this is plain zeroed memory.
constexpr size_t HUGE_PAGE = size_t(2) << 20;

inline void* allocate_table(size_t bytes) {
#if defined(__linux__) && defined(MADV_HUGEPAGE)
    if (bytes >= HUGE_PAGE) {
        const size_t rounded = (bytes + HUGE_PAGE - 1) & ~(HUGE_PAGE - 1);
        const size_t mapped = rounded + HUGE_PAGE;  // room to align
        void* raw = mmap(nullptr, mapped, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (raw == MAP_FAILED) throw std::bad_alloc();
        const uintptr_t start = reinterpret_cast<uintptr_t>(raw);
        const uintptr_t aligned = (start + HUGE_PAGE - 1) & ~uintptr_t(HUGE_PAGE - 1);
        // Unmap the slack on both sides so free_table can recompute the span.
        if (aligned > start) munmap(raw, aligned - start);
        const uintptr_t end = start + mapped;
        if (end > aligned + rounded) munmap(reinterpret_cast<void*>(aligned + rounded), end - aligned - rounded);
        madvise(reinterpret_cast<void*>(aligned), rounded, MADV_HUGEPAGE);  // advice: failure is harmless
        return reinterpret_cast<void*>(aligned);
    }
#endif
    void* memory = std::calloc(bytes > 0 ? bytes : 1, 1);
    if (memory == nullptr) throw std::bad_alloc();
    return memory;
}

// Frees what allocate_table(bytes) returned (the same ``bytes``).
inline void free_table(void* memory, size_t bytes) {
    if (memory == nullptr) return;
#if defined(__linux__) && defined(MADV_HUGEPAGE)
    if (bytes >= HUGE_PAGE) {
        munmap(memory, (bytes + HUGE_PAGE - 1) & ~(HUGE_PAGE - 1));
        return;
    }
#endif
    std::free(memory);
}

// An allocator over allocate_table, for std::vector tables.
template <class T>
struct TableAllocator {
    using value_type = T;
    TableAllocator() = default;
    template <class U>
    TableAllocator(const TableAllocator<U>&) {}  // NOLINT: rebinding is implicit by design
    T* allocate(size_t n) { return static_cast<T*>(allocate_table(n * sizeof(T))); }
    void deallocate(T* memory, size_t n) { free_table(memory, n * sizeof(T)); }
    template <class U>
    bool operator==(const TableAllocator<U>&) const { return true; }
    template <class U>
    bool operator!=(const TableAllocator<U>&) const { return false; }
};

template <class T>
using TableVector = std::vector<T, TableAllocator<T>>;

// ------------------------------------------------------- table images

// Built tables written out as flat bytes and read back, so that a table
// built once (the vocabulary of a large encoding takes most of a second)
// loads in milliseconds later. The bytes are this build's own layout
// (native byte order, struct padding): callers keep an image only for the
// build that wrote it (IMAGE_TAG) and check its integrity before reading.
template <class T>
constexpr bool image_safe = std::is_trivially_copyable<T>::value;

inline const char* image_tag() {
    // Any change to a layout changes the compile time too, so an image from
    // another build of this module is never read as one of this build.
    return "streambpe-tables-1 " __DATE__ " " __TIME__;
}

class ImageWriter {
public:
    template <class T>
    void value(const T& item) {
        static_assert(image_safe<T>, "only plain data goes into an image");
        bytes_.append(reinterpret_cast<const char*>(&item), sizeof item);
    }
    // A vector or string: its length, then its elements.
    template <class Sequence>
    void sequence(const Sequence& items) {
        static_assert(image_safe<typename Sequence::value_type>, "only plain data goes into an image");
        value(uint64_t(items.size()));
        bytes_.append(reinterpret_cast<const char*>(items.data()),
                      items.size() * sizeof(typename Sequence::value_type));
    }
    std::string& bytes() { return bytes_; }

private:
    std::string bytes_;
};

// Reads what an ImageWriter wrote, in the same order. Every read is bounds
// checked: a short or garbled image makes ok() false, never a read past it.
class ImageReader {
public:
    ImageReader(const uint8_t* data, size_t size) : at_(data), left_(size) {}

    template <class T>
    bool value(T& item) {
        static_assert(image_safe<T>, "only plain data comes from an image");
        if (!ok_ || left_ < sizeof item) return ok_ = false;
        std::memcpy(&item, at_, sizeof item);
        at_ += sizeof item;
        left_ -= sizeof item;
        return true;
    }
    template <class Sequence>
    bool sequence(Sequence& items) {
        using Item = typename Sequence::value_type;
        uint64_t count = 0;
        if (!value(count) || count > left_ / sizeof(Item)) return ok_ = false;
        items.resize(size_t(count));
        std::memcpy(static_cast<void*>(items.data()), at_, size_t(count) * sizeof(Item));
        at_ += count * sizeof(Item);
        left_ -= count * sizeof(Item);
        return true;
    }
    bool ok() const { return ok_; }
    bool done() const { return ok_ && left_ == 0; }
    bool fail() { return ok_ = false; }

private:
    const uint8_t* at_;
    size_t left_;
    bool ok_ = true;
};

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

    void save(ImageWriter& image) const {
        image.value(size_);
        image.sequence(slots_);
    }
    bool load(ImageReader& image) {
        if (!image.value(size_) || !image.sequence(slots_)) return false;
        const size_t capacity = slots_.size();
        if (capacity < 2 || (capacity & (capacity - 1)) != 0 || size_ * 2 > capacity) {
            return image.fail();
        }
        mask_ = capacity - 1;
        shift_ = 64 - __builtin_ctzll(capacity);
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

    void rehash(size_t capacity) {  // capacity: a power of two, at least 2
        TableVector<Slot> old(capacity, Slot{EMPTY, V()});
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

    TableVector<Slot> slots_;
    size_t mask_ = 0;
    int shift_ = 0;
    size_t size_ = 0;
};

inline uint64_t pair_key(uint32_t left, uint32_t right) {
    return (uint64_t(left) << 32) | right;
}

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
