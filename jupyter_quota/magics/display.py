"""Rich views of a balance and a plan: ipywidgets bars, HTML tables, plain text.

Each view is one display bundle, so every frontend shows its best form: JupyterLab renders the
widget, a static renderer (nbconvert, GitHub) the HTML table, a terminal IPython the text.
"""

from __future__ import annotations

import html

from ..planner.report import command_line, range_phrase
from ..quantity import Quantity

#: resources listed first, in this order; the rest follow alphabetically
_ORDER = (
    "requests.nvidia.com/gpu",
    "requests.cpu",
    "cpu",
    "limits.cpu",
    "requests.memory",
    "memory",
    "limits.memory",
    "pods",
    "count/jobs.batch",
)


def in_kernel() -> bool:
    """True in a Jupyter kernel (widgets can reach a frontend), False in a terminal IPython."""
    try:
        from IPython import get_ipython
    except ImportError:  # pragma: no cover - magics imply IPython
        return False
    shell = get_ipython()
    return shell is not None and getattr(shell, "kernel", None) is not None


def publish(bundle: dict, widget=None) -> None:
    """Display ``bundle`` (mime type -> data), with ``widget``'s view on top in a kernel."""
    from IPython.display import display

    if widget is not None and in_kernel():
        view = widget._repr_mimebundle_() or {}
        bundle = {**view, **bundle}  # the widget's view, with our text and HTML as the fallbacks
    display(bundle, raw=True)


# -- balance -------------------------------------------------------------------------------------
def show_balance(balance: dict) -> None:
    """Display one namespace's balance (``GET .../balance``)."""
    publish(
        {"text/plain": balance_text(balance), "text/html": balance_html(balance)},
        balance_widget(balance) if in_kernel() else None,
    )


def balance_rows(balance: dict) -> list[dict]:
    """``[{"resource", "hard", "used", "remaining", "fraction"}]`` in a stable, readable order."""
    resources = balance.get("resources") or {}
    names = [n for n in _ORDER if n in resources] + sorted(n for n in resources if n not in _ORDER)
    rows = []
    for name in names:
        item = resources[name] or {}
        rows.append(
            {
                "resource": name,
                "hard": item.get("hard", ""),
                "used": item.get("used", "0"),
                "remaining": item.get("remaining", ""),
                "fraction": _fraction(item.get("used"), item.get("hard")),
            }
        )
    return rows


def balance_title(balance: dict) -> str:
    stale = " (stale: the backend has not confirmed it recently)" if balance.get("stale") else ""
    team = f" (team {balance['team']})" if balance.get("team") else ""
    return f"{balance.get('namespace', '?')}{team}{stale}"


def balance_text(balance: dict) -> str:
    rows = balance_rows(balance)
    lines = [balance_title(balance)]
    if not rows:
        return lines[0] + "\n  no quota: nothing is limited"
    width = max(len(r["resource"]) for r in rows)
    for r in rows:
        bar = _text_bar(r["fraction"])
        lines.append(f"  {r['resource']:<{width}}  {bar}  {r['used']} of {r['hard']} used, {r['remaining']} left")
    if balance.get("observedAt"):
        lines.append(f"  observed at {balance['observedAt']}")
    return "\n".join(lines)


def balance_html(balance: dict) -> str:
    rows = balance_rows(balance)
    cells = []
    for r in rows:
        pct = 0 if r["fraction"] is None else round(r["fraction"] * 100)
        color = "#d9534f" if pct >= 90 else ("#f0ad4e" if pct >= 70 else "#5cb85c")
        bar = (
            f'<div style="width:12em;height:0.9em;background:#e6e6e6;border-radius:3px">'
            f'<div style="width:{pct}%;height:100%;background:{color};border-radius:3px"></div></div>'
        )
        cells.append(
            f"<tr><td><code>{_e(r['resource'])}</code></td><td>{bar}</td>"
            f"<td style='text-align:right'>{_e(r['used'])}</td><td style='text-align:right'>"
            f"{_e(r['hard'])}</td><td style='text-align:right'><b>{_e(r['remaining'])}</b></td></tr>"
        )
    body = "".join(cells) or "<tr><td colspan=5>no quota: nothing is limited</td></tr>"
    return (
        f"<div class='jq-balance'><b>{_e(balance_title(balance))}</b><table>"
        "<thead><tr><th>resource</th><th></th><th>used</th><th>hard</th><th>left</th></tr></thead>"
        f"<tbody>{body}</tbody></table></div>"
    )


def balance_widget(balance: dict):
    """A VBox: the title, then one row per resource (name, progress bar, used/hard/remaining)."""
    try:
        import ipywidgets as w
    except ImportError:
        return None
    rows = [w.HTML(f"<b>{_e(balance_title(balance))}</b>")]
    for r in balance_rows(balance):
        pct = 0.0 if r["fraction"] is None else r["fraction"] * 100
        style = "danger" if pct >= 90 else ("warning" if pct >= 70 else "success")
        bar = w.FloatProgress(
            value=pct, min=0, max=100, bar_style=style, layout=w.Layout(width="14em"), description_allow_html=False
        )
        rows.append(
            w.HBox(
                [
                    w.HTML(f"<code>{_e(r['resource'])}</code>", layout=w.Layout(width="16em")),
                    bar,
                    w.HTML(f"&nbsp;{_e(r['used'])} of {_e(r['hard'])} used, <b>{_e(r['remaining'])}</b> left"),
                ]
            )
        )
    if len(rows) == 1:
        rows.append(w.HTML("no quota: nothing is limited"))
    return w.VBox(rows)


# -- plan ----------------------------------------------------------------------------------------
def show_plan(result: dict) -> None:
    """Display a ``POST .../plan`` answer: the recommendation, what it changed and why."""
    from ..planner.report import plan_text

    publish({"text/plain": plan_text(result), "text/html": plan_html(result)})


def plan_html(result: dict) -> str:
    request = result.get("request") or {}
    est = request.get("estimate") or {}
    parts = [
        f"<div class='jq-plan'><b>{_e(result.get('namespace'))}</b> (team {_e(result.get('team'))}): "
        f"{_e(result.get('gpusFree'))} GPU(s) left, {_e(result.get('gpuMemory'))} per GPU "
        f"({_e(result.get('usableGpuMemory'))} usable)<br>"
        f"As written: {_e(request.get('gpus'))} GPU(s), estimated "
        f"<b>{est.get('peakGibPerGpu', 0):.1f} GiB</b> per GPU{_e(range_phrase(est))}"
        + (" (plans are fitted to the range's upper end)" if result.get("fit") == "upper" else "")
    ]
    best = result.get("recommended")
    if best is None:
        parts.append("<p><b style='color:#d9534f'>Nothing fits now.</b></p>")
    else:
        parts.append(f"<p><b>Recommended:</b> {_e(best['summary'])}</p>")
        if best.get("marginal"):
            parts.append(
                "<p><b style='color:#f0ad4e'>Marginal:</b> the upper end of its range leaves less than 2% of "
                "the GPU's memory free, and no safer plan as close to the request fits.</p>"
            )
        if best.get("changes"):
            rows = "".join(
                f"<tr><td><code>{_e(c['field'])}</code></td><td>{_e(_shown(c['from']))}</td>"
                f"<td>{_e(_shown(c['to']))}</td><td>{_e(c['why'])}</td></tr>"
                for c in best["changes"]
            )
            parts.append(
                "<table><thead><tr><th>changed</th><th>from</th><th>to</th><th>why</th></tr></thead>"
                f"<tbody>{rows}</tbody></table>"
            )
        else:
            parts.append("<p>Your request fits as written: nothing changed.</p>")
        res = best.get("resources") or {}
        parts.append(
            f"<p>Pod resources: requests <code>{_e(_quantities(res.get('requests')))}</code>, "
            f"limits <code>{_e(_quantities(res.get('limits')))}</code></p>"
        )
        parts.append(f"<pre>{_e(command_line(best['args'], best['gpus']))}</pre>")
    if result.get("rejected"):
        items = "".join(f"<li>{_e(r['plan']['summary'])}<br><i>{_e(r['reason'])}</i></li>" for r in result["rejected"])
        parts.append(f"<details><summary>Rejected ({len(result['rejected'])})</summary><ul>{items}</ul></details>")
    if result.get("notes"):
        parts.append(
            "<details open><summary>Notes</summary><ul>"
            + "".join(f"<li>{_e(n)}</li>" for n in result["notes"])
            + "</ul></details>"
        )
    if result.get("assumptions"):
        parts.append(
            "<details><summary>Assumptions</summary><ul>"
            + "".join(f"<li>{_e(a)}</li>" for a in result["assumptions"])
            + "</ul></details>"
        )
    parts.append("</div>")
    return "".join(parts)


# -- helpers -------------------------------------------------------------------------------------
def _fraction(used, hard) -> float | None:
    try:
        h = Quantity(str(hard)).as_fraction()
        u = Quantity(str(used or "0")).as_fraction()
    except (ValueError, TypeError):
        return None
    if h <= 0:
        return 1.0 if u > 0 else None
    return float(min(u / h, 1))


def _text_bar(fraction: float | None, width: int = 20) -> str:
    if fraction is None:
        return "[" + " " * width + "]"
    filled = round(fraction * width)
    return "[" + "#" * filled + "." * (width - filled) + "]"


def _quantities(values: dict | None) -> str:
    return " ".join(f"{k}={v}" for k, v in (values or {}).items()) or "none"


def _shown(value) -> str:
    return "default" if value is None else str(value)


def _e(value) -> str:
    return html.escape("" if value is None else str(value))


def increases_text(items: list[dict]) -> str:
    """Increase requests (``GET /increases``), one line each: name, phase, what, until when, why."""
    if not items:
        return "No increase requests."
    lines = []
    for item in items:
        more = ", ".join(f"+{v} {k}" for k, v in sorted((item.get("resources") or {}).items()))
        until = f", until {item['expiresAt']}" if item.get("phase") == "Approved" and item.get("expiresAt") else ""
        by = f" by {item['decidedBy']}" if item.get("decidedBy") else ""
        if by and item.get("phase") == "Expired":
            by = f" (approved{by})"
        note = f" ({item['comment']})" if item.get("comment") else ""
        lines.append(
            f"{item['name']} {item['namespace']}: {item['phase']}{by}{until}{note}: {more} for {item['hours']:g} h, "
            f"asked by {item['user']}: {item['reason']}"
        )
        lines.extend(f"  warning: {warning}" for warning in item.get("warnings") or [])
    return "\n".join(lines)
