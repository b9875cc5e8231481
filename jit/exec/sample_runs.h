#pragma once
// Image by image: at batch > 1, consecutive groups of blocked-layout convolutions
// (conv2d_nchwc, kir::NchwcConv) run as one run, image after image: every group's outer
// indices of image 0, then of image 1, and so on, instead of each group over the whole batch.
// A conv's outer indices are image-major (kir.h: outer / (rblocks * cblocks) is the image)
// and read and write that image alone, so the order is free; what it buys is locality: the
// values the run computes and reads itself take one image's bytes in the arena
// (jit/exec/memory_plan.h), reused image after image, so they stay in cache from the group
// that writes them to the groups that read them. (mobilenet_v2 at batch 8: a 96-channel
// 112 x 112 layer's output is 38 MB for the batch, larger than a 32 MB L3; 4.8 MB an image.)
//
// jit/exec/run_plan.cpp runs a run image by image on a call where every group of it has host
// code whose guard passes; else that call runs it group by group, as any other groups (the
// values inside then get memory of their own, not the arena's image-sized blocks).
// KILN_SAMPLE_RUNS (Options::sample_runs): `auto` where it pays (the size rule below), `1` every
// run of such groups whatever their size, `0` never.
#include "jit/exec/memory_plan.h"
#include "jit/exec/pipeline.h"
#include "jit/exec/shape_plan.h"

#include <vector>

namespace kiln::jit {

// The runs at these shapes: maximal stretches of at least two consecutive groups, each
// `compilable` (jit/exec/memory_plan.h), with a conv2d_nchwc kernel whose batch (the same for
// the stretch) is more than 1, whose outputs' leading dim is that batch, and whose largest
// activation is at least Executable::image_run_min_bytes an image: where a batch's values leave
// the cache between groups, not where they stay in it and image by image would only read each
// group's weights once an image.
std::vector<SampleRun> find_sample_runs(const Executable& x, const ShapePlan& sp, const std::vector<bool>& compilable);

// Per group at these shapes: the batch N (> 1) where the group is `compilable` and its code
// may run one image at a time, image s as outer indices [s * extent / N, (s + 1) * extent / N)
// that read and write image s alone, its one output dense with leading dim N: a conv's kernel
// (kir::MatmulHint with im2col and one group, whose outer indices are image-major, or
// kir::NchwcConv); else 0. plan_memory joins concats of such groups' outputs across images.
std::vector<std::int64_t> image_major_groups(const Executable& x, const ShapePlan& sp, const std::vector<bool>& compilable);

}  // namespace kiln::jit
