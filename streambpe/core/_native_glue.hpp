// The C++ half of _native.pyx's glue: Python lists filled from native arrays.
//
// Unlike the *_impl.hpp headers, these functions use the Python API and run
// with the GIL held. They are C++ rather than Cython because they fill
// lists' item arrays directly (PyList_SET_ITEM, lent items, a grown
// ob_item), which Cython does not express.
#pragma once

#include <Python.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "_table_memory.hpp"

namespace streambpe {
namespace glue {

// The list of pieces of `text` ending at `ends` and starting at `starts`
// (empty when each starts where the one before ended): a new reference,
// or NULL with an exception set.
//
// Creating a str per piece dominates the cost, and prose repeats its
// short pieces (" the", ",", " and") all the time, so a piece equal to a
// recent one reuses that str object: a direct-mapped cache of recent
// short pieces, compared by their code units in `text`. It lives for one
// call, so it holds no object longer than the list does.
inline PyObject* piece_list(PyObject* text, const std::vector<size_t>& starts,
                            const std::vector<size_t>& ends) {
    constexpr size_t MAX_CACHED_LENGTH = 16;
    const int kind = PyUnicode_KIND(text);
    const char* data = static_cast<const char*>(PyUnicode_DATA(text));
    const size_t count = ends.size();
    PyObject* list = PyList_New(static_cast<Py_ssize_t>(count));
    if (list == nullptr) return nullptr;
    size_t slots = 16;
    while (slots < 4096 && slots < count) slots *= 2;
    std::vector<PyObject*> recent(slots, nullptr);  // borrowed from `list`
    std::vector<size_t> recent_start(slots, 0);
    size_t start = 0;
    for (size_t index = 0; index < count; ++index) {
        if (!starts.empty()) start = starts[index];
        const size_t end = ends[index];
        const size_t length = end - start;
        const char* units = data + start * kind;
        PyObject* piece = nullptr;
        size_t slot = 0;
        if (length <= MAX_CACHED_LENGTH) {
            uint64_t hash = length;
            for (size_t k = 0; k < length * kind; ++k) {
                hash = (hash ^ static_cast<unsigned char>(units[k])) * 0x100000001b3ULL;
            }
            slot = static_cast<size_t>(hash >> 40) & (slots - 1);
            PyObject* seen = recent[slot];
            if (seen != nullptr && static_cast<size_t>(PyUnicode_GET_LENGTH(seen)) == length &&
                std::memcmp(data + recent_start[slot] * kind, units, length * kind) == 0) {
                Py_INCREF(seen);
                piece = seen;
            }
        }
        if (piece == nullptr) {
            piece = PyUnicode_Substring(text, static_cast<Py_ssize_t>(start),
                                        static_cast<Py_ssize_t>(end));
            if (piece == nullptr) {
                Py_DECREF(list);
                return nullptr;
            }
            if (length <= MAX_CACHED_LENGTH) {
                recent[slot] = piece;
                recent_start[slot] = start;
            }
        }
        PyList_SET_ITEM(list, static_cast<Py_ssize_t>(index), piece);
        start = end;
    }
    return list;
}

// A new int object equal to `value` (not negative), for a list of ids of
// its own: a new reference, or NULL with an exception set.
//
// Every id put in a list has its reference count written, and two threads
// writing the counts of the same int objects pass their cache lines from
// core to core (see PieceEncoder._id_objects in _native.pyx). Before 3.12,
// CPython's small ints (below 257: the byte tokens, a third of r50k's ids
// on multilingual prose) are shared objects with such counts, so one of
// each is made here, equal but not the same object; from 3.12 they are
// immortal, their counts never written, and the shared ones serve.
inline PyObject* private_int(long long value) {
#if PY_VERSION_HEX < 0x030C0000
    if (value >= 0 && value < (1LL << PyLong_SHIFT)) {
        PyLongObject* number = _PyLong_New(value == 0 ? 0 : 1);
        if (number == nullptr) return nullptr;
        if (value != 0) number->ob_digit[0] = static_cast<digit>(value);
        return reinterpret_cast<PyObject*>(number);
    }
#endif
    return PyLong_FromLongLong(value);
}

// A list of `count` ids of a thread's own, none made yet: every item NULL,
// until extend_ids makes the int for an output number the first time it
// puts that id in a list. Kept out of the cyclic collector's walks (ints
// make no cycle). A new reference, or NULL with an exception set; it never
// reaches Python code, which could not read a NULL item.
//
// Made all at once before, a fork's ints were 200,000 objects for o200k:
// 3 to 13 ms with the GIL held, once per thread per tokenizer, while the
// other threads waited to hand over their own ids. A text uses a fraction
// of the vocabulary, and the ids it never uses are never made now.
inline PyObject* unmade_ints(Py_ssize_t count) {
    PyObject* list = PyList_New(count);
    if (list == nullptr) return nullptr;
    PyObject_GC_UnTrack(list);
    return list;
}

#ifndef Py_GIL_DISABLED
// Room in `list`'s item array for `count` (> 0) more items past its size:
// where they go, or NULL with an exception set (`list` unchanged). The
// array grows the way list.append grows it, an eighth more than needed, so
// appending again and again reallocates a few times; a big array is a
// mapping of its own, which realloc moves without copying. The caller
// fills the room and sets the size.
inline PyObject** room_for(PyListObject* list, Py_ssize_t count) {
    const Py_ssize_t size = Py_SIZE(list);
    if (count > PY_SSIZE_T_MAX / Py_ssize_t(sizeof(PyObject*)) - size) {
        PyErr_NoMemory();
        return nullptr;
    }
    const Py_ssize_t needed = size + count;
    if (needed > list->allocated) {
        Py_ssize_t allocated = needed + (needed >> 3) + 6;
        if (allocated > PY_SSIZE_T_MAX / Py_ssize_t(sizeof(PyObject*))) allocated = needed;
        auto* items = static_cast<PyObject**>(
            PyMem_Realloc(list->ob_item, static_cast<size_t>(allocated) * sizeof(PyObject*)));
        if (items == nullptr) {
            PyErr_NoMemory();
            return nullptr;
        }
        list->ob_item = items;
        list->allocated = allocated;
    }
    return list->ob_item + size;
}
#endif

// Room in `out`'s item array for `count` more ids, made at once before a
// long stretch's ids are handed over in parts (PieceEncoder._hand_over);
// grown part by part, the array was reallocated some thirty times for 2.77
// million ids. A big array is advised onto huge pages (advise_huge_pages):
// each of its pages is written once, in order. 0, or -1 with an exception
// set (`out` unchanged). A free-threaded build extends lists by slices and
// needs no room made.
inline int reserve_ids(PyObject* out, Py_ssize_t count) {
#ifdef Py_GIL_DISABLED
    (void)out;
    (void)count;
    return 0;
#else
    PyListObject* list = reinterpret_cast<PyListObject*>(out);
    if (count <= 0 || list->allocated - Py_SIZE(list) >= count) return 0;
    PyObject** at = room_for(list, count);
    if (at == nullptr) return -1;
    advise_huge_pages(at, static_cast<size_t>(count) * sizeof(PyObject*));
    return 0;
#endif
}

// Appends the Python ints ids[output] for each output number to the list
// `out`; 0, or -1 with an exception set (`out` then unchanged).
//
// The ids are written straight into `out`'s item array, grown the way
// list.append grows it (an eighth more than needed), each with a
// reference of its own. Going through a list per block instead (filled,
// then taken in one slice assignment) cost a fresh half-megabyte
// allocation per block, its page faults and a second copy: 20 of the 115
// ms of a warm o200k encode of source code, against 4 for list(ids) of the
// same ids. A PyList_Append per id cost a call and a capacity check each.
//
// PyListObject's `ob_item` and `allocated` are part of CPython's (non-
// limited) API and list_resize itself grows `ob_item` with PyMem_Realloc;
// a free-threaded build lays lists out otherwise, so it keeps the slice.
//
// An output number past the end of `ids` stands for the special token
// specials[output - len(ids)] of the call (see PieceEncoder._run in _native.pyx).
//
// `values` is null when `ids` holds every int. For a list of unmade_ints
// it is the vocabulary's 32-bit ids, and an int not made yet is made here
// (private_int(values[output])) and kept in `ids` for the next time.
inline int extend_ids(PyObject* out, PyObject* ids, PyObject* specials, const uint32_t* outputs,
                      size_t output_count, const uint32_t* values) {
    const Py_ssize_t count = static_cast<Py_ssize_t>(output_count);
    if (count == 0) return 0;
    const size_t vocabulary = static_cast<size_t>(PyList_GET_SIZE(ids));
    // The int in `slot` (of `ids`, or of `specials`, whose items are all
    // there), made first if it is not there yet: borrowed, or NULL with an
    // exception set.
    auto made = [values](PyObject** slot, size_t output) -> PyObject* {
        if (*slot == nullptr && values != nullptr) *slot = private_int(values[output]);
        return *slot;
    };
#ifdef Py_GIL_DISABLED
    auto slot_of = [&](size_t output) {
        return output < vocabulary ? &PyList_GET_ITEM(ids, output)
                                   : &PyList_GET_ITEM(specials, output - vocabulary);
    };
    PyObject* block = PyList_New(count);
    if (block == nullptr) return -1;
    for (Py_ssize_t index = 0; index < count; ++index) {
        PyObject* id = made(slot_of(outputs[index]), outputs[index]);
        if (id == nullptr) {
            Py_DECREF(block);  // the items set so far go with it; the rest are NULL
            return -1;
        }
        Py_INCREF(id);
        PyList_SET_ITEM(block, index, id);
    }
    const Py_ssize_t end = PyList_GET_SIZE(out);
    const int status = PyList_SetSlice(out, end, end, block);
    Py_DECREF(block);
    return status;
#else
    PyListObject* list = reinterpret_cast<PyListObject*>(out);
    PyObject** at = room_for(list, count);
    if (at == nullptr) return -1;
    // Writes each output's int, with a reference of its own, prefetching
    // the slot and the int ahead (a prefetch of an unmade NULL is a no-op);
    // `slot_of(output)` is where its int is. False, with the references
    // written so far taken back, if an int could not be made.
    auto fill = [&](auto slot_of) {
        constexpr Py_ssize_t AHEAD = 8;
        for (Py_ssize_t index = 0; index < count; ++index) {
            if (index + 2 * AHEAD < count) __builtin_prefetch(slot_of(outputs[index + 2 * AHEAD]));
            if (index + AHEAD < count) __builtin_prefetch(*slot_of(outputs[index + AHEAD]), 1);
            PyObject* id = made(slot_of(outputs[index]), outputs[index]);
            if (id == nullptr) {
                for (Py_ssize_t written = 0; written < index; ++written) Py_DECREF(at[written]);
                return false;
            }
            Py_INCREF(id);
            at[index] = id;
        }
        return true;
    };
    bool filled;
    if (PyList_GET_SIZE(specials) == 0) {
        // No special token in this call, so every output number indexes
        // `ids`: no choice of list three times an id (about 400
        // instructions of a warm chat-sized call, callgrind).
        PyObject** const items = reinterpret_cast<PyListObject*>(ids)->ob_item;
        filled = fill([items](size_t output) { return items + output; });
    } else {
        filled = fill([&](size_t output) {
            return output < vocabulary ? &PyList_GET_ITEM(ids, output)
                                       : &PyList_GET_ITEM(specials, output - vocabulary);
        });
    }
    if (!filled) return -1;
    Py_SET_SIZE(list, Py_SIZE(list) + count);
    return 0;
#endif
}

inline int extend_ids(PyObject* out, PyObject* ids, PyObject* specials,
                      const std::vector<uint32_t>& outputs, const uint32_t* values) {
    return extend_ids(out, ids, specials, outputs.data(), outputs.size(), values);
}

// Appends the items of the list parts[index] to `joined` and puts None in
// its place: 0, or -1 with an exception set (nothing changed). This is how
// the parts of a long text encoded on several threads come together, each
// as soon as it and the ones before it are done, while the other threads
// still encode (Encoder._encode_in_parts).
//
// A part that only `parts` holds gives its items up instead of lending
// them, so no item's reference count is touched: into an empty `joined` its
// whole item array moves; otherwise the pointers move in one copy. Joining
// the parts only once all were done cost 42 ms for 6.8 million ids, most of
// it page faults on the new item array, with both threads idle: 7 % of a
// two-thread encode of 20 MiB (o200k, perf).
//
// A big copy runs without the GIL, so a thread still encoding can hand over
// its blocks meanwhile. `joined` must then be the caller's own list, which
// no other thread can reach; the part cannot be reached either, since it
// left `parts` first. Sizes change only once the GIL is back, so a garbage
// collection meanwhile sees both lists as they were.
inline int move_part(PyObject* joined, PyObject* parts, Py_ssize_t index) {
    constexpr Py_ssize_t COPY_WITHOUT_GIL = Py_ssize_t(1) << 16;
    if (index < 0 || index >= PyList_GET_SIZE(parts)) {
        PyErr_SetString(PyExc_IndexError, "part index out of range");
        return -1;
    }
    PyObject* part = PyList_GET_ITEM(parts, index);
    if (!PyList_CheckExact(part)) {
        PyErr_SetString(PyExc_TypeError, "move_id_part takes a list of lists");
        return -1;
    }
#ifdef Py_GIL_DISABLED
    // Lists are laid out otherwise there: the slice assignment's own copy.
    const Py_ssize_t end = PyList_GET_SIZE(joined);
    if (PyList_SetSlice(joined, end, end, part) < 0) return -1;
    Py_INCREF(part);
    PyList_SetItem(parts, index, Py_NewRef(Py_None));
    Py_DECREF(part);
    return 0;
#else
    const bool sole = Py_REFCNT(part) == 1;  // only `parts` holds it
    const Py_ssize_t count = PyList_GET_SIZE(part);
    auto* to = reinterpret_cast<PyListObject*>(joined);
    auto* from = reinterpret_cast<PyListObject*>(part);
    const Py_ssize_t size = Py_SIZE(to);
    if (sole && size == 0) {
        std::swap(to->ob_item, from->ob_item);
        std::swap(to->allocated, from->allocated);
        Py_SET_SIZE(to, count);
        Py_SET_SIZE(from, 0);
        PyList_SET_ITEM(parts, index, Py_NewRef(Py_None));
        Py_DECREF(part);  // frees it with joined's old, empty item array
        return 0;
    }
    PyObject** at = count > 0 ? room_for(to, count) : nullptr;
    if (count > 0 && at == nullptr) return -1;
    PyList_SET_ITEM(parts, index, Py_NewRef(Py_None));  // the reference `parts` held is now ours
    if (sole) {
        const size_t bytes = static_cast<size_t>(count) * sizeof(PyObject*);
        if (count >= COPY_WITHOUT_GIL) {
            Py_BEGIN_ALLOW_THREADS
            std::memcpy(at, from->ob_item, bytes);
            Py_END_ALLOW_THREADS
        } else if (count > 0) {
            std::memcpy(at, from->ob_item, bytes);
        }
        Py_SET_SIZE(from, 0);  // its references moved to `joined`
    } else {
        for (Py_ssize_t item = 0; item < count; ++item) at[item] = Py_NewRef(from->ob_item[item]);
    }
    Py_SET_SIZE(to, size + count);
    Py_DECREF(part);
    return 0;
#endif
}

// Writes the records a vocabulary's tables are built from (see _Vocabulary
// in _native.pyx): for each token its value and its length as two 32-bit
// words, then its bytes, one after the other in `content`. The string is
// written through a pointer and grown by doubling, then cut to what was
// written (finish). Two std::string appends a record, each a call into
// libstdc++ with its own capacity check, were 65 of the 153 million
// instructions of building o200k's vocabulary from the table cache
// (callgrind). Nothing here touches a Python object.
class RecordWriter {
   public:
    RecordWriter(std::string& content, size_t expected) : content_(content) {
        content_.resize(expected);
    }

    void put(uint32_t value, const char* bytes, uint32_t length) {
        const size_t needed = 8 + size_t(length);
        if (content_.size() - used_ < needed) {
            const size_t doubled = 2 * content_.size();
            content_.resize(doubled > used_ + needed ? doubled : used_ + needed);
        }
        char* const at = &content_[used_];
        std::memcpy(at, &value, 4);
        std::memcpy(at + 4, &length, 4);
        std::memcpy(at + 8, bytes, length);
        used_ += needed;
    }

    void finish() { content_.resize(used_); }

   private:
    std::string& content_;
    size_t used_ = 0;
};

}  // namespace glue
}  // namespace streambpe
