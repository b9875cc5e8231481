// The checked arithmetic behind every size (src/support/checked.h), and its uses inside the
// library that the public API cannot reach with a hostile shape: the arena layout of the
// memory planner and the host allocator. Overflow is a kiln::Error, never a wrap-around.
#include <doctest/doctest.h>
#include <kiln/error.h>

#include "jit/exec/memory_plan.h"
#include "src/core/allocator.h"
#include "src/support/checked.h"

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

using namespace kiln;
using Shape = std::vector<std::int64_t>;

namespace {
constexpr std::int64_t P(int e) { return std::int64_t{1} << e; }
constexpr std::int64_t kMax = std::numeric_limits<std::int64_t>::max();

std::string error_of(auto&& f) {
    try {
        f();
    } catch (const Error& e) {
        return e.what();
    }
    return "";
}
}  // namespace

TEST_CASE("checked: element counts") {
    CHECK(support::checked_numel(Shape{}, "t") == 1);
    CHECK(support::checked_numel(Shape{2, 3, 4}, "t") == 24);
    CHECK(support::checked_numel(Shape{P(40), P(40), 0}, "t") == 0);  // zero wins over overflow
    CHECK(support::checked_numel(Shape{P(31), P(31)}, "t") == P(62));
    CHECK(support::checked_numel(Shape{kMax}, "t") == kMax);
    const std::string e = error_of([] { support::checked_numel(Shape{P(32), P(32)}, "here"); });
    CHECK(e.find("here: shape [4294967296,4294967296]") != std::string::npos);
    CHECK(error_of([] { support::checked_numel(Shape{3, -1}, "t"); }).find("negative dim -1 at axis 1") != std::string::npos);
}

TEST_CASE("checked: byte sizes, strides and spans") {
    CHECK(support::checked_bytes(Shape{P(60)}, 4, "t") == P(62));
    CHECK(support::checked_bytes(Shape{0, kMax}, 8, "t") == 0);
    CHECK(error_of([] { support::checked_bytes(Shape{P(61)}, 4, "t"); }).find("[2305843009213693952]") != std::string::npos);
    CHECK_FALSE(support::bytes_fit(Shape{P(61)}, 4));
    CHECK(support::bytes_fit(Shape{P(60)}, 4));
    CHECK_FALSE(support::bytes_fit(Shape{-2}, 1));
    CHECK(support::checked_strides(Shape{2, 3, 4}, "t") == Shape{12, 4, 1});
    CHECK(support::checked_strides(Shape{2, 0, 4}, "t") == Shape{4, 4, 1});
    CHECK(support::checked_strides(Shape{P(31), P(31)}, "t") == Shape{P(31), 1});
    CHECK_THROWS_AS(support::checked_strides(Shape{2, P(32), P(32)}, "t"), Error);
    CHECK(support::checked_span_bytes(Shape{3, 2}, Shape{0, 0}, 4, "t") == 4);
    CHECK(support::checked_span_bytes(Shape{3, 2}, Shape{2, 1}, 4, "t") == 24);
    CHECK(support::checked_span_bytes(Shape{0, 5}, Shape{P(62), P(62)}, 4, "t") == 0);
    CHECK_THROWS_AS(support::checked_span_bytes(Shape{2}, Shape{kMax}, 1, "t"), Error);
    CHECK_THROWS_AS(support::checked_span_bytes(Shape{2}, Shape{P(61)}, 4, "t"), Error);
}

TEST_CASE("checked: sums and rounding stay within int64") {
    CHECK(support::checked_mul(P(31), P(31), "t") == P(62));
    CHECK_THROWS_AS(support::checked_mul(P(32), P(31), "t"), Error);
    CHECK(support::checked_add(kMax - 1, 1, "t") == kMax);
    CHECK_THROWS_AS(support::checked_add(kMax, 1, "t"), Error);
    CHECK(support::checked_round_up(65, 64, "t") == 128);
    CHECK_THROWS_AS(support::checked_round_up(static_cast<std::size_t>(kMax), 64, "t"), Error);
    CHECK_THROWS_AS(support::checked_add_bytes(std::numeric_limits<std::size_t>::max(), 1, "t"), Error);
}

TEST_CASE("memory plan: an arena whose size overflows int64 is a kiln::Error") {
    // Two buffers alive at once, 2^62 bytes each: the second would end at 2^63.
    const std::vector<jit::LiveBuffer> huge(2, jit::LiveBuffer{static_cast<std::size_t>(P(62)), 0, 1});
    std::vector<std::size_t> offsets;
    CHECK(error_of([&] { jit::assign_offsets(huge, offsets); }).find("plan_memory") != std::string::npos);
    // Three of 2^61 bytes fit; so do two of 2^62 that do not live at the same time.
    const std::vector<jit::LiveBuffer> big(3, jit::LiveBuffer{static_cast<std::size_t>(P(61)), 0, 1});
    CHECK(jit::assign_offsets(big, offsets) == static_cast<std::size_t>(3 * P(61)));
    const std::vector<jit::LiveBuffer> apart{{static_cast<std::size_t>(P(62)), 0, 0}, {static_cast<std::size_t>(P(62)), 1, 1}};
    CHECK(jit::assign_offsets(apart, offsets) == static_cast<std::size_t>(P(62)));
}

TEST_CASE("allocator: a size past int64 is a kiln::Error, not a small block") {
    std::size_t cap = 0;
    const std::uint64_t before = core::host_alloc_count();
    CHECK_THROWS_AS(core::host_alloc(std::numeric_limits<std::size_t>::max() - 10, &cap), Error);
    CHECK(cap == 0);
    CHECK(core::host_alloc_count() == before);
}
