#pragma once
// The tier-2 versions a function holds, as KILN_CACHE_DIR records them for the next process
// that loads the same graph: Function::warmup() (no arguments) compiles, or loads from the
// persistent cache, the same versions before traffic arrives.
//
// One record per graph and tier-2 backend (versions_key), rewritten whenever a tier-2
// version lands, stored like a code entry (jit/tiering/disk_cache.h: atomic, checksummed).
// Text, one version a line:
//   v1 <group index> <hash of the group's normalised kernel IR, hex> <g|s> <params> <value or ?>...
// A group whose kernel no longer hashes the same (another graph, another Kiln) is skipped,
// as is a malformed line.
#include "src/ir/ir.h"
#include "tiers/tier.h"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kiln::jit {

struct RecordedVersion {
    std::size_t group = 0;       // index in the function's partition
    std::uint64_t kir_hash = 0;  // of the group's normalised kernel IR (jit/exec/code_cache.h)
    bool generic = false;
    std::vector<std::optional<std::int64_t>> params;  // bound values (nullopt: a run-time argument)

    bool operator==(const RecordedVersion&) const = default;
};

std::string format_versions(const std::vector<RecordedVersion>& versions);
std::vector<RecordedVersion> parse_versions(std::string_view text);
// The persistent cache key of `g`'s record for `tier2`.
std::string versions_key(const tiers::Tier& tier2, const ir::Graph& g);
std::uint64_t kir_hash(const std::string& normalised_kir);

}  // namespace kiln::jit
