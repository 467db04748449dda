// nn.h — everything in nn/: Module and its layers, the initialisers, nn::functional.
//   #include "nn/nn.h"
#pragma once
#include "nn/activation.h"
#include "nn/attention.h"
#include "nn/container.h"
#include "nn/conv.h"
#include "nn/embedding.h"
#include "nn/functional.h"
#include "nn/init.h"
#include "nn/linear.h"
#include "nn/module.h"
#include "nn/normalization.h"
