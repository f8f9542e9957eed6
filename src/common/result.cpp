#include "common/result.h"
// Header-only; this file keeps the module's library non-empty.
