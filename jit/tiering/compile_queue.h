#pragma once
// The engine's background compile queue: `threads` worker threads (KILN_COMPILE_THREADS),
// started on the first submit, run compile jobs highest priority first (the tier manager
// gives a group's share of its function's time, so hot groups tier up before cold ones).
// Jobs belong to an owner (a Ticket: one per function); an owner can wait until its jobs are
// done (Function::wait_for_compiles) and cancel the ones not started when it goes away, so
// a job never runs against a destroyed function.
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace kiln::jit {

class CompileQueue {
public:
    // The jobs of one owner: counts what is queued or running, and whether the owner is gone.
    class Ticket {
    public:
        // Blocks until every job of this owner submitted so far has finished.
        void wait_idle();
        std::size_t pending() const;

    private:
        friend class CompileQueue;
        mutable std::mutex mu_;
        std::condition_variable cv_;
        std::size_t pending_ = 0;  // queued + running
        bool cancelled_ = false;
    };

    explicit CompileQueue(std::size_t threads);
    ~CompileQueue();  // drops queued jobs, joins the workers
    CompileQueue(const CompileQueue&) = delete;
    CompileQueue& operator=(const CompileQueue&) = delete;

    std::shared_ptr<Ticket> new_ticket() { return std::make_shared<Ticket>(); }
    // Queues `job` for `owner`. Higher `priority` runs first; equal priorities run in order.
    void submit(const std::shared_ptr<Ticket>& owner, double priority, std::function<void()> job);
    // Removes `owner`'s queued jobs and blocks until its running ones have finished (it never
    // waits behind other owners' jobs). After it returns no job of this owner runs again, and
    // later submits for it are dropped.
    void cancel(const std::shared_ptr<Ticket>& owner);
    std::size_t threads() const { return threads_; }

private:
    struct Job {
        double priority;
        std::uint64_t seq;
        std::shared_ptr<Ticket> owner;
        std::function<void()> run;
    };
    void worker();

    const std::size_t threads_;
    std::mutex mu_;
    std::condition_variable cv_;
    std::vector<Job> heap_;  // std::push_heap / pop_heap by (priority, -seq)
    std::uint64_t seq_ = 0;
    bool stop_ = false;
    std::vector<std::thread> workers_;
};

}  // namespace kiln::jit
