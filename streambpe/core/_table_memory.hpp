// The memory of the big native tables, in plain C++ (no Python API).
//
// allocate_table and free_table give the tables that are read at random
// (the vocabulary, the pair table, the piece cache, the segment store) their
// memory: zeroed, on huge pages where the system allows, and kept for the
// next table of the same size when one is freed (KeptMappings). TableVector
// is a std::vector over them. Nothing here touches a Python object, so all of
// it may run with the GIL released.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <new>
#include <vector>

#if defined(__linux__)
#include <pthread.h>
#include <sys/mman.h>
#include <unistd.h>
#endif

namespace streambpe {

// Memory for the big tables that are read at random (the vocabulary, the
// pair table, the piece cache), zeroed. With 4 KiB pages nearly every lookup
// in a table of many megabytes also misses the TLB, and the page walk, not
// the read, bounds how many lookups can overlap; so on Linux a table of 2 MiB
// or more is mapped on its own, aligned to 2 MiB and advised to use huge
// pages (measured: random reads of a 64 MiB table take 24 ns instead of 39).
// Anonymous mappings also come zeroed and untouched until used. Elsewhere, or
// when the kernel declines, this is plain zeroed memory, aligned to a cache
// line: a table that probes the two 32-byte entries of one line
// (ShortPieces) needs its lines where it thinks they are, and calloc aligns
// to 16 bytes only. calloc still does the allocating, so a big block comes
// zeroed from the kernel, untouched: the block starts a little further in,
// and the pointer calloc gave sits just before it for free_table.
constexpr size_t HUGE_PAGE = size_t(2) << 20;
constexpr size_t CACHE_LINE = 64;

// Advises huge pages for the whole 2 MiB pages within [data, data + bytes):
// those not touched yet then fault in 2 MiB at a time instead of 4 KiB. For
// allocate_table's mappings, and for a big buffer from malloc that is
// written once from its start, such as a long text's ids (PieceEncoder's
// _run_spans: on 8 MiB of source code, a fresh process, 1,900 page faults
// fewer and 47 against 49 ms, medians of eight). Only advice: a kernel that
// declines it, or a system without it, leaves plain pages.
inline void advise_huge_pages(void* data, size_t bytes) {
#if defined(__linux__) && defined(MADV_HUGEPAGE)
    const uintptr_t start = reinterpret_cast<uintptr_t>(data);
    const uintptr_t first = (start + HUGE_PAGE - 1) & ~uintptr_t(HUGE_PAGE - 1);
    const uintptr_t end = (start + bytes) & ~uintptr_t(HUGE_PAGE - 1);
    if (end > first) madvise(reinterpret_cast<void*>(first), end - first, MADV_HUGEPAGE);
#else
    (void)data;
    (void)bytes;
#endif
}

#if defined(__linux__) && defined(MADV_HUGEPAGE)
// Mappings that free_table let go of, kept for the next table of the same
// size, up to limit() bytes in all (KEPT_LIMIT unless kept_table_memory
// changes it). A process that drops a tokenizer and builds another, calls
// clear_cache, or starts new threads' caches asks again for the sizes it
// just freed; unmapped, that memory came back as fresh pages. On virtual
// machines whose host takes back the pages a guest frees (ours: a balloon
// device with free page reporting), touching fresh memory costs a host fault
// as well as the zeroing. One 8 MiB o200k text on two threads, a fresh
// tokenizer a round, nine rounds in turns with one thread: 128-346 ms of
// system time in all in the two-thread rounds with unmapped tables, 20-76
// with kept ones (three runs each), and 1.45-1.59x one thread's speed
// against 1.60-1.64x. This is what malloc does for its own heap; the tables
// map their memory themselves (aligned to huge pages) and so had lost it.
//
// A kept mapping is zeroed when it is taken again, page run by page run:
// memset where pages are resident (mincore), MADV_DONTNEED where they are
// not, which costs nothing for pages never touched and drops any that were
// swapped out. Pages the previous table never touched so stay untouched.
class KeptMappings {
public:
    static constexpr size_t KEPT_LIMIT = size_t(128) << 20;

    // Never destroyed: a table may be freed while the process exits, after
    // static objects' destructors ran.
    static KeptMappings& instance() {
        static KeptMappings* const kept = new KeptMappings();
        return *kept;
    }

    // A kept mapping of exactly ``bytes`` (a multiple of HUGE_PAGE), zeroed;
    // nullptr if none is kept.
    void* take(size_t bytes) {
        void* mapping = nullptr;
        {
            std::lock_guard<std::mutex> hold(lock_);
            for (size_t i = 0; i < mappings_.size(); ++i) {
                if (mappings_[i].bytes != bytes) continue;
                mapping = mappings_[i].start;
                mappings_.erase(mappings_.begin() + i);
                kept_ -= bytes;
                break;
            }
        }
        if (mapping != nullptr) zero(mapping, bytes);
        return mapping;
    }

    // Keeps ``mapping`` (``bytes`` long); false, keeping nothing, if that
    // would pass the limit.
    bool keep(void* mapping, size_t bytes) {
        std::lock_guard<std::mutex> hold(lock_);
        if (kept_ + bytes > limit_) return false;
        mappings_.push_back(Mapping{mapping, bytes});
        kept_ += bytes;
        return true;
    }

    // Sets the limit, unmapping kept mappings (the oldest first) until the
    // bytes kept are within it.
    void set_limit(size_t limit) {
        std::lock_guard<std::mutex> hold(lock_);
        limit_ = limit;
        size_t dropped = 0;
        while (kept_ > limit_) {
            munmap(mappings_[dropped].start, mappings_[dropped].bytes);
            kept_ -= mappings_[dropped].bytes;
            ++dropped;
        }
        mappings_.erase(mappings_.begin(), mappings_.begin() + dropped);
    }

    size_t limit() {
        std::lock_guard<std::mutex> hold(lock_);
        return limit_;
    }
    size_t kept() {
        std::lock_guard<std::mutex> hold(lock_);
        return kept_;
    }

private:
    struct Mapping {
        void* start;
        size_t bytes;
    };

    KeptMappings() {
        // A child forked while another thread held the lock would find it
        // held forever; fork takes it first, so both sides start unlocked.
        pthread_atfork([] { instance().lock_.lock(); }, [] { instance().lock_.unlock(); },
                       [] { instance().lock_.unlock(); });
    }

    static void zero(void* mapping, size_t bytes) {
        const size_t page = size_t(sysconf(_SC_PAGESIZE));
        const size_t pages = bytes / page;
        std::vector<unsigned char> resident(pages);
        if (mincore(mapping, bytes, resident.data()) != 0) {
            std::memset(mapping, 0, bytes);
            return;
        }
        char* const start = static_cast<char*>(mapping);
        for (size_t first = 0; first < pages;) {
            const bool in_memory = resident[first] & 1;
            size_t end = first + 1;
            while (end < pages && bool(resident[end] & 1) == in_memory) ++end;
            if (in_memory) {
                std::memset(start + first * page, 0, (end - first) * page);
            } else if (madvise(start + first * page, (end - first) * page, MADV_DONTNEED) != 0) {
                std::memset(start + first * page, 0, (end - first) * page);
            }
            first = end;
        }
    }

    std::mutex lock_;
    std::vector<Mapping> mappings_;  // oldest first
    size_t kept_ = 0;
    size_t limit_ = KEPT_LIMIT;
};
#endif

inline void* allocate_table(size_t bytes) {
#if defined(__linux__) && defined(MADV_HUGEPAGE)
    if (bytes >= HUGE_PAGE) {
        const size_t rounded = (bytes + HUGE_PAGE - 1) & ~(HUGE_PAGE - 1);
        if (void* kept = KeptMappings::instance().take(rounded)) return kept;
        const size_t mapped = rounded + HUGE_PAGE;  // room to align
        void* raw = mmap(nullptr, mapped, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (raw == MAP_FAILED) throw std::bad_alloc();
        const uintptr_t start = reinterpret_cast<uintptr_t>(raw);
        const uintptr_t aligned = (start + HUGE_PAGE - 1) & ~uintptr_t(HUGE_PAGE - 1);
        // Unmap the slack on both sides so free_table can recompute the span.
        if (aligned > start) munmap(raw, aligned - start);
        const uintptr_t end = start + mapped;
        if (end > aligned + rounded) munmap(reinterpret_cast<void*>(aligned + rounded), end - aligned - rounded);
        advise_huge_pages(reinterpret_cast<void*>(aligned), rounded);
        return reinterpret_cast<void*>(aligned);
    }
#endif
    void* raw = std::calloc(bytes + CACHE_LINE + sizeof(void*), 1);
    if (raw == nullptr) throw std::bad_alloc();
    const uintptr_t past_pointer = reinterpret_cast<uintptr_t>(raw) + sizeof(void*);
    void** aligned = reinterpret_cast<void**>((past_pointer + CACHE_LINE - 1) & ~uintptr_t(CACHE_LINE - 1));
    aligned[-1] = raw;
    return aligned;
}

// Frees what allocate_table(bytes) returned (the same ``bytes``).
inline void free_table(void* memory, size_t bytes) {
    if (memory == nullptr) return;
#if defined(__linux__) && defined(MADV_HUGEPAGE)
    if (bytes >= HUGE_PAGE) {
        const size_t rounded = (bytes + HUGE_PAGE - 1) & ~(HUGE_PAGE - 1);
        if (!KeptMappings::instance().keep(memory, rounded)) munmap(memory, rounded);
        return;
    }
#endif
    std::free(static_cast<void**>(memory)[-1]);
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

// Sets how many bytes of freed table memory KeptMappings keeps (``limit``,
// if not SIZE_MAX) and returns the bytes it keeps now; 0 and nothing is
// kept where tables are not mapped on their own.
inline size_t kept_table_memory(size_t limit, size_t& limit_now) {
#if defined(__linux__) && defined(MADV_HUGEPAGE)
    KeptMappings& kept = KeptMappings::instance();
    if (limit != SIZE_MAX) kept.set_limit(limit);
    limit_now = kept.limit();
    return kept.kept();
#else
    (void)limit;
    limit_now = 0;
    return 0;
#endif
}

}  // namespace streambpe
