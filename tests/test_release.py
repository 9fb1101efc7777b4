"""Release management against the real Prefect stack: a champion exists, a weaker challenger
passes its own gate but loses to the champion (named state, webhook notification), a stronger
one is promoted, and a rollback restores the first champion.

"Weaker" is made certain: the challenger is trained from a copy of the base model whose final
norm is zeroed (greedy decoding then says nothing), and the judge scores an empty answer low."""

import json
import os
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from tests import fake_openai
from tests.test_orchestration import children, press_run, run_detail

pytestmark = pytest.mark.slow

# The candidate's own gate: passes for any run whose judging worked (the rules of the default
# gate are the report tests' business; here the champion comparison is under test).
PASSING_GATE = "report.gate=[{check: judge_failures_below, value: 0.05}]"
CATEGORIES = ("clinical", "mixed_domain", "para_clinical", "adversarial")


@pytest.fixture(scope="module")
def release_recipe(recipe):
    """The stack's tiny recipe on 40 real scenarios (a test split big enough for a verdict)."""
    tiny, _ = recipe
    root = tiny.parent
    sources = root / "release-scenarios"
    sources.mkdir()
    repo = Path(__file__).resolve().parent.parent
    for category in CATEGORIES:
        rows = (repo / "data/scenarios" / f"{category}.jsonl").read_text().splitlines()[:10]
        (sources / f"{category}.jsonl").write_text("\n".join(rows) + "\n")
    config = json.loads(tiny.read_text())
    config["curate"] = {
        "sources": [str(sources)],
        "split": {"train": 0.5, "validation": 0.2, "test": 0.3},
    }
    # the release line is under test, not the warm start or preference tuning
    config["sft"] = {"enabled": False}
    config["prefer"] = {"enabled": False}
    path = root / "release.yaml"
    path.write_text(json.dumps(config))
    return path


@pytest.fixture(scope="module")
def silent_model(tmp_path_factory, default_model_dir):
    """The base model with its final norm zeroed: every greedy answer is empty."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    out = tmp_path_factory.mktemp("silent-model")
    model = AutoModelForCausalLM.from_pretrained(default_model_dir)
    with torch.no_grad():
        model.model.norm.weight.zero_()
    model.save_pretrained(out)
    AutoTokenizer.from_pretrained(default_model_dir).save_pretrained(out)
    return out


@pytest.fixture
def empty_answers_score_low(monkeypatch):
    """The fake judge, plus: an answer of fewer than two words scores 0.1 on every number."""
    honest = fake_openai.honest_fields

    def judge(instructions: str, response: str, obey: bool) -> dict:
        fields = honest(instructions, response, obey)
        if len(set(response.split())) < 2:
            fields = {k: 0.1 if isinstance(v, float) else v for k, v in fields.items()}
        return fields

    monkeypatch.setattr(fake_openai, "honest_fields", judge)


@pytest.fixture
def webhook(stack):
    """A local webhook receiver and the `custom-webhook/argen-release` block pointing at it."""
    from prefect.blocks.notifications import CustomWebhookNotificationBlock
    from prefect.settings import PREFECT_API_URL, temporary_settings

    received: list[dict] = []

    class Receiver(BaseHTTPRequestHandler):
        def do_POST(self):
            length = int(self.headers.get("content-length", 0))
            received.append(json.loads(self.rfile.read(length)))
            self.send_response(200)
            self.end_headers()

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Receiver)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    api, _ = stack
    url = f"http://127.0.0.1:{server.server_address[1]}/hook"
    with temporary_settings({PREFECT_API_URL: str(api.base_url).rstrip("/")}):
        block = CustomWebhookNotificationBlock(
            name="argen-release", url=url, json_data={"text": "{{body}}"}
        )
        block.save("argen-release", overwrite=True)
    yield received
    server.shutdown()


def line_cli(api, home: Path, command: str, recipe: Path) -> str:
    """`argen champion|rollback --recipe RECIPE` as a user runs it."""
    env = {**os.environ, "PREFECT_API_URL": str(api.base_url).rstrip("/")}
    env["PREFECT_HOME"] = str(home)
    done = subprocess.run(
        [sys.executable, "-m", "flows.cli", command, "--recipe", str(recipe)],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout


def notices_of(webhook: list[dict], run: dict, wait: float = 180) -> list[str]:
    """The webhook notices about `run`, once one has come or `wait` seconds have passed.

    Only this run's: a notice about an earlier test's run on the same server (one that ended
    "Gate failed") may still be queued for a worker and reach the webhook during this test."""
    deadline = time.monotonic() + wait
    while True:
        texts = [n["text"] for n in webhook if f"pipeline run {run['name']}:" in n["text"]]
        if texts or time.monotonic() > deadline:
            return texts
        time.sleep(2)


def release_run(api, home: Path, recipe: Path, **parameters) -> dict:
    """A pipeline run on the release recipe with a gate it passes; it must complete."""
    overrides = parameters.pop("overrides", []) + [PASSING_GATE]
    run = press_run(api, {"recipe": str(recipe), "overrides": overrides, **parameters})
    assert run["state"]["type"] == "COMPLETED", run_detail(run, home)
    return run


# Three whole pipeline runs (champion, weaker and stronger challengers), each bounded by its own
# deadline; the suite-wide 900 s per test is too little for three on a loaded 2-core machine.
@pytest.mark.timeout(2700)
def test_champion_challenger_rollback(
    stack, release_recipe, silent_model, empty_answers_score_low, webhook
):
    api, home = stack
    art = Path(json.loads(release_recipe.read_text())["storage"]["root"])
    champion_file = art / "models" / "release" / "champion.json"

    first = release_run(api, home, release_recipe, max_steps=2)
    assert first["state"]["name"] == "Promoted", first["state"]
    champion = json.loads(champion_file.read_text())["model_dir"]

    weaker = release_run(api, home, release_recipe, max_steps=1, model=str(silent_model))
    assert weaker["state"]["name"] == "Lost to champion", weaker["state"]
    assert "worse than the release champion" in weaker["state"]["message"]
    assert json.loads(champion_file.read_text())["model_dir"] == champion
    labels = sorted(
        c["parameters"]["label"] for c in children(api, weaker) if "label" in c["parameters"]
    )
    assert labels == ["aligned", "baseline", "champion"]  # all on the gpu pool's deployment
    artifacts = api.post(
        "/artifacts/filter", json={"artifacts": {"flow_run_id": {"any_": [weaker["id"]]}}}
    ).json()
    keys = {a["key"] for a in artifacts}
    assert {"argen-release", "argen-champion", "argen-champion-comparison"} <= keys
    notices = notices_of(webhook, weaker)
    assert len(notices) == 1, "the release-notice automation sent nothing about the weaker run"
    assert "Lost to champion" in notices[0]

    stronger = release_run(api, home, release_recipe, max_steps=1)
    assert stronger["state"]["name"] == "Promoted", stronger["state"]
    promoted = json.loads(champion_file.read_text())["model_dir"]
    assert promoted != champion
    assert not notices_of(webhook, stronger, wait=30)  # a promotion notifies nobody

    assert "release champion is" in line_cli(api, home, "rollback", release_recipe)
    assert json.loads(champion_file.read_text())["model_dir"] == champion
    history = line_cli(api, home, "champion", release_recipe)
    assert [line.split()[1] for line in history.splitlines()[1:]] == [
        "promote",
        "promote",
        "rollback",
    ]
