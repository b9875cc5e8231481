// A preloaded library that hides AVX-512 from the process it is loaded into, for benchmarks:
// the peer (ONNX Runtime, whose kernels pick their ISA from CPUID and have no setting to cap
// it) then runs its AVX2 kernels on an AVX-512 host, beside Kiln's KILN_CPU_ISA=avx2 code.
//
//   LD_PRELOAD=build/bench/libkiln_cpuid_cap.so python bench/ort_compare.py ...   (the harness
//   does this itself with --peer-isa avx2)
//
// How: Linux's CPUID faulting (arch_prctl ARCH_SET_CPUID, 0; the CPU flag "cpuid_fault")
// makes every CPUID instruction of the thread, and of the threads it starts, raise SIGSEGV.
// The handler executes CPUID itself with faulting off for the moment, clears the AVX-512
// (and AMX, AVX10) feature bits of leaves 7 and 0xD, writes the result into the faulting
// thread's registers and steps over the instruction. XGETBV still reports the ZMM state as
// enabled; code that asks CPUID first (as every dispatcher we know does) sees AVX2 only.
// execve turns faulting off, so a child program (kiln-run) sees the real CPU. A SIGSEGV handler
// the program installs later (Python's faulthandler, say) takes the faults over: run the peer
// without one.
//
// Where the kernel or CPU lacks CPUID faulting the library does nothing and says so on stderr
// (KILN_CPUID_CAP=unavailable then); set KILN_CPUID_CAP_QUIET=1 to silence it.
#include <asm/prctl.h>
#include <cerrno>
#include <cpuid.h>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sys/syscall.h>
#include <ucontext.h>
#include <unistd.h>

namespace {

constexpr int kCpuidOn = 1, kCpuidFaults = 0;

long set_cpuid(int mode) { return syscall(SYS_arch_prctl, ARCH_SET_CPUID, mode); }

struct sigaction g_previous {};

// Leaf 7 sub-leaf 0: EBX bits 16 (F), 17 (DQ), 21 (IFMA), 26 (PF), 27 (ER), 28 (CD), 30 (BW),
// 31 (VL); ECX bits 1 (VBMI), 6 (VBMI2), 11 (VNNI), 12 (BITALG), 14 (VPOPCNTDQ); EDX bits 2
// (4VNNIW), 3 (4FMAPS), 8 (VP2INTERSECT), 22/24/25 (AMX), 23 (FP16). Sub-leaf 1: EAX bit 5
// (BF16), EDX bit 19 (AVX10). Leaf 0xD sub-leaf 0: EAX bits 5-7, the opmask and ZMM states.
void cap(unsigned leaf, unsigned sub, unsigned& a, unsigned& b, unsigned& c, unsigned& d) {
    if (leaf == 7 && sub == 0) {
        b &= ~((1u << 16) | (1u << 17) | (1u << 21) | (1u << 26) | (1u << 27) | (1u << 28) | (1u << 30) | (1u << 31));
        c &= ~((1u << 1) | (1u << 6) | (1u << 11) | (1u << 12) | (1u << 14));
        d &= ~((1u << 2) | (1u << 3) | (1u << 8) | (1u << 22) | (1u << 23) | (1u << 24) | (1u << 25));
    } else if (leaf == 7 && sub == 1) {
        a &= ~(1u << 5);
        d &= ~(1u << 19);
    } else if (leaf == 0xD && sub == 0) {
        a &= ~0xE0u;
    }
}

void on_segv(int sig, siginfo_t* info, void* context) {
    auto* uc = static_cast<ucontext_t*>(context);
    greg_t* r = uc->uc_mcontext.gregs;
    // A faulting CPUID is a general-protection fault (SI_KERNEL), so its RIP is readable
    // code; any other fault (a jump to an unmapped address, say) leaves RIP unread.
    const auto* ip = reinterpret_cast<const unsigned char*>(r[REG_RIP]);
    if (info->si_code == SI_KERNEL && ip[0] == 0x0F && ip[1] == 0xA2) {  // CPUID
        const unsigned leaf = static_cast<unsigned>(r[REG_RAX]), sub = static_cast<unsigned>(r[REG_RCX]);
        unsigned a = 0, b = 0, c = 0, d = 0;
        set_cpuid(kCpuidOn);
        __cpuid_count(leaf, sub, a, b, c, d);
        set_cpuid(kCpuidFaults);
        cap(leaf, sub, a, b, c, d);
        r[REG_RAX] = a;
        r[REG_RBX] = b;
        r[REG_RCX] = c;
        r[REG_RDX] = d;
        r[REG_RIP] += 2;
        return;
    }
    // Any other fault is the program's own: hand it to the handler that was there before.
    if (g_previous.sa_flags & SA_SIGINFO) {
        if (g_previous.sa_sigaction) return g_previous.sa_sigaction(sig, info, context);
    } else if (g_previous.sa_handler != SIG_DFL && g_previous.sa_handler != SIG_IGN) {
        return g_previous.sa_handler(sig);
    }
    std::signal(SIGSEGV, SIG_DFL);  // returning re-runs the instruction, which faults again
}

__attribute__((constructor)) void install() {
    const bool quiet = std::getenv("KILN_CPUID_CAP_QUIET") != nullptr;
    struct sigaction sa {};
    sa.sa_sigaction = on_segv;
    sa.sa_flags = SA_SIGINFO | SA_NODEFER;
    sigemptyset(&sa.sa_mask);
    if (sigaction(SIGSEGV, &sa, &g_previous) != 0 || set_cpuid(kCpuidFaults) != 0) {
        sigaction(SIGSEGV, &g_previous, nullptr);
        setenv("KILN_CPUID_CAP", "unavailable", 1);
        if (!quiet) std::fprintf(stderr, "cpuid_cap: CPUID faulting unavailable (%s); the CPU is not capped\n", std::strerror(errno));
        return;
    }
    setenv("KILN_CPUID_CAP", "avx2", 1);
}

}  // namespace
