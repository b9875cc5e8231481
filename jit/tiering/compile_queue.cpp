#include "jit/tiering/compile_queue.h"

#include "src/support/log.h"

#include <algorithm>
#include <exception>

namespace kiln::jit {

void CompileQueue::Ticket::wait_idle() {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [this] { return pending_ == 0; });
}

std::size_t CompileQueue::Ticket::pending() const {
    std::lock_guard<std::mutex> lock(mu_);
    return pending_;
}

CompileQueue::CompileQueue(std::size_t threads) : threads_(std::max<std::size_t>(1, threads)) {}

CompileQueue::~CompileQueue() {
    std::vector<Job> dropped;
    {
        std::lock_guard<std::mutex> lock(mu_);
        stop_ = true;
        dropped.swap(heap_);
    }
    cv_.notify_all();
    for (auto& t : workers_) t.join();
    for (auto& j : dropped) {
        std::lock_guard<std::mutex> lock(j.owner->mu_);
        --j.owner->pending_;
        j.owner->cv_.notify_all();
    }
}

namespace {
bool before(const auto& a, const auto& b) {  // heap order: b runs before a
    return a.priority != b.priority ? a.priority < b.priority : a.seq > b.seq;
}
}  // namespace

void CompileQueue::submit(const std::shared_ptr<Ticket>& owner, double priority, std::function<void()> job) {
    {
        std::lock_guard<std::mutex> lock(owner->mu_);
        if (owner->cancelled_) return;
        ++owner->pending_;
    }
    {
        std::lock_guard<std::mutex> lock(mu_);
        heap_.push_back(Job{priority, seq_++, owner, std::move(job)});
        std::push_heap(heap_.begin(), heap_.end(), [](const Job& a, const Job& b) { return before(a, b); });
        if (workers_.size() < threads_) workers_.emplace_back([this] { worker(); });
    }
    cv_.notify_one();
}

void CompileQueue::cancel(const std::shared_ptr<Ticket>& owner) {
    std::size_t removed = 0;
    {
        std::lock_guard<std::mutex> lock(mu_);
        {
            std::lock_guard<std::mutex> olock(owner->mu_);
            owner->cancelled_ = true;  // submits from now on are dropped
        }
        auto mine = std::remove_if(heap_.begin(), heap_.end(), [&](const Job& j) { return j.owner == owner; });
        removed = static_cast<std::size_t>(heap_.end() - mine);
        heap_.erase(mine, heap_.end());
        std::make_heap(heap_.begin(), heap_.end(), [](const Job& a, const Job& b) { return before(a, b); });
    }
    std::unique_lock<std::mutex> lock(owner->mu_);
    owner->pending_ -= removed;
    // A job popped by a worker just before the flag was set sees it and returns at once;
    // running ones finish normally.
    owner->cv_.wait(lock, [&] { return owner->pending_ == 0; });
}

void CompileQueue::worker() {
    for (;;) {
        Job job;
        {
            std::unique_lock<std::mutex> lock(mu_);
            cv_.wait(lock, [this] { return stop_ || !heap_.empty(); });
            if (stop_) return;
            std::pop_heap(heap_.begin(), heap_.end(), [](const Job& a, const Job& b) { return before(a, b); });
            job = std::move(heap_.back());
            heap_.pop_back();
        }
        bool run = false;
        {
            std::lock_guard<std::mutex> lock(job.owner->mu_);
            run = !job.owner->cancelled_;
        }
        if (run) {
            try {
                job.run();
            } catch (const std::exception& e) {  // jobs report their own failures; this is a last resort
                support::log().error("compile job failed: {}", e.what());
            } catch (...) {
                support::log().error("compile job failed with an unknown exception");
            }
        }
        job.run = nullptr;  // release what the job captured before the owner is told
        std::lock_guard<std::mutex> lock(job.owner->mu_);
        --job.owner->pending_;
        job.owner->cv_.notify_all();
    }
}

}  // namespace kiln::jit
