// Counting equal pieces of many texts without making a string per piece.
//
// Training needs, per task, how often each distinct piece occurs. Text
// repeats its pieces (" the", ",", " of") so much that a million pieces hold
// a few tens of thousands of distinct ones: WordCounts counts them by their
// UTF-8 bytes, kept once each, and only the distinct pieces become Python
// strings at the end. Plain C++, no Python API, so scanning and counting run
// without the GIL.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "_hash_table.hpp"
#include "_pretokenize_impl.hpp"

namespace streambpe {

class WordCounts {
public:
    struct Entry {
        uint64_t hash;
        uint64_t count;   // 0 marks a free slot
        size_t offset;    // of the piece's UTF-8 in keys()
        size_t length;
    };

    WordCounts() { rehash(1 << 12); }

    // Adds every piece of ``length`` code units of ``unit_size`` bytes at
    // ``data`` (a str buffer), as ``pattern`` cuts them. ``ascii`` says every
    // unit is below 0x80, so the buffer is its own UTF-8.
    void add_text(pretokenize::Pattern pattern, const pretokenize::ClassTable& table,
                  int unit_size, const void* data, size_t length, bool ascii) {
        pretokenize::scan_typed_pieces_of_kind(
            pattern, table, unit_size, data, length, [&](auto units, size_t start, size_t end) {
                if (ascii) {
                    add(static_cast<const uint8_t*>(data) + start, end - start);
                } else {
                    utf8_.clear();
                    pretokenize::append_units_utf8(units, start, end, utf8_, true);
                    add(utf8_.data(), utf8_.size());
                }
            });
    }

    void add(const uint8_t* piece, size_t n) {
        const uint64_t hash = hash_bytes(piece, n);
        size_t i = hash & mask_;
        while (entries_[i].count != 0) {
            Entry& entry = entries_[i];
            if (entry.hash == hash && entry.length == n &&
                std::memcmp(keys_.data() + entry.offset, piece, n) == 0) {
                ++entry.count;
                return;
            }
            i = (i + 1) & mask_;
        }
        entries_[i] = Entry{hash, 1, keys_.size(), n};
        keys_.append(reinterpret_cast<const char*>(piece), n);
        if (++distinct_ * 2 > entries_.size()) rehash(entries_.size() * 2);
    }

    // Every slot; the ones with count 0 are free.
    const std::vector<Entry>& entries() const { return entries_; }
    const char* keys() const { return keys_.data(); }

private:
    void rehash(size_t capacity) {
        std::vector<Entry> old(capacity, Entry{0, 0, 0, 0});
        old.swap(entries_);
        mask_ = capacity - 1;
        for (const Entry& entry : old) {
            if (entry.count == 0) continue;
            size_t i = entry.hash & mask_;
            while (entries_[i].count != 0) i = (i + 1) & mask_;
            entries_[i] = entry;
        }
    }

    std::vector<Entry> entries_;
    std::string keys_;
    pretokenize::ByteBuffer utf8_;
    size_t mask_ = 0;
    size_t distinct_ = 0;
};

}  // namespace streambpe
