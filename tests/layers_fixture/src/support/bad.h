#pragma once
// A file of the lowest layer that includes one of the highest: check_layers.cmake must
// reject this tree (the ctest `layers_check_fails_on_upward_include`).
#include "jit/api/top.h"
