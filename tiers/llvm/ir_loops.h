#pragma once
// Private to tiers/llvm: the IR-building helpers that the code generators of whole kernels
// (gemm_gen.h's blocked GEMM, conv_nchwc.cpp's blocked-layout convolution) share: constants,
// guarded loops with their loop metadata, branches, and the runtime's callouts (tier.h).
#include "tiers/llvm/codegen.h"

#include <llvm/IR/Constants.h>
#include <llvm/IR/DerivedTypes.h>
#include <llvm/IR/Function.h>
#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/Intrinsics.h>
#include <llvm/IR/Metadata.h>
#include <llvm/IR/Module.h>

#include <cstdint>
#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

namespace kiln::tiers::llvm_tier {

class IrLoops {
protected:
    using Value = llvm::Value;

    IrLoops(llvm::IRBuilderBase& b, llvm::Function* fn) : b_(b), ctx_(b.getContext()), fn_(fn) {}

    llvm::IRBuilderBase& b_;
    llvm::LLVMContext& ctx_;
    llvm::Function* fn_;

    Value* i64(std::int64_t v) { return b_.getInt64(static_cast<std::uint64_t>(v)); }
    Value* smin(Value* x, Value* y) { return b_.CreateBinaryIntrinsic(llvm::Intrinsic::smin, x, y); }
    Value* smax(Value* x, Value* y) { return b_.CreateBinaryIntrinsic(llvm::Intrinsic::smax, x, y); }
    // The runtime's callouts (tier.h): the calling thread's kernel scratch of `bytes` (null
    // when it cannot be had), and recording that this call failed for want of it.
    Value* scratch(Value* bytes) {
        llvm::Module& mod = *fn_->getParent();
        auto* ptr_t = llvm::PointerType::getUnqual(ctx_);
        return b_.CreateCall(mod.getOrInsertFunction(kScratchSymbol, llvm::FunctionType::get(ptr_t, {b_.getInt64Ty()}, false)),
                             {bytes});
    }
    // A read prefetch of the line at p (locality 3: every cache level; 2: not L1).
    void prefetch(Value* p, int locality = 3) {
        b_.CreateIntrinsic(llvm::Intrinsic::prefetch, {p->getType()}, {p, b_.getInt32(0), b_.getInt32(locality), b_.getInt32(1)});
    }
    void mark_failed() {
        llvm::Module& mod = *fn_->getParent();
        b_.CreateCall(mod.getOrInsertFunction(kFailedSymbol, llvm::FunctionType::get(b_.getVoidTy(), false)), {});
    }

    // Attaches loop metadata to the back-edge branch `br`: the named hints and their values.
    void loop_hints(llvm::Instruction* br, std::initializer_list<std::pair<const char*, llvm::Constant*>> hints) {
        std::vector<llvm::Metadata*> ops{nullptr};
        for (const auto& [name, value] : hints) {
            llvm::Metadata* hint[] = {llvm::MDString::get(ctx_, name), llvm::ConstantAsMetadata::get(value)};
            ops.push_back(llvm::MDNode::get(ctx_, hint));
        }
        auto* id = llvm::MDNode::getDistinct(ctx_, ops);
        id->replaceOperandWith(0, id);
        br->setMetadata(llvm::LLVMContext::MD_loop, id);
    }

    llvm::BasicBlock* block_named(const std::string& name) { return llvm::BasicBlock::Create(ctx_, name, fn_); }

    // for (iv = begin; iv < end; iv += step) body(iv): a guarded, rotated loop.
    // `scalar`: a loop of a few iterations that the loop vectoriser should leave alone (its
    // vector and epilogue loops would cost compile time and gain nothing).
    template <class F> void loop(Value* begin, Value* end, Value* step, const std::string& name, F body, bool scalar = false) {
        llvm::Instruction* br = loop_by(begin, end, name, [&](Value* iv) {
            body(iv);
            return step;
        });
        if (scalar) loop_hints(br, {{"llvm.loop.vectorize.enable", b_.getFalse()}});
    }

    // for (iv = begin; iv < end; iv += body(iv)): body returns a positive step. Returns the
    // loop's back-edge branch.
    template <class F> llvm::Instruction* loop_by(Value* begin, Value* end, const std::string& name, F body) {
        auto* pre = b_.GetInsertBlock();
        auto* head = block_named(name);
        auto* exit = block_named(name + ".exit");
        b_.CreateCondBr(b_.CreateICmpSLT(begin, end), head, exit);
        b_.SetInsertPoint(head);
        auto* iv = b_.CreatePHI(b_.getInt64Ty(), 2, name + ".iv");
        iv->addIncoming(begin, pre);
        Value* next = b_.CreateAdd(iv, body(iv), name + ".next", false, true);
        iv->addIncoming(next, b_.GetInsertBlock());
        auto* br = b_.CreateCondBr(b_.CreateICmpSLT(next, end), head, exit);
        b_.SetInsertPoint(exit);
        return br;
    }

    template <class F> void if_then(Value* cond, F then) {
        auto* yes = block_named("if.then");
        auto* done = block_named("if.end");
        b_.CreateCondBr(cond, yes, done);
        b_.SetInsertPoint(yes);
        then();
        b_.CreateBr(done);
        b_.SetInsertPoint(done);
    }

    template <class F, class G> void if_else(Value* cond, F then, G otherwise) {
        auto* yes = block_named("if.then");
        auto* no = block_named("if.else");
        auto* done = block_named("if.end");
        b_.CreateCondBr(cond, yes, no);
        b_.SetInsertPoint(yes);
        then();
        b_.CreateBr(done);
        b_.SetInsertPoint(no);
        otherwise();
        b_.CreateBr(done);
        b_.SetInsertPoint(done);
    }

    // if_else, emitting one side alone when `cond` is a constant (a specialised kernel).
    template <class F, class G> void choose(Value* cond, F then, G otherwise) {
        if (auto* known = llvm::dyn_cast<llvm::ConstantInt>(cond)) {
            if (known->isOne()) then();
            else otherwise();
            return;
        }
        if_else(cond, then, otherwise);
    }

    // cond ? make() : otherwise (make() runs only when cond holds).
    template <class F> Value* if_value(Value* cond, F make, Value* otherwise) {
        auto* pre = b_.GetInsertBlock();
        auto* yes = block_named("ifv.then");
        auto* done = block_named("ifv.end");
        b_.CreateCondBr(cond, yes, done);
        b_.SetInsertPoint(yes);
        Value* v = make();
        auto* yes_end = b_.GetInsertBlock();
        b_.CreateBr(done);
        b_.SetInsertPoint(done);
        auto* phi = b_.CreatePHI(v->getType(), 2);
        phi->addIncoming(v, yes_end);
        phi->addIncoming(otherwise, pre);
        return phi;
    }

};

}  // namespace kiln::tiers::llvm_tier
