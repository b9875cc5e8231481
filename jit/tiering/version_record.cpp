#include "jit/tiering/version_record.h"

#include "src/support/hash.h"

#include <charconv>
#include <sstream>

namespace kiln::jit {

std::string format_versions(const std::vector<RecordedVersion>& versions) {
    std::string out;
    for (const RecordedVersion& v : versions) {
        out += "v1 " + std::to_string(v.group) + " " + support::hex64(v.kir_hash) + (v.generic ? " g " : " s ") +
               std::to_string(v.params.size());
        for (const auto& p : v.params) out += p ? " " + std::to_string(*p) : std::string(" ?");
        out += "\n";
    }
    return out;
}

namespace {
template <class T> bool number(const std::string& s, T& out, int base = 10) {
    auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), out, base);
    return ec == std::errc() && p == s.data() + s.size();
}
}  // namespace

std::vector<RecordedVersion> parse_versions(std::string_view text) {
    std::vector<RecordedVersion> out;
    std::istringstream lines{std::string(text)};
    std::string line;
    while (std::getline(lines, line)) {
        std::istringstream in(line);
        std::string tag, group, hash, kind, count;
        if (!(in >> tag >> group >> hash >> kind >> count) || tag != "v1" || (kind != "g" && kind != "s")) continue;
        RecordedVersion v;
        std::size_t n = 0;
        if (!number(group, v.group) || !number(hash, v.kir_hash, 16) || !number(count, n) || n > 4096) continue;
        v.generic = kind == "g";
        bool ok = true;
        for (std::size_t i = 0; i < n && ok; ++i) {
            std::string value;
            std::int64_t x = 0;
            if (!(in >> value)) ok = false;
            else if (value == "?") v.params.emplace_back();
            else if (number(value, x)) v.params.emplace_back(x);
            else ok = false;
        }
        std::string extra;
        if (ok && !(in >> extra)) out.push_back(std::move(v));
    }
    return out;
}

std::string versions_key(const tiers::Tier& tier2, const ir::Graph& g) {
    return "versions of a graph\n" + std::string(tier2.name()) + "\n" + tier2.fingerprint() + "\n" +
           support::hex64(ir::structural_hash(g));
}

std::uint64_t kir_hash(const std::string& normalised_kir) { return support::Hasher().str(normalised_kir).digest(); }

}  // namespace kiln::jit
