#pragma once
// Internal to tiers/asmjit (included only by its .cpp files; the one header besides
// gen_p.h that names asmjit types): f32 lanes, the LaneOps of vmath.h on xmm, ymm or zmm
// registers (the Lanes class), and the lane sequences of KIR's f32 ops built on them
// (lanes.cpp). Scalar f32 code uses lane 0 of xmm registers through the same sequences, so
// a value is the same in every lane and in scalar code.
#include "tiers/asmjit/analyze.h"
#include "tiers/asmjit/vmath.h"

#include <asmjit/x86.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

namespace kiln::tiers::asmjit_tier {

namespace aj = asmjit;
namespace x86 = asmjit::x86;

// Reports what the generator cannot emit (an error asmjit reported, or a malformed kernel).
[[noreturn]] inline void backend(const std::string& msg) { throw Unsupported{Bailout::backend_error, msg}; }

class Lanes final : public LaneOps {
public:
    Lanes(x86::Compiler& cc, int bytes) : cc_(cc), bytes_(bytes) {}

    // A value as a register; a constant (a full-width vector in the function's constant
    // pool) is loaded into a fresh one at the cursor.
    x86::Vec reg(F f) {
        const Slot& s = slot(f);
        if (!s.is_mem) return s.reg;
        x86::Vec r = new_vec(s.bytes);
        cc_.vmovaps(r, s.mem);
        return r;
    }
    F wrap(const x86::Vec& v) {
        f_.push_back(Slot{v, x86::Mem(), false, static_cast<int>(v.size())});
        return F{static_cast<int>(f_.size()) - 1};
    }
    F fresh(int bytes = 0) { return wrap(new_vec(bytes ? bytes : bytes_)); }
    // Masks: a vector of all-ones/zero lanes (xmm, ymm) or a mask register (zmm).
    bool kmask(F f) { return slot(f).bytes == 64; }
    K wrap_mask(const x86::Vec& v) {
        mv_.push_back(v);
        mk_.emplace_back();
        return K{static_cast<int>(mv_.size()) - 1};
    }
    K wrap_kmask(const x86::KReg& k) {
        mv_.emplace_back();
        mk_.push_back(k);
        return K{static_cast<int>(mk_.size()) - 1};
    }
    bool is_k(K m) const { return mk_[static_cast<std::size_t>(m.id)].isValid(); }
    const x86::Vec& mvec(K m) { return mv_[static_cast<std::size_t>(m.id)]; }
    const x86::KReg& mk(K m) { return mk_[static_cast<std::size_t>(m.id)]; }

    F constant(float v) override {
        std::uint32_t b;
        std::memcpy(&b, &v, 4);
        return bits(b);
    }
    // Constants stay in memory and are used as memory operands: no register is held for
    // them across a loop (fewer long-lived registers: much faster register allocation).
    F bits(std::uint32_t v) override {
        std::uint32_t data[16];
        for (auto& d : data) d = v;
        x86::Mem m = cc_.newConst(aj::ConstPoolScope::kLocal, data, static_cast<std::size_t>(bytes_));
        f_.push_back(Slot{x86::Vec(), m, true, bytes_});
        return F{static_cast<int>(f_.size()) - 1};
    }
    F add(F a, F b) override { return op3(x86::Inst::kIdVaddps, a, b, true); }
    F sub(F a, F b) override { return op3(x86::Inst::kIdVsubps, a, b, false); }
    F mul(F a, F b) override { return op3(x86::Inst::kIdVmulps, a, b, true); }
    F div(F a, F b) override { return op3(x86::Inst::kIdVdivps, a, b, false); }
    F min_x86(F a, F b) override { return op3(x86::Inst::kIdVminps, a, b, false); }
    F max_x86(F a, F b) override { return op3(x86::Inst::kIdVmaxps, a, b, false); }
    F fma(F a, F b, F c) override {
        if (slot(a).is_mem && !slot(b).is_mem) std::swap(a, b);
        F r = like(a);
        cc_.emit(x86::Inst::kIdVmovaps, reg(r), src(c));
        cc_.emit(x86::Inst::kIdVfmadd231ps, reg(r), reg(a), src(b));
        return r;
    }
    F sqrt(F a) { return op2(x86::Inst::kIdVsqrtps, a); }
    F round(F a, int mode) override {
        F r = like(a);
        cc_.emit(kmask(a) ? x86::Inst::kIdVrndscaleps : x86::Inst::kIdVroundps, reg(r), src(a), aj::imm(mode | 8));
        return r;
    }
    F bit_and(F a, F b) override { return op3(kmask(a) ? x86::Inst::kIdVpandd : x86::Inst::kIdVandps, a, b, true); }
    F bit_or(F a, F b) override { return op3(kmask(a) ? x86::Inst::kIdVpord : x86::Inst::kIdVorps, a, b, true); }
    F bit_xor(F a, F b) override { return op3(kmask(a) ? x86::Inst::kIdVpxord : x86::Inst::kIdVxorps, a, b, true); }
    K cmp(F a, F b, Cmp p) override {
        if (kmask(a)) {
            x86::KReg k = cc_.newKw();
            cc_.emit(x86::Inst::kIdVcmpps, k, reg(a), src(b), aj::imm(static_cast<int>(p)));
            return wrap_kmask(k);
        }
        x86::Vec r = new_vec(slot(a).bytes);
        cc_.emit(x86::Inst::kIdVcmpps, r, reg(a), src(b), aj::imm(static_cast<int>(p)));
        return wrap_mask(r);
    }
    F select(K m, F a, F b) override {
        F r = like(a);
        const x86::Vec rb = reg(b);  // before k(): a constant's load must not take the mask
        if (is_k(m)) {
            // r = b, then a merge-masked move of a: the register allocator sees r defined
            // first (a masked vblendmps into a fresh register reads it as uninitialised).
            cc_.vmovaps(reg(r), rb);
            cc_.k(mk(m)).emit(x86::Inst::kIdVmovups, reg(r), src(a));
        } else {
            cc_.emit(x86::Inst::kIdVblendvps, reg(r), rb, src(a), mvec(m));
        }
        return r;
    }
    F to_i32(F a) override { return op2(x86::Inst::kIdVcvtps2dq, a); }
    F from_i32(F a) override { return op2(x86::Inst::kIdVcvtdq2ps, a); }
    F add_i32(F a, F b) override { return op3(x86::Inst::kIdVpaddd, a, b, true); }
    F sub_i32(F a, F b) override { return op3(x86::Inst::kIdVpsubd, a, b, false); }
    F shl_i32(F a, int n) override { return shift(x86::Inst::kIdVpslld, a, n); }
    F shr_i32(F a, int n) override { return shift(x86::Inst::kIdVpsrld, a, n); }
    F sar_i32(F a, int n) override { return shift(x86::Inst::kIdVpsrad, a, n); }

    // Lane masks as KIR bools.
    K mask_and(K a, K b) { return mask_op(a, b, 0); }
    K mask_or(K a, K b) { return mask_op(a, b, 1); }
    K mask_not(K a) {
        if (is_k(a)) {
            x86::KReg k = cc_.newKw();
            cc_.knotw(k, mk(a));
            return wrap_kmask(k);
        }
        F ones = bits(0xffffffffu);
        x86::Vec r = new_vec(static_cast<int>(mvec(a).size()));
        cc_.emit(x86::Inst::kIdVxorps, r, mvec(a), src(ones));
        return wrap_mask(r);
    }

private:
    struct Slot {
        x86::Vec reg;
        x86::Mem mem;
        bool is_mem = false;
        int bytes = 16;
    };
    x86::Compiler& cc_;
    int bytes_;
    std::vector<Slot> f_;
    std::vector<x86::Vec> mv_;
    std::vector<x86::KReg> mk_;

    const Slot& slot(F f) const { return f_[static_cast<std::size_t>(f.id)]; }
    aj::Operand src(F f) const {
        const Slot& s = slot(f);
        return s.is_mem ? aj::Operand(s.mem) : aj::Operand(s.reg);
    }
    x86::Vec new_vec(int bytes) {
        return bytes == 64 ? x86::Vec(cc_.newZmm()) : bytes == 32 ? x86::Vec(cc_.newYmm()) : x86::Vec(cc_.newXmm());
    }
    F like(F a) { return fresh(slot(a).bytes); }
    F op3(x86::Inst::Id id, F a, F b, bool commutes) {
        if (commutes && slot(a).is_mem && !slot(b).is_mem) std::swap(a, b);
        F r = like(a);
        cc_.emit(id, reg(r), reg(a), src(b));
        return r;
    }
    F op2(x86::Inst::Id id, F a) {
        F r = like(a);
        cc_.emit(id, reg(r), src(a));
        return r;
    }
    F shift(x86::Inst::Id id, F a, int n) {
        F r = like(a);
        cc_.emit(id, reg(r), reg(a), aj::imm(n));
        return r;
    }
    K mask_op(K a, K b, int which) {
        if (is_k(a)) {
            x86::KReg k = cc_.newKw();
            if (which == 0) cc_.kandw(k, mk(a), mk(b));
            else cc_.korw(k, mk(a), mk(b));
            return wrap_kmask(k);
        }
        x86::Vec r = new_vec(static_cast<int>(mvec(a).size()));
        cc_.emit(which == 0 ? x86::Inst::kIdVandps : x86::Inst::kIdVorps, r, mvec(a), mvec(b));
        return wrap_mask(r);
    }
};

// KIR max/min on lanes: isnan(x) ? x : isnan(y) ? y : (y > x ? y : x)   (`<` for min).
F kir_minmax(Lanes& o, kir::BinaryOp op, F x, F y);
// One step of a reduction on lanes: acc + x, KIR's max/min, or a NaN-skipping extreme
// x > acc ? x : acc (x86's max with x first gives acc when either is NaN; `<` for min).
F reduce_step(Lanes& o, const LoopPlan::Reduction& r, F acc, F x);
// The f32 unary ops that are the same in scalar and vector code (all but sin and cos).
F f32_unary(Lanes& o, kir::UnaryOp op, F x);
// add, sub, mul, div, max, min.
F f32_binary(Lanes& o, kir::BinaryOp op, F a, F b);
// The predicate of a KIR comparison.
Cmp f32_pred(kir::BinaryOp op);

}  // namespace kiln::tiers::asmjit_tier
