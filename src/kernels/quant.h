// GGUF weight formats: conversion between float and the block layouts (F16, BF16, Q4_0,
// Q8_0, Q4_K, Q6_K, and Q8_K for activations), following the public ggml block definitions.
#pragma once

#include <cstddef>
#include <cstdint>

#include "gguf/ggml_type.h"

namespace tangram {

float fp16_to_fp32(uint16_t h);
uint16_t fp32_to_fp16(float f);  // round to nearest even
float bf16_to_fp32(uint16_t h);
uint16_t fp32_to_bf16(float f);  // round to nearest even

// dst[n] = values of n elements stored as `type` at src. n is a multiple of the block size.
void dequantize_row(GgmlType type, const void* src, float* dst, int64_t n);
// Quantises n floats into `type` blocks at dst (ggml_row_bytes(type, n) bytes). Supported for
// every GgmlType, so test models can be written in any weight type.
void quantize_row(GgmlType type, const float* src, void* dst, int64_t n);

}  // namespace tangram
