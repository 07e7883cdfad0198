// tilepy_hip_amd.h: the HIP names tilepy_hip's generated code uses, defined on clang's AMDGPU builtins, so
// the source compiles with `clang -x hip --offload-arch=gfx942 -nogpulib -nogpuinc` (no ROCm install).
// With a ROCm install (hipcc) the same definitions apply: this header includes nothing.
#pragma once
#define TP_AMD 1
#define TP_WARP_SIZE 64
#define TP_INF __builtin_huge_valf()
#define TP_NAN __builtin_nanf("")
#define tp_floorf __builtin_floorf

#ifndef __HIP_PLATFORM_AMD__
#define __global__ __attribute__((global))
#define __device__ __attribute__((device))
#define __shared__ __attribute__((shared))
#define __host__ __attribute__((host))
#define __forceinline__ inline __attribute__((always_inline))
#define __launch_bounds__(n) __attribute__((amdgpu_flat_work_group_size(1, n)))
#define __align__(n) __attribute__((aligned(n)))
#define __restrict__ __restrict
#endif

#define hipThreadIdx_x __builtin_amdgcn_workitem_id_x()
#define hipThreadIdx_y __builtin_amdgcn_workitem_id_y()
#define hipBlockIdx_x __builtin_amdgcn_workgroup_id_x()
#define hipBlockIdx_y __builtin_amdgcn_workgroup_id_y()
#define hipBlockIdx_z __builtin_amdgcn_workgroup_id_z()
// Code object v5: hidden_block_count_{x,y,z} are the first three words of the implicit arguments.
#define hipGridDim_x (((const unsigned*)__builtin_amdgcn_implicitarg_ptr())[0])
#define hipGridDim_y (((const unsigned*)__builtin_amdgcn_implicitarg_ptr())[1])
#define hipGridDim_z (((const unsigned*)__builtin_amdgcn_implicitarg_ptr())[2])

static __device__ __forceinline__ void __syncthreads() {
  __builtin_amdgcn_fence(__ATOMIC_RELEASE, "workgroup");
  __builtin_amdgcn_s_barrier();
  __builtin_amdgcn_fence(__ATOMIC_ACQUIRE, "workgroup");
}
static __device__ __forceinline__ unsigned tp_lane_id() {
  return __builtin_amdgcn_mbcnt_hi(~0u, __builtin_amdgcn_mbcnt_lo(~0u, 0u));
}
static __device__ __forceinline__ unsigned tp_float_as_uint(float f) { return __builtin_bit_cast(unsigned, f); }
static __device__ __forceinline__ float tp_uint_as_float(unsigned u) { return __builtin_bit_cast(float, u); }
static __device__ __forceinline__ unsigned short tp_f32_to_f16_bits(float f) {
  return __builtin_bit_cast(unsigned short, (_Float16)f);
}
static __device__ __forceinline__ float tp_f16_bits_to_f32(unsigned short h) {
  return (float)__builtin_bit_cast(_Float16, h);
}
static __device__ __forceinline__ unsigned tp_smem_addr(const void* p) {
  return (unsigned)(unsigned long long)(const __attribute__((address_space(3))) void*)p;
}

// Wave-wide shuffles through ds_bpermute (any width up to 64).
static __device__ __forceinline__ int tp_bpermute(int v, unsigned src_lane) {
  return __builtin_amdgcn_ds_bpermute((int)(src_lane << 2), v);
}
static __device__ __forceinline__ unsigned tp_shfl_src_xor(unsigned m, unsigned w) {
  unsigned lane = tp_lane_id();
  return (lane & ~(w - 1)) | ((lane ^ m) & (w - 1));
}
static __device__ __forceinline__ float __shfl_xor(float v, int m, int w = 64) {
  return __builtin_bit_cast(float, tp_bpermute(__builtin_bit_cast(int, v), tp_shfl_src_xor(m, w)));
}
static __device__ __forceinline__ int __shfl_xor(int v, int m, int w = 64) { return tp_bpermute(v, tp_shfl_src_xor(m, w)); }
static __device__ __forceinline__ unsigned __shfl_xor(unsigned v, int m, int w = 64) {
  return (unsigned)tp_bpermute((int)v, tp_shfl_src_xor(m, w));
}
static __device__ __forceinline__ double __shfl_xor(double v, int m, int w = 64) {
  unsigned long long u = __builtin_bit_cast(unsigned long long, v);
  unsigned src = tp_shfl_src_xor(m, w);
  unsigned lo = (unsigned)tp_bpermute((int)(unsigned)u, src), hi = (unsigned)tp_bpermute((int)(unsigned)(u >> 32), src);
  return __builtin_bit_cast(double, ((unsigned long long)hi << 32) | lo);
}

// Math without the device libraries (-nogpulib): LLVM lowers these intrinsics natively for AMDGPU.
#define tp_expf __builtin_expf
#define tp_exp2f __builtin_exp2f
#define tp_logf __builtin_logf
#define tp_log2f __builtin_log2f
#define tp_sqrtf __builtin_sqrtf
#define tp_rsqrtf(x) (1.0f / __builtin_sqrtf(x))
#define tp_fabsf __builtin_fabsf
#define tp_sinf __builtin_sinf
#define tp_cosf __builtin_cosf
// double precision: the same intrinsics.
#define tp_exp __builtin_exp
#define tp_exp2 __builtin_exp2
#define tp_log __builtin_log
#define tp_log2 __builtin_log2
#define tp_sqrt __builtin_sqrt
#define tp_fabs __builtin_fabs
static __device__ __forceinline__ float tp_tanhf(float x) {
  float e = __builtin_expf(-2.0f * __builtin_fabsf(x));
  float t = (1.0f - e) / (1.0f + e);
  return x < 0.0f ? -t : t;
}
// Abramowitz-Stegun 7.1.26 refined: |error| < 1.5e-7.
static __device__ __forceinline__ float tp_erff(float x) {
  float a = __builtin_fabsf(x), t = 1.0f / (1.0f + 0.3275911f * a);
  float y = 1.0f - (((((1.061405429f * t - 1.453152027f) * t) + 1.421413741f) * t - 0.284496736f) * t + 0.254829592f) * t *
                       __builtin_expf(-a * a);
  return x < 0.0f ? -y : y;
}
#define tp_powf(a, b) __builtin_exp2f((b) * __builtin_log2f(a))

// MFMA operand and accumulator vectors.
typedef short tp_s4 __attribute__((ext_vector_type(4)));
typedef _Float16 tp_h4 __attribute__((ext_vector_type(4)));
typedef float tp_f32x4 __attribute__((ext_vector_type(4)));
typedef float tp_f32x16 __attribute__((ext_vector_type(16)));

// ---------------------------------------------------------------- global atomics: relaxed, agent (device) scope
static __device__ __forceinline__ void tp_fence_device() { __builtin_amdgcn_fence(__ATOMIC_SEQ_CST, "agent"); }
static __device__ __forceinline__ float tp_atomic_add_prim(float* p, float v) {
  return __hip_atomic_fetch_add(p, v, __ATOMIC_RELAXED, __HIP_MEMORY_SCOPE_AGENT);
}
static __device__ __forceinline__ int tp_atomic_add_prim(int* p, int v) {
  return __hip_atomic_fetch_add(p, v, __ATOMIC_RELAXED, __HIP_MEMORY_SCOPE_AGENT);
}
static __device__ __forceinline__ int tp_atomic_max_prim(int* p, int v) {
  return __hip_atomic_fetch_max(p, v, __ATOMIC_RELAXED, __HIP_MEMORY_SCOPE_AGENT);
}
static __device__ __forceinline__ int tp_atomic_min_prim(int* p, int v) {
  return __hip_atomic_fetch_min(p, v, __ATOMIC_RELAXED, __HIP_MEMORY_SCOPE_AGENT);
}
static __device__ __forceinline__ unsigned tp_atomic_cas_u32(unsigned* p, unsigned c, unsigned v) {
  __hip_atomic_compare_exchange_strong(p, &c, v, __ATOMIC_RELAXED, __ATOMIC_RELAXED, __HIP_MEMORY_SCOPE_AGENT);
  return c;
}
static __device__ __forceinline__ unsigned tp_atomic_load_u32(unsigned* p) {
  return __hip_atomic_load(p, __ATOMIC_RELAXED, __HIP_MEMORY_SCOPE_AGENT);
}
