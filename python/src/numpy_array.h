#pragma once
// NumPy arrays that take over a std::vector's storage: the data is not copied again, and the
// array frees it when Python drops the last reference.
#include <nanobind/ndarray.h>

#include <initializer_list>
#include <utility>
#include <vector>

namespace ts::python {

template <typename T>
nanobind::ndarray<nanobind::numpy, T> numpy_array(std::vector<T>&& values,
                                                  std::initializer_list<size_t> shape) {
  auto* owned = new std::vector<T>(std::move(values));
  nanobind::capsule owner(owned, [](void* p) noexcept { delete static_cast<std::vector<T>*>(p); });
  return nanobind::ndarray<nanobind::numpy, T>(owned->data(), shape.size(), shape.begin(), owner);
}

}  // namespace ts::python
