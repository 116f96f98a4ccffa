// Checks of the generated backward's gradient-final notifications (llmcc::adgen::grad_final): a
// listener that records each notified gradient (its data pointer and a copy of its values), and
// the check that every gradient of a store was notified exactly once with its final value.
#pragma once

#include <gtest/gtest.h>

#include <cstddef>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "llmcc/adgen.h"
#include "llmcc/parameters.h"
#include "llmcc/tensor.h"

namespace llmcc::test {

class RecordingListener : public adgen::GradFinalListener {
 public:
  struct Note {
    const void* data;
    std::vector<unsigned char> bytes;  // the gradient's value when notified
  };
  void grad_final(const Tensor& grad) override {
    const auto* p = static_cast<const unsigned char*>(grad.raw());
    notes.push_back({grad.raw(), std::vector<unsigned char>(p, p + grad.nbytes())});
  }
  std::vector<Note> notes;
};

// Every tensor of `store` was notified exactly once, nothing else was, and each snapshot equals
// the tensor's value now (bitwise). Returns, per notification in order, the store index.
inline std::vector<std::size_t> expect_each_final_once(const RecordingListener& listener, const ParameterStore& store,
                                                       const std::string& what) {
  std::map<const void*, std::size_t> index;
  for (std::size_t i = 0; i < store.count(); ++i) index[store.tensor(i).raw()] = i;
  std::vector<int> seen(store.count(), 0);
  std::vector<std::size_t> order;
  for (const auto& note : listener.notes) {
    auto it = index.find(note.data);
    if (it == index.end()) {
      ADD_FAILURE() << what << ": a notified tensor is not in the gradient store";
      continue;
    }
    const std::size_t i = it->second;
    ++seen[i];
    order.push_back(i);
    const Tensor t = store.tensor(i);
    EXPECT_EQ(note.bytes.size(), t.nbytes()) << what << ": " << store.name(i);
    if (note.bytes.size() == t.nbytes()) {
      EXPECT_EQ(std::memcmp(note.bytes.data(), t.raw(), t.nbytes()), 0)
          << what << ": " << store.name(i) << " changed after it was notified final";
    }
  }
  for (std::size_t i = 0; i < store.count(); ++i)
    EXPECT_EQ(seen[i], 1) << what << ": " << store.name(i) << " notified " << seen[i] << " times";
  return order;
}

// Position of the first and last notification of tensors whose name starts with `prefix`.
inline std::pair<std::size_t, std::size_t> notified_span(const std::vector<std::size_t>& order,
                                                         const ParameterStore& store, const std::string& prefix) {
  std::size_t first = order.size(), last = 0;
  for (std::size_t k = 0; k < order.size(); ++k)
    if (store.name(order[k]).rfind(prefix, 0) == 0) {
      first = std::min(first, k);
      last = k;
    }
  // An empty span would pass every order check against it.
  if (first == order.size()) ADD_FAILURE() << "no notified gradient's name starts with '" << prefix << "'";
  return {first, last};
}

}  // namespace llmcc::test
