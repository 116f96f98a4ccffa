// The writing of one safetensors file, shared by write_safetensors (one file) and
// write_safetensors_model (shards): private to src/io.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "file_io.h"
#include "llmcc/io/safetensors.h"

namespace llmcc::detail {

// Writes the header and the tensors, converted to dtype, into `out`, which the caller commits.
// Throws naming out.path() for an invalid name, a repeated name or a negative dimension.
void write_safetensors_file(AtomicFile& out, const std::vector<const SafetensorsTensor*>& tensors,
                            const std::vector<std::pair<std::string, std::string>>& metadata, SafetensorsDType dtype);

}  // namespace llmcc::detail
