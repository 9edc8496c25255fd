// Table images: built tables written out as flat bytes and read back, in
// plain C++ (no Python API).
//
// An image is what streambpe/_support/table_cache.py keeps on disk: the
// built vocabulary of a large encoding (most of a second to build) loads
// from it in milliseconds. _native.pyx names and stores the images; the
// tables (_hash_table.hpp, _piece_encoder_impl.hpp) write and read their own
// fields through ImageWriter and ImageReader.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>

namespace streambpe {

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

}  // namespace streambpe
