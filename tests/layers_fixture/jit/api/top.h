#pragma once
// The top layer of the fixture tree; including the layers below is allowed.
#include "src/support/bad.h"
