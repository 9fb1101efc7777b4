"""A TRL/transformers callback that shows training progress as a Prefect progress artifact."""

from prefect.artifacts import create_progress_artifact, update_progress_artifact
from transformers import TrainerCallback


class PrefectProgress(TrainerCallback):
    """Creates the artifact when training starts and updates it after every optimizer step."""

    def __init__(self, key: str = "argen-training-progress"):
        self.key = key
        self.artifact_id = None

    def on_train_begin(self, args, state, control, **kwargs):
        self.artifact_id = create_progress_artifact(
            progress=100.0 * state.global_step / max(state.max_steps, 1),
            key=self.key,
            description="GRPO training: optimizer steps done",
        )

    def on_step_end(self, args, state, control, **kwargs):
        if self.artifact_id is not None:
            update_progress_artifact(
                self.artifact_id, 100.0 * state.global_step / max(state.max_steps, 1)
            )
