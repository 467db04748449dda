// random.cpp — the generator and random creation. Values are drawn on the host in float64
// and converted to the tensor's dtype, so a seed gives the same tensor on every device.
#include "tensor/random.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <numeric>
#include <sstream>

#include "tensor/kernels.h"

namespace ampgrad {

uint64_t Generator::next() { return engine_(); }
double Generator::uniform() { return (double)(engine_() >> 11) * 0x1.0p-53; }
double Generator::normal() {
  if (normal_spare_) { double v = *normal_spare_; normal_spare_.reset(); return v; }
  double u1 = uniform(), u2 = uniform();
  if (u1 < 1e-300) u1 = 1e-300;  // log(0) guard
  double r = std::sqrt(-2.0 * std::log(u1)), th = 2.0 * M_PI * u2;
  normal_spare_ = r * std::sin(th);
  return r * std::cos(th);
}

Generator& default_generator() {
  static Generator g(0);
  return g;
}
std::string Generator::State::to_string() const {
  std::ostringstream out;
  out << engine << ' ';
  if (normal_spare) out << std::hexfloat << *normal_spare;
  else out << '-';
  return out.str();
}

Generator::State Generator::State::from_string(const std::string& text) {
  State s;
  std::istringstream in(text);
  std::string spare, rest;
  in >> s.engine >> spare;
  AMPGRAD_CHECK(in && !(in >> rest), "Generator state: expected the engine's state and the spare normal, got "
                                         << (text.size() > 40 ? text.substr(0, 40) + "..." : "'" + text + "'"));
  if (spare != "-") {
    char* end = nullptr;
    const double v = std::strtod(spare.c_str(), &end);
    AMPGRAD_CHECK(*end == '\0', "Generator state: the spare normal '" << spare << "' is not a number");
    s.normal_spare = v;
  }
  return s;
}

void manual_seed(uint64_t seed) { default_generator().manual_seed(seed); }

static thread_local DrawRecorder* innermost = nullptr;
DrawRecorder::DrawRecorder() : prev_(innermost) { innermost = this; }
DrawRecorder::~DrawRecorder() { innermost = prev_; }

Generator& draw_source(Generator* gen) {
  Generator& g = gen ? *gen : default_generator();
  for (DrawRecorder* r = innermost; r; r = r->prev_) {
    auto seen = [&g](const auto& entry) { return entry.first == &g; };
    if (std::none_of(r->drawn_.begin(), r->drawn_.end(), seen)) r->drawn_.emplace_back(&g, g.get_state());
  }
  return g;
}

// Fills t (any dtype, any device) with values from draw(gen), in row-major order.
template <class Draw> static Tensor& fill_from(Tensor& t, Generator* gen, Draw draw) {
  Generator& g = draw_source(gen);
  std::vector<double> v(t.numel());
  {
    std::lock_guard lock(g.mutex());
    for (double& x : v) x = draw(g);
  }
  kernels::copy_(t, from_vector(v, t.shape()));
  return t;
}

Tensor& uniform_(Tensor& t, double lo, double hi, Generator* gen) {
  AMPGRAD_CHECK(lo <= hi, "uniform_ expects to return a [from, to) range, but found from=" << lo << " > to=" << hi);
  return fill_from(t, gen, [=](Generator& g) { return lo + (hi - lo) * g.uniform(); });
}
Tensor& normal_(Tensor& t, double mean, double std, Generator* gen) {
  AMPGRAD_CHECK(std >= 0, "normal_ expects std >= 0.0, but found std " << std);
  return fill_from(t, gen, [=](Generator& g) { return mean + std * g.normal(); });
}

// The fills write through the kernels, so a tensor made to require grad can be filled.
Tensor rand(const Shape& shape, TensorOptions opts, Generator* gen) {
  Tensor t = empty(shape, opts);
  return uniform_(t, 0, 1, gen);
}
Tensor randn(const Shape& shape, TensorOptions opts, Generator* gen) {
  Tensor t = empty(shape, opts);
  return normal_(t, 0, 1, gen);
}
Tensor randint(int64_t low, int64_t high, const Shape& shape, TensorOptions opts, Generator* gen) {
  AMPGRAD_CHECK(high > low, "randint: empty range [" << low << ", " << high << ")");
  Tensor t = empty(shape, opts.dtype(opts.dtype_or(kInt64)).requires_grad(false));
  const uint64_t span = uint64_t(high) - uint64_t(low);  // in uint64: high − low may pass INT64_MAX
  return fill_from(t, gen, [=](Generator& g) { return double(int64_t(uint64_t(low) + g.next() % span)); });
}
Tensor randperm(int64_t n, Generator* gen) {
  Generator& g = draw_source(gen);
  std::vector<int64_t> p(n);
  std::iota(p.begin(), p.end(), 0);
  std::lock_guard lock(g.mutex());
  for (int64_t i = n - 1; i > 0; --i) std::swap(p[i], p[g.next() % uint64_t(i + 1)]);  // Fisher–Yates
  return from_vector(p, {n});
}

}  // namespace ampgrad
