#pragma once
// The im2col matrix of a convolution, written straight into the packed layout of the GEMM's
// right operand (gemm.h, gemm_acc_packed_b), so that it is never built as a plain matrix
// nor copied again. Shared by the interpreter's conv2d and tier 1's conv kernels.
#include <cstdint>

namespace kiln::cpu {

// One sample's input channels (dense NCHW planes) and the window of the convolution.
struct Im2colShape {
    std::int64_t c = 0, h = 0, w = 0;  // input channels (of one group), height, width
    std::int64_t ow = 0;               // output width
    std::int64_t kh = 1, kw = 1;       // filter height, width
    std::int64_t sh = 1, sw = 1;       // strides
    std::int64_t ph = 0, pw = 0;       // zero padding (top/bottom, left/right)
    std::int64_t dh = 1, dw = 1;       // dilations
};

// The im2col matrix for output pixels [p0, p0 + np) (pixel p is output row p / ow, column
// p % ow), as panels of nr columns: row r = (ch, i, j) (r = (ch * kh + i) * kw + j) holds
// the input value under tap (i, j) of channel ch for each pixel, 0 in the padding; pixel q
// of row r is at (q / nr) * ckk * nr + r * nr + q % nr with ckk = c * kh * kw, and the last
// panel is zero past np. `src` is the sample's first channel plane. float and double.
template <class T>
void im2col_packed(const Im2colShape& s, const T* src, std::int64_t p0, std::int64_t np, std::int64_t nr, T* col);

}  // namespace kiln::cpu
