// Errors of the pybind functions (blocks, the optimizer) as Python exceptions carrying llmcc's
// message: TypeError for dtypes, ValueError for shapes, devices and values.
#pragma once

#include <pybind11/pybind11.h>

#include <utility>

#include "torch_bridge.h"

namespace llmcc_torch {

template <class F>
decltype(auto) python_errors(F&& f) {
  try {
    return run(std::forward<F>(f));
  } catch (const c10::TypeError& e) {
    throw pybind11::type_error(e.what_without_backtrace());
  } catch (const c10::Error& e) {
    throw pybind11::value_error(e.what_without_backtrace());
  }
}

}  // namespace llmcc_torch
