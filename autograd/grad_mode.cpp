// grad_mode.cpp — the thread-local switch behind is_grad_enabled (grad_mode.h): each thread
// starts recording.
#include "autograd/grad_mode.h"

namespace ampgrad {

static thread_local bool grad_enabled = true;
bool is_grad_enabled() { return grad_enabled; }
void set_grad_enabled(bool e) { grad_enabled = e; }

}  // namespace ampgrad
