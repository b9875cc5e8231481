// The channel-lane path of the blocked GEMM's convolutions (gemm_gen.h, chan()): where an
// image is small, vectors along its output pixels leave lanes empty (7 x 7 = 49 pixels fill
// 64 lanes; a 14 x 14 grid of pitch 16 computes 224 values for 196 pixels). Here the lanes
// run along the output channels instead, as in the blocked channel layouts (NCHWc) of the
// CPU runtimes, with the tensors left as they are (NCHW) and the weights packed once per
// function by the runtime (kir::Derived: tiles of CT = 2 VW channels, transposed):
//
//   for each tile of CT output channels of the block:
//     for each run of R pixels of one output row:               R x 2 vector accumulators
//       for each depth index k = (c, i, j):
//         w0, w1 = Ap[k][0:VW], Ap[k][VW:2 VW]
//         for each pixel r: b = broadcast(grid[c][tap (i, j) of pixel r]); acc[r] += b * (w0, w1)
//       the accumulators, transposed in registers into the stack tile, into the epilogue
//
// Where a tile's weights outgrow L1 (chan_depth_block()), the depth loop is cut into blocks of
// input channels, each block run over kChanBlockRuns runs (of a dense image, or of whole
// output rows) before the next, the runs' accumulators kept on the stack in between.
//
// The grid is grid()'s: the image for a dense 1x1 conv, else the phase planes of the block's
// input rows; a run's pixels are consecutive in it (one base, constant offsets). The last
// run of a row starts early enough to end at the row's end and stores only its new pixels.
// A dense conv's image is one row of all its pixels (a run may span output rows).
// At 512 bits only. With AVX2's 16 registers (runs of at most 6 pixels, tiles of 16 channels)
// runs confined to one output row ran 10-25% slower than the pixel lanes (resnet18's
// 512-channel 3x3 at 7 x 7, 1 thread, AMD EPYC Zen 4), and a dense 1x1 conv runs faster as
// the packed GEMM on its image (gemm.cpp, dense_gemm_).
#include "tiers/llvm/gemm_gen.h"

#include <llvm/IR/IntrinsicsX86.h>

#include <algorithm>

namespace kiln::tiers::llvm_tier::gemm_detail {

namespace {

std::int64_t bound_value(Value* v) {
    auto* k = llvm::dyn_cast<llvm::ConstantInt>(v);
    return k ? k->getSExtValue() : -1;
}

std::int64_t round_up(std::int64_t v, std::int64_t m) { return (v + m - 1) / m * m; }

}  // namespace

std::int64_t GemmGen::chan_run() {
    // Bound dims, f32 in 512-bit vectors, operands of the compute type, A packed by the
    // runtime in whole row blocks of tiles, a conv that is not depthwise and that grid()
    // would run.
    const std::int64_t CT = 2 * vw_;
    if (!h_.im2col || h_.a_packed < 0 || vw_ * es_ != 64 || es_ != 4 || widened_a() || widened_b())
        return 0;
    const kir::Derived& d = kern_.derived[static_cast<std::size_t>(h_.a_packed)];
    const std::int64_t npix = bound_value(n_), k = bound_value(k_dim_), khw = bound_value(im_khw_), og = bound_value(m_);
    const std::int64_t ow = bound_value(im_ow_);
    auto* applies = llvm::dyn_cast<llvm::ConstantInt>(grid_applies());
    if (npix < 1 || k < 1 || khw < 1 || og < CT || ow < 1 || npix % ow != 0 || k == khw || !applies || !applies->isOne())
        return 0;
    if (d.lanes % CT != 0 || d.rows != og || d.cols != k || (h_.row_block < og && h_.row_block % CT != 0)) return 0;
    auto* dense_c = llvm::dyn_cast<llvm::ConstantInt>(dense_conv());
    const bool dense = dense_c && dense_c->isOne();
    // A run: R pixels of one output row (of the image's pixels for a dense conv), all of them
    // where they are at most kMaxChanRun, else the R in [kMinChanRun, kMaxChanRun] of
    // the least cost, a run costing R + 4 pixels (each step of depth loads the weights and
    // loops whatever R is).
    const std::int64_t len = dense ? npix : ow, most = kMaxChanRun;
    std::int64_t run = len, best = len;
    if (len > most) {
        run = 0;
        for (std::int64_t r = most; r >= kMinChanRun; --r)
            if (run == 0 || (round_up(len, r) / r) * (r + 4) < (best / run) * (run + 4)) {
                run = r;
                best = round_up(len, r);
            }
    }
    // Cycles per image, roughly: pixel lanes run row tiles of MR rows over strips of NR grid
    // pixels, K * MR * NV vector FMAs and a short epilogue each; channel lanes tiles of 2 VW
    // rows over runs of R pixels, K * 2 R FMAs each, and their transposes and epilogue of
    // 2 VW rows (~500 cycles: mobilenet_v2's 64 -> 384 1x1 at 14 x 14 ran 5-10% slower on
    // channel lanes, 1 thread, AMD EPYC Zen 4).
    const std::int64_t pitch = dense || exact_planes() ? ow : bound_value(grid_pitch());
    if (pitch < 1) return 0;
    const std::int64_t oh = npix / ow, rows = h_.row_block < og ? h_.row_block : og, blocks = (og + rows - 1) / rows;
    const double pixel = double(blocks * round_up(rows, mr_) / mr_) * double(round_up(oh * pitch, nr_) / nr_) *
                         double(k * mr_ * nv_ + 60);
    // At 512 bits a dense image of at most kChanRowsMax pixels runs its epilogue once per row
    // of the block (crows_), not per run: ~100 cycles a run, its transposes. So chosen, at
    // 14 x 14 and 13 x 13 (1 thread, AMD EPYC Zen 4; channel against pixel lanes): 112 -> 672
    // with SiLU 0.302 against 0.326 ms, 96 -> 576 relu6 0.209 / 0.224, 80 -> 480 SiLU 0.165 /
    // 0.175, 64 -> 384 relu6 0.098 / 0.102, 512 -> 64 relu 0.101 / 0.111; left on pixel lanes:
    // 672 -> 112 (0.294 / 0.293), 480 -> 112 (0.212 / 0.210), 480 -> 80 (0.158 / 0.150),
    // 64 -> 256 relu at 13 x 13 (0.066 / 0.058-0.064).
    const std::int64_t per_run = chan_rows(dense, npix) ? 100 : 500;
    // A last tile of at most VW channels costs half a tile (chan() runs it on one vector): at
    // 512 bits 672 -> 112 at 14 x 14 took channel lanes, 0.293 -> 0.257 ms, and 480 -> 80
    // 0.151 -> 0.132 (1 thread, AMD EPYC Zen 4).
    const double tiles = double(round_up(rows, vw_)) / double(CT);
    const double chan = double(blocks) * tiles * double((dense ? 1 : oh) * best / run) * double(k * 2 * run + per_run);
    return chan <= 0.95 * pixel ? run : 0;
}

std::int64_t GemmGen::chan_depth_block(std::int64_t run) {
    auto* dense_c = llvm::dyn_cast<llvm::ConstantInt>(dense_conv());
    const bool dense = dense_c && dense_c->isOne();
    const std::int64_t k = bound_value(k_dim_), khw = bound_value(im_khw_), ow = bound_value(im_ow_);
    const std::int64_t tile = 2 * vw_ * es_;  // a depth step's bytes of a tile's weights
    if (run < 1 || k < 1 || khw < 1 || k * tile <= 2 * kChanDepthBytes) return 0;
    // Runs confined to output rows: whole rows of them share the partial sums' slots.
    if (!dense && (ow < 1 || (ow + run - 1) / run > kChanBlockRuns)) return 0;
    return std::max<std::int64_t>(1, kChanDepthBytes / tile / khw);
}

void GemmGen::chan(Value* xb, Value* i0, Value* rows, Value* j0, Value* j1) {
    const std::int64_t R = chan_run(), CT = 2 * vw_;
    const llvm::Align ea(static_cast<std::uint64_t>(es_)), va(static_cast<std::uint64_t>(es_ * vw_));
    auto* dense_c = llvm::dyn_cast<llvm::ConstantInt>(dense_conv());
    const bool dense = dense_c && dense_c->isOne();
    const GridGeo geo = grid_geo(j0, j1);
    const std::int64_t phases = phase_rows() * plane_cols();
    Value* slack = b_.CreateAdd(i64(CT), b_.CreateMul(geo.wq, i64(2)));
    // The planes (not for a dense conv: its grid is the image).
    Value* scratch = dense ? nullptr
                           : this->scratch(b_.CreateMul(
                                 b_.CreateAdd(b_.CreateMul(b_.CreateMul(geo.cin, i64(phases)), geo.plane), slack), i64(es_)));
    const std::int64_t L = kern_.derived[static_cast<std::size_t>(h_.a_packed)].lanes;  // a packed tile's channels
    auto body = [&] {
        if (!dense) phase_planes(xb, scratch, geo.cin, geo.ya, geo.q_rows, geo.wq, slack);
        Value* buf = dense ? xb : scratch;
        // A's packed tiles of this batch entry's group: a_offset = group * og * k.
        Value* tiles = b_.CreateSDiv(b_.CreateAdd(m_, i64(L - 1)), i64(L));
        Value* grp = b_.CreateSDiv(em_.index(h_.a_offset), b_.CreateMul(m_, k_dim_));
        Value* packed = em_.buffer_ptr(static_cast<int>(kern_.buffers.size()) + h_.a_packed);
        Value* cstride = dense ? n_ : b_.CreateMul(geo.plane, i64(phases));  // one input channel's planes
        Value* kh = b_.CreateSDiv(im_khw_, im_kw_);
        auto accp = [&](std::int64_t i) {
            return b_.CreateConstInBoundsGEP2_64(cacc_t_->getAllocatedType(), cacc_t_, 0, static_cast<std::uint64_t>(i));
        };
        loop(i64(0), rows, i64(CT), "chan.rt", [&](Value* rt) {
            Value* count = smin(i64(CT), b_.CreateSub(rows, rt));
            Value* row0 = b_.CreateAdd(i0, rt);
            auto packed_at = [&](Value* r) {  // channel r's column of the packed tiles
                Value* t = b_.CreateAdd(b_.CreateMul(grp, tiles), b_.CreateSDiv(r, i64(L)));
                return b_.CreateGEP(t_, packed, b_.CreateAdd(b_.CreateMul(t, b_.CreateMul(k_dim_, i64(L))), b_.CreateSRem(r, i64(L))));
            };
            Value* ap = packed_at(row0);
            // Each run prefetches the next tile's weights into L2, both lines of a depth step
            // as it reads those of its own: in a model the weights are cold, and a tile's
            // first run, which reads them from memory at the pace of its FMAs, outran the
            // hardware prefetchers. 1 thread, AMD EPYC Zen 4: mobilenet_v2's eight 1x1 convs
            // at 7 x 7 1.99 -> 1.88 ms (one line changed nothing), and 960 -> 2048 -> 960 ->
            // 320 at 7 x 7 (23 MB of weights) 4.7 -> 4.2 ms.
            Value* next = packed_at(b_.CreateAdd(row0, i64(CT)));
            // One run: the R pixels from grid pixel `base` on, of which the `n` from `lead` on
            // are stored, as output pixels from `col`.
            // nv: the tile's vectors of channels, 2, or 1 for a last tile of at most VW
            // channels (112 channels at 512 bits: three tiles of 32 and one of 16).
            // With depth blocks (slot: the run's place among cpart_'s), the input channels
            // [c0, c1): the first block starts from zero, the others from the partial sums,
            // and all but the last leave them in cpart_.
            auto run = [&](Value* base, Value* lead, Value* col, Value* n, Value* rows_at, int nv, Value* c0 = nullptr,
                           Value* c1 = nullptr, Value* slot = nullptr) {
                Value* zero = llvm::ConstantAggregateZero::get(vt_);
                auto partp = [&](std::int64_t i) {
                    return b_.CreateInBoundsGEP(cpart_->getAllocatedType(), cpart_,
                                                {i64(0), b_.CreateAdd(b_.CreateMul(slot, i64(2 * R)), i64(i))});
                };
                auto zero_all = [&] {
                    for (std::int64_t i = 0; i < 2 * R; ++i) b_.CreateAlignedStore(zero, accp(i), va);
                };
                if (!slot) zero_all();
                else
                    if_else(b_.CreateICmpEQ(c0, i64(0)), zero_all, [&] {
                        for (std::int64_t i = 0; i < 2 * R; ++i)
                            b_.CreateAlignedStore(b_.CreateAlignedLoad(vt_, partp(i), va), accp(i), va);
                    });
                // Input channel ci.
                auto channel = [&](Value* ci) {
                    Value* pc = elem(base, b_.CreateMul(ci, cstride));
                    Value* kci = b_.CreateMul(ci, im_khw_);
                    taps(kh, "chan.i", 1, [&](Value* i) {
                        taps(im_kw_, "chan.j", 1, [&](Value* j) {
                            Value* bp = dense ? pc : tap_at(pc, i, j, geo.plane, geo.wq);
                            Value* k = b_.CreateAdd(kci, b_.CreateAdd(b_.CreateMul(i, im_kw_), j));
                            Value* wrow = elem(ap, b_.CreateMul(k, i64(L)));
                            Value* w0 = b_.CreateAlignedLoad(vt_, wrow, ea);  // (the copy's alignment: unknown)
                            Value* w1 = nv == 2 ? b_.CreateAlignedLoad(vt_, elem(wrow, i64(vw_)), ea) : nullptr;
                            Value* pf = b_.CreateGEP(t_, next, b_.CreateMul(k, i64(L)));  // not inbounds: may pass the copy's end
                            for (int line = 0; line < 2; ++line) {
                                Value* p = line ? b_.CreateGEP(t_, pf, i64(vw_)) : pf;
                                prefetch(p, 2);
                            }
                            for (std::int64_t r = 0; r < R; ++r) {
                                Value* x = b_.CreateAlignedLoad(t_, elem(bp, i64(r)), ea);
                                Value* sp = b_.CreateVectorSplat(static_cast<unsigned>(vw_), x);
                                for (int v = 0; v < nv; ++v) {
                                    Value* p = accp(2 * r + v);
                                    Value* acc = b_.CreateAlignedLoad(vt_, p, va);
                                    b_.CreateAlignedStore(
                                        b_.CreateIntrinsic(llvm::Intrinsic::fmuladd, {vt_}, {sp, v ? w1 : w0, acc}), p, va);
                                }
                            }
                        });
                    });
                };
                Value* lo = slot ? c0 : i64(0);
                Value* hi = slot ? c1 : geo.cin;
                loop(lo, hi, i64(1), "chan.ci", [&](Value* ci) { channel(ci); }, true);
                auto finish = [&] {
                    // Transposed in registers into the stack tile: row c (a channel) holds the
                    // run's pixels, VW apart, for the epilogue's vector loops.
                    for (int v = 0; v < nv; ++v) {
                        std::vector<Value*> sq(static_cast<std::size_t>(vw_), llvm::PoisonValue::get(vt_));
                        for (std::int64_t r = 0; r < R; ++r) sq[static_cast<std::size_t>(r)] = b_.CreateAlignedLoad(vt_, accp(2 * r + v), va);
                        transpose(sq);
                        for (int c = 0; c < vw_; ++c) {
                            if (rows_at)
                                b_.CreateAlignedStore(sq[static_cast<std::size_t>(c)], elem(rows_at, i64((v * vw_ + c) * crows_ld_)), ea);
                            else
                                b_.CreateAlignedStore(sq[static_cast<std::size_t>(c)], elem(tile_, i64((v * vw_ + c) * vw_)), va);
                        }
                    }
                    if (!rows_at) epilogue(elem(tile_, lead), vw_, row0, count, col, n);
                };
                if (!slot) return finish();
                if_else(b_.CreateICmpEQ(c1, geo.cin), finish, [&] {
                    for (std::int64_t i = 0; i < 2 * R; ++i)
                        b_.CreateAlignedStore(b_.CreateAlignedLoad(vt_, accp(i), va), partp(i), va);
                });
            };
            // Depth blocks (chan_depth_block()): the range [lo, hi) (pixels or output rows) in
            // pieces of `span`, each piece over every block of kcb input channels in turn:
            // inner(piece begin, piece end, block's first channel, its end).
            auto in_blocks = [&](Value* lo, Value* hi, std::int64_t span, std::int64_t kcb, auto inner) {
                loop(lo, hi, i64(span), "chan.piece", [&](Value* p0) {
                    Value* p1 = smin(b_.CreateAdd(p0, i64(span)), hi);
                    loop(i64(0), geo.cin, i64(kcb), "chan.kb", [&](Value* c0) {
                        inner(p0, p1, c0, smin(b_.CreateAdd(c0, i64(kcb)), geo.cin));
                    }, true);
                }, true);
            };
            auto runs = [&](int nv) {
                if (dense) {
                    // The image as one row: the run [x0, x0 + R) ends inside it (R <= its pixels)
                    // and stores [xa, min(xa + R, j1)).
                    // The runs' results go into rows of the block's pixels (crows_, from column R
                    // on: a run may start up to R - 1 pixels before the block), and the epilogue
                    // runs once over them. Run by run it ran in masked vectors of 12 of 16
                    // lanes, and of 1 for the last pixel of 49
                    // (efficientnet_b0's 192 -> 1152 1x1 with SiLU at 7 x 7: 0.27 -> 0.215 ms with
                    // rows, ONNX Runtime 0.22; without
                    // SiLU 0.214 -> 0.199; 160 -> 960 at 7 x 7 0.159 -> 0.140; 1 thread).
                    auto one = [&](Value* xa, Value* end, Value* c0, Value* c1, Value* slot) {
                        Value* x0 = smin(xa, b_.CreateSub(n_, i64(R)));
                        Value* at = crows_ ? elem(crows_, b_.CreateAdd(b_.CreateSub(x0, j0), i64(R))) : nullptr;
                        run(elem(buf, x0), b_.CreateSub(xa, x0), xa, b_.CreateSub(smin(b_.CreateAdd(xa, i64(R)), end), xa), at, nv,
                            c0, c1, slot);
                    };
                    // Depth blocks: kChanBlockRuns runs at a time.
                    if (const std::int64_t kcb = chan_depth_block(R); kcb > 0) {
                        in_blocks(j0, j1, kChanBlockRuns * R, kcb, [&](Value* xc, Value* xe, Value* c0, Value* c1) {
                            loop(xc, xe, i64(R), "chan.x", [&](Value* xa) {
                                one(xa, j1, c0, c1, b_.CreateSDiv(b_.CreateSub(xa, xc), i64(R)));
                            }, true);
                        });
                    } else {
                        loop(j0, j1, i64(R), "chan.x", [&](Value* xa) { one(xa, j1, nullptr, nullptr, nullptr); }, true);
                    }
                    if (crows_) long_epilogue(elem(crows_, i64(R)), crows_ld_, row0, count, j0, b_.CreateSub(j1, j0));
                    return;
                }
                Value* y0 = b_.CreateSDiv(j0, im_ow_);
                Value* y1 = b_.CreateSDiv(b_.CreateSub(j1, i64(1)), im_ow_);
                // Row y's runs; with depth blocks, in the slots from slot0 on.
                auto row = [&](Value* y, Value* c0, Value* c1, Value* slot0) {
                    Value* yo = b_.CreateMul(y, im_ow_);
                    Value* xs = smax(i64(0), b_.CreateSub(j0, yo));
                    Value* xe = smin(im_ow_, b_.CreateSub(j1, yo));
                    loop(xs, xe, i64(R), "chan.x", [&](Value* xa) {
                        // The run [x0, x0 + R) ends inside the row; it stores [xa, min(xa + R, xe)).
                        Value* x0 = smin(xa, b_.CreateSub(im_ow_, i64(R)));
                        Value* g = b_.CreateAdd(b_.CreateMul(b_.CreateSub(y, geo.ya), geo.wq), x0);
                        Value* slot = slot0 ? b_.CreateAdd(slot0, b_.CreateSDiv(b_.CreateSub(xa, xs), i64(R))) : nullptr;
                        run(elem(buf, g), b_.CreateSub(xa, x0), b_.CreateAdd(yo, xa),
                            b_.CreateSub(smin(b_.CreateAdd(xa, i64(R)), xe), xa), nullptr, nv, c0, c1, slot);
                    }, true);
                };
                // Depth blocks: as many whole rows at a time as have kChanBlockRuns runs.
                if (const std::int64_t kcb = chan_depth_block(R); kcb > 0) {
                    const std::int64_t per_row = (bound_value(im_ow_) + R - 1) / R, rows_at_once = kChanBlockRuns / per_row;
                    in_blocks(y0, b_.CreateAdd(y1, i64(1)), rows_at_once, kcb, [&](Value* yc, Value* ye, Value* c0, Value* c1) {
                        loop(yc, ye, i64(1), "chan.y", [&](Value* y) {
                            row(y, c0, c1, b_.CreateMul(b_.CreateSub(y, yc), i64(per_row)));
                        }, true);
                    });
                } else {
                    loop(y0, b_.CreateAdd(y1, i64(1)), i64(1), "chan.y", [&](Value* y) { row(y, nullptr, nullptr, nullptr); }, true);
                }
            };
            // A last tile of at most VW channels runs on one vector of them (half the FMAs),
            // emitted only where the group's channels leave one (row blocks are whole tiles:
            // chan_run()), as it doubles the code to compile.
            const std::int64_t tail = bound_value(m_) % CT;
            if (tail == 0 || tail > vw_) runs(2);
            else if_else(b_.CreateICmpSGT(count, i64(vw_)), [&] { runs(2); }, [&] { runs(1); });
        });
    };
    if (dense) return body();
    if_else(b_.CreateIsNull(scratch), [&] { mark_failed(); }, body);
}

void GemmGen::transpose(std::vector<Value*>& m) {
    // Stage k swaps bit k of the row index with bit k of the lane index: lanes with the bit
    // clear stay in row i and take row j's lanes with it clear, and the other way round.
    // Every pair (i, j) of a stage takes the same two masks over its rows' lanes, concatenated:
    // lane l of the new row i (hi == false) or j (hi == true).
    const int w = vw_;
    auto mask = [w](int bit, bool hi, int l) { return hi ? ((l & bit) ? w + l : (l ^ bit)) : ((l & bit) ? w + (l ^ bit) : l); };
    // At 512 bits (16 lanes) each shuffle is a two-source permute (vpermt2ps) whose index
    // vector the code reads from a table by a volatile load: to instruction selection an
    // unknown index, so its shuffle combiner leaves the 4-deep tree of 64 shuffles alone
    // instead of searching it for merges (45 us a shuffle). AMD EPYC Zen 4, 1 thread, three
    // interleaved runs: code generation of the channel-lane kernels of resnet18 (6) 100-118 ->
    // 82-88 ms in all, of squeezenet1_1 (5) 80-92 -> 67-69 ms; their calls the same within
    // noise (squeezenet1_1's five: 1980-2040 against 1966-2098 us a call).
    const bool permutes = w == 16 && es_ == 4 && avx512_;  // (forced 512-bit vectors under an AVX2 cap: shuffles)
    auto* index_t = llvm::FixedVectorType::get(b_.getInt32Ty(), 16);
    auto* table_t = llvm::ArrayType::get(index_t, 8);  // (lo, hi) of each of the 4 stages
    llvm::GlobalVariable* table = nullptr;
    if (permutes) {
        llvm::Module& mod = *fn_->getParent();
        table = mod.getNamedGlobal("kiln.transpose16");
        if (!table) {
            std::vector<llvm::Constant*> rows;
            for (int bit = 1; bit < w; bit *= 2)
                for (bool hi : {false, true}) {
                    std::vector<std::uint32_t> idx(16);
                    for (int l = 0; l < 16; ++l) idx[static_cast<std::size_t>(l)] = static_cast<std::uint32_t>(mask(bit, hi, l));
                    rows.push_back(llvm::ConstantDataVector::get(ctx_, idx));
                }
            table = new llvm::GlobalVariable(mod, table_t, true, llvm::GlobalValue::PrivateLinkage,
                                             llvm::ConstantArray::get(table_t, rows), "kiln.transpose16");
            table->setAlignment(llvm::Align(64));
        }
        // (Rows past a run's pixels are poison to the shuffles; the permutes get zeros.)
        for (Value*& v : m)
            if (llvm::isa<llvm::PoisonValue>(v)) v = llvm::ConstantAggregateZero::get(v->getType());
    }
    for (int bit = 1, stage = 0; bit < w; bit *= 2, ++stage) {
        std::vector<int> lo, hi;  // the shuffles' masks
        if (!permutes)
            for (int l = 0; l < w; ++l) {
                lo.push_back(mask(bit, false, l));
                hi.push_back(mask(bit, true, l));
            }
        auto index = [&](int k) {
            auto* ld = b_.CreateAlignedLoad(index_t, b_.CreateConstInBoundsGEP2_64(table_t, table, 0, static_cast<std::uint64_t>(k)),
                                            llvm::Align(64));
            ld->setVolatile(true);
            return ld;
        };
        Value* ilo = permutes ? index(2 * stage) : nullptr;
        Value* ihi = permutes ? index(2 * stage + 1) : nullptr;
        for (int i = 0; i < w; ++i) {
            if (i & bit) continue;
            const int j = i | bit;
            Value* a = m[static_cast<std::size_t>(i)];
            Value* b = m[static_cast<std::size_t>(j)];
            if (permutes) {
                // A pair of zero rows (past the run's pixels) stays zero: no permutes, and none
                // in the later stages for the zeros they would have made (the permutes' results
                // are opaque to LLVM, which merged the equal ones but kept them; the shuffles
                // below fold by themselves). resnet18's six channel-lane kernels (runs of 7
                // pixels): 107 -> 80 permutes each, 4596 -> 4340 bytes of code (14 x 14, 3x3);
                // their code generation (llc -O3, 15 interleaved runs, AMD EPYC Zen 4) 153.6 ->
                // 145.4 ms median in all.
                if (llvm::isa<llvm::ConstantAggregateZero>(a) && llvm::isa<llvm::ConstantAggregateZero>(b)) continue;
                m[static_cast<std::size_t>(i)] = b_.CreateIntrinsic(llvm::Intrinsic::x86_avx512_vpermi2var_ps_512, {}, {a, ilo, b});
                m[static_cast<std::size_t>(j)] = b_.CreateIntrinsic(llvm::Intrinsic::x86_avx512_vpermi2var_ps_512, {}, {a, ihi, b});
            } else {
                m[static_cast<std::size_t>(i)] = b_.CreateShuffleVector(a, b, lo);
                m[static_cast<std::size_t>(j)] = b_.CreateShuffleVector(a, b, hi);
            }
        }
    }
}

}  // namespace kiln::tiers::llvm_tier::gemm_detail
