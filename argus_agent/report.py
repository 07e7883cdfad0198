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


def _svg_bars(rows, title, width=640) -> str:
    height = 40 + 26 * max(1, len(rows))
    vals = [r["value"] for r in rows if r["value"] is not None]
    top = max(vals) if vals else 1.0
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" role="img">',
             f'<text x="{width / 2}" y="18" text-anchor="middle" font-size="14">{html.escape(title)}</text>']
    for i, r in enumerate(rows):
        y = 32 + 26 * i
        w = 0 if r["value"] is None else (r["value"] / top) * (width - 300)
        color = "#2a9d4b" if r["ok"] else "#d62828"
        parts.append(f'<text x="200" y="{y + 14}" font-size="11" text-anchor="end">{html.escape(r["label"])}</text>')
        parts.append(f'<rect x="206" y="{y}" width="{max(w, 3):.1f}" height="18" fill="{color}"/>')
        parts.append(f'<text x="{212 + w:.1f}" y="{y + 14}" font-size="11">{html.escape(r["text"])}</text>')
    parts.append("</svg>")
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
        bars.append({"label": f"without {a['removed']}"[:34], "value": a["speedup"] or (1.0 if a["correct"] else 0.0),
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
    best = next((c for c in cands if c["id"] == run["best_candidate"]), None)
    s = run["summary"]
    return f"""<!doctype html>
<html><head><meta charset="utf-8"><title>ARGUS run {run_id}: {html.escape(run['problem'])}</title>
<style>body{{font-family:system-ui,sans-serif;margin:24px;max-width:1000px}} table{{border-collapse:collapse}}
td,th{{border:1px solid #ccc;padding:3px 6px;font-size:13px;vertical-align:top}} pre{{background:#f6f8fa;padding:8px;
overflow:auto;font-size:12px}}</style></head><body>
<h1>ARGUS run {run_id}: {html.escape(run['problem'])} on {html.escape(run['target'])}</h1>
<p>Status <b>{html.escape(run['status'])}</b>; planner {html.escape(run['planner'])} (seed {run['seed']});
kernel: {html.escape(s.get('pattern', ''))}; best candidate #{run['best_candidate']};
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
