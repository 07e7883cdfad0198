"""`argus report RUN_ID`: one self-contained HTML page with inline SVG plots (no plotting dependency).

Plots: speedup over iterations (or, where timing was skipped, each candidate's outcome and its max error
against the reference), and the best kernel's ablation (speedup or correctness with each skill removed).
"""

from __future__ import annotations

import html
import math

COLORS = {"correct": "#2a9d4b", "test-failed": "#d62828", "verify-failed": "#e76f51", "compile-error": "#f4a261",
          "not-applicable": "#adb5bd", "infeasible": "#8d99ae"}


def _svg_line(points, title, ylabel, width=640, height=240, log=False) -> str:
    """points: [(x, y or None, outcome)]; a line through the y values plus colored outcome markers."""
    pad_l, pad_b, pad_t = 56, 32, 28
    ys = [p[1] for p in points if p[1] is not None]
    if log:
        ys = [math.log10(max(y, 1e-12)) for y in ys]
    lo, hi = (min(ys), max(ys)) if ys else (0.0, 1.0)
    if hi - lo < 1e-12:
        lo, hi = lo - 0.5, hi + 0.5
    xs = [p[0] for p in points] or [0]
    x0, x1 = min(xs), max(max(xs), min(xs) + 1)

    def sx(x):
        return pad_l + (x - x0) / (x1 - x0) * (width - pad_l - 16)

    def sy(y):
        if log:
            y = math.log10(max(y, 1e-12))
        return pad_t + (1 - (y - lo) / (hi - lo)) * (height - pad_t - pad_b)

    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" role="img">',
             f'<text x="{width / 2}" y="18" text-anchor="middle" font-size="14">{html.escape(title)}</text>',
             f'<line x1="{pad_l}" y1="{height - pad_b}" x2="{width - 8}" y2="{height - pad_b}" stroke="#333"/>',
             f'<line x1="{pad_l}" y1="{pad_t}" x2="{pad_l}" y2="{height - pad_b}" stroke="#333"/>',
             f'<text x="12" y="{height / 2}" font-size="11" transform="rotate(-90 12 {height / 2})" '
             f'text-anchor="middle">{html.escape(ylabel)}</text>',
             f'<text x="{width / 2}" y="{height - 6}" font-size="11" text-anchor="middle">iteration</text>']
    for frac in (0, 0.5, 1):
        v = lo + frac * (hi - lo)
        label = f"{10 ** v:.2g}" if log else f"{v:.3g}"
        parts.append(f'<text x="{pad_l - 4}" y="{sy(10 ** v if log else v) + 4}" font-size="10" '
                     f'text-anchor="end">{label}</text>')
    line = [f"{sx(x):.1f},{sy(y):.1f}" for x, y, _ in points if y is not None]
    if len(line) > 1:
        parts.append(f'<polyline fill="none" stroke="#1d3557" stroke-width="1.5" points="{" ".join(line)}"/>')
    for x, y, outcome in points:
        cy = sy(y) if y is not None else height - pad_b - 6
        parts.append(f'<circle cx="{sx(x):.1f}" cy="{cy:.1f}" r="4" fill="{COLORS.get(outcome, "#6c757d")}">'
                     f'<title>#{x}: {html.escape(outcome)}{"" if y is None else f" {y:.4g}"}</title></circle>')
    parts.append("</svg>")
    return "".join(parts)


def _svg_bars(rows, title, width=760) -> str:
    """Horizontal bars; labels are never cut (the label column is as wide as the longest label)."""
    height = 40 + 26 * max(1, len(rows))
    vals = [r["value"] for r in rows if r["value"] is not None]
    top = max(vals) if vals else 1.0
    label_w = 16 + 6.2 * max([len(r["label"]) for r in rows] or [10])
    width = max(width, int(label_w) + 360)
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" role="img">',
             f'<text x="{width / 2}" y="18" text-anchor="middle" font-size="14">{html.escape(title)}</text>']
    for i, r in enumerate(rows):
        y = 32 + 26 * i
        w = 0 if r["value"] is None else (r["value"] / top) * (width - label_w - 100)
        color = "#2a9d4b" if r["ok"] else "#d62828"
        parts.append(f'<text x="{label_w - 6:.0f}" y="{y + 14}" font-size="11" text-anchor="end">'
                     f'{html.escape(r["label"])}<title>{html.escape(r.get("note", r["label"]))}</title></text>')
        parts.append(f'<rect x="{label_w:.0f}" y="{y}" width="{max(w, 3):.1f}" height="18" fill="{color}"/>')
        parts.append(f'<text x="{label_w + 6 + w:.1f}" y="{y + 14}" font-size="11">{html.escape(r["text"])}</text>')
    parts.append("</svg>")
    return "".join(parts)


def _svg_histogram(values, title, edges=(0, 0.5, 0.8, 1.0, 1.5, 2.0, 4.0), width=640, height=240,
                   failed: int = 0) -> str:
    """Counts of `values` per bin [edges[i], edges[i+1]) (the last bin open), plus a bar for `failed`."""
    bins = [(f"{a:g}-{b:g}x", a, b) for a, b in zip(edges, edges[1:])] + [(f">={edges[-1]:g}x", edges[-1], math.inf)]
    counts = [sum(1 for v in values if lo <= v < hi) for _, lo, hi in bins]
    labels = [b[0] for b in bins]
    if failed:
        labels.append("failed")
        counts.append(failed)
    pad_l, pad_b, pad_t = 40, 36, 28
    top = max(counts + [1])
    bw = (width - pad_l - 10) / len(counts)
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" role="img">',
             f'<text x="{width / 2}" y="18" text-anchor="middle" font-size="14">{html.escape(title)}</text>',
             f'<line x1="{pad_l}" y1="{height - pad_b}" x2="{width - 8}" y2="{height - pad_b}" stroke="#333"/>']
    for i, (label, n) in enumerate(zip(labels, counts)):
        h = n / top * (height - pad_t - pad_b)
        x = pad_l + i * bw
        color = "#d62828" if label == "failed" else ("#2a9d4b" if label[0] == ">" or bins[i][1] >= 1.0 else
                                                    "#f4a261")
        parts.append(f'<rect x="{x + 4:.1f}" y="{height - pad_b - h:.1f}" width="{bw - 8:.1f}" height="{h:.1f}" '
                     f'fill="{color}"><title>{html.escape(label)}: {n}</title></rect>')
        parts.append(f'<text x="{x + bw / 2:.1f}" y="{height - pad_b + 14}" font-size="11" '
                     f'text-anchor="middle">{html.escape(label)}</text>')
        parts.append(f'<text x="{x + bw / 2:.1f}" y="{height - pad_b - h - 4:.1f}" font-size="11" '
                     f'text-anchor="middle">{n}</text>')
    parts.append(f'<text x="{width / 2}" y="{height - 4}" font-size="11" text-anchor="middle">speedup over eager '
                 "(problems per bin)</text></svg>")
    return "".join(parts)


def render_report(history, run_id: int) -> str:
    run = history.run(run_id)
    if run is None:
        raise KeyError(f"no run {run_id} in {history.path}")
    cands = history.candidates(run_id)
    timed = any(c["speedup"] for c in cands)
    if timed:
        pts = [(c["iteration"], c["speedup"], c["evaluation"].get("outcome", "")) for c in cands]
        plot1 = _svg_line(pts, "speedup over iterations (geometric mean over test shapes)", "speedup (x)")
    else:
        pts = [(c["iteration"], max([t.get("max_abs_err") or 0 for t in c["evaluation"].get("trials", [])] or [0])
                if c["correct"] else None, c["evaluation"].get("outcome", "")) for c in cands]
        pts = [(x, (y if y else 1e-9) if y is not None else None, o) for x, y, o in pts]
        plot1 = _svg_line(pts, "speedup not measured (timing skipped): max |error| vs the reference", "max abs error",
                          log=True)
    abl = history.ablations(run_id)
    best_sp = run["summary"].get("best_speedup")
    bars = [{"label": "best kernel (all skills)", "value": best_sp or 1.0, "ok": True,
             "text": f"{best_sp:.3f}x" if best_sp else "correct"}]
    for a in abl:
        bars.append({"label": f"without {a['removed']}", "note": a.get("note") or "",
                     "value": a["speedup"] or (1.0 if a["correct"] else 0.0),
                     "ok": bool(a["correct"]), "text": (f"{a['speedup']:.3f}x" if a["speedup"] else
                                                        ("correct" if a["correct"] else "fails")) })
    plot2 = _svg_bars(bars, "ablation of the best kernel" + ("" if timed else " (correctness; timing skipped)"))
    rows = "".join(
        f"<tr><td>{c['iteration']}</td><td>{html.escape(_action(c['action']))}</td>"
        f"<td style='color:{COLORS.get(c['evaluation'].get('outcome', ''), '#333')}'>"
        f"{html.escape(c['evaluation'].get('outcome', ''))}</td><td>{html.escape(c['verdict'] or '')}</td>"
        f"<td>{_x(c['speedup'])}</td><td>{c['reward']:+.2f}</td>"
        f"<td><details><summary>{html.escape((c['error'] or '')[:90])}</summary><pre>{html.escape(c['error'] or '')}"
        f"</pre></details></td></tr>" for c in cands)
    best = next((c for c in cands if c["iteration"] == run["best_candidate"]), None)
    s = run["summary"]
    best_text = (f"best candidate #{run['best_candidate']}" if run["best_candidate"] is not None else
                 "no correct kernel" + (f" ({run['status']}: the same command resumes it)"
                                        if run["status"] in ("interrupted", "running") else ""))
    return f"""<!doctype html>
<html><head><meta charset="utf-8"><title>ARGUS run {run_id}: {html.escape(run['problem'])}</title>
<style>body{{font-family:system-ui,sans-serif;margin:24px;max-width:1000px}} table{{border-collapse:collapse}}
td,th{{border:1px solid #ccc;padding:3px 6px;font-size:13px;vertical-align:top}} pre{{background:#f6f8fa;padding:8px;
overflow:auto;font-size:12px}}</style></head><body>
<h1>ARGUS run {run_id}: {html.escape(run['problem'])} on {html.escape(run['target'])}</h1>
<p>Status <b>{html.escape(run['status'])}</b>; planner {html.escape(run['planner'])} (seed {run['seed']});
kernel: {html.escape(s.get('pattern', ''))}; {best_text};
speedup: <b>{f'{best_sp:.3f}x' if best_sp else 'not measured'}</b>. Timing: {html.escape(s.get('timing', ''))}</p>
<h2>Progress</h2>{plot1}
<h2>Ablation</h2>{plot2}
<h2>Candidates</h2><table><tr><th>#</th><th>action</th><th>outcome</th><th>verifier</th><th>speedup</th>
<th>reward</th><th>message</th></tr>{rows}</table>
<h2>Best kernel</h2><pre>{html.escape(best['source'] if best else '(none)')}</pre>
</body></html>
"""


def _action(a: dict) -> str:
    from .planner import describe_action

    if a.get("kind") == "template":
        return f"template: {a.get('pattern', '')}"
    return describe_action(a)


def _x(speedup) -> str:
    return f"{speedup:.3f}x" if speedup else "-"


FAST_P = (0.0, 0.8, 1.0, 1.5, 2.0)


def fast_p(rows: list[dict], ps=FAST_P) -> dict:
    """KernelBench's fast_p: the share of problems that are correct with speedup over eager > p (p = 0: just
    correct). Without a timing only fast_0 is defined; the others are None."""
    n = len(rows)
    out = {}
    for p in ps:
        if p == 0:
            out[f"fast_{p:g}"] = sum(1 for r in rows if r.get("correct")) / n if n else 0.0
        elif any(r.get("speedup_eager") is not None for r in rows):
            out[f"fast_{p:g}"] = sum(1 for r in rows if r.get("correct") and (r.get("speedup_eager") or 0) > p) / n
        else:
            out[f"fast_{p:g}"] = None
    return out


def solved_share(rows: list[dict]) -> float | None:
    """Correct and at least 0.8x eager; None without timings."""
    if not rows or not any(r.get("speedup_eager") is not None for r in rows):
        return None
    return sum(1 for r in rows if r.get("correct") and (r.get("speedup_eager") or 0) >= 0.8) / len(rows)


def render_suite_report(history, suite_id: int) -> str:
    """One page per suite: fast_p, the solved share, a speedup histogram and one row per problem."""
    suite = history.suite(suite_id)
    if suite is None:
        raise KeyError(f"no suite {suite_id} in {history.path}")
    rows = history.suite_problems(suite_id)
    fp = fast_p(rows)
    solved = solved_share(rows)
    speeds = [r["speedup_eager"] for r in rows if r["correct"] and r["speedup_eager"] is not None]
    failed = sum(1 for r in rows if not r["correct"])
    if speeds:
        hist = _svg_histogram(speeds, f"suite {suite_id}: speedup over eager", failed=failed)
    else:
        hist = _svg_histogram([], f"suite {suite_id}: no timings (target {suite['target']}); failed problems",
                              failed=failed)
    table = "".join(
        f"<tr><td>{html.escape(r['name'])}</td><td>{'yes' if r['correct'] else 'no'}</td>"
        f"<td>{_x(r['speedup_eager'])}</td><td>{_x(r['speedup_compile'])}</td>"
        f"<td>{html.escape(r['precision'] or '')}</td><td>{'' if r['run_id'] is None else r['run_id']}</td>"
        f"<td>{html.escape(r['error'] or '')}</td></tr>" for r in rows)
    summary = ", ".join(f"{k} {'-' if v is None else f'{v:.0%}'}" for k, v in fp.items())
    return f"""<!doctype html>
<html><head><meta charset="utf-8"><title>ARGUS suite {suite_id}</title>
<style>body{{font-family:system-ui,sans-serif;margin:24px;max-width:1100px}} table{{border-collapse:collapse}}
td,th{{border:1px solid #ccc;padding:3px 6px;font-size:13px;vertical-align:top}}</style></head><body>
<h1>ARGUS suite {suite_id}: {html.escape(suite['directory'])} on {html.escape(suite['target'])}</h1>
<p>{len(rows)} problems; status {html.escape(suite['status'])}; {summary}; solved (correct, &ge;0.8x eager):
{'-' if solved is None else f'{solved:.0%}'}</p>
{hist}
<table><tr><th>problem</th><th>correct</th><th>vs eager</th><th>vs torch.compile</th><th>precision</th>
<th>run</th><th>error</th></tr>{table}</table>
</body></html>
"""
