// Little-endian byte encoding for what the transport puts on the wire itself (the unique id, the
// bootstrap messages, each rank's peer info). Explicit byte order keeps the formats the same
// whatever the hosts' endianness; the reader checks every length so malformed input is refused
// rather than read out of bounds.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace terse {

class ByteWriter {
 public:
  explicit ByteWriter(std::vector<uint8_t>* out) : out_(out) {}

  void u8(uint8_t value) { out_->push_back(value); }
  void u16(uint16_t value) { little_endian(value, 2); }
  void u32(uint32_t value) { little_endian(value, 4); }
  void u64(uint64_t value) { little_endian(value, 8); }
  void bytes(const void* data, size_t size) {
    const uint8_t* begin = static_cast<const uint8_t*>(data);
    out_->insert(out_->end(), begin, begin + size);
  }

 private:
  void little_endian(uint64_t value, int size) {
    for (int i = 0; i < size; ++i) out_->push_back(static_cast<uint8_t>(value >> (8 * i)));
  }
  std::vector<uint8_t>* out_;
};

// Every read returns false (and reads nothing) when fewer bytes remain than it needs.
class ByteReader {
 public:
  ByteReader(const void* data, size_t size)
      : data_(static_cast<const uint8_t*>(data)), size_(size) {}

  bool u8(uint8_t* value) { return little_endian(value, 1); }
  bool u16(uint16_t* value) { return little_endian(value, 2); }
  bool u32(uint32_t* value) { return little_endian(value, 4); }
  bool u64(uint64_t* value) { return little_endian(value, 8); }
  // Points `*data` at the next `size` bytes inside the buffer (no copy).
  bool bytes(size_t size, const uint8_t** data) {
    if (size > remaining()) return false;
    *data = data_ + position_;
    position_ += size;
    return true;
  }
  size_t remaining() const { return size_ - position_; }

 private:
  template <typename T>
  bool little_endian(T* value, size_t size) {
    if (size > remaining()) return false;
    uint64_t result = 0;
    for (size_t i = 0; i < size; ++i)
      result |= static_cast<uint64_t>(data_[position_ + i]) << (8 * i);
    position_ += size;
    *value = static_cast<T>(result);
    return true;
  }
  const uint8_t* data_;
  size_t size_;
  size_t position_ = 0;
};

}  // namespace terse
