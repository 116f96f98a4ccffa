// Loss masks beside token files: which tokens of a shard a loss trains on, for chat data where
// only the assistant's words are targets (llmcc prepare --chat).
//
// For the token file X.bin (token_file.h), X.mask holds one byte per token of X.bin:
//   header: 256 little-endian int32
//     [0] magic 20261129
//     [1] version 1
//     [2] number of tokens N, the same as X.bin's
//     [3] R > 0: the tokens are rows of R, one conversation each from its first token, padded
//         (mask 0), and one more token (so that a row's last target exists): N = k R + 1 and
//         training rows must be R tokens long, starting at multiples of R (prepare --chat
//         --pad-to R); 0: conversations packed one after another, rows anywhere
//     [4..255] zero
//   then N bytes: byte i is 1 when token i is a trained target (the prediction of token i from the
//   tokens before it counts in the loss), 0 when it is not; nothing after them.
//
// A shard without a mask file trains on every token. DataLoader (train/data_loader.h) reads the
// masks of its shards and gives a target of -1 (ignored by cross_entropy) wherever the mask is 0.
// A bad file throws llmcc::Error naming the file and what is wrong.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace llmcc {

inline constexpr std::int32_t kLossMaskMagic = 20261129;

// "data/train_000000.bin" -> "data/train_000000.mask" (a path without ".bin" gets ".mask" added).
std::string loss_mask_path(const std::string& token_file_path);

// Writes `mask` (one 0 or 1 per token) to `path` atomically (<path>.tmp, fsync, rename), its
// tokens in rows of `row_tokens` (0: packed). Throws llmcc::Error for a byte other than 0 or 1,
// 2^31 or more values, or a count that is not whole rows and one more.
void write_loss_mask_file(const std::string& path, std::span<const std::uint8_t> mask, std::int32_t row_tokens = 0);

// Reads and checks a mask file: magic, version, a count equal to `tokens` (the token file's),
// whole rows and one more when it has rows, the exact size, every byte 0 or 1. *row_tokens (when
// given) gets the row length (0: packed).
std::vector<std::uint8_t> read_loss_mask_file(const std::string& path, std::int64_t tokens,
                                              std::int32_t* row_tokens = nullptr);

}  // namespace llmcc
