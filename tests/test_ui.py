"""The Prefect UI in a real headless Chromium: Deployments -> pipeline -> Run -> Custom run,
change the training steps in the form, submit, follow the run to its end (the page shows the
release outcome, e.g. Gate failed), read the report artifact's verdict. Screenshots land in
test-artifacts/ui/."""

import os
import re
import shutil
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

CHROMIUM = os.environ.get("ARGEN_CHROMIUM", shutil.which("chromium") or "/usr/bin/chromium")
SHOTS = Path(os.environ.get("ARGEN_TEST_ARTIFACTS", "test-artifacts")) / "ui"
FLAGS = [
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


@pytest.fixture
def page():
    from playwright.sync_api import sync_playwright

    if not Path(CHROMIUM).is_file():
        pytest.fail(f"Chromium not found at {CHROMIUM}: `make test` installs Debian's chromium")
    SHOTS.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as playwright:
        try:
            browser = playwright.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        except Exception as exc:  # a browser that cannot start is a failure, not a skip
            pytest.fail(f"Chromium at {CHROMIUM} did not start: {exc}")
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        page.set_default_timeout(60_000)
        yield page
        browser.close()


def test_run_pipeline_from_the_ui_and_read_the_report(stack, recipe, page):
    api, _ = stack
    recipe_path, _ = recipe
    ui = str(api.base_url).rstrip("/").removesuffix("/api")

    page.goto(f"{ui}/deployments")
    page.get_by_role("link", name="pipeline", exact=True).first.click()
    page.get_by_role("button", name="Run", exact=True).click()
    page.get_by_text("Custom run", exact=True).click()
    page.wait_for_url(re.compile(r"/run(\?|$)"))

    run_name = page.get_by_role("textbox").first.input_value()
    assert run_name
    page.locator("textarea").first.fill(str(recipe_path))
    steps = (
        page.locator("div.schema-form-property")
        .filter(has=page.get_by_text("max_steps (Optional)", exact=True))
        .last
    )
    steps.get_by_role("button", name="int", exact=True).click()
    steps.locator("input").first.fill("1")
    page.screenshot(path=SHOTS / "1-custom-run-form.png", full_page=True)
    page.get_by_role("button", name="Submit", exact=True).click()

    # Back on the deployment, the new run is listed under its name: open it.
    page.get_by_role("link", name=run_name, exact=True).first.click()
    page.wait_for_url(re.compile(r"/runs/flow-run/"))
    run_id = page.url.split("?")[0].rstrip("/").split("/")[-1]
    run = api.get(f"/flow_runs/{run_id}").json()
    assert run["parameters"]["max_steps"] == 1
    assert run["parameters"]["recipe"] == str(recipe_path)

    deadline = time.monotonic() + 900
    while time.monotonic() < deadline:
        state = api.get(f"/flow_runs/{run_id}").json()["state"]
        if state["type"] in {"COMPLETED", "FAILED", "CRASHED", "CANCELLED"}:
            break
        time.sleep(3)
    assert state["type"] == "COMPLETED", f"the run ended {state}"
    # The release outcome is the state's name, shown on the run's page.
    assert state["name"] in ("Promoted", "Gate failed", "Lost to champion", "Completed"), state
    page.reload()
    page.get_by_text(state["name"], exact=True).first.wait_for()
    page.screenshot(path=SHOTS / "2-completed-run.png", full_page=True)

    page.get_by_text("Artifacts", exact=True).first.click()
    page.get_by_text("argen-report").first.click()
    page.get_by_text("Verdict").first.wait_for()
    page.screenshot(path=SHOTS / "3-report-artifact.png", full_page=True)
    body = page.locator("body").inner_text()
    assert "Release gate" in body
    assert re.search(r"dharma\W+(improved|worse|no change beyond noise)", body)
