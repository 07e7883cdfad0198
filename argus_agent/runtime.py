"""What generated `model_new.py` files import: one `launch` that runs a tilepy kernel on the GPU through
tilepy_hip for CUDA tensors, and on the CPU interpreter otherwise.

    launch(softmax, lambda m: (m["M"],), x, y, BLOCK_N=1024)

The grid may be a callable of {constexpr and symbolic dimension name: value} (the kernel's defaults merged
with the overrides), so a tuned tile size moves the grid with it.
"""

from __future__ import annotations

import weakref

import tilepy_hip  # noqa: F401  (registers the GPU backend that kernel[grid] uses for CUDA tensors)


def launch(kernel, grid, *args, target: str | None = None, **constexprs):
    """Run `kernel` over `grid` on `args`: exactly `kernel[grid](*args, target=target, **constexprs)` (CUDA
    tensors go through tilepy_hip's prepared launch, anything else runs on the interpreter)."""
    return kernel[grid](*args, target=target, **constexprs)


def aligned16(x):
    """`x` itself when its data starts on a 16-byte boundary, else an aligned copy. Kernels built TMA-only
    (the attention kernels' FALLBACK=False) refuse a tensor a tensor map cannot describe; a contiguous view at
    an odd offset into a larger tensor is one, and a copy is what makes it describable."""
    return x if x.data_ptr() % 16 == 0 else x.clone()


# id(tensor) -> (weak reference to it, its flat detached view); an entry leaves with its tensor
_FLAT: dict = {}


def flat(t):
    """`t.detach().contiguous().view(-1)`, made once per contiguous tensor (a parameter or buffer read every call)
    and reused while the tensor's storage is the one the view was made of: in-place updates show through the view;
    a tensor given new data (`p.data = ...`, `.to()` in place) gets a new view; a non-contiguous one is copied on
    every call, as before."""
    got = _FLAT.get(id(t))
    if got is not None and got[0]() is t and got[1].data_ptr() == t.data_ptr() and got[1].numel() == t.numel() \
            and got[1].dtype == t.dtype:
        return got[1]
    v = t.detach().contiguous().view(-1)
    if t.is_contiguous():
        if got is None or got[0]() is not t:
            weakref.finalize(t, _FLAT.pop, id(t), None)
        _FLAT[id(t)] = (weakref.ref(t), v)
    return v


def state(model, specs) -> list:
    """The flat views (`flat`) of `model`'s parameters and buffers: specs is a tuple of (kind, module path,
    name), kind "p" (parameter) or "b" (buffer), e.g. ("p", ("features", "0"), "weight"). Read through the modules'
    own dicts on every call (what `get_parameter` walks, without its checks), so a replaced submodule or parameter
    is seen at once; candidates may not reach those private dicts themselves."""
    out = []
    for kind, path, name in specs:
        m = model
        for p in path:
            m = m._modules[p]
        out.append(flat((m._parameters if kind == "p" else m._buffers)[name]))
    return out


# (id(weight), the call) -> (weak reference to the weight, the state it was split in, the halves); an entry leaves
# with its weight
_SPLITS: dict = {}


def weight_split(kernel, grid, w, w_view, out_shape, out_view, key=None, prep=None, tag: str = ""):
    """The TF32 halves (hi, lo) of a weight (the fp32 GEMM's B operand, a parameter's flat view from `state`):
    `kernel` (split_tf32 / split_tf32_t) over `grid` on w.view(w_view) into two new f32 tensors of `out_shape`
    (passed as .view(out_view)), made once and reused while the weight is the same tensor in the same state:
    its data pointer, shape, dtype and torch's version counter (which every in-place change bumps, also through
    a view and under no_grad). A new split follows any change; a weight given new data gets a new view from
    `state`, so a new entry. Candidates may not read the version counter (a private attribute) themselves.
    `key` and `prep` (a convolution's B reordered from its weight, conv_tma): `w` is a scratch tensor that `prep()`
    fills from the parameter `key` (launching the reordering kernel); the state is key's, and prep runs only when
    it moved, before the split. `tag` names the prep (the reordering kernel), so two preps of one key differ."""
    import torch

    src = w if key is None else key
    now = (src.data_ptr(), tuple(src.shape), src.dtype, src._version, src.device)
    call = (kernel, grid, tuple(w_view), tuple(out_shape), tuple(out_view), tag)
    entry = (id(src), call)
    got = _SPLITS.get(entry)
    if got is not None and got[0]() is src and got[1] == now:
        return got[2]
    if prep is not None:
        prep()
    hi = torch.empty(out_shape, dtype=torch.float32, device=w.device)
    lo = torch.empty(out_shape, dtype=torch.float32, device=w.device)
    launch(kernel, grid, w.view(w_view), hi.view(out_view), lo.view(out_view))
    if got is None or got[0]() is not src:
        weakref.finalize(src, _SPLITS.pop, entry, None)
    _SPLITS[entry] = (weakref.ref(src), now, (hi, lo))
    return hi, lo
