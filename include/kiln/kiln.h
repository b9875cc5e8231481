#pragma once
// The one include a user of Kiln needs.
#include <kiln/dim.h>
#include <kiln/dtype.h>
#include <kiln/engine.h>
#include <kiln/error.h>
#include <kiln/graph.h>
#include <kiln/onnx.h>  // always declared; throws kiln::Error when built without ONNX
#include <kiln/options.h>
#include <kiln/tensor.h>
#include <kiln/trace.h>
#include <kiln/version.h>
