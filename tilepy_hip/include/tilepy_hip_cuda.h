// tilepy_hip_cuda.h: the HIP runtime and intrinsic names tilepy_hip's generated code uses, mapped onto CUDA,
// so one HIP source compiles with NVRTC or nvcc. Included by tilepy_hip.h on NVIDIA builds.
#pragma once
#define TP_NVIDIA 1
#define TP_WARP_SIZE 32
#define TP_INF __int_as_float(0x7f800000)
#define TP_NAN __int_as_float(0x7fffffff)
#define tp_floorf floorf

#define hipThreadIdx_x threadIdx.x
#define hipThreadIdx_y threadIdx.y
#define hipBlockIdx_x blockIdx.x
#define hipBlockIdx_y blockIdx.y
#define hipBlockIdx_z blockIdx.z
#define hipBlockDim_x blockDim.x
#define hipGridDim_x gridDim.x
#define hipGridDim_y gridDim.y
#define hipGridDim_z gridDim.z
// HIP's width-taking shuffles; CUDA needs the participating mask (all lanes: tilepy reduces in converged code).
#define __shfl_xor(v, m, w) __shfl_xor_sync(0xffffffffu, (v), (m), (w))
#define __shfl(v, s, w) __shfl_sync(0xffffffffu, (v), (s), (w))
#define __shfl_down(v, d, w) __shfl_down_sync(0xffffffffu, (v), (d), (w))
#define hipLaunchKernelGGL(kernel, grid, block, shmem, stream, ...) kernel<<<(grid), (block), (shmem), (stream)>>>(__VA_ARGS__)
#define hipStream_t cudaStream_t

static __device__ __forceinline__ unsigned tp_float_as_uint(float f) { return __float_as_uint(f); }
static __device__ __forceinline__ float tp_uint_as_float(unsigned u) { return __uint_as_float(u); }
static __device__ __forceinline__ unsigned short tp_f32_to_f16_bits(float f) {
  unsigned short h;
  asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f));
  return h;
}
static __device__ __forceinline__ float tp_f16_bits_to_f32(unsigned short h) {
  float f;
  asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
  return f;
}
static __device__ __forceinline__ unsigned tp_smem_addr(const void* p) { return (unsigned)__cvta_generic_to_shared(p); }
static __device__ __forceinline__ unsigned tp_lane_id() { unsigned l; asm("mov.u32 %0, %%laneid;" : "=r"(l)); return l; }

#define tp_expf expf
// exp2 as one MUFU.EX2: ex2.approx.ftz.f32 is the approximation CUDA's exp2f uses (2 ulp), without exp2f's
// three-instruction rescue of results under 2^-126 (flushed to zero here); a softmax pays it per element.
static __device__ __forceinline__ float tp_exp2f(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}
#define tp_logf logf
#define tp_log2f log2f
#define tp_sqrtf sqrtf
#define tp_rsqrtf rsqrtf
#define tp_fabsf fabsf
#define tp_sinf sinf
#define tp_cosf cosf
#define tp_tanhf tanhf
#define tp_erff erff
#define tp_exp exp
#define tp_exp2 exp2
#define tp_log log
#define tp_log2 log2
#define tp_sqrt sqrt
#define tp_fabs fabs
#define tp_powf powf

// ---------------------------------------------------------------- global atomics: relaxed, device scope
static __device__ __forceinline__ void tp_fence_device() { __threadfence(); }
static __device__ __forceinline__ float tp_atomic_add_prim(float* p, float v) { return atomicAdd(p, v); }
static __device__ __forceinline__ int tp_atomic_add_prim(int* p, int v) { return atomicAdd(p, v); }
static __device__ __forceinline__ int tp_atomic_max_prim(int* p, int v) { return atomicMax(p, v); }
static __device__ __forceinline__ int tp_atomic_min_prim(int* p, int v) { return atomicMin(p, v); }
static __device__ __forceinline__ unsigned tp_atomic_cas_u32(unsigned* p, unsigned c, unsigned v) { return atomicCAS(p, c, v); }
static __device__ __forceinline__ unsigned tp_atomic_load_u32(unsigned* p) { return *(volatile unsigned*)p; }

// ---------------------------------------------------------------- cp.async (sm_80+)
template <int BYTES> static __device__ __forceinline__ void tp_cp_async(unsigned dst, const void* src, int src_bytes);
template <> __device__ __forceinline__ void tp_cp_async<16>(unsigned dst, const void* src, int src_bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" :: "r"(dst), "l"(src), "r"(src_bytes) : "memory");
}
template <> __device__ __forceinline__ void tp_cp_async<8>(unsigned dst, const void* src, int src_bytes) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 8, %2;\n" :: "r"(dst), "l"(src), "r"(src_bytes) : "memory");
}
template <> __device__ __forceinline__ void tp_cp_async<4>(unsigned dst, const void* src, int src_bytes) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" :: "r"(dst), "l"(src), "r"(src_bytes) : "memory");
}

// ---------------------------------------------------------------- ldmatrix and mma.sync (sm_80+)
static __device__ __forceinline__ void tp_ldmatrix_x4(unsigned a, unsigned& r0, unsigned& r1, unsigned& r2, unsigned& r3) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3) : "r"(a) : "memory");
}
static __device__ __forceinline__ void tp_ldmatrix_x4_trans(unsigned a, unsigned& r0, unsigned& r1, unsigned& r2, unsigned& r3) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3) : "r"(a) : "memory");
}
static __device__ __forceinline__ void tp_ldmatrix_x2(unsigned a, unsigned& r0, unsigned& r1) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0, %1}, [%2];\n" : "=r"(r0), "=r"(r1) : "r"(a) : "memory");
}
static __device__ __forceinline__ void tp_ldmatrix_x2_trans(unsigned a, unsigned& r0, unsigned& r1) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0, %1}, [%2];\n" : "=r"(r0), "=r"(r1) : "r"(a) : "memory");
}
static __device__ __forceinline__ void tp_mma_m16n8k16_bf16(float& d0, float& d1, float& d2, float& d3, unsigned a0,
    unsigned a1, unsigned a2, unsigned a3, unsigned b0, unsigned b1) {
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
               "{%0, %1, %2, %3};\n"
               : "+f"(d0), "+f"(d1), "+f"(d2), "+f"(d3) : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}
static __device__ __forceinline__ void tp_mma_m16n8k8_tf32(float& d0, float& d1, float& d2, float& d3, unsigned a0,
    unsigned a1, unsigned a2, unsigned a3, unsigned b0, unsigned b1) {
  asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
               "{%0, %1, %2, %3};\n"
               : "+f"(d0), "+f"(d1), "+f"(d2), "+f"(d3) : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}
static __device__ __forceinline__ void tp_mma_m16n8k16_f16(float& d0, float& d1, float& d2, float& d3, unsigned a0,
    unsigned a1, unsigned a2, unsigned a3, unsigned b0, unsigned b1) {
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
               "{%0, %1, %2, %3};\n"
               : "+f"(d0), "+f"(d1), "+f"(d2), "+f"(d3) : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

// ---------------------------------------------------------------- wgmma, mbarrier, bulk copies (sm_90a)
static __device__ __forceinline__ unsigned long long tp_gmma_desc(unsigned addr, unsigned lbo, unsigned sbo, unsigned mode) {
  return (unsigned long long)((addr >> 4) & 0x3FFFu) | ((unsigned long long)((lbo >> 4) & 0x3FFFu) << 16) |
         ((unsigned long long)((sbo >> 4) & 0x3FFFu) << 32) | ((unsigned long long)mode << 62);
}
#define tp_wgmma_fence() asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory")
#define tp_wgmma_commit() asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory")
#define tp_wgmma_wait0() asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory")

static __device__ __forceinline__ void tp_mbar_init(unsigned long long* bar, unsigned count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" :: "r"(tp_smem_addr(bar)), "r"(count) : "memory");
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
}
static __device__ __forceinline__ void tp_mbar_arrive(unsigned long long* bar) {
  asm volatile("{\n.reg .b64 st;\nmbarrier.arrive.shared::cta.b64 st, [%0];\n}\n" :: "r"(tp_smem_addr(bar)) : "memory");
}
static __device__ __forceinline__ void tp_mbar_expect_tx(unsigned long long* bar, unsigned bytes) {
  asm volatile("mbarrier.expect_tx.relaxed.cta.shared::cta.b64 [%0], %1;\n" :: "r"(tp_smem_addr(bar)), "r"(bytes) : "memory");
}
static __device__ __forceinline__ void tp_mbar_wait(unsigned long long* bar, unsigned parity) {
  unsigned done = 0;
  while (!done) {
    asm volatile("{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\nselp.u32 %0, 1, 0, p;\n}\n"
                 : "=r"(done) : "r"(tp_smem_addr(bar)), "r"(parity) : "memory");
  }
}
// ---------------------------------------------------------------- thread-block clusters (sm_90a)
static __device__ __forceinline__ int tp_cluster_rank() {
  unsigned r;
  asm volatile("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(r));
  return (int)r;
}
static __device__ __forceinline__ void tp_cluster_sync() {
  asm volatile("barrier.cluster.arrive.release.aligned;\nbarrier.cluster.wait.acquire.aligned;\n" ::: "memory");
}
// tp.cluster_sync(relaxed=True): an execution barrier without the release (whose MEMBAR.ALL.GPU waits for the block's
// outstanding stores: 0.6 us at the end of gemm_splitk_swap CLUSTER_K, H100)
static __device__ __forceinline__ void tp_cluster_sync_relaxed() {
  asm volatile("barrier.cluster.arrive.relaxed.aligned;\nbarrier.cluster.wait.aligned;\n" ::: "memory");
}
// the same shared-memory element in CTA `cta` of the cluster, as a generic address (distributed shared memory:
// tp.load(..., cta=); the loads through it are generic, ld's shared::cluster window)
template <class T> static __device__ __forceinline__ T* tp_mapa(T* p, int cta) {
  unsigned long long r;
  asm volatile("mapa.u64 %0, %1, %2;\n" : "=l"(r) : "l"(p), "r"(cta));
  return (T*)r;
}
// arrive on the mbarrier at the same shared offset in CTA `cta` of the cluster, with the default semantics
// (.release.cta, as CUTLASS's ClusterBarrier::arrive(cta_id)): what it orders is the arriving warp's own reads of
// its stage (retired wgmma groups), before the other block's copy engine refills it. The .release.cluster form
// (tp_mbar_arrive_cluster_sc) made gemm_cluster 2x slower on an H100 (benchmarks/profile/g3_cluster_ablation.py).
static __device__ __forceinline__ void tp_mbar_arrive_cluster(unsigned long long* bar, int cta) {
  asm volatile("{\n.reg .b32 ra;\nmapa.shared::cluster.u32 ra, %0, %1;\n"
               "mbarrier.arrive.shared::cluster.b64 _, [ra];\n}\n"
               :: "r"(tp_smem_addr(bar)), "r"(cta) : "memory");
}
static __device__ __forceinline__ void tp_mbar_arrive_cluster_sc(unsigned long long* bar, int cta) {
  asm volatile("{\n.reg .b32 ra;\nmapa.shared::cluster.u32 ra, %0, %1;\n"
               "mbarrier.arrive.release.cluster.shared::cluster.b64 _, [ra];\n}\n"
               :: "r"(tp_smem_addr(bar)), "r"(cta) : "memory");
}
// tp.store_remote: st.async of 1 / 2 / 4 32-bit values to the shared::cluster address `ra` (another CTA's shared
// memory, from mapa), completing their bytes on the mbarrier at shared::cluster address `rb`; and the one arrival
// that carries the tile's byte count (arrive.expect_tx, default .release.cta: no MEMBAR, the data is ordered by the
// transaction count, not by a fence)
static __device__ __forceinline__ unsigned tp_mapa_shared(unsigned a, int cta) {
  unsigned r;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(r) : "r"(a), "r"(cta));
  return r;
}
static __device__ __forceinline__ void tp_st_async1(unsigned ra, unsigned a, unsigned rb) {
  asm volatile("st.async.shared::cluster.mbarrier::complete_tx::bytes.b32 [%0], %1, [%2];\n"
               :: "r"(ra), "r"(a), "r"(rb) : "memory");
}
static __device__ __forceinline__ void tp_st_async2(unsigned ra, unsigned a, unsigned b, unsigned rb) {
  asm volatile("st.async.shared::cluster.mbarrier::complete_tx::bytes.v2.b32 [%0], {%1, %2}, [%3];\n"
               :: "r"(ra), "r"(a), "r"(b), "r"(rb) : "memory");
}
static __device__ __forceinline__ void tp_st_async4(unsigned ra, unsigned a, unsigned b, unsigned c, unsigned d,
                                                    unsigned rb) {
  asm volatile("st.async.shared::cluster.mbarrier::complete_tx::bytes.v4.b32 [%0], {%1, %2, %3, %4}, [%5];\n"
               :: "r"(ra), "r"(a), "r"(b), "r"(c), "r"(d), "r"(rb) : "memory");
}
static __device__ __forceinline__ void tp_mbar_arrive_expect_tx_remote(unsigned rb, unsigned bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cluster.b64 _, [%0], %1;\n" :: "r"(rb), "r"(bytes) : "memory");
}
static __device__ __forceinline__ void tp_bulk_g2s(unsigned dst, const void* src, unsigned bytes, unsigned long long* bar) {
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n"
               :: "r"(dst), "l"(src), "r"(bytes), "r"(tp_smem_addr(bar)) : "memory");
}

// ---------------------------------------------------------------- bulk tensor copies (TMA, sm_90a)
// A CUtensorMap (cuda.h's opaque 128-byte, 64-byte aligned object), built on the host by cuTensorMapEncodeTiled
// and passed by value as a `const __grid_constant__` kernel parameter. Coordinates are innermost first.
struct __align__(64) tp_tensor_map { unsigned long long opaque[16]; };
static __device__ __forceinline__ void tp_tma_load_1d(unsigned dst, const tp_tensor_map* map, unsigned long long* bar, int c0) {
  asm volatile("cp.async.bulk.tensor.1d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%3}], [%2];\n"
               :: "r"(dst), "l"(map), "r"(tp_smem_addr(bar)), "r"(c0) : "memory");
}
static __device__ __forceinline__ void tp_tma_load_2d(unsigned dst, const tp_tensor_map* map, unsigned long long* bar, int c0, int c1) {
  asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4}], [%2];\n"
               :: "r"(dst), "l"(map), "r"(tp_smem_addr(bar)), "r"(c0), "r"(c1) : "memory");
}
static __device__ __forceinline__ void tp_tma_load_3d(unsigned dst, const tp_tensor_map* map, unsigned long long* bar, int c0, int c1, int c2) {
  asm volatile("cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4, %5}], [%2];\n"
               :: "r"(dst), "l"(map), "r"(tp_smem_addr(bar)), "r"(c0), "r"(c1), "r"(c2) : "memory");
}
static __device__ __forceinline__ void tp_tma_load_4d(unsigned dst, const tp_tensor_map* map, unsigned long long* bar, int c0, int c1, int c2, int c3) {
  asm volatile("cp.async.bulk.tensor.4d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4, %5, %6}], [%2];\n"
               :: "r"(dst), "l"(map), "r"(tp_smem_addr(bar)), "r"(c0), "r"(c1), "r"(c2), "r"(c3) : "memory");
}
static __device__ __forceinline__ void tp_tma_load_5d(unsigned dst, const tp_tensor_map* map, unsigned long long* bar, int c0, int c1, int c2, int c3, int c4) {
  asm volatile("cp.async.bulk.tensor.5d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4, %5, %6, %7}], [%2];\n"
               :: "r"(dst), "l"(map), "r"(tp_smem_addr(bar)), "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(c4) : "memory");
}
// multicast: one load written at the same shared offset of every CTA of `mask` in the cluster, completing the
// bytes on each one's mbarrier (same offset)
static __device__ __forceinline__ void tp_tma_load_2d_mc(unsigned dst, const tp_tensor_map* map, unsigned long long* bar, unsigned short mask, int c0, int c1) {
  asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster [%0], [%1, {%4, %5}], [%2], %3;\n"
               :: "r"(dst), "l"(map), "r"(tp_smem_addr(bar)), "h"(mask), "r"(c0), "r"(c1) : "memory");
}
static __device__ __forceinline__ void tp_tma_load_3d_mc(unsigned dst, const tp_tensor_map* map, unsigned long long* bar, unsigned short mask, int c0, int c1, int c2) {
  asm volatile("cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster [%0], [%1, {%4, %5, %6}], [%2], %3;\n"
               :: "r"(dst), "l"(map), "r"(tp_smem_addr(bar)), "h"(mask), "r"(c0), "r"(c1), "r"(c2) : "memory");
}
