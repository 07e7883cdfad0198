"""Soundness and precision, cross-checked against the interpreter with Hypothesis.

Generated kernels (pipeline rings with varied stage counts, wait counts, barrier placement, stage offsets,
prologue depth, commits and swizzles; shared staging with varied barriers, layouts and role writers; tagged
elementwise kernels with index offsets) run on the interpreter with recording. Every race, hazard,
out-of-bounds access, divergent barrier or tag mismatch the run shows must be among the verifier's errors;
kernels correct by construction must verify without errors; and every error the verifier reports must be
replayable: the interpreter run shows a violation of that kind."""

from __future__ import annotations

import os

import numpy as np
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import tilepy_verify as tv

from . import gen, oracle

SETTINGS = settings(max_examples=int(os.environ.get("VERIFY_EXAMPLES", 40)), deadline=None,
                    suppress_health_check=list(HealthCheck))
RNG = np.random.default_rng(1)

# what the interpreter shows -> the verifier checks that must report it
EXPECT = {"race": {"race", "pipeline_hazard"}, "pipeline_hazard": {"pipeline_hazard", "race"},
          "out_of_bounds": {"out_of_bounds"}, "barrier_divergence": {"barrier_divergence"},
          "poison": {"pipeline_hazard", "race", "out_of_bounds"}}


def observe(kir, args, evidence=False):
    obs = oracle.run(kir, (1,), args)
    kinds = obs.kinds()
    if evidence and obs.unretired:
        kinds.add("unretired")
    if np.isnan(args[-1]).any():
        kinds.add("poison")  # shared memory read before anything landed in it
    if obs.error is not None and not kinds:
        raise AssertionError(obs.error)
    return kinds


def assert_sound(report, kinds):
    reported = {f.check for f in report.errors}
    for k in kinds:
        assert EXPECT[k] & reported, f"interpreter shows {k}, verifier reports {sorted(reported)}\n{report}"


def assert_replayable(report, kinds, rerun=None):
    """Every error the verifier reports shows up when the interpreter runs with the counterexample's sizes
    (or, for a copy the interpreter never lands, as that copy still in flight when the block ends)."""
    for f in report.errors:
        if f.check == "tag_assertion":
            continue
        dims = f.counterexample.get("dims") or {}
        if rerun is not None and dims:
            kinds = rerun(dims)
        if kinds & {"out_of_bounds", "barrier_divergence"} and f.check not in kinds:
            continue  # the run stopped at that fatal error before reaching this one
        seen = {"race": {"race", "pipeline_hazard"},
                "pipeline_hazard": {"pipeline_hazard", "race", "poison", "unretired"},
                "out_of_bounds": {"out_of_bounds"}, "barrier_divergence": {"barrier_divergence"}}[f.check]
        assert seen & kinds, f"verifier reports {f.check} the run does not show ({sorted(kinds)}):\n{f}"


pipeline_params = st.fixed_dictionaries({
    "stages": st.integers(1, 3),
    "prologue": st.integers(0, 2),
    "wait_n": st.integers(0, 2),
    "barrier_after_wait": st.booleans(),
    "barrier_end": st.booleans(),
    "order": st.sampled_from(["wait_copy_read", "wait_copy_read", "copy_wait_read", "wait_read_copy"]),
    "nk_off": st.sampled_from([0, 0, -1, 1]),
    "read_off": st.sampled_from([0, 0, 0, 1]),
    "commit": st.sampled_from([True, True, True, False]),
    "modulo": st.sampled_from([True, True, True, False]),
    "add": st.sampled_from([0, 0, 0, 1]),
    "swizzle": st.sampled_from(list(gen.SWIZZLES)),
    "read_layout": st.sampled_from(["other", "same"]),
})


@SETTINGS
@given(p=pipeline_params, k_tiles=st.integers(1, 4))
def test_pipeline_family_sound_and_replayable(p, k_tiles):
    assume(p["prologue"] <= p["stages"])
    kern = gen.load(gen.pipeline_source(**p), "gen")
    kir = kern.ir(target="sm_80")
    report = tv.verify(kir)
    X = RNG.standard_normal((8, 16 * k_tiles)).astype(np.float32)
    kinds = observe(kir, [X, np.zeros_like(X)], evidence=True)
    assert_sound(report, kinds - {"unretired"})

    def rerun(dims):
        n = max(16, min(int(dims.get("N", 16 * k_tiles)), 4096))
        Xr = RNG.standard_normal((8, n)).astype(np.float32)
        return observe(kir, [Xr, np.zeros_like(Xr)], evidence=True)

    assert_replayable(report, kinds, rerun)


@SETTINGS
@given(stages=st.integers(2, 4), swizzle=st.sampled_from(list(gen.SWIZZLES)),
       layout=st.sampled_from(["other", "same"]), barrier_end=st.booleans(), k_tiles=st.integers(1, 5))
def test_correct_pipelines_verify_clean(stages, swizzle, layout, barrier_end, k_tiles):
    src = gen.pipeline_source(stages, stages - 1, stages - 2, True, barrier_end, "wait_copy_read", 0, 0, True, True, 0,
                              swizzle, layout)
    kir = gen.load(src, "gen").ir(target="sm_80")
    report = tv.verify(kir)
    assert report.ok, str(report)
    X = RNG.standard_normal((8, 16 * k_tiles)).astype(np.float32)
    assert not observe(kir, [X, np.zeros_like(X)])


@SETTINGS
@given(loops=st.integers(1, 3), barrier_mid=st.booleans(), barrier_end=st.booleans(), same_layout=st.booleans(),
       role_write=st.booleans(), diverge=st.booleans())
def test_staging_family_sound_and_precise(loops, barrier_mid, barrier_end, same_layout, role_write, diverge):
    src = gen.staging_source(loops, barrier_mid, barrier_end, same_layout, role_write, diverge and role_write)
    kir = gen.load(src, "gen").ir(target="sm_80")
    report = tv.verify(kir)
    X = RNG.standard_normal((16, 16 * loops)).astype(np.float32)
    kinds = observe(kir, [X, np.zeros_like(X)])
    assert_sound(report, kinds)
    assert_replayable(report, kinds)
    if barrier_mid and (barrier_end or loops == 1) and not (diverge and role_write):
        assert report.ok, str(report)


@SETTINGS
@given(x_off=st.integers(-2, 2), y_off=st.integers(-2, 2), block=st.sampled_from([64, 128, 256]),
       blocks=st.integers(1, 3))
def test_tag_family_sound_and_precise(x_off, y_off, block, blocks):
    kir = gen.load(gen.tags_source(x_off, y_off, block), "gen").ir(target="sm_80")
    report = tv.verify(kir)
    n = block * blocks
    X = RNG.standard_normal(n).astype(np.float32)
    Y = RNG.standard_normal(n).astype(np.float32)
    Z = np.zeros(n, np.float32)
    oracle.run(kir, (blocks,), [X, Y, Z])
    # the assertion says each sum pairs x[i] with y[i]; the output shows whether it did
    def at(a, i):
        return a[i] if 0 <= i < n else 0.0
    paired = all(np.isclose(Z[i], at(X, i + x_off) + at(Y, i + x_off)) for i in range(n)) if x_off == y_off else False
    violated = x_off != y_off
    if violated:
        f = report.by_check("tag_assertion")
        assert f, str(report)
        tags = f[0].counterexample["tags"]["x"]
        assert tags[0][1] != tags[1][1]
    else:
        assert report.ok, str(report)
        assert paired
