// Which tensor a collective is working on, as residual memory and decision logs see it.
//
// A tensor is identified by its communicator plus either its C API name (when the application
// named it) or its buffer address (anonymous ncclAllReduce calls). The element count and dtype
// are carried along but are *attributes*, not identity: when the same buffer comes back with a
// different size (an allocator reusing an address, a resized bucket), that is the same slot
// whose old residual no longer fits, so the memory recreates the entry instead of keeping a
// stale one around until it is evicted.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

#include "codecs/dtype.h"

namespace terse {

struct TensorKey {
  // The communicator's identity (e.g. its address or a unique id); tensors on different
  // communicators never share memory even at the same address.
  uint64_t comm = 0;
  // The buffer the collective reduces into; ignored for identity when `name` is set.
  uint64_t address = 0;
  // Elements and their type; attributes, see the file comment.
  size_t count = 0;
  DType dtype = DType::kFloat32;
  // The C API name; when non-empty, comm + name identify the tensor, so a named tensor keeps its
  // memory when the framework moves its gradient buffer.
  std::string name;

  bool named() const { return !name.empty(); }

  // For messages: "tensor 'encoder.w' on comm 0x1 (1024 x float)" or
  // "tensor at 0x7f00 on comm 0x1 (1024 x float)".
  std::string describe() const;
};

// All fields equal (identity and attributes).
bool operator==(const TensorKey& a, const TensorKey& b);
inline bool operator!=(const TensorKey& a, const TensorKey& b) {
  return !(a == b);
}

// True when `a` and `b` name the same tensor slot: same comm and same name, or, both unnamed,
// same address. Count and dtype are not compared.
bool same_tensor(const TensorKey& a, const TensorKey& b);

// Hash and equality on identity only (same_tensor), for maps that hold one entry per tensor.
struct TensorIdentityHash {
  size_t operator()(const TensorKey& key) const;
};
struct TensorIdentityEqual {
  bool operator()(const TensorKey& a, const TensorKey& b) const { return same_tensor(a, b); }
};

}  // namespace terse

// Hash consistent with operator== (every field), for maps keyed by the full description.
template <>
struct std::hash<terse::TensorKey> {
  size_t operator()(const terse::TensorKey& key) const;
};
