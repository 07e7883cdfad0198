"""The e4m3 element type (OCP float8 e4m3fn): the interpreter's rounding against an independent float64
nearest-value search and against torch.float8_e4m3fn, all 256 bit patterns, casts in kernels, e4m3 tensors
at launch, the wgmma e4m3 instruction's operand model, and the C++ header's software conversion (the path of
targets without cvt.rn.satfinite.e4m3x2, built on the host with g++)."""

import os
import re
import shutil
import subprocess

import numpy as np
import pytest

import tilepy as tp
from tilepy import dtypes as dt

torch = pytest.importorskip("torch", reason="torch is not installed")


def _table():
    """(values, codes) of the 254 finite e4m3 values from the format's definition, in float64: bias 7, 3
    mantissa bits, subnormals m * 2**-9, S.1111.111 NaN."""
    vals, codes = [], []
    for code in range(256):
        s, e, m = code >> 7, (code >> 3) & 15, code & 7
        if e == 15 and m == 7:
            continue
        mag = m * 2.0**-9 if e == 0 else (1 + m / 8) * 2.0 ** (e - 7)
        vals.append(-mag if s else mag)
        codes.append(code)
    return np.array(vals), np.array(codes)


def _nearest(x: np.ndarray) -> np.ndarray:
    """float64 reference of cvt.rn.satfinite: the nearest finite e4m3 value (ties to the even code), |x| over
    448 saturating, NaN staying NaN; the sign of zero follows x."""
    vals, codes = _table()
    x64 = np.asarray(x, np.float64)
    out = np.empty_like(x64)
    for i, v in enumerate(x64.ravel()):
        if np.isnan(v):
            out.flat[i] = np.nan
            continue
        c = min(max(v, -448.0), 448.0)
        d = np.abs(vals - c)
        best = np.flatnonzero(d == d.min())
        pick = best[0] if len(best) == 1 else next(b for b in best if codes[b] % 2 == 0)
        r = vals[pick]
        out.flat[i] = np.copysign(abs(r), v) if r == 0 else r
    return out


def _random_inputs(n=4000, seed=0):
    rng = np.random.default_rng(seed)
    x = np.concatenate([
        rng.standard_normal(n) * 10.0 ** rng.uniform(-4, 3, n),      # every binade, subnormals, over 448
        rng.uniform(-500, 500, n // 4),
        rng.uniform(-2.0**-6, 2.0**-6, n // 4),                    # the subnormal range
    ]).astype(np.float32)
    vals, _ = _table()
    pos = np.unique(vals[vals >= 0])
    mids = (pos[:-1] + pos[1:]) / 2                                 # exact ties, both signs
    return np.concatenate([x, mids, -mids, [0.0, -0.0, 448.0, 463.99, 464.0, 1e30, 2.0**-10, 2.0**-11]]
                          ).astype(np.float32)


def test_all_bit_patterns_decode_as_the_format_defines_and_as_torch():
    bits = np.arange(256, dtype=np.uint8)
    got = dt.e4m3_from_bits(bits)
    vals, codes = _table()
    want = np.full(256, np.nan)
    want[codes] = vals
    np.testing.assert_array_equal(got, want.astype(np.float32))          # NaN at 0x7f and 0xff only
    assert np.flatnonzero(np.isnan(got)).tolist() == [0x7F, 0xFF]
    via_torch = torch.from_numpy(bits).view(torch.float8_e4m3fn).to(torch.float32).numpy()
    np.testing.assert_array_equal(got, via_torch)
    finite = ~np.isnan(got)
    assert np.array_equal(dt.e4m3_to_bits(got[finite]), bits[finite])   # encoding inverts decoding
    assert np.array_equal(dt.round_e4m3(got), got, equal_nan=True)       # e4m3 values round to themselves


def test_rounding_matches_the_float64_nearest_value_and_torch():
    x = _random_inputs()
    got = dt.round_e4m3(x)
    want = _nearest(x)
    np.testing.assert_array_equal(got, want.astype(np.float32))
    assert np.array_equal(np.signbit(got), np.signbit(want))
    # torch's float8_e4m3fn conversion (CPU) rounds to nearest even and saturates finite values the same way
    via_torch = torch.from_numpy(x).to(torch.float8_e4m3fn).to(torch.float32).numpy()
    np.testing.assert_array_equal(got, via_torch)


def test_specials_saturate_and_ties_go_to_even():
    x = np.array([np.inf, -np.inf, np.nan, 1e6, -449.0, 17.0, 19.0, 2.0**-10, 3 * 2.0**-10], np.float32)
    got = dt.round_e4m3(x)
    # 17 lies between 16 (code ...000) and 18 (...001): even; 19 between 18 and 20 (...010): even;
    # 2^-10 is half the smallest subnormal (code 0 even); 3 * 2^-10 between codes 1 and 2: code 2
    assert got[0] == 448 and got[1] == -448 and np.isnan(got[2]) and got[3] == 448 and got[4] == -448
    assert got[5:].tolist() == [16.0, 20.0, 0.0, 2.0**-8]
    assert dt.e4m3_to_bits(np.float32(np.nan)) == 0x7F


@tp.kernel(threads=64)
def _casts(X: tp.Tensor[tp.f32, "N"], Y: tp.Tensor[tp.e4m3, "N"], Z: tp.Tensor[tp.f32, "N"],
           W: tp.Tensor[tp.f32, "N"], BLOCK: tp.constexpr = 256):
    i0 = tp.block_id(0) * BLOCK
    x = tp.load(X[i0:i0 + BLOCK])
    q = tp.cast(x, tp.e4m3)                       # f32 -> e4m3
    tp.store(Y[i0:i0 + BLOCK], q)
    tp.store(Z[i0:i0 + BLOCK], q.to(tp.f32))       # e4m3 -> f32 (exact)
    h = x.to(tp.bf16).to(tp.e4m3)                  # bf16 -> e4m3
    tp.store(W[i0:i0 + BLOCK], h.to(tp.f32) * 2.0)  # arithmetic on e4m3 computes in f32


def test_casts_in_a_kernel_and_e4m3_tensors_at_launch():
    x = _random_inputs(600, seed=3)
    n = x.size
    y = torch.full((n,), float("nan")).to(torch.float8_e4m3fn)   # a CPU torch e4m3 tensor, written back
    z, w = np.full(n, np.nan, np.float32), np.full(n, np.nan, np.float32)
    _casts[(tp.cdiv(n, 256),)](x, y, z, w)
    want = _nearest(x).astype(np.float32)
    np.testing.assert_array_equal(y.to(torch.float32).numpy(), want)
    np.testing.assert_array_equal(z, want)
    np.testing.assert_array_equal(w, _nearest(dt.round_bf16(x)).astype(np.float32) * 2)


def test_wrong_dtype_at_launch_names_the_parameter():
    x = np.zeros(8, np.float32)
    with pytest.raises(tp.LaunchError, match="'Y'.*e4m3"):
        _casts[(1,)](x, torch.zeros(8, dtype=torch.bfloat16), x.copy(), x.copy())


_I = tp.nv.wgmma_m64n64k32_e4m3


@tp.kernel(threads=128, target="sm_90a")
def _wgmma_fp8(A: tp.Tensor[tp.f32, "M", "K"], B: tp.Tensor[tp.e4m3, "N", "K"], C: tp.Tensor[tp.f32, "M", "N"]):
    a_s = tp.shared((64, 128), tp.e4m3, swizzle=tp.Swizzle(3, 4, 3))
    b_s = tp.shared((64, 128), tp.e4m3, swizzle=tp.Swizzle(3, 4, 3))
    tp.store(a_s, tp.load(A[0:64, 0:128]).to(tp.e4m3))     # f32 quantized on the way into shared memory
    tp.copy(B[0:64, 0:128], b_s)
    tp.barrier()
    acc = tp.zeros((64, 64), tp.f32, layout=tp.accumulator(_I, (64, 64), (1, 1)))
    acc = tp.mma(a_s, b_s.T, acc)
    tp.store(C[0:64, 0:64], acc)


def test_wgmma_e4m3_instruction_against_float64():
    assert (_I.m, _I.n, _I.k, _I.ab, _I.k_major_only) == (64, 64, 32, tp.e4m3, True)
    assert tp.nv.wgmma_m64n256k32_e4m3.name == "nv.wgmma_m64n256k32_e4m3"
    rng = np.random.default_rng(5)
    a = (rng.standard_normal((64, 128)) * 30).astype(np.float32)       # quantized by the kernel's cast
    b = dt.round_e4m3(rng.standard_normal((64, 128)).astype(np.float32) * 8)
    c = np.full((64, 64), np.nan, np.float32)
    _wgmma_fp8[(1,)](a, b, c)
    ref = _nearest(a) @ b.astype(np.float64).T
    # f32 accumulation of exact e4m3 products: a few f32 ulps of the row's magnitude
    bound = 1e-6 * (np.abs(_nearest(a)) @ np.abs(b.astype(np.float64)).T) + 1e-30
    assert np.all(np.abs(c - ref) <= bound)
    assert not np.allclose(c, a.astype(np.float64) @ b.astype(np.float64).T, rtol=1e-3)  # a was quantized


def _header_function(name: str) -> str:
    src = open(os.path.join(os.path.dirname(tp.__file__), "..", "tilepy_hip", "include", "tilepy_hip.h")).read()
    start = src.index(f"static __device__ __forceinline__ {name}")
    end = src.index("\n}\n", start) + 3
    return src[start:end]


@pytest.mark.skipif(shutil.which("g++") is None, reason="no host C++ compiler (g++) to build the header's path")
def test_header_software_conversion_matches_the_interpreter(tmp_path):
    """The header's integer conversions (used where cvt.rn.satfinite.e4m3x2 does not exist: sm_80, gfx942),
    compiled for the host, against round_e4m3 and e4m3_from_bits."""
    body = "\n".join(_header_function(f) for f in ("unsigned char tp_f32_to_e4m3_bits", "float tp_e4m3_bits_to_f32"))
    body = re.sub(r"static __device__ __forceinline__ ", "static ", body)
    prog = tmp_path / "conv.cpp"
    prog.write_text(
        "#include <cstdio>\n#include <cstring>\n"
        "static unsigned tp_float_as_uint(float f) { unsigned u; memcpy(&u, &f, 4); return u; }\n"
        "static float tp_uint_as_float(unsigned u) { float f; memcpy(&f, &u, 4); return f; }\n"
        + body +
        "int main() { float f; while (fread(&f, 4, 1, stdin) == 1) { unsigned char b = tp_f32_to_e4m3_bits(f);"
        " float g = tp_e4m3_bits_to_f32(b); fwrite(&b, 1, 1, stdout); fwrite(&g, 4, 1, stdout); } }\n")
    exe = tmp_path / "conv"
    subprocess.run(["g++", "-O1", "-o", str(exe), str(prog)], check=True)
    x = np.concatenate([_random_inputs(2000, seed=9), [np.inf, -np.inf, np.nan]]).astype(np.float32)
    out = subprocess.run([str(exe)], input=x.tobytes(), capture_output=True, check=True).stdout
    rec = np.frombuffer(out, dtype=np.dtype([("b", "u1"), ("f", "<f4")]))
    want = dt.round_e4m3(x)
    np.testing.assert_array_equal(rec["b"], dt.e4m3_to_bits(want))
    np.testing.assert_array_equal(rec["f"], want)
    np.testing.assert_array_equal(rec["b"][np.isnan(x)], [0x7F])
