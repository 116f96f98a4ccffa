// Loss masks beside token files (llmcc/io/loss_mask_file.h).
#include "llmcc/io/loss_mask_file.h"

#include <cstring>
#include <limits>

#include "io/file_io.h"
#include "llmcc/error.h"
#include "llmcc/io/token_file.h"

namespace llmcc {

namespace {
constexpr const char* kWhere = "loss mask";
}  // namespace

std::string loss_mask_path(const std::string& token_file_path) {
  const std::string ext = ".bin";
  if (token_file_path.size() >= ext.size() &&
      token_file_path.compare(token_file_path.size() - ext.size(), ext.size(), ext) == 0)
    return token_file_path.substr(0, token_file_path.size() - ext.size()) + ".mask";
  return token_file_path + ".mask";
}

void write_loss_mask_file(const std::string& path, std::span<const std::uint8_t> mask, std::int32_t row_tokens) {
  if (mask.size() > static_cast<std::size_t>(std::numeric_limits<std::int32_t>::max()))
    fail(kWhere, path + ": " + std::to_string(mask.size()) + " values do not fit the header's int32 count");
  if (row_tokens < 0 || (row_tokens > 0 && mask.size() % static_cast<std::size_t>(row_tokens) != 1))
    fail(kWhere, path + ": " + std::to_string(mask.size()) + " tokens are not rows of " + std::to_string(row_tokens) +
                     " and one more");
  for (std::size_t i = 0; i < mask.size(); ++i)
    if (mask[i] > 1)
      fail(kWhere, path + ": value " + std::to_string(i) + " is " + std::to_string(mask[i]) + ", not 0 or 1");
  std::int32_t header[kTokenFileHeaderInts] = {};
  header[0] = kLossMaskMagic;
  header[1] = 1;
  header[2] = static_cast<std::int32_t>(mask.size());
  header[3] = row_tokens;
  detail::AtomicFile out(path, kWhere);
  out.write(header, sizeof header);
  out.write(mask.data(), mask.size());
  out.commit();
}

std::vector<std::uint8_t> read_loss_mask_file(const std::string& path, std::int64_t tokens, std::int32_t* row_tokens) {
  const detail::MappedFile file(path, kWhere);
  if (file.size() < kTokenFileHeaderBytes)
    fail(kWhere, path + ": truncated: " + std::to_string(file.size()) + " bytes, less than the " +
                     std::to_string(kTokenFileHeaderBytes) + "-byte header");
  std::int32_t header[kTokenFileHeaderInts];
  std::memcpy(header, file.data(), sizeof header);
  if (header[0] != kLossMaskMagic)
    fail(kWhere, path + ": bad magic " + std::to_string(header[0]) + ", expected " + std::to_string(kLossMaskMagic) +
                     " (a loss mask file)");
  if (header[1] != 1) fail(kWhere, path + ": unknown version " + std::to_string(header[1]) + ", expected 1");
  if (header[2] != tokens)
    fail(kWhere,
         path + ": masks " + std::to_string(header[2]) + " tokens, but its token file holds " + std::to_string(tokens));
  if (header[3] < 0 || (header[3] > 0 && tokens % header[3] != 1))
    fail(kWhere, path + ": rows of " + std::to_string(header[3]) + " tokens, but " + std::to_string(tokens) +
                     " tokens are not whole rows and one more");
  if (row_tokens != nullptr) *row_tokens = header[3];
  const std::size_t want = kTokenFileHeaderBytes + static_cast<std::size_t>(tokens);
  if (file.size() != want)
    fail(kWhere, path + ": " + std::to_string(file.size()) + " bytes, expected the header and " +
                     std::to_string(tokens) + " mask bytes (" + std::to_string(want) + ")");
  std::vector<std::uint8_t> mask(file.data() + kTokenFileHeaderBytes, file.data() + want);
  for (std::size_t i = 0; i < mask.size(); ++i)
    if (mask[i] > 1)
      fail(kWhere, path + ": value " + std::to_string(i) + " is " + std::to_string(mask[i]) + ", not 0 or 1");
  return mask;
}

}  // namespace llmcc
