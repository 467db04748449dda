// optim.h — everything in optim/: the optimizers, clip_grad_norm_, the lr schedulers.
//   #include "optim/optim.h"
#pragma once
#include "optim/adam.h"
#include "optim/clip_grad.h"
#include "optim/lr_scheduler.h"
#include "optim/optimizer.h"
#include "optim/sgd.h"
