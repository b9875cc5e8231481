#include "tiers/tier.h"

namespace kiln::tiers {
namespace {
struct Info {
    std::string_view name, text;
};
constexpr Info kBailouts[] = {
#define X(id, text) {#id, text},
    KILN_BAILOUTS(X)
#undef X
};
}  // namespace

std::string_view bailout_name(Bailout b) { return kBailouts[static_cast<int>(b)].name; }
std::string_view bailout_text(Bailout b) { return kBailouts[static_cast<int>(b)].text; }

}  // namespace kiln::tiers
