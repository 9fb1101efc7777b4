"""The release notice: the `release-notice` deployment's automation (prefect.yaml) starts it when
a pipeline run ends "Gate failed" or "Lost to champion"; it sends the run's message through a
notification block the team configures (any Prefect notification block: a webhook, Slack...)."""

from typing import Any

from prefect import flow, get_run_logger
from prefect.blocks.core import Block


@flow(name="argen-release-notice", description="Notify the team that a release did not happen.")
def release_notice(
    run_name: str = "",
    outcome: str = "",
    message: str = "",
    block: str = "custom-webhook/argen-release",
) -> str:
    """Send the outcome of a pipeline run through the notification block `block` (type/name).

    Args:
        run_name: the pipeline run's name.
        outcome: its final state's name (Gate failed, Lost to champion).
        message: its final state's message (which rule failed, or which dimensions lost).
        block: the notification block to use, as "block-type-slug/block-name".
    """
    log = get_run_logger()
    try:
        notifier: Any = Block.load(block)  # the block type the team chose: any notifier
    except ValueError:
        log.warning("no notification block %s: configure one to be told of releases", block)
        return "not sent"
    body = f"ArGen pipeline run {run_name}: {outcome}. {message}"
    notifier.notify(body=body, subject=f"ArGen release: {outcome}")
    return "sent"
