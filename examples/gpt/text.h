// text.h — the GPT's data: a text as byte tokens, random windows of it as batches, and a
// continuation sampled from a model token by token.
#pragma once
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "gpt/model.h"
#include "tensor/random.h"

namespace gpt {

// A text as byte tokens: the vocabulary is the distinct bytes it holds, in byte order. A token id
// is a byte too (at most 256 of them), so a text is held in memory once (plus a tenth, briefly).
struct CharText {
  std::vector<unsigned char> vocab;        // token id -> byte
  std::vector<unsigned char> train, val;   // token ids: the first 90% of the text, the rest
  static CharText load(const std::string& path);
  static CharText from_string(const std::string& text, const std::string& name = "text");
  std::string decode(const std::vector<int64_t>& ids) const;
};

// B random windows of T + 1 tokens from `tokens`: inputs x the first T, targets y the last T,
// so position t of y is the token that follows x[0..t].   x, y int64 (B, T) on `device`
std::pair<ampgrad::Tensor, ampgrad::Tensor> get_batch(const std::vector<unsigned char>& tokens, int64_t B, int64_t T, ampgrad::Generator& gen,
                                                      ampgrad::Device device);

// Continues `context` by n tokens, each drawn from softmax(logits / temperature) with `gen`
// (temperature 0: the most likely token), handing each to on_token as it is drawn; returns the
// context and the continuation.
std::vector<int64_t> generate(GPT& model, std::vector<int64_t> context, int64_t n, double temperature, ampgrad::Generator& gen,
                              const std::function<void(int64_t)>& on_token = {});

}  // namespace gpt
