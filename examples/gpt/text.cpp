// text.cpp — a text as byte tokens, random windows of it for training, and sampling a
// continuation from a model.
#include "gpt/text.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>

#include "autograd/grad_mode.h"
#include "data/input_file.h"

namespace gpt {
using namespace ampgrad;

// The bytes become token ids where they lie; the last tenth is then copied out as the validation split.
static CharText tokenize(std::vector<unsigned char> bytes, const std::string& name) {
  CharText t;
  bool seen[256] = {};
  for (unsigned char ch : bytes) seen[ch] = true;
  unsigned char id_of[256];
  for (int b = 0; b < 256; ++b)
    if (seen[b]) {
      id_of[b] = (unsigned char)t.vocab.size();
      t.vocab.push_back((unsigned char)b);
    }
  AMPGRAD_CHECK(!t.vocab.empty(), name << ": the text is empty");
  for (unsigned char& ch : bytes) ch = id_of[ch];
  const size_t n_train = bytes.size() * 9 / 10;
  t.val.assign(bytes.begin() + std::ptrdiff_t(n_train), bytes.end());
  bytes.resize(n_train);
  t.train = std::move(bytes);
  return t;
}

CharText CharText::from_string(const std::string& text, const std::string& name) {
  return tokenize(std::vector<unsigned char>(text.begin(), text.end()), name);
}

CharText CharText::load(const std::string& path) {
  AMPGRAD_CHECK(std::filesystem::exists(path),
                "cannot read the text " << path << " (the default, from Debian's fortunes package, comes with scripts/install-deps.sh)");
  // Its type before it is opened: opening a FIFO would wait for a writer, forever.
  std::vector<unsigned char> bytes(data::input_file_size(path));
  std::ifstream f(path, std::ios::binary);
  f.read(reinterpret_cast<char*>(bytes.data()), std::streamsize(bytes.size()));
  AMPGRAD_CHECK(f && f.gcount() == std::streamsize(bytes.size()), "error reading " << path);
  return tokenize(std::move(bytes), path);
}

std::string CharText::decode(const std::vector<int64_t>& ids) const {
  std::string s;
  for (int64_t id : ids) s.push_back(char(vocab.at(size_t(id))));
  return s;
}

std::pair<Tensor, Tensor> get_batch(const std::vector<unsigned char>& tokens, int64_t B, int64_t T, Generator& gen, Device device) {
  std::vector<int64_t> x(B * T), y(B * T);
  const int64_t starts = int64_t(tokens.size()) - T;  // windows that fit
  for (int64_t b = 0; b < B; ++b) {
    const int64_t s = int64_t(gen.uniform() * double(starts));
    std::copy_n(tokens.begin() + s, T, x.begin() + b * T);
    std::copy_n(tokens.begin() + s + 1, T, y.begin() + b * T);
  }
  return {from_vector(x, {B, T}).to(device), from_vector(y, {B, T}).to(device)};
}

std::vector<int64_t> generate(GPT& model, std::vector<int64_t> ids, int64_t n, double temperature, Generator& gen,
                              const std::function<void(int64_t)>& on_token) {
  AMPGRAD_CHECK(!ids.empty(), "generate: needs at least one token of context");
  NoGradGuard no_grad;
  const bool was_training = model.is_training();
  model.eval();
  const Device device = model.wte->weight.device();
  for (int64_t i = 0; i < n; ++i) {
    const int64_t T = std::min<int64_t>(int64_t(ids.size()), model.config.block_size);  // the context that fits
    Tensor idx = from_vector(std::vector<int64_t>(ids.end() - T, ids.end()), {1, T}).to(device);
    Tensor logits = model.forward(idx).select(1, T - 1).select(0, 0).to(kFloat32).to(Device::cpu());  // (V)
    std::vector<float> l = to_vector<float>(logits);
    int64_t next = std::max_element(l.begin(), l.end()) - l.begin();
    if (temperature > 0) {  // inverse-CDF draw from softmax(l / temperature)
      std::vector<double> p(l.size());
      double total = 0;
      for (size_t v = 0; v < l.size(); ++v) total += p[v] = std::exp((l[v] - l[next]) / temperature);
      double u = gen.uniform() * total;
      for (next = 0; next + 1 < int64_t(p.size()) && u >= p[next]; ++next) u -= p[next];
    }
    ids.push_back(next);
    if (on_token) on_token(next);
  }
  model.train(was_training);
  return ids;
}

}  // namespace gpt
