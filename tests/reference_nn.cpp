// The reference, continued: matmul, linear, conv2d, pooling and the shape ops (see reference.h).
#include "reference.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>

namespace ref {

// ---------------------------------------------------------------- linear algebra

RTensor matmul(const RTensor& a, const RTensor& b) {
    RTensor A = a, B = b;
    bool a1 = A.shape.size() == 1, b1 = B.shape.size() == 1;
    if (a1) A.shape = {1, A.shape[0]};
    if (b1) B.shape = {B.shape[0], 1};
    std::int64_t M = A.shape[A.shape.size() - 2], K = A.shape.back();
    std::int64_t K2 = B.shape[B.shape.size() - 2], N = B.shape.back();
    if (K != K2) throw std::runtime_error("ref::matmul: K");
    Shape ab(A.shape.begin(), A.shape.end() - 2), bb(B.shape.begin(), B.shape.end() - 2);
    Shape batch = broadcast_shape(ab, bb);
    Shape as = batch, bs = batch, os = batch;
    as.insert(as.end(), {M, K});
    bs.insert(bs.end(), {K, N});
    os.insert(os.end(), {M, N});
    RTensor AA = broadcast_to(A, as), BB = broadcast_to(B, bs);
    RTensor out = full(os, 0.0);
    std::int64_t nb = numel_of(batch);
    for (std::int64_t p = 0; p < nb; ++p)
        for (std::int64_t i = 0; i < M; ++i)
            for (std::int64_t j = 0; j < N; ++j) {
                double s = 0;
                for (std::int64_t k = 0; k < K; ++k) s += AA.v[(p * M + i) * K + k] * BB.v[(p * K + k) * N + j];
                out.v[(p * M + i) * N + j] = s;
            }
    if (b1) out.shape.erase(out.shape.end() - 1);
    if (a1) out.shape.erase(out.shape.end() - (b1 ? 1 : 2));
    return out;
}

RTensor linear(const RTensor& x, const RTensor& w, const std::optional<RTensor>& b) {
    RTensor out = matmul(x, transpose(w, 0, 1));
    if (b) out = zip(out, *b, [](double p, double q) { return p + q; });
    return out;
}

RTensor conv2d(const RTensor& x, const RTensor& w, const std::optional<RTensor>& b, kiln::Pair stride,
               kiln::Pair padding, kiln::Pair dilation, std::int64_t groups) {
    std::int64_t N = x.shape[0], C = x.shape[1], H = x.shape[2], W = x.shape[3];
    std::int64_t O = w.shape[0], IPG = w.shape[1], KH = w.shape[2], KW = w.shape[3];
    if (IPG * groups != C) throw std::runtime_error("ref::conv2d: channels");
    std::int64_t OH = (H + 2 * padding[0] - dilation[0] * (KH - 1) - 1) / stride[0] + 1;
    std::int64_t OW = (W + 2 * padding[1] - dilation[1] * (KW - 1) - 1) / stride[1] + 1;
    std::int64_t OPG = O / groups;
    RTensor out = full({N, O, OH, OW}, 0.0);
    for (std::int64_t n = 0; n < N; ++n)
        for (std::int64_t o = 0; o < O; ++o) {
            std::int64_t g = o / OPG;
            for (std::int64_t oh = 0; oh < OH; ++oh)
                for (std::int64_t ow = 0; ow < OW; ++ow) {
                    double s = b ? b->v[o] : 0.0;
                    for (std::int64_t ic = 0; ic < IPG; ++ic)
                        for (std::int64_t kh = 0; kh < KH; ++kh)
                            for (std::int64_t kw = 0; kw < KW; ++kw) {
                                std::int64_t ih = oh * stride[0] - padding[0] + kh * dilation[0];
                                std::int64_t iw = ow * stride[1] - padding[1] + kw * dilation[1];
                                if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
                                s += x.at({n, g * IPG + ic, ih, iw}) * w.at({o, ic, kh, kw});
                            }
                    out.v[ravel({n, o, oh, ow}, out.shape)] = s;
                }
        }
    return out;
}

namespace {
RTensor pool(const RTensor& x, kiln::Pair k, kiln::Pair st, kiln::Pair pd, bool is_max) {
    std::int64_t N = x.shape[0], C = x.shape[1], H = x.shape[2], W = x.shape[3];
    std::int64_t OH = (H + 2 * pd[0] - k[0]) / st[0] + 1, OW = (W + 2 * pd[1] - k[1]) / st[1] + 1;
    RTensor out = full({N, C, OH, OW}, 0.0);
    for (std::int64_t n = 0; n < N; ++n)
        for (std::int64_t c = 0; c < C; ++c)
            for (std::int64_t oh = 0; oh < OH; ++oh)
                for (std::int64_t ow = 0; ow < OW; ++ow) {
                    double best = -std::numeric_limits<double>::infinity(), s = 0;
                    std::int64_t count = 0;
                    for (std::int64_t kh = 0; kh < k[0]; ++kh)
                        for (std::int64_t kw = 0; kw < k[1]; ++kw) {
                            std::int64_t ih = oh * st[0] - pd[0] + kh, iw = ow * st[1] - pd[1] + kw;
                            if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
                            double v = x.at({n, c, ih, iw});
                            // NaN propagates (as in ONNX and PyTorch).
                            best = std::isnan(best) || std::isnan(v) ? std::nan("") : std::max(best, v);
                            s += v;
                            ++count;
                        }
                    out.v[ravel({n, c, oh, ow}, out.shape)] = is_max ? best : s / static_cast<double>(count);
                }
    return out;
}
}  // namespace

RTensor max_pool2d(const RTensor& x, kiln::Pair kernel, kiln::Pair stride, kiln::Pair padding) {
    return pool(x, kernel, stride, padding, true);
}
RTensor avg_pool2d(const RTensor& x, kiln::Pair kernel, kiln::Pair stride, kiln::Pair padding) {
    return pool(x, kernel, stride, padding, false);
}
RTensor global_avg_pool2d(const RTensor& x) { return mean(x, {2, 3}, true); }

// ---------------------------------------------------------------- shape ops

RTensor reshape(const RTensor& x, const Shape& shape) {
    Shape s = shape;
    std::int64_t known = 1, infer = -1;
    for (std::size_t i = 0; i < s.size(); ++i) {
        if (s[i] == -1) infer = static_cast<std::int64_t>(i);
        else known *= s[i];
    }
    if (infer >= 0) s[infer] = known == 0 ? 0 : x.numel() / known;
    if (numel_of(s) != x.numel()) throw std::runtime_error("ref::reshape: count");
    return {s, x.v};
}

RTensor permute(const RTensor& x, const std::vector<std::int64_t>& perm) {
    std::int64_t r = static_cast<std::int64_t>(x.shape.size());
    Shape os(x.shape.size());
    std::vector<std::int64_t> p(perm.size());
    for (std::size_t i = 0; i < perm.size(); ++i) {
        p[i] = norm_axis(perm[i], r);
        os[i] = x.shape[p[i]];
    }
    RTensor out = full(os, 0.0);
    for (std::int64_t f = 0; f < out.numel(); ++f) {
        auto oi = unravel(f, os);
        std::vector<std::int64_t> xi(x.shape.size());
        for (std::size_t i = 0; i < p.size(); ++i) xi[p[i]] = oi[i];
        out.v[f] = x.at(xi);
    }
    return out;
}

RTensor transpose(const RTensor& x, std::int64_t a, std::int64_t b) {
    std::int64_t r = static_cast<std::int64_t>(x.shape.size());
    std::vector<std::int64_t> perm(x.shape.size());
    for (std::int64_t i = 0; i < r; ++i) perm[i] = i;
    std::swap(perm[norm_axis(a, r)], perm[norm_axis(b, r)]);
    return permute(x, perm);
}

RTensor flatten(const RTensor& x, std::int64_t start_axis, std::int64_t end_axis) {
    std::int64_t r = static_cast<std::int64_t>(x.shape.size());
    std::int64_t s = norm_axis(start_axis, r), e = norm_axis(end_axis, r);
    Shape os;
    for (std::int64_t i = 0; i < s; ++i) os.push_back(x.shape[i]);
    std::int64_t p = 1;
    for (std::int64_t i = s; i <= e; ++i) p *= x.shape[i];
    os.push_back(p);
    for (std::int64_t i = e + 1; i < r; ++i) os.push_back(x.shape[i]);
    return {os, x.v};
}

RTensor squeeze(const RTensor& x, std::vector<std::int64_t> axes) {
    std::int64_t r = static_cast<std::int64_t>(x.shape.size());
    std::vector<bool> drop(x.shape.size(), false);
    if (axes.empty()) {
        for (std::int64_t i = 0; i < r; ++i) drop[i] = x.shape[i] == 1;
    } else {
        for (auto a : axes) drop[norm_axis(a, r)] = true;
    }
    Shape os;
    for (std::int64_t i = 0; i < r; ++i)
        if (!drop[i]) os.push_back(x.shape[i]);
    return {os, x.v};
}

RTensor unsqueeze(const RTensor& x, std::vector<std::int64_t> axes) {
    std::int64_t r = static_cast<std::int64_t>(x.shape.size() + axes.size());
    std::vector<bool> ins(static_cast<std::size_t>(r), false);
    for (auto a : axes) ins[norm_axis(a, r)] = true;
    Shape os;
    std::size_t j = 0;
    for (std::int64_t i = 0; i < r; ++i) os.push_back(ins[i] ? 1 : x.shape[j++]);
    return {os, x.v};
}

RTensor slice(const RTensor& x, std::int64_t axis, std::int64_t start, std::int64_t end, std::int64_t step) {
    std::int64_t a = norm_axis(axis, static_cast<std::int64_t>(x.shape.size()));
    std::int64_t n = x.shape[a];
    auto clampi = [n](std::int64_t v) { return v < 0 ? std::max<std::int64_t>(v + n, 0) : std::min(v, n); };
    std::int64_t b = clampi(start), e = clampi(end);
    std::vector<std::int64_t> picks;
    for (std::int64_t i = b; i < e; i += step) picks.push_back(i);
    Shape os = x.shape;
    os[a] = static_cast<std::int64_t>(picks.size());
    RTensor out = full(os, 0.0);
    for (std::int64_t f = 0; f < out.numel(); ++f) {
        auto oi = unravel(f, os);
        oi[a] = picks[oi[a]];
        out.v[f] = x.at(oi);
    }
    return out;
}

RTensor narrow(const RTensor& x, std::int64_t axis, std::int64_t start, std::int64_t length) {
    const std::int64_t a = norm_axis(axis, static_cast<std::int64_t>(x.shape.size()));
    if (start < 0 || length < 0 || start + length > x.shape[a]) throw std::runtime_error("ref::narrow: out of range");
    Shape os = x.shape;
    os[a] = length;
    RTensor out = full(os, 0.0);
    for (std::int64_t f = 0; f < out.numel(); ++f) {
        auto oi = unravel(f, os);
        oi[a] += start;
        out.v[f] = x.at(oi);
    }
    return out;
}

RTensor arange(std::int64_t start, std::int64_t length, std::int64_t step, DType dt) {
    RTensor out = full({length}, 0.0);
    for (std::int64_t i = 0; i < length; ++i) {
        const std::int64_t v = start + i * step;
        double d = static_cast<double>(v);
        if (dt == DType::i8) d = static_cast<double>(static_cast<std::int8_t>(v));
        if (dt == DType::u8) d = static_cast<double>(static_cast<std::uint8_t>(v));
        if (dt == DType::i32) d = static_cast<double>(static_cast<std::int32_t>(v));
        if (dt == DType::f32) d = static_cast<double>(static_cast<float>(v));
        out.v[static_cast<std::size_t>(i)] = d;  // f16/bf16: check_close's tolerance covers their rounding
    }
    return out;
}

RTensor concat(const std::vector<RTensor>& xs, std::int64_t axis) {
    std::int64_t a = norm_axis(axis, static_cast<std::int64_t>(xs[0].shape.size()));
    Shape os = xs[0].shape;
    os[a] = 0;
    for (const auto& x : xs) os[a] += x.shape[a];
    RTensor out = full(os, 0.0);
    std::int64_t base = 0;
    for (const auto& x : xs) {
        for (std::int64_t f = 0; f < x.numel(); ++f) {
            auto xi = unravel(f, x.shape);
            xi[a] += base;
            out.v[ravel(xi, os)] = x.v[f];
        }
        base += x.shape[a];
    }
    return out;
}

std::vector<RTensor> split(const RTensor& x, const std::vector<std::int64_t>& sizes, std::int64_t axis) {
    std::int64_t a = norm_axis(axis, static_cast<std::int64_t>(x.shape.size()));
    std::vector<RTensor> out;
    std::int64_t start = 0;
    for (auto s : sizes) {
        out.push_back(slice(x, a, start, start + s, 1));
        start += s;
    }
    return out;
}

std::vector<RTensor> split_sections(const RTensor& x, std::int64_t sections, std::int64_t axis) {
    std::int64_t a = norm_axis(axis, static_cast<std::int64_t>(x.shape.size()));
    std::vector<std::int64_t> sizes(static_cast<std::size_t>(sections), x.shape[a] / sections);
    return split(x, sizes, a);
}

RTensor gather(const RTensor& x, const RTensor& indices, std::int64_t axis) {
    std::int64_t a = norm_axis(axis, static_cast<std::int64_t>(x.shape.size()));
    Shape os(x.shape.begin(), x.shape.begin() + a);
    os.insert(os.end(), indices.shape.begin(), indices.shape.end());
    os.insert(os.end(), x.shape.begin() + a + 1, x.shape.end());
    RTensor out = full(os, 0.0);
    std::size_t ir = indices.shape.size();
    for (std::int64_t f = 0; f < out.numel(); ++f) {
        auto oi = unravel(f, os);
        std::vector<std::int64_t> ii(oi.begin() + a, oi.begin() + a + static_cast<std::int64_t>(ir));
        auto k = static_cast<std::int64_t>(indices.at(ii));
        if (k < 0) k += x.shape[a];
        std::vector<std::int64_t> xi(oi.begin(), oi.begin() + a);
        xi.push_back(k);
        xi.insert(xi.end(), oi.begin() + a + static_cast<std::int64_t>(ir), oi.end());
        out.v[f] = x.at(xi);
    }
    return out;
}

RTensor pad(const RTensor& x, const std::vector<std::int64_t>& pads, double value) {
    Shape os = x.shape;
    for (std::size_t i = 0; i < os.size(); ++i) os[i] += pads[2 * i] + pads[2 * i + 1];
    RTensor out = full(os, value);
    for (std::int64_t f = 0; f < x.numel(); ++f) {
        auto xi = unravel(f, x.shape);
        for (std::size_t i = 0; i < xi.size(); ++i) xi[i] += pads[2 * i];
        out.v[ravel(xi, os)] = x.v[f];
    }
    return out;
}

}  // namespace ref
