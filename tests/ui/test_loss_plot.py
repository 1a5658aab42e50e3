"""The job widget's loss plot (bqplot) in a real JupyterLab and a real Chromium.

The page submits a job to the demo server, whose jobs run ``tests/fake_trainer.py``: it logs 3
ms-swift-like steps with losses, waits for a file this test creates, then logs 3 more. A notebook
cell follows the job as ``%swift_sft`` does (a ``Job``, followed and shown). The plot must draw the
first 3 points, then grow to 6 in the same figure as the log brings them. The screenshot goes
to ``loss-plot.png`` in the test output folder.
"""

from __future__ import annotations

import pytest
from quota_ui import NAMESPACE, api, cancel_live_jobs

pytestmark = pytest.mark.ui

FIGURE = ".jp-OutputArea .bqplot.figure"
# The kernel finds the server through its runtime files. It only reads here: this server has no
# token, so the kernel's POST would need an XSRF cookie, and the page submits the job instead.
CELL = """from jupyter_quota.magics import Job
from jupyter_quota.magics.client import connect
job = Job(connect(), {namespace!r}, {name!r}, interval=0.5).follow()
job"""


def test_the_loss_plot_draws_the_logged_steps_and_grows(lab_page, ui_output_dir, tmp_path):
    page = lab_page.page
    until = tmp_path / "more-steps"
    args = ["--steps", "3", "--more-steps", "3", "--until-file", str(until)]
    body = {"args": args, "gpus": 0, "generateName": "loss-plot-"}
    submitted = api(page, "POST", f"namespaces/{NAMESPACE}/jobs", body)
    assert submitted["status"] == 201, submitted
    try:
        page.evaluate(
            """async (code) => {
                const app = window.jupyterapp;
                const panel = await app.commands.execute('notebook:create-new', {kernelName: 'python3'});
                await panel.context.ready;
                await panel.sessionContext.ready;
                panel.content.activeCell.model.sharedModel.setSource(code);
                await app.commands.execute('notebook:run-cell');
            }""",
            CELL.format(namespace=NAMESPACE, name=submitted["body"]["name"]),
        )
        figure = page.locator(FIGURE)
        figure.wait_for(timeout=120_000)  # the kernel's first import of ipywidgets and bqplot
        _wait_for_points(page, 3)
        assert figure.locator(".mainheading").text_content() == "training loss"
        assert {"step", "loss"} <= set(figure.locator(".axislabel").all_text_contents())

        until.touch()  # the trainer logs steps 4 to 6 and ends
        _wait_for_points(page, 6)
        page.locator(".jp-OutputArea").get_by_text("Succeeded", exact=True).first.wait_for(timeout=60_000)
        assert page.locator(FIGURE).count() == 1  # the same figure, grown
        # Nothing to cancel once it ended: the widget's Cancel goes.
        page.locator(".jp-OutputArea .widget-button", has_text="Cancel").first.wait_for(state="hidden")
        loss_ticks = figure.evaluate(
            """f => [...f.querySelectorAll('.axis')]
                   .filter(a => a.querySelector('.axislabel')?.textContent === 'loss')
                   .flatMap(a => [...a.querySelectorAll('.tick text')].map(t => t.textContent))"""
        )
        assert len(loss_ticks) >= 3 and len(set(loss_ticks)) == len(loss_ticks), loss_ticks
        assert _point_heights(page) == sorted(_point_heights(page))  # the loss falls: 2/step
        figure.locator(".object_grp").last.hover()  # the tooltip names the step and its loss
        page.wait_for_function(
            """() => [...document.querySelectorAll('.bqplot_tooltip_div')].some(t =>
                   getComputedStyle(t).opacity !== '0' && /step\\s*6[\\s\\S]*loss\\s*0\\.3333/.test(t.textContent))""",
            timeout=30_000,
        )
        figure.screenshot(path=ui_output_dir / "loss-plot.png")
        assert not lab_page.errors, lab_page.errors
    except Exception:
        page.screenshot(path=ui_output_dir / "loss-plot-failure.png")
        print("notebook output:", page.locator(".jp-OutputArea").all_inner_texts(), lab_page.errors)
        raise
    finally:
        until.touch()
        cancel_live_jobs(page)
        # Close the notebook unsaved and delete it: the lab server (and its workspace) serves the
        # next test modules, which would otherwise restore it with a kernel dialog over the page.
        page.evaluate(
            """async () => {
                const app = window.jupyterapp;
                const panel = app.shell.currentWidget;
                if (!panel?.context) { return; }
                await panel.sessionContext?.shutdown();
                const path = panel.context.path;
                panel.context.model.dirty = false;
                panel.dispose();
                await app.serviceManager.contents.delete(path);
            }"""
        )


def _wait_for_points(page, count: int) -> None:
    page.wait_for_function(
        f"""(n) => document.querySelectorAll('{FIGURE} .object_grp').length === n""",
        arg=count,
        timeout=60_000,
    )


def _point_heights(page) -> list[float]:
    """The points' y on the screen, left to right (a larger y is lower: a smaller loss)."""
    return page.evaluate(
        f"""() => [...document.querySelectorAll('{FIGURE} .object_grp')]
                .map(g => g.getBoundingClientRect())
                .sort((a, b) => a.x - b.x)
                .map(r => r.y)"""
    )
