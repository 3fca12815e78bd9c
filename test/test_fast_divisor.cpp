// The launch-constant division the kernels do per tile (src/kernels/fast_divisor.h), checked
// through its host twin: the same multiply-high, add and shift, against plain division.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <random>
#include <vector>

#include "kernels/fast_divisor.h"

namespace {

// Numerators where a wrong multiplier or shift shows first: around multiples of d, and the
// top of the range.
std::vector<uint32_t> numerators_for(uint32_t d, std::mt19937_64& rng) {
  constexpr uint32_t kMax = 0x7fffffffu;  // n < 2^31
  std::vector<uint32_t> ns = {0, 1, 2, kMax, kMax - 1, kMax - d + 1};
  for (uint64_t k : {uint64_t{1}, uint64_t{2}, uint64_t{3}, uint64_t{kMax} / d - 1, uint64_t{kMax} / d})
    for (int64_t delta : {-1, 0, 1}) {
      const int64_t n = static_cast<int64_t>(k * d) + delta;
      if (n >= 0 && n <= kMax) ns.push_back(static_cast<uint32_t>(n));
    }
  for (int i = 0; i < 64; ++i) ns.push_back(static_cast<uint32_t>(rng() & kMax));
  const uint64_t near = std::min<uint64_t>(uint64_t{4} * d, uint64_t{kMax} + 1);
  for (int i = 0; i < 16; ++i) ns.push_back(static_cast<uint32_t>(rng() % near));
  return ns;
}

void check_divisor(uint32_t d, std::mt19937_64& rng) {
  const fa3::FastDivisor fd = fa3::make_fast_divisor(d);
  REQUIRE(fd.divisor == d);
  for (uint32_t n : numerators_for(d, rng)) {
    if (fa3::fast_div(n, fd) != n / d) {
      INFO("n = " << n << ", d = " << d);
      REQUIRE(fa3::fast_div(n, fd) == n / d);
    }
    const fa3::QuotRem qr = fa3::fast_divmod(static_cast<int>(n), fd);
    if (qr.quot != static_cast<int>(n / d) || qr.rem != static_cast<int>(n % d)) {
      INFO("n = " << n << ", d = " << d);
      REQUIRE(qr.quot == static_cast<int>(n / d));
      REQUIRE(qr.rem == static_cast<int>(n % d));
    }
  }
}

}  // namespace

TEST_CASE("fast_div divides every n < 2^31 like n / d", "[cpu][fast_divisor]") {
  std::mt19937_64 rng(31);
  SECTION("every divisor up to 4096") {
    for (uint32_t d = 1; d <= 4096; ++d) check_divisor(d, rng);
  }
  SECTION("powers of two, their neighbours, and the largest divisors") {
    for (int l = 1; l <= 30; ++l)
      for (int64_t delta : {-1, 0, 1})
        check_divisor(static_cast<uint32_t>((int64_t{1} << l) + delta), rng);
    check_divisor(0x7fffffffu, rng);
    check_divisor(0x7ffffffeu, rng);
  }
  SECTION("random divisors") {
    for (int i = 0; i < 2000; ++i) check_divisor(1 + static_cast<uint32_t>(rng() % 0x7ffffffeu), rng);
  }
  SECTION("a small divisor against every numerator of a range") {
    for (uint32_t d : {3u, 7u, 13u, 1000u}) {
      const fa3::FastDivisor fd = fa3::make_fast_divisor(d);
      for (uint32_t n = 0; n < (1u << 20); ++n)
        if (fa3::fast_div(n, fd) != n / d) {
          INFO("n = " << n << ", d = " << d);
          REQUIRE(fa3::fast_div(n, fd) == n / d);
        }
    }
  }
}
