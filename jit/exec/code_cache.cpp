#include "jit/exec/code_cache.h"

#include <algorithm>

namespace kiln::jit {

CodeCache::CodeCache(std::size_t limit_bytes) : limit_(limit_bytes) {}

namespace {
void add_user(CodeEntry& e, const std::shared_ptr<CodeUser>& user) {
    // Drop expired users while here, so the list stays as long as the groups alive.
    std::erase_if(e.users, [](const std::weak_ptr<CodeUser>& w) { return w.expired(); });
    for (const auto& w : e.users)
        if (w.lock() == user) return;
    e.users.push_back(user);
}
}  // namespace

bool CodeCache::contains(const std::string& key) const {
    std::lock_guard<std::mutex> lock(mu_);
    return map_.count(key) != 0 || claimed_.count(key) != 0;
}

std::shared_ptr<CodeEntry> CodeCache::find(const std::string& key, const std::shared_ptr<CodeUser>& user) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = map_.find(key);
    if (it == map_.end()) {
        ++misses_;
        return nullptr;
    }
    ++hits_;
    add_user(*it->second, user);
    it->second->touch();
    return it->second;
}

std::shared_ptr<CodeEntry> CodeCache::find_or_claim(const std::string& key, const std::shared_ptr<CodeUser>& user) {
    std::unique_lock<std::mutex> lock(mu_);
    for (;;) {
        if (auto it = map_.find(key); it != map_.end()) {
            ++hits_;
            add_user(*it->second, user);
            it->second->touch();
            return it->second;
        }
        if (claimed_.insert(key).second) {
            ++misses_;
            return nullptr;
        }
        released_.wait(lock);  // another caller is making this code; look again when it is done
    }
}

void CodeCache::release(const std::string& key) {
    {
        std::lock_guard<std::mutex> lock(mu_);
        claimed_.erase(key);
    }
    released_.notify_all();
}

std::shared_ptr<CodeEntry> CodeCache::insert(const std::string& key, std::shared_ptr<const tiers::CompiledKernel> code,
                                             int tier, const std::shared_ptr<CodeUser>& user,
                                             std::vector<Evicted>* evicted) {
    std::lock_guard<std::mutex> lock(mu_);
    if (auto it = map_.find(key); it != map_.end()) {  // another compile of the same code won
        add_user(*it->second, user);
        return it->second;
    }
    auto e = std::make_shared<CodeEntry>();
    e->key = key;
    e->bytes = std::max<std::size_t>(code->code_bytes(), 1);
    e->code = std::move(code);
    e->tier = tier;
    e->clock = &clock_;
    e->admitted = ++admitted_;
    // Stamped with the current epoch, then a new epoch starts: entries run from now on are
    // told apart from those (this one included) that were not.
    e->last_use.store(clock_.fetch_add(1, std::memory_order_relaxed), std::memory_order_relaxed);
    e->users.push_back(user);
    map_.emplace(key, e);
    bytes_ += e->bytes;
    while (limit_ > 0 && bytes_ > limit_ && map_.size() > 1) {
        auto victim = map_.end();
        for (auto it = map_.begin(); it != map_.end(); ++it) {
            if (it->second == e) continue;
            if (victim == map_.end()) {
                victim = it;
                continue;
            }
            const CodeEntry& a = *it->second;
            const CodeEntry& b = *victim->second;
            const auto ua = a.last_use.load(std::memory_order_relaxed), ub = b.last_use.load(std::memory_order_relaxed);
            if (ua < ub || (ua == ub && a.admitted < b.admitted)) victim = it;
        }
        CodeEntry& v = *victim->second;
        v.resident.store(false, std::memory_order_release);
        bytes_ -= v.bytes;
        ++evictions_;
        if (evicted) evicted->push_back(Evicted{victim->second, std::move(v.users)});
        v.users.clear();
        map_.erase(victim);
    }
    return e;
}

CodeCacheStats CodeCache::stats() const {
    std::lock_guard<std::mutex> lock(mu_);
    CodeCacheStats s;
    s.bytes = bytes_;
    s.entries = map_.size();
    s.limit_bytes = limit_;
    s.hits = hits_;
    s.misses = misses_;
    s.evictions = evictions_;
    return s;
}

std::string normalised_kir(const kir::Kernel& kernel) {
    kir::Kernel k = kernel;  // shallow: the statement trees are shared, immutable
    k.name.clear();
    for (auto& b : k.buffers) b.name.clear();
    for (auto& p : k.params) p.clear();
    return kir::print(k);
}

std::string code_key(const tiers::Tier& tier, const std::string& kir_text, const kir::Specialization& spec) {
    std::string key;
    key.reserve(kir_text.size() + 160);
    key += "tier ";
    key += std::to_string(tier.level());
    key += ' ';
    key += tier.name();
    key += '\n';
    key += tier.fingerprint();
    key += "\nbound:";
    for (const auto& p : spec.params) {
        key += ' ';
        key += p ? std::to_string(*p) : std::string("?");
    }
    key += '\n';
    key += kir_text;
    return key;
}

}  // namespace kiln::jit
